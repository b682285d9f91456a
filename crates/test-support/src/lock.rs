//! The one lock for tests that must not overlap.

use std::sync::{Mutex, MutexGuard};

/// Held while a test records a session or uses a plugin's global state (loading it into
/// omniprof's registry, its test hooks, OpenReg's recording): those are process-wide, and the
/// tests of one binary run on parallel threads. Each test binary is a process of its own, so
/// this orders only the tests inside one binary, which is all that shares that state.
///
/// A test that panicked while holding it leaves it poisoned; the next test takes it anyway,
/// so one failure is reported once instead of failing every test after it.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
