//! Per-thread record buffers: fixed-size 16-byte records in pre-faulted 64 KiB chunks.
//!
//! Ownership protocol (what makes the raw pointers below sound):
//! - A thread's [`ThreadBuffer`] is created on its first event, registered in [`REGISTRY`]
//!   and never freed while the thread lives: the registry drops it only after the thread
//!   has exited *and* its records were drained.
//! - Only the owning thread writes records and moves its write position. Chunks are never
//!   freed or handed back to the pool while they belong to a live thread, except by the owner
//!   itself when it starts a new session, or reuses its oldest chunk in a ring session
//!   ([`ring`]), under the buffer's `chunks` lock.
//! - The hot path touches only the thread's own thread-local state and the slot it writes:
//!   nothing is published per event. Each slot vouches for itself instead: its word carries
//!   the session's [tag](super::word::session_tag) and its tick, stored last with Release,
//!   is newer than the previous session's end. The drainer reads the chunk list under the `chunks` lock and
//!   takes slots, tick first (Acquire), up to the first one that fails either test or is
//!   newer than the stop. Chunks are recycled without being cleared; what a slot held before
//!   fails the test. Slots are atomics, so a late write from a thread that has not yet
//!   noticed the stop is a race on values, never on memory, and is left out by its tick.
//!
//! After `fork` (a DataLoader worker, a `multiprocessing` child): the child has one thread,
//! the one that forked, and a copy of every buffer. A session inherited in the child holds
//! only what the child records after the fork: the drain there leaves out the buffers of the
//! parent's other threads (they do not exist in the child; each [`ThreadBuffer`] says in
//! which process its thread records) and what the forking thread recorded before the fork
//! (older than the fork's tick). So the child's `stop()` costs what its own records cost,
//! not what the parent had recorded (8 recording threads' ~2.8M events took over a minute to
//! sort in a child before). The parent's buffers in the child are forgotten, never freed or
//! locked: a lock held by a parent's thread at the fork stays held in the child, and freeing
//! would copy pages the child shares with the parent. Fork handlers ([`fork`]) hold the
//! registry and pool locks across the fork, so the child's copies are unlocked.
//!
//! The files, one concept each: the [`chunk_pool`] hands out pre-faulted chunks; the
//! [`registry`] keeps every thread's [`ThreadBuffer`]; [`local`] is the owning thread's
//! view of its buffer and the hot path that appends a record, [`prefetch`] fetches the lines
//! it and the open block are about to write, and [`slow_path`] is what that path calls when
//! it runs out of room; [`side_tables`] hold what a record carries beside
//! its 16 bytes, in [`block_list`]s that never reallocate, allocator reports first
//! [`staged`] without a lock (autograd's numbers too), packed args in an [`open_block`]
//! written without one; [`drain`] copies a session out
//! (each thread's copy a [`drained`] thread); [`ring`] keeps a
//! session in bounded memory by reusing each thread's oldest chunk, and copies time slices
//! of it out while it records; [`fork`] keeps the buffers sound across a fork;
//! [`thread_name`] names the thread's row.
//!
//! [`ThreadBuffer`]: registry::ThreadBuffer
//! [`REGISTRY`]: registry::REGISTRY
//! [`drain`]: mod@drain

mod block_list;
mod chunk_pool;
mod drain;
mod drained;
mod fork;
mod local;
mod open_block;
mod prefetch;
mod registry;
mod ring;
mod side_tables;
mod slow_path;
mod staged;
mod thread_name;

pub(super) use chunk_pool::{prefill_pool, trim_pool, CHUNK_BYTES};
pub(super) use drain::drain;
pub(super) use local::{this_thread, with_local, Local};
pub(super) use registry::{registered_threads, thread_ids};
pub(crate) use ring::RingUse;
pub(super) use ring::{begin_rings, begin_view, end_view, ring_use};
pub(super) use side_tables::{autograd_by_seq, trim_spare_autograd};
pub(super) use slow_path::set_max_records_per_thread;
pub(super) use thread_name::set_current_thread_name;

/// The tick a record of session `state` that belongs at the earlier `tick` may be stamped
/// with ([`Local::push_at`]): `tick`, or the fork's when this process was forked after it
/// (the drain keeps a session's records from its start, and in a forked child only those
/// after the fork); `None` in a ring session, whose copies read a thread's records only up
/// to the first that goes back in time (where its newest records end), so a record there is
/// stamped when it is written.
pub(super) fn backdated_tick(state: u64, tick: u64) -> Option<u64> {
    (!ring::is_ring(state))
        .then(|| tick.max(fork::FORK_TICK.load(std::sync::atomic::Ordering::Relaxed)))
}
