//! The recorder's session state, shared by every recording thread: whether a session
//! records and which one it is (one atomic word, so the check on every event is one relaxed
//! load), and the tick that separates a session's records from the previous one's.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{buffer, name};

/// Bit 0: a session is recording. Bits 1..: the session generation, so a thread notices a new
/// session with the same comparison that tells it whether to record at all.
pub(super) static STATE: AtomicU64 = AtomicU64::new(0);
/// A tick taken when the last session stopped: the next session's records are all newer.
/// Never 0, so the zeroed slots of a fresh chunk are older than any session.
static LAST_STOP_TICK: AtomicU64 = AtomicU64::new(1);
/// A tick taken when the current (or last) session started, before it recorded anything;
/// published by the store to [`STATE`] that starts the session.
static START_TICK: AtomicU64 = AtomicU64::new(1);

/// The tick the session `STATE` says is recording started at; read after an acquiring load
/// of [`STATE`] that saw that session.
pub(super) fn start_tick() -> u64 {
    START_TICK.load(Ordering::Relaxed)
}

/// The recorder's side of a session, from [`start_session`] to [`collect`](super::collect).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostSession {
    pub(super) state: u64,
    /// [`name::dropped_names`] when the session started.
    pub(super) dropped_names: u64,
    /// Older than every record of the session (see [`buffer::drain`]).
    pub(super) floor_tick: u64,
    /// Taken once recording has stopped: a record newer than this was written by a thread
    /// that read the state just before the stop and is left out.
    pub(super) stop_tick: u64,
}

/// Starts recording for a new session.
pub(crate) fn start_session(max_records_per_thread: u64) -> HostSession {
    buffer::set_max_records_per_thread(max_records_per_thread);
    // No session records now: names no session needs can go.
    name::reclaim();
    let next_generation = (STATE.load(Ordering::Relaxed) >> 1) + 1;
    let state = (next_generation << 1) | 1;
    let floor_tick = LAST_STOP_TICK.load(Ordering::Relaxed);
    START_TICK.store(crate::clock::ticks().max(floor_tick), Ordering::Relaxed);
    STATE.store(state, Ordering::Release);
    HostSession {
        state,
        dropped_names: name::dropped_names(),
        floor_tick,
        stop_tick: u64::MAX,
    }
}

/// Stops recording (threads notice at their next event).
pub(crate) fn stop_session(session: &mut HostSession) {
    let state = session.state;
    if STATE
        .compare_exchange(state, state & !1, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        session.stop_tick = crate::clock::ticks().max(1);
        LAST_STOP_TICK.store(session.stop_tick, Ordering::Relaxed);
    }
}

/// Pre-faults enough chunks for the threads seen so far, plus headroom.
pub(crate) fn warm_up() {
    buffer::prefill_pool(2 * buffer::registered_threads() + 8);
}

#[cfg(test)]
pub(crate) fn is_recording() -> bool {
    STATE.load(Ordering::Relaxed) & 1 == 1
}
