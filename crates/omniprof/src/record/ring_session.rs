//! The ring session: the recorder's one session kept recording for the life of a flight
//! recorder, in bounded memory ([`buffer`]'s rings), and read as time slices of its last
//! seconds while it goes on.
//!
//! A profiling session started while the rings record does not start a session of its own:
//! it views the ring session from its start to its stop ([`view`], [`end_view`]), its
//! records copied out of the rings at its stop like a dump's. Meanwhile the rings stop
//! reusing chunks, so the session loses nothing to them, and its cap on records per thread
//! applies to what each thread records from its start. Rings stopped while a session views
//! them stop recording when that session stops.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::buffer::{self, RingUse};
use super::correlation::{self, CorrelationListener};
use super::decode::{collect, HostRecording};
use super::name;
use super::state::{self, HostSession, STATE};
use crate::clock::{self, CalibrationSample, TickConverter};
use crate::lock;
use crate::Window;

/// The rings' bounds: how far back they keep, and how much memory they may hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingBounds {
    pub(crate) window: Duration,
    pub(crate) max_bytes: usize,
}

/// The running ring session.
struct Rings {
    host: HostSession,
    start: CalibrationSample,
    window_ticks: u64,
    /// A profiling session views the rings.
    viewed: bool,
    /// Stopped while viewed: the viewing session's stop ends the recording.
    stop_pending: bool,
}

static RINGS: Mutex<Option<Rings>> = Mutex::new(None);

/// Why the rings cannot start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RingsRefused {
    /// Rings already record in this process.
    Running,
    /// A profiling session records (the rings would end it).
    SessionRecording,
}

/// The bytes of one chunk.
pub(crate) const CHUNK_BYTES: usize = buffer::CHUNK_BYTES;

/// Starts recording in rings, telling `listeners` of every host op and user range (the
/// correlation pushes of the backends that record device work continuously).
pub(crate) fn start_rings(
    bounds: RingBounds,
    listeners: Vec<Arc<dyn CorrelationListener>>,
) -> Result<(), RingsRefused> {
    // One start at a time; `RINGS` itself is free while the session starts, as starting
    // asks `view` whether rings run.
    static STARTING: Mutex<()> = Mutex::new(());
    let _starting = lock(&STARTING);
    if lock(&RINGS).is_some() {
        return Err(RingsRefused::Running);
    }
    if STATE.load(std::sync::atomic::Ordering::Acquire) & 1 == 1 {
        return Err(RingsRefused::SessionRecording);
    }
    let window_ticks = (bounds.window.as_secs_f64() * clock::ticks_per_second()) as u64;
    let max_chunks = (bounds.max_bytes / CHUNK_BYTES).max(1);
    // The state `start_session` is about to make, set up before any thread can record in it.
    let next = ((STATE.load(std::sync::atomic::Ordering::Relaxed) >> 1) + 1) << 1 | 1;
    buffer::begin_rings(next, max_chunks, window_ticks);
    buffer::trim_pool();
    super::packed_args::trim_spare_blocks();
    super::buffer::trim_spare_autograd();
    let start = CalibrationSample::take();
    // Before the session: each thread takes its snapshot of them when it first records in it.
    correlation::set_session_listeners(listeners);
    let host = state::start_session(u64::MAX);
    if host.state != next {
        buffer::begin_rings(host.state, max_chunks, window_ticks);
    }
    *lock(&RINGS) = Some(Rings {
        host,
        start,
        window_ticks,
        viewed: false,
        stop_pending: false,
    });
    Ok(())
}

/// Stops recording in rings (when a session views them, at that session's stop). What they
/// hold is forgotten when the next session starts.
pub(crate) fn stop_rings() {
    let mut guard = lock(&RINGS);
    let Some(rings) = guard.as_mut() else {
        return;
    };
    if rings.viewed {
        rings.stop_pending = true;
        return;
    }
    let mut host = rings.host;
    *guard = None;
    drop(guard);
    state::stop_session(&mut host);
}

/// The session a profiling session records in while rings run (see the module docs), with
/// a cap of `max_records` per thread; `None` when no rings run.
fn view(max_records: u64) -> Option<HostSession> {
    let mut guard = lock(&RINGS);
    let rings = guard.as_mut().filter(|r| !r.stop_pending && !r.viewed)?;
    rings.viewed = true;
    buffer::begin_view(max_records);
    Some(HostSession {
        state: rings.host.state,
        dropped_names: name::dropped_names(),
        floor_tick: clock::ticks(),
        stop_tick: u64::MAX,
    })
}

/// Ends a view `session` (true) at the next tick; false when it is no view.
fn end_view(session: &mut HostSession) -> bool {
    let mut guard = lock(&RINGS);
    let Some(rings) = guard.as_mut().filter(|r| r.host.state == session.state) else {
        return false;
    };
    if session.stop_tick == u64::MAX {
        session.stop_tick = clock::ticks();
    }
    if rings.viewed {
        rings.viewed = false;
        buffer::end_view();
    }
    if rings.stop_pending {
        let mut host = rings.host;
        *guard = None;
        drop(guard);
        state::stop_session(&mut host);
    }
    true
}

/// Starts a session as its callers see it: while rings record, a view of theirs; else a
/// session of its own ([`state::start_session`]).
pub(crate) fn start_session(max_records_per_thread: u64) -> HostSession {
    view(max_records_per_thread).unwrap_or_else(|| state::start_session(max_records_per_thread))
}

/// Stops a session [`start_session`] started.
pub(crate) fn stop_session(session: &mut HostSession) {
    if !end_view(session) {
        state::stop_session(session);
    }
}

/// The last seconds the rings hold, as a host recording of process `pid`.
pub(crate) struct RingWindow {
    pub(crate) host: HostRecording,
    pub(crate) window: Window,
    /// What the rings lost and hold.
    pub(crate) used: RingUse,
    /// The window's start lies before the newest overwritten record: the memory bound cut
    /// the window short.
    pub(crate) cut_short: bool,
}

/// Copies out the rings' window, ending now; `None` when no rings record.
pub(crate) fn ring_window(pid: i64) -> Option<RingWindow> {
    let (host, start, window_ticks) = {
        let guard = lock(&RINGS);
        let rings = guard.as_ref().filter(|r| !r.stop_pending)?;
        (rings.host, rings.start, rings.window_ticks)
    };
    let stop = CalibrationSample::take();
    let from = stop.tick.saturating_sub(window_ticks).max(host.floor_tick);
    let conv = TickConverter::new(start, stop);
    let window = Window {
        start_ns: conv.to_unix_ns(from).max(start.wall_ns),
        end_ns: stop.wall_ns,
    };
    let used = buffer::ring_use();
    let slice = HostSession {
        floor_tick: from,
        stop_tick: stop.tick,
        ..host
    };
    Some(RingWindow {
        host: collect(slice, pid, &conv, window),
        window,
        used,
        cut_short: used.lost_up_to >= from,
    })
}

/// The rings' use now, when they record.
pub(crate) fn rings_use() -> Option<RingUse> {
    lock(&RINGS).as_ref().map(|_| buffer::ring_use())
}
