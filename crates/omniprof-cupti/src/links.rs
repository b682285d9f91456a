//! How CUDA device work finds the host op and user range that launched it: by the launch's
//! thread and time, or through CUPTI's external correlation.
//!
//! Kernels, copies and sets carry the correlation id of the runtime or driver call that
//! launched them, and that call's record carries its thread and its start and end. Two ways
//! lead from the call to the op ([`Linking`]):
//!
//! - **By thread and time** (the default): the call is linked to the innermost host op and
//!   user range open on its thread over the whole call ([`HostOps::enclosing`]), which the
//!   recorder already knows. No CUPTI call is made per op; the engine's correlation listener
//!   only notes, once per thread, which system thread id a CUPTI thread id stands for
//!   ([`threads`]).
//! - **By external correlation** (Kineto's way): every op's and user range's correlation id is
//!   pushed to CUPTI as it begins and popped as it ends (`CUSTOM0` and `CUSTOM1`: two CUPTI
//!   calls per op and per user range), and CUPTI writes, for each call, the ids on top of
//!   its thread's stacks.
//!
//! The two give the same links: a call runs on its thread between the op's begin and end,
//! which is where the op is on CUPTI's stack. The first needs the call's record, so it is
//! taken only where the session records both runtime and driver calls (a kernel may be
//! launched by either) and `OMNIPROF_CUPTI_EXTERNAL_CORRELATION` is off; otherwise the
//! session takes the second, for all its calls. Within a session on the first path, a call
//! is left unlinked, and counted in a warning, where the link would be ambiguous:
//!
//! - its CUPTI thread id is shared by two recorder threads (their `pthread_self` agree in
//!   the low 32 bits CUPTI keeps), or
//! - it lies within [`margin_ns`] of the begin or end of an op or user range of its thread,
//!   or straddles one: CUPTI's times and the recorder's are each put on the wall clock by a
//!   line through pairs of clock reads taken at start and stop ([`ClockMap`], the recorder's
//!   [`TickConverter`](omniprof::clock::TickConverter)), each off by up to half its reads'
//!   bracket, and closer than that the order of the call and the edge is not known. A
//!   runtime call runs between the begin and end of its op on its thread, so on a clock
//!   both share it never straddles one; the margin is there for the clocks alone.
//!
//! A call on a thread that recorded no op, or outside every op, is unlinked on both paths.
//! The paths part only where the recorder's ranges do not nest as CUPTI's stacks do: a
//! range ended on another thread ([`omniprof::recording::OwnedRange`]) is never popped from
//! its own thread's stack, so the external correlation links that thread's later calls to
//! it, where its recorded times do not.

use std::collections::HashMap;
use std::sync::Arc;

use omniprof::backends::{CorrelationListener, HostOps};
use omniprof::recording::Name;
use omniprof::trace::{ActivitySet, ActivityType};
use omniprof::Config;

use crate::clock::ClockMap;
use crate::library::Loaded;
use crate::records::{external, Record};
use crate::threads::{self, Threads};

/// What the recorder's ticks may be off on the wall clock: its calibration keeps the
/// narrowest of 101 brackets of two counter reads around a wall read (tens of nanoseconds
/// wide where the counter is the TSC), and its line is drawn through pairs read a few
/// microseconds from CUPTI's.
const RECORDER_CLOCK_NS: i64 = 50;

/// How close to the edge of an op or user range a call may lie and still be linked by its
/// time: what CUPTI's times may be off on the wall clock, measured ([`ClockMap`]), plus what
/// the recorder's may be ([`RECORDER_CLOCK_NS`]).
pub(crate) fn margin_ns(clock: &ClockMap) -> i64 {
    clock.uncertainty_ns().saturating_add(RECORDER_CLOCK_NS)
}

/// The (op, user range) each API call was made in, by the call's correlation id.
pub(crate) type Links = HashMap<u32, (Option<u64>, Option<u64>)>;

