//! The chunks records are written in, and the pool of pre-faulted ones waiting for a thread,
//! kept topped up by the background [`refill`] thread so that taking
//! a chunk rarely faults a page in on the recording path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::record::refill;

/// Records per chunk: 4096 × 16 B = 64 KiB, small enough to stay cache-friendly and to
/// pre-fault cheaply, large enough that taking a new chunk is rare.
pub(crate) const CHUNK_SLOTS: usize = 4096;
/// The bytes of a chunk.
pub(crate) const CHUNK_BYTES: usize = CHUNK_SLOTS * std::mem::size_of::<Slot>();
const PAGE_SLOTS: usize = 4096 / std::mem::size_of::<Slot>();

/// One record: what happened (`word`, with the session tag) and when (`tick`).
#[derive(Default)]
#[repr(C)]
pub(crate) struct Slot {
    pub(super) word: AtomicU64,
    pub(super) tick: AtomicU64,
}

pub(super) type Chunk = Box<[Slot]>;

fn new_chunk() -> Chunk {
    let chunk: Chunk = (0..CHUNK_SLOTS).map(|_| Slot::default()).collect();
    // Atomic stores cannot be elided, so every page is really touched here rather than on
    // the recording path, even if the allocator handed out lazily mapped zero pages.
    for slot in chunk.iter().step_by(PAGE_SLOTS) {
        slot.word.store(0, Ordering::Relaxed);
    }
    chunk
}

/// Pre-faulted chunks waiting for a thread.
pub(super) static POOL: Mutex<Vec<Chunk>> = Mutex::new(Vec::new());

/// Tops the pool up to `chunks` pre-faulted chunks (done at prepare, off the recording path).
pub(crate) fn prefill_pool(chunks: usize) {
    refill::fill(&POOL, chunks, new_chunk);
}

/// Frees pooled chunks past the refill target (a ring session's start).
pub(crate) fn trim_pool() {
    refill::trim(&POOL, POOL_HIGH);
}

/// Below this many pooled chunks, the refill thread is woken.
const POOL_LOW: usize = 16;
/// The refill thread tops the pool up to this many chunks (4 MiB).
const POOL_HIGH: usize = 64;
pub(super) fn take_chunk() -> Chunk {
    // Only when the refill thread has fallen behind does a recording thread fault pages in.
    refill::take(&POOL, POOL_LOW, top_up).unwrap_or_else(new_chunk)
}

/// The refill thread's work for the pool.
fn top_up() {
    prefill_pool(POOL_HIGH);
}
