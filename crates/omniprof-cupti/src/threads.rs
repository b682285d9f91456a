//! The system thread ids of the threads that pushed correlation ids, by CUPTI's default
//! thread id (`pthread_self`, as 32 bits). CUPTI could write system ids itself
//! (`cuptiSetThreadIdType`), but then it asks the kernel for one with every API record: on the
//! H200 check that cost 3 % of a training step. Host ops carry system ids, so a runtime
//! call outside any op is put on its thread's row through this map.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use omniprof::trace::lock;

static SEEN: Mutex<Option<HashMap<u32, i64>>> = Mutex::new(None);
static SESSION: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static NOTED_IN: Cell<u64> = const { Cell::new(0) };
}

/// Forgets the threads of earlier sessions (their ids may have been reused).
pub(crate) fn new_session() {
    SESSION.fetch_add(1, Ordering::Relaxed);
    *lock(&SEEN) = Some(HashMap::new());
}

/// Notes the calling thread, once per session.
#[inline]
pub(crate) fn note() {
    let session = SESSION.load(Ordering::Relaxed);
    let _ = NOTED_IN.try_with(|noted| {
        if noted.get() != session {
            noted.set(session);
            // SAFETY: both calls only read the calling thread's ids.
            let (pthread, tid) = unsafe { (libc::pthread_self(), libc::gettid()) };
            lock(&SEEN)
                .get_or_insert_with(HashMap::new)
                .insert(pthread as u32, i64::from(tid));
        }
    });
}

/// The threads noted this session.
pub(crate) fn seen() -> HashMap<u32, i64> {
    lock(&SEEN).clone().unwrap_or_default()
}