/// How a session links device work to host ops, decided when it is configured (the pushes
/// of the external correlation must run from the first op on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Linking {
    /// By the launching call's thread and time: no CUPTI call per op.
    ThreadAndTime,
    /// By the external correlation ids pushed around every op and user range.
    ExternalCorrelation,
}

impl Linking {
    /// The path for a session recording `activities` under `config`.
    pub(crate) fn choose(activities: ActivitySet, config: &Config) -> Self {
        let calls_recorded = activities.contains(ActivityType::CudaRuntime)
            && activities.contains(ActivityType::CudaDriver);
        if calls_recorded && !config.cupti_external_correlation() {
            Self::ThreadAndTime
        } else {
            Self::ExternalCorrelation
        }
    }

    /// What the engine tells of every op and user range.
    pub(crate) fn listener(self, loaded: &'static Loaded) -> Arc<dyn CorrelationListener> {
        match self {
            Self::ThreadAndTime => Arc::new(ThreadNotes),
            Self::ExternalCorrelation => Arc::new(ExternalCorrelation(loaded)),
        }
    }
}

/// Notes each thread that begins an op or user range, and calls CUPTI for none.
struct ThreadNotes;

impl CorrelationListener for ThreadNotes {
    fn push_correlation_id(&self, _: u64) {
        threads::note();
    }
    fn pop_correlation_id(&self) {}
    fn push_user_correlation_id(&self, _: u64) {
        threads::note();
    }
    fn pop_user_correlation_id(&self) {}
    fn range_begin(&self, _: u64, _: Name, _: bool) {
        threads::note();
    }
    fn range_end(&self, _: u64, _: bool) {}
}

/// Feeds the engine's pushes into CUPTI's external correlation stacks.
struct ExternalCorrelation(&'static Loaded);

impl CorrelationListener for ExternalCorrelation {
    fn push_correlation_id(&self, id: u64) {
        threads::note();
        self.0.cupti.push_external(external::OP, id);
    }
    fn pop_correlation_id(&self) {
        self.0.cupti.pop_external(external::OP);
    }
    fn push_user_correlation_id(&self, id: u64) {
        threads::note();
        self.0.cupti.push_external(external::USER, id);
    }
    fn pop_user_correlation_id(&self) {
        self.0.cupti.pop_external(external::USER);
    }
}

/// The links the external correlation records name.
pub(crate) fn from_external_correlation<N>(records: &[(Record, N)]) -> Links {
    let mut links = Links::new();
    for (r, _) in records {
        if let Record::ExternalCorrelation(e) = r {
            let link = links.entry(e.correlation).or_default();
            match e.external_kind {
                external::OP => link.0 = Some(e.external_id),
                external::USER => link.1 = Some(e.external_id),
                _ => {}
            }
        }
    }
    links
}

/// The links of every API call found by its thread and time, and how many calls were left
/// unlinked as ambiguous.
pub(crate) fn by_thread_and_time<N>(
    records: &[(Record, N)],
    host_ops: &dyn HostOps,
    threads: &Threads,
    clock: &ClockMap,
) -> (Links, u64) {
    let mut links = Links::new();
    let mut ambiguous = 0;
    let margin = margin_ns(clock);
    for (r, _) in records {
        let Record::Api(api) = r else { continue };
        let Some(&tid) = threads.tids.get(&api.thread) else {
            // No op was recorded on its thread: nothing encloses it.
            continue;
        };
        if threads.shared.contains(&api.thread) {
            ambiguous += 1;
            continue;
        }
        let (start, end) = (clock.to_unix_ns(api.start), clock.to_unix_ns(api.end));
        let found = host_ops.enclosing(tid, start, end);
        if found.clearance_ns <= margin {
            ambiguous += 1;
        } else if found.op.is_some() || found.user_range.is_some() {
            links.insert(api.correlation, (found.op, found.user_range));
        }
    }
    (links, ambiguous)
}
