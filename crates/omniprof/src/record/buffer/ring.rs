//! Rings: a session whose threads reuse their oldest chunk instead of taking more memory,
//! the flight recorder's always-on recording. The hot path is the same as any session's;
//! only what happens when a chunk is full differs ([`next_chunk`]), and how the records are
//! read: a [`snapshot`] copies a time slice out while the threads go on writing, where a
//! session's drain empties the buffers once they stopped.
//!
//! A thread's chunk list is kept oldest first. When its current chunk is full, the thread
//! reuses its oldest chunk when that chunk holds only records older than the window (nothing
//! is lost), or when the process's rings hold their bound of chunks (the records of that
//! chunk still inside the window are overwritten and counted); otherwise it takes a fresh
//! chunk. So a ring holds at most the window, and all rings together at most the bound
//! (each thread keeps at least the one chunk it writes in).
//!
//! Reading while the owner writes: the reader holds the thread's `chunks` lock (so no chunk
//! is reused under it) and takes records in list order while their ticks do not go back. The
//! slots after the write position in the chunk being written hold the chunk's previous lap,
//! older than everything before them, so the first of them ends the thread's records; a slot
//! caught half-written has its new word and its old tick, and ends them the same way.
//!
//! While a profiling session records beside the rings (it views the same records, see
//! `record::ring_session`), nothing is reused: the session's records stay until it stops,
//! and each thread may take as many chunks since the session started as the session's cap
//! allows, past which records are dropped and counted, as in any session.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::chunk_pool::{take_chunk, Chunk, CHUNK_SLOTS, POOL};
use super::drained::DrainedThread;
use super::local::Local;
use super::registry::{ThreadBuffer, REGISTRY};
use super::side_tables::{append_autograd, SPARE_AUTOGRAD};
use crate::lock;
use crate::record::word::{kind, seq, session_tag, tag_of, untagged, KIND_END};

/// The session state recorded in rings (0: none).
static RING_STATE: AtomicU64 = AtomicU64::new(0);
/// The rings' bound, in chunks, for the whole process.
static MAX_CHUNKS: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The window, in ticks: a chunk whose newest record is older than this is reused freely.
static WINDOW_TICKS: AtomicU64 = AtomicU64::new(u64::MAX);
/// Chunks the threads hold in the ring session.
static HELD: AtomicUsize = AtomicUsize::new(0);
/// Records overwritten while still inside the window, since the rings started.
static OVERWRITTEN: AtomicU64 = AtomicU64::new(0);
/// The newest tick among the records counted in [`OVERWRITTEN`]: a window starting after it
/// lost nothing.
static LOST_UP_TO: AtomicU64 = AtomicU64::new(0);
/// Whether a profiling session views the rings (nothing is reused meanwhile), its cap in
/// records per thread, and which session it is (a thread notes its chunk count at the first
/// chunk it takes in each).
static VIEWED: AtomicBool = AtomicBool::new(false);
static VIEW_CAP: AtomicU64 = AtomicU64::new(u64::MAX);
static VIEW_EPOCH: AtomicU64 = AtomicU64::new(0);

/// What the rings have held and lost so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RingUse {
    /// Chunks the threads hold now.
    pub(crate) held_chunks: usize,
    /// Records overwritten while still inside the window.
    pub(crate) overwritten: u64,
    /// The newest tick of those records (0: none was).
    pub(crate) lost_up_to: u64,
}

/// Makes session `state` a ring session of at most `max_chunks` chunks over `window_ticks`;
/// called before any thread records in it.
pub(crate) fn begin_rings(state: u64, max_chunks: usize, window_ticks: u64) {
    MAX_CHUNKS.store(max_chunks.max(1), Ordering::Relaxed);
    WINDOW_TICKS.store(window_ticks, Ordering::Relaxed);
    HELD.store(0, Ordering::Relaxed);
    OVERWRITTEN.store(0, Ordering::Relaxed);
    LOST_UP_TO.store(0, Ordering::Relaxed);
    VIEWED.store(false, Ordering::Relaxed);
    RING_STATE.store(state, Ordering::Release);
}

