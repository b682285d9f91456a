//! Host objects lent to a plugin for the length of one call, on one thread: the registry
//! during `KinetoPlugin_register`, the trace builder during `profilerProcessEvents`.
//!
//! The handle a plugin gets is not the object's address but a token, a number never reused
//! in the process. While an object is lent, the lending thread remembers its token, address
//! and type; a call through a handle is served only on that thread, with that token and that
//! type. A call from another thread, after the lending call returned, or with a handle of
//! another kind is refused (−1) and counted, and never touches host memory: misuse of a
//! handle cannot crash the host. (A plugin that keeps the *pointer* to a function table and
//! reads it after the call reads dead memory of its own making; it must copy the table.)

use crate::lock;
use std::any::TypeId;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The answer to a refused call.
pub(crate) const REFUSED: c_int = -1;

/// What this thread has lent, if anything.
#[derive(Clone, Copy)]
struct Loan {
    token: u64,
    address: *mut (),
    kind: TypeId,
}

thread_local! {
    static LOAN: Cell<Option<Loan>> = const { Cell::new(None) };
}

/// The next token; 0 is never one, so a NULL handle is always refused.
static TOKENS: AtomicU64 = AtomicU64::new(1);
/// Refused calls per live loan, by token.
static REFUSED_CALLS: Mutex<BTreeMap<u64, u64>> = Mutex::new(BTreeMap::new());
/// Refused calls through handles whose loan had ended.
static LATE_CALLS: AtomicU64 = AtomicU64::new(0);

/// Calls through a handle after its loan ended (or through one never handed out), refused,
/// since the process started.
///
/// ```
/// use omniprof::plugins::{late_plugin_calls, HostTraceBuilder};
///
/// let before = late_plugin_calls();
/// let kept = HostTraceBuilder::default().lend(|table| *table);
/// // SAFETY: a complete table; its handle is checked before anything is read.
/// let rc = unsafe { kept.add_event.unwrap()(kept.trace_builder_handle, std::ptr::null()) };
/// assert_eq!((rc, late_plugin_calls()), (-1, before + 1));
/// ```
pub fn late_plugin_calls() -> u64 {
    LATE_CALLS.load(Ordering::Relaxed)
}

/// Lends `value` for the length of `f`, which gets the handle to pass to the plugin; returns
/// what `f` returned and how many calls were refused during the loan (from other threads or
/// with a wrong handle).
pub(crate) fn lend<T: 'static, R>(value: &mut T, f: impl FnOnce(*mut c_void) -> R) -> (R, u64) {
    let token = TOKENS.fetch_add(1, Ordering::Relaxed);
    refused_calls().insert(token, 0);
    let loan = Loan {
        token,
        address: (value as *mut T).cast(),
        kind: TypeId::of::<T>(),
    };
    let result = {
        let _restore = Restore(LOAN.replace(Some(loan)));
        f(token as usize as *mut c_void)
    };
    let refused = refused_calls().remove(&token).unwrap_or(0);
    (result, refused)
}

/// Serves a plugin's call through `handle` with the lent `T`, or refuses it. A panic in `f`
/// (a host bug) is −1 instead of unwinding into C.
pub(crate) fn with_lent<T: 'static>(handle: *mut c_void, f: impl FnOnce(&mut T) -> c_int) -> c_int {
    let token = handle as usize as u64;
    let loan = LOAN.get();
    let Some(loan) = loan.filter(|l| l.token == token && l.kind == TypeId::of::<T>()) else {
        refuse(token);
        return REFUSED;
    };
    // Not lent while in use: a call made from inside this one is refused, not aliased.
    let _restore = Restore(LOAN.replace(None));
    // SAFETY: `lend` stored the address of a live `T` it holds a unique borrow of, on this
    // thread, until `f` returns; the loan is taken out above, so this is the only reference.
    let value = unsafe { &mut *loan.address.cast::<T>() };
    catch_unwind(AssertUnwindSafe(|| f(value))).unwrap_or(REFUSED)
}

fn refused_calls() -> std::sync::MutexGuard<'static, BTreeMap<u64, u64>> {
    lock(&REFUSED_CALLS)
}

fn refuse(token: u64) {
    if let Some(count) = refused_calls().get_mut(&token) {
        *count += 1;
        return;
    }
    if LATE_CALLS.fetch_add(1, Ordering::Relaxed) == 0 {
        log::warn!(
            "omniprof: a plugin called the host through a handle after the call that lent it \
             returned, or through a handle it was never given; refused (further such calls \
             are counted, not logged)"
        );
    }
}

/// Puts back the loan a scope replaced, also when it unwinds.
struct Restore(Option<Loan>);

impl Drop for Restore {
    fn drop(&mut self) {
        LOAN.set(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bump(handle: *mut c_void) -> c_int {
        with_lent::<u32>(handle, |v| {
            *v += 1;
            0
        })
    }

    #[test]
    fn only_the_lending_thread_during_the_loan_reaches_the_value() {
        let mut value = 0u32;
        let mut kept = std::ptr::null_mut();
        let ((), refused) = lend(&mut value, |handle| {
            kept = handle;
            assert_eq!(bump(handle), 0);
            let other = handle as usize;
            let rc = std::thread::spawn(move || bump(other as *mut c_void))
                .join()
                .unwrap();
            assert_eq!(rc, REFUSED, "another thread");
            assert_eq!(with_lent::<u64>(handle, |_| 0), REFUSED, "another type");
            assert_eq!(bump(std::ptr::null_mut()), REFUSED, "a NULL handle");
        });
        assert_eq!((value, refused), (1, 2), "NULL is no loan's handle");
        let late = late_plugin_calls();
        assert_eq!(bump(kept), REFUSED, "after the loan");
        assert!(late_plugin_calls() > late);
        assert_eq!(value, 1);
    }
}
