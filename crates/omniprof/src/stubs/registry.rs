//! The stubs registered per device name, process-wide.

use std::sync::{Arc, Mutex};

use super::interface::{ProfilerStubs, StubError};
use crate::lock;

static REGISTERED: Mutex<Vec<(String, Arc<dyn ProfilerStubs>)>> = Mutex::new(Vec::new());

/// Registers `stubs` for `device` (names compare case-insensitively); a later registration
/// for the same device replaces it, with a warning.
pub fn register_stubs(device: &str, stubs: Arc<dyn ProfilerStubs>) {
    let mut registered = lock(&REGISTERED);
    match registered
        .iter_mut()
        .find(|(name, _)| name.eq_ignore_ascii_case(device))
    {
        Some(slot) => {
            log::warn!("omniprof: profiler stubs for {device} already registered, overwriting");
            slot.1 = stubs;
        }
        None => registered.push((device.to_owned(), stubs)),
    }
}

/// The stubs registered for `device`, or the error PyTorch gives for an unregistered one.
pub fn registered_stubs(device: &str) -> Result<Arc<dyn ProfilerStubs>, StubError> {
    lock(&REGISTERED)
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(device))
        .map(|(_, s)| s.clone())
        .filter(|s| s.enabled())
        .ok_or_else(|| StubError::NotEnabled(device.to_owned()))
}