/// Whether `state` is recorded in rings.
#[inline]
pub(crate) fn is_ring(state: u64) -> bool {
    state != 0 && RING_STATE.load(Ordering::Acquire) == state
}

/// The rings' use so far.
pub(crate) fn ring_use() -> RingUse {
    RingUse {
        held_chunks: HELD.load(Ordering::Relaxed),
        overwritten: OVERWRITTEN.load(Ordering::Relaxed),
        lost_up_to: LOST_UP_TO.load(Ordering::Relaxed),
    }
}

/// A profiling session starts viewing the rings with a cap of `max_records` per thread:
/// nothing is reused until [`end_view`], and the drop counts start from zero.
pub(crate) fn begin_view(max_records: u64) {
    VIEW_CAP.store(max_records, Ordering::Relaxed);
    VIEW_EPOCH.fetch_add(1, Ordering::Relaxed);
    for buffer in lock(&REGISTRY).iter() {
        buffer.dropped.store(0, Ordering::Relaxed);
        lock(&buffer.dropped_ends).clear();
    }
    VIEWED.store(true, Ordering::Release);
}

/// The viewing session stopped: the rings go back to their bound as threads take chunks.
pub(crate) fn end_view() {
    VIEWED.store(false, Ordering::Release);
}

/// Counts the chunk a thread keeps when it starts writing in a ring session.
pub(super) fn note_first_chunk(state: u64) {
    if is_ring(state) {
        HELD.fetch_add(1, Ordering::Relaxed);
    }
}

/// The next chunk of a thread whose current chunk is full, in a ring session (module docs).
/// `None` when the record (`word`) is dropped past a viewing session's cap.
pub(super) fn next_chunk(
    local: &Local,
    buffer: &ThreadBuffer,
    chunks: &mut Vec<Chunk>,
    word: u64,
    begins_range: bool,
) -> Option<()> {
    if VIEWED.load(Ordering::Acquire) {
        let epoch = VIEW_EPOCH.load(Ordering::Relaxed);
        if buffer.view_epoch.swap(epoch, Ordering::Relaxed) != epoch {
            buffer.view_chunks.store(chunks.len(), Ordering::Relaxed);
        }
        let since = chunks.len() - buffer.view_chunks.load(Ordering::Relaxed).min(chunks.len());
        if (since * CHUNK_SLOTS) as u64 >= VIEW_CAP.load(Ordering::Relaxed) {
            buffer.dropped.fetch_add(1, Ordering::Relaxed);
            if !begins_range {
                lock(&buffer.dropped_ends).push(word);
            }
            return None;
        }
        chunks.push(take_chunk());
        HELD.fetch_add(1, Ordering::Relaxed);
    } else {
        let cutoff = crate::clock::ticks().saturating_sub(WINDOW_TICKS.load(Ordering::Relaxed));
        let max = MAX_CHUNKS.load(Ordering::Relaxed);
        // Above the bound (a viewing session let the rings grow): give the oldest back.
        while chunks.len() > 2 && HELD.load(Ordering::Relaxed) > max {
            let oldest = chunks.remove(0);
            forget(buffer, &oldest, cutoff);
            lock(&POOL).push(oldest);
            HELD.fetch_sub(1, Ordering::Relaxed);
        }
        let aged = chunks.len() >= 2 && newest_tick(&chunks[0]) < cutoff;
        if aged || HELD.load(Ordering::Relaxed) >= max {
            let oldest = chunks.remove(0);
            forget(buffer, &oldest, cutoff);
            chunks.push(oldest);
        } else {
            chunks.push(take_chunk());
            HELD.fetch_add(1, Ordering::Relaxed);
        }
    }
    let last = chunks.len() - 1;
    local.point_at(&mut chunks[last]);
    Some(())
}

