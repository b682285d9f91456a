//! Every thread that has recorded: its [`ThreadBuffer`], kept in the registry until the
//! thread has exited and its records were drained (the ownership protocol in the
//! [module docs](super)).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

use super::block_list::BlockList;
use super::chunk_pool::Chunk;
use super::open_block::OpenBlock;
use super::staged::Staged;
use crate::lock;
use crate::record::autograd::{Autograd, AUTOGRAD_WORDS};
use crate::record::packed_args::PackedArgs;
use crate::Value;

/// Every thread that has recorded and whose records may still be needed.
pub(super) static REGISTRY: Mutex<Vec<Arc<ThreadBuffer>>> = Mutex::new(Vec::new());
pub(super) static NEXT_THREAD_INDEX: AtomicU32 = AtomicU32::new(0);

/// A thread's records for the session it last recorded in.
pub(crate) struct ThreadBuffer {
    pub(crate) index: u32,
    pub(crate) tid: i64,
    pub(crate) name: Mutex<String>,
    pub(super) chunks: Mutex<Vec<Chunk>>,
    /// The session state the contents belong to.
    pub(super) state: AtomicU64,
    pub(super) dropped: AtomicU64,
    /// Records a ring overwrote while still inside its window ([`ring`](super::ring)).
    pub(super) overwritten: AtomicU64,
    /// The viewing session this thread last took a chunk in, and how many chunks it held
    /// then ([`ring`](super::ring)).
    pub(super) view_epoch: AtomicU64,
    pub(super) view_chunks: AtomicUsize,
    /// The words of dropped records that end a range (not [beginnings](super::Local::push)): their
    /// ranges' beginnings were kept, so the drain must not close them at the window's end.
    /// Only ranges open when the cap was reached can lose an end, so this stays small.
    pub(super) dropped_ends: Mutex<Vec<u64>>,
    pub(super) args: Mutex<BlockList<(u32, Arc<str>, Value)>>,
    /// What autograd knows of ops (their args and forward/backward links are made at the
    /// drain).
    pub(super) autograd: Mutex<BlockList<(u32, Autograd)>>,
    /// The newest ops' autograd numbers, not yet moved into `autograd`.
    pub(super) staged_autograd: Staged<AUTOGRAD_WORDS>,
    /// Args packed as words, allocator reports among them (unpacked at the drain): the
    /// blocks sealed so far. Its lock is also the open block's.
    pub(super) packed: Mutex<PackedArgs>,
    /// The block being written, without a lock ([`open_block`](super::open_block)).
    pub(super) open_packed: OpenBlock,
    pub(super) exited: AtomicBool,
    /// The process the owning thread records in: set at registration, and by the fork
    /// handler for the thread that forked. A buffer of another process is a parent's.
    pub(super) pid: AtomicU32,
}

/// The OS ids of the threads that have recorded and may record again.
pub(crate) fn thread_ids() -> Vec<i64> {
    lock(&REGISTRY).iter().map(|b| b.tid).collect()
}

/// The number of threads with a live buffer (for tests and diagnostics).
pub(crate) fn registered_threads() -> usize {
    lock(&REGISTRY).len()
}
