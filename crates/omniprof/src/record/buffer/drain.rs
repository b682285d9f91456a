//! Copying a session's records out of every thread's buffer at stop.
//!
//! The "module docs" cited below are the [buffer's](super): its ownership protocol.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::drained::DrainedThread;

use super::chunk_pool::POOL;
use super::fork::FORK_TICK;
use super::registry::REGISTRY;
use super::ring::{is_ring, snapshot};
use super::side_tables::append_autograd;
use crate::lock;
use crate::record::word::{session_tag, tag_of, untagged};

/// Copies out every buffer that recorded in session `state`, and frees the buffers of
/// threads that have exited. `floor` is a tick taken before the session started and after
/// the previous one stopped: every record of this session is newer. A thread's records come
/// in tick order (but for one stamped earlier, no earlier than the session's start:
/// [`Local::push_at`](super::Local::push_at)), so its copy ends at the first record newer
/// than `ceiling`.
///
/// In a forked child, the buffers of the parent's threads are forgotten unread and the
/// records older than the fork are skipped (module docs).
///
/// A ring session is copied from, not emptied ([`ring`](super::ring)): it goes on recording.
pub(crate) fn drain(state: u64, floor: u64, ceiling: u64) -> Vec<DrainedThread> {
    if is_ring(state) {
        return snapshot(state, floor, ceiling);
    }
    let tag = session_tag(state);
    let me = std::process::id();
    // What a session inherited through a fork recorded before it is the parent's.
    let start = floor.max(FORK_TICK.load(Ordering::Relaxed));
    let mut registry = lock(&REGISTRY);
    let mut out = Vec::new();
    registry.retain(|buffer| {
        if buffer.pid.load(Ordering::Relaxed) != me {
            // A thread of the parent: not in this process. Its locks may be held for good
            // and its chunks are pages shared with the parent, so it is neither locked nor
            // freed.
            std::mem::forget(Arc::clone(buffer));
            return false;
        }
        // Read before the records: once `exited` is seen, no write can follow.
        let exited = buffer.exited.load(Ordering::Acquire);
        let mut chunks = lock(&buffer.chunks);
        if buffer.state.load(Ordering::Acquire) == state {
            let records = chunks
                .iter()
                .flat_map(|c| c.iter())
                .map(|s| {
                    let tick = s.tick.load(Ordering::Acquire);
                    (s.word.load(Ordering::Relaxed), tick)
                })
                // The forking thread's records from before the fork (none elsewhere).
                .skip_while(|&(word, tick)| tag_of(word) == tag && (floor..start).contains(&tick))
                .take_while(|&(word, tick)| {
                    tag_of(word) == tag && (start..=ceiling).contains(&tick)
                })
                .map(|(word, tick)| (untagged(word), tick))
                .collect();
            out.push(DrainedThread {
                index: buffer.index,
                tid: buffer.tid,
                name: lock(&buffer.name).clone(),
                records,
                args: std::mem::take(&mut *lock(&buffer.args)),
                autograd: buffer
                    .staged_autograd
                    .take_with(&buffer.autograd, append_autograd),
                packed: buffer.take_packed(),
                dropped: buffer.dropped.load(Ordering::Relaxed),
                dropped_ends: std::mem::take(&mut *lock(&buffer.dropped_ends)),
            });
        }
        if exited {
            lock(&POOL).extend(chunks.drain(..));
        }
        !exited
    });
    out
}
