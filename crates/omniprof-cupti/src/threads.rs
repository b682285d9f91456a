//! The system thread ids of the threads that recorded host ops and user ranges, by CUPTI's
//! default thread id (`pthread_self`, as 32 bits). CUPTI could write system ids itself
//! (`cuptiSetThreadIdType`), but then it asks the kernel for one with every API record: on the
//! H200 check that cost 3 % of a training step. Host ops carry system ids, so a runtime call
//! is put on its thread's row, and on the cheap linking path matched to its thread's ops,
//! through this map.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use omniprof::trace::lock;

/// The threads noted in a session.
#[derive(Clone, Debug, Default)]
pub(crate) struct Threads {
    /// System thread id by CUPTI's thread id.
    pub(crate) tids: HashMap<u32, i64>,
    /// CUPTI thread ids two noted threads share (their `pthread_self` differs only above
    /// the 32 bits CUPTI keeps): a call made under one cannot be told to be either's.
    pub(crate) shared: HashSet<u32>,
}

impl Threads {
    /// The system id of the thread CUPTI calls `cupti_tid`, or that id itself where no
    /// thread noted this session has it.
    pub(crate) fn system_tid(&self, cupti_tid: u32) -> i64 {
        self.tids
            .get(&cupti_tid)
            .copied()
            .unwrap_or(cupti_tid.into())
    }
}

static SEEN: Mutex<Option<Threads>> = Mutex::new(None);
static SESSION: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static NOTED_IN: Cell<u64> = const { Cell::new(0) };
}

/// Forgets the threads of earlier sessions (their ids may have been reused).
pub(crate) fn new_session() {
    SESSION.fetch_add(1, Ordering::Relaxed);
    *lock(&SEEN) = Some(Threads::default());
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
            let mut seen = lock(&SEEN);
            let threads = seen.get_or_insert_with(Threads::default);
            let key = pthread as u32;
            if let Some(earlier) = threads.tids.insert(key, i64::from(tid)) {
                if earlier != i64::from(tid) {
                    threads.shared.insert(key);
                }
            }
        }
    });
}

/// The threads noted this session.
pub(crate) fn seen() -> Threads {
    lock(&SEEN).clone().unwrap_or_default()
}
