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

use super::Name;
use crate::lock;

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

    /// A host op (`user == false`) or user range began: what the recorder calls. The default
    /// pushes its correlation id; a listener that needs the name (a marker forwarder, the
    /// profiler stubs) overrides it.
    fn range_begin(&self, id: u64, name: Name, user: bool) {
        let _ = name;
        if user {
            self.push_user_correlation_id(id);
        } else {
            self.push_correlation_id(id);
        }
    }

    /// The range `id` ended. The default pops.
    fn range_end(&self, id: u64, user: bool) {
        let _ = id;
        if user {
            self.pop_user_correlation_id();
        } else {
            self.pop_correlation_id();
        }
    }

    /// An instant was recorded. The default does nothing.
    fn instant(&self, name: Name) {
        let _ = name;
    }
}

type Listeners = Vec<Arc<dyn CorrelationListener>>;

static SESSION_LISTENERS: Mutex<Listeners> = Mutex::new(Vec::new());

thread_local! {
    static THREAD_LISTENERS: RefCell<Listeners> = const { RefCell::new(Vec::new()) };
}

/// Sets the listeners of the session about to start.
pub(crate) fn set_session_listeners(listeners: Listeners) {
    *lock(&SESSION_LISTENERS) = listeners;
}

/// Takes this thread's snapshot for a new session; true when there is anyone to tell.
pub(crate) fn refresh_thread() -> bool {
    let current = lock(&SESSION_LISTENERS).clone();
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

// Out of line and cold: the loop over listeners would otherwise sit in the middle of every
// push and pop, in instruction-cache lines that a session without listeners (no device, no
// stubs) fetches for nothing.
#[cold]
#[inline(never)]
pub(crate) fn begin(id: u64, name: Name, user: bool) {
    each(|l| l.range_begin(id, name, user));
}

#[cold]
#[inline(never)]
pub(crate) fn end(id: u64, user: bool) {
    each(|l| l.range_end(id, user));
}

pub(crate) fn instant(name: Name) {
    each(|l| l.instant(name));
}
