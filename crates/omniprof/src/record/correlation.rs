//! Correlation ids handed to backends around every host op and user range.
//!
//! A device runtime tags the work launched on a thread with the innermost host op and user
//! range open on that thread (CUPTI's external correlation, Kineto's
//! `pushCorrelationId`/`pushUserCorrelationId`). Backends that need these pushes give the
//! engine a [`CorrelationListener`]; the recorder calls it on the recording thread when a
//! range begins and ends. Each thread works from its own snapshot of the session's listeners,
//! taken when it first records in the session, so the hot path takes no lock.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// Receives correlation pushes and pops on application threads, concurrently; calls for one
/// thread come from that thread, properly nested.
pub trait CorrelationListener: Send + Sync {
    /// A host op with this correlation id began on the calling thread.
    fn push_correlation_id(&self, id: u64);
    /// The innermost host op of the calling thread ended.
    fn pop_correlation_id(&self);
    /// A user range with this correlation id began on the calling thread.
    fn push_user_correlation_id(&self, id: u64);
    /// The innermost user range of the calling thread ended.
    fn pop_user_correlation_id(&self);
}

type Listeners = Vec<Arc<dyn CorrelationListener>>;

static SESSION_LISTENERS: Mutex<Listeners> = Mutex::new(Vec::new());

thread_local! {
    static THREAD_LISTENERS: RefCell<Listeners> = const { RefCell::new(Vec::new()) };
}

/// Sets the listeners of the session about to start.
pub(crate) fn set_session_listeners(listeners: Listeners) {
    *SESSION_LISTENERS.lock().unwrap_or_else(|e| e.into_inner()) = listeners;
}

/// Takes this thread's snapshot for a new session; true when there is anyone to tell.
pub(crate) fn refresh_thread() -> bool {
    let current = SESSION_LISTENERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let listening = !current.is_empty();
    let _ = THREAD_LISTENERS.try_with(|l| *l.borrow_mut() = current);
    listening
}

fn each(f: impl Fn(&dyn CorrelationListener)) {
    let _ = THREAD_LISTENERS.try_with(|l| {
        for listener in l.borrow().iter() {
            f(listener.as_ref());
        }
    });
}

pub(crate) fn push(user: bool, id: u64) {
    if user {
        each(|l| l.push_user_correlation_id(id));
    } else {
        each(|l| l.push_correlation_id(id));
    }
}

pub(crate) fn pop(user: bool) {
    if user {
        each(|l| l.pop_user_correlation_id());
    } else {
        each(|l| l.pop_correlation_id());
    }
}