/// The newest tick a full chunk holds.
fn newest_tick(chunk: &Chunk) -> u64 {
    chunk.last().map_or(0, |s| s.tick.load(Ordering::Relaxed))
}

/// Forgets what `chunk`, about to be reused, held: its records still inside the window
/// (at or after `cutoff`) are counted as overwritten, and the side tables drop what they
/// kept for the ranges it began.
fn forget(buffer: &ThreadBuffer, chunk: &Chunk, cutoff: u64) {
    // A reused chunk was filled in one lap, so its ticks rise.
    let older = chunk.partition_point(|s| s.tick.load(Ordering::Relaxed) < cutoff);
    let lost = (chunk.len() - older) as u64;
    if lost > 0 {
        buffer.overwritten.fetch_add(lost, Ordering::Relaxed);
        OVERWRITTEN.fetch_add(lost, Ordering::Relaxed);
        LOST_UP_TO.fetch_max(newest_tick(chunk), Ordering::Relaxed);
    }
    let last_begun = chunk
        .iter()
        .rev()
        .map(|s| s.word.load(Ordering::Relaxed))
        .find(|&w| kind(w) != KIND_END)
        .map(seq);
    if let Some(last_begun) = last_begun {
        // Sequence numbers wrap: "at or before" is within half the range behind.
        let gone = |s: u32| last_begun.wrapping_sub(s) < 1 << 31;
        lock(&buffer.args).forget_front_while(|(s, ..)| gone(*s));
        SPARE_AUTOGRAD.give_back(lock(&buffer.autograd).forget_front_while(|(s, _)| gone(*s)));
        lock(&buffer.packed).forget_front_while(gone);
    }
}

/// Copies out the records of ring session `state` between ticks `from` and `to` from every
/// thread, without emptying anything (the threads go on writing; module docs), with each
/// thread's drops past a viewing session's cap. Buffers of threads that exited and whose
/// records are all older than the window are freed.
pub(crate) fn snapshot(state: u64, from: u64, to: u64) -> Vec<DrainedThread> {
    let tag = session_tag(state);
    let me = std::process::id();
    let window_start = crate::clock::ticks().saturating_sub(WINDOW_TICKS.load(Ordering::Relaxed));
    let mut registry = lock(&REGISTRY);
    let mut out = Vec::new();
    registry.retain(|buffer| {
        if buffer.pid.load(Ordering::Relaxed) != me {
            // A thread of the parent (see the buffer's module docs on fork).
            std::mem::forget(Arc::clone(buffer));
            return false;
        }
        let exited = buffer.exited.load(Ordering::Acquire);
        let mut chunks = lock(&buffer.chunks);
        if buffer.state.load(Ordering::Acquire) != state {
            // Records of no ring: an exited thread's are no one's.
            if exited {
                lock(&POOL).extend(chunks.drain(..));
            }
            return !exited;
        }
        let mut records = Vec::new();
        let mut newest = 0;
        for slot in chunks.iter().flat_map(|c| c.iter()) {
            let tick = slot.tick.load(Ordering::Acquire);
            let word = slot.word.load(Ordering::Relaxed);
            if tag_of(word) != tag || tick < newest {
                break;
            }
            newest = tick;
            if (from..=to).contains(&tick) {
                records.push((untagged(word), tick));
            }
        }
        if exited && newest < window_start {
            HELD.fetch_sub(
                chunks.len().min(HELD.load(Ordering::Relaxed)),
                Ordering::Relaxed,
            );
            lock(&POOL).extend(chunks.drain(..));
            return false;
        }
        out.push(DrainedThread {
            index: buffer.index,
            tid: buffer.tid,
            name: lock(&buffer.name).clone(),
            records,
            args: lock(&buffer.args).clone(),
            autograd: buffer
                .staged_autograd
                .copy_with(&buffer.autograd, append_autograd),
            packed: buffer.copy_packed(),
            dropped: buffer.dropped.load(Ordering::Relaxed),
            dropped_ends: lock(&buffer.dropped_ends).clone(),
        });
        true
    });
    out
}
