//! Kineto's on-demand state machine (`docs/lifecycle.md` §1, §3) as a pure core: it
//! holds no session, reads no clock and no counter. The driver (`engine`) feeds it the time
//! (`tick`), the iteration (`step`) and the outside calls (`request`, `cancel`, `preempt`),
//! and carries out the [`Action`]s it returns, so every rule is testable without a thread.

use std::fmt;

use super::error::{Refused, TraceFailed};
use crate::config::keys::{ACTIVITIES_WARMUP_PERIOD_SECS, PROFILE_START_ITERATION};
use crate::config::{Config, CONTROLLER_TICK_MS, MAX_START_AHEAD_ITERATIONS, MAX_START_AHEAD_MS};

/// Collection that starts later than this after its scheduled time is logged (Kineto's
/// "Tracing started N ms late!").
const LATE_START_MS: i64 = 10;

/// The engine's state, named as in Kineto.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDemandState {
    /// Idle, or holding a request whose start has not come yet.
    WaitForRequest,
    /// The session is prepared; the backends warm up until the start.
    Warmup,
    /// Recording.
    CollectTrace,
    /// Recording ended; the profiler thread merges the trace and writes the file.
    ProcessTrace,
    /// A running trace is being torn down without a file.
    Cancelling,
}

impl OnDemandState {
    /// Kineto's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            Self::WaitForRequest => "WaitForRequest",
            Self::Warmup => "Warmup",
            Self::CollectTrace => "CollectTrace",
            Self::ProcessTrace => "ProcessTrace",
            Self::Cancelling => "Cancelling",
        }
    }
}

impl fmt::Display for OnDemandState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// When a request starts and stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDemandTrigger {
    /// Time-based: warm up from `start_ms − warmup_ms`, collect `[start_ms, start_ms +
    /// duration_ms)`. Times are ms since the Unix epoch.
    Time {
        /// The collection's start.
        start_ms: i64,
        /// How long before it the backends warm up.
        warmup_ms: i64,
        /// How long it collects.
        duration_ms: i64,
    },
    /// Iteration-based: warm up from step `start − warmup`, collect steps `[start, start +
    /// iterations)`; a late request moves `start` (and rounds it up to a multiple of
    /// `roundup` when set).
    Iteration {
        /// The first step collected.
        start: i64,
        /// How many steps before it the backends warm up.
        warmup: i64,
        /// How many steps it collects.
        iterations: i64,
        /// What a late start is rounded up to a multiple of.
        roundup: Option<i64>,
    },
}

impl OnDemandTrigger {
    /// The trigger of `config`, given the current `iteration` (−1 before the first step).
    /// An iteration-based config while the application has never stepped falls back to
    /// time-based when it has a duration, and is declined otherwise.
    ///
    /// A start beyond the horizon ([`MAX_START_AHEAD_MS`], [`MAX_START_AHEAD_ITERATIONS`]) is
    /// declined, naming the key, its value and the horizon: the request would stay pending,
    /// refusing every other, for as long as the process runs.
    pub(crate) fn from_config(config: &Config, iteration: i64) -> Result<Self, Refused> {
        let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let warmup = config.warmup_duration();
        if ms(warmup) > MAX_START_AHEAD_MS {
            return Err(Refused::Declined(format!(
                "declined: {ACTIVITIES_WARMUP_PERIOD_SECS}={} is beyond the horizon: an \
                 on-demand request may start at most {} s ahead",
                warmup.as_secs(),
                MAX_START_AHEAD_MS / 1000
            )));
        }
        if let Some(start) = config
            .start_iteration()
            .filter(|_| config.has_start_iteration())
        {
            let from = iteration.max(0);
            if i64::from(start) > from.saturating_add(MAX_START_AHEAD_ITERATIONS) {
                return Err(Refused::Declined(format!(
                    "declined: {PROFILE_START_ITERATION}={start} is beyond the horizon: an \
                     on-demand request may start at most {MAX_START_AHEAD_ITERATIONS} \
                     iterations after the current one ({iteration})"
                )));
            }
        }
        let time = Self::Time {
            start_ms: config.start_time_ms(),
            warmup_ms: ms(config.warmup_duration()),
            duration_ms: ms(config.activities_duration()),
        };
        let Some(start) = config
            .start_iteration()
            .filter(|_| config.has_start_iteration())
        else {
            return Ok(time);
        };
        if iteration < 0 {
            return if config.activities_duration().is_zero() {
                Err(Refused::Declined(
                    "iteration-based request ignored: the application is not updating \
                     iteration count (it never called omniprof::step())"
                        .to_owned(),
                ))
            } else {
                log::info!(
                    "omniprof on-demand: step() was never called; \
                     the iteration-based request falls back to time-based"
                );
                Ok(time)
            };
        }
        Ok(Self::Iteration {
            start: start.into(),
            warmup: config.warmup_iterations().into(),
            iterations: config.iterations().into(),
            roundup: config.start_iteration_roundup().map(i64::from),
        })
    }
}

impl fmt::Display for OnDemandTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Time {
                start_ms,
                warmup_ms,
                duration_ms,
            } => write!(
                f,
                "{duration_ms} ms from {} (warm-up {warmup_ms} ms)",
                utc(start_ms)
            ),
            Self::Iteration {
                start,
                warmup,
                iterations,
                roundup,
            } => {
                write!(
                    f,
                    "{iterations} iterations from iteration {start} (warm-up {warmup})"
                )?;
                match roundup {
                    Some(r) => write!(f, ", start rounded up to a multiple of {r}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// What the driver must do after an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Configure a session for request `id` (warm-up begins).
    Prepare(u64),
    /// Start collecting; `late_ms` is set when the start is late enough to log.
    Start { id: u64, late_ms: Option<i64> },
    /// End the recording and hand the session to the profiler thread to process and write.
    End(u64),
    /// Drop request `id`'s session, if any, without a file; then call
    /// [`Machine::torn_down`]. The request fails with `why`.
    Teardown { id: u64, why: TraceFailed },
    /// Request `id` failed before it had a session.
    Fail { id: u64, why: TraceFailed },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Request {
    id: u64,
    trigger: OnDemandTrigger,
}

/// The state machine. At most one request exists: pending (in `WaitForRequest`) or running.
#[derive(Debug)]
pub(crate) struct Machine {
    state: OnDemandState,
    request: Option<Request>,
}

impl Default for Machine {
    fn default() -> Self {
        Self {
            state: OnDemandState::WaitForRequest,
            request: None,
        }
    }
}

impl Machine {
    pub(crate) fn state(&self) -> OnDemandState {
        self.state
    }

    /// The pending or running request: its id and trigger.
    pub(crate) fn request(&self) -> Option<(u64, OnDemandTrigger)> {
        self.request.map(|r| (r.id, r.trigger))
    }

    /// Kineto's "active": this machine is past `WaitForRequest`, or a synchronous session
    /// holds the profiler (`sync_active`; past `WaitForRequest` the holder is this machine's
    /// own session).
    fn busy(&self, now_ms: i64, iteration: i64, sync_active: bool) -> Option<String> {
        let sync = || "profiler busy: a synchronous profiling session is active".to_owned();
        let Some(request) = self.request else {
            return sync_active.then(sync);
        };
        let id = request.id;
        Some(match (self.state, request.trigger) {
            (OnDemandState::WaitForRequest, _) => return sync_active.then(sync),
            (OnDemandState::Warmup | OnDemandState::CollectTrace, OnDemandTrigger::Time { .. }) => {
                let end = end_ms(request.trigger);
                format!(
                    "profiler busy until {} (in {} ms): request #{id} is in {}",
                    utc(end),
                    end.saturating_sub(now_ms).max(0),
                    self.state
                )
            }
            (
                OnDemandState::Warmup | OnDemandState::CollectTrace,
                OnDemandTrigger::Iteration {
                    start, iterations, ..
                },
            ) => format!(
                "profiler busy until iteration {} (now at iteration {iteration}): \
                 request #{id} is in {}",
                start + iterations,
                self.state
            ),
            (OnDemandState::ProcessTrace, _) => {
                format!("profiler busy: writing the trace of request #{id}")
            }
            (OnDemandState::Cancelling, _) => format!("profiler busy: cancelling request #{id}"),
        })
    }

    /// Accepts request `id`, or says why not. `sync_active`: a synchronous session holds the
    /// profiler.
    pub(crate) fn submit(
        &mut self,
        id: u64,
        trigger: OnDemandTrigger,
        now_ms: i64,
        iteration: i64,
        sync_active: bool,
    ) -> Result<(), Refused> {
        if let Some(reason) = self.busy(now_ms, iteration, sync_active) {
            return Err(Refused::Busy(reason));
        }
        if let Some(pending) = self.request {
            return Err(Refused::Pending(format!(
                "another profile request is pending: request #{}, {}",
                pending.id, pending.trigger
            )));
        }
        // The run loop would refuse it at activation; say so now.
        if let OnDemandTrigger::Time { .. } = trigger {
            check_schedule(trigger, now_ms).map_err(Refused::Declined)?;
        }
        self.request = Some(Request { id, trigger });
        Ok(())
    }

    /// The run-loop tick at `now_ms`: drives a time-based request.
    pub(crate) fn tick(&mut self, now_ms: i64) -> Vec<Action> {
        let Some(Request {
            id,
            trigger:
                trigger @ OnDemandTrigger::Time {
                    start_ms,
                    warmup_ms,
                    ..
                },
        }) = self.request
        else {
            return Vec::new();
        };
        let mut actions = Vec::new();
        if self.state == OnDemandState::WaitForRequest {
            if now_ms.saturating_add(CONTROLLER_TICK_MS) < start_ms.saturating_sub(warmup_ms) {
                return actions;
            }
            if let Err(why) = check_schedule(trigger, now_ms) {
                self.request = None;
                actions.push(Action::Fail {
                    id,
                    why: TraceFailed::CouldNotStart(why),
                });
                return actions;
            }
            self.state = OnDemandState::Warmup;
            actions.push(Action::Prepare(id));
        }
        if self.state == OnDemandState::Warmup && now_ms >= start_ms {
            let late = now_ms - start_ms;
            self.state = OnDemandState::CollectTrace;
            actions.push(Action::Start {
                id,
                late_ms: (late > LATE_START_MS).then_some(late),
            });
        }
        if self.state == OnDemandState::CollectTrace && now_ms >= end_ms(trigger) {
            self.state = OnDemandState::ProcessTrace;
            actions.push(Action::End(id));
        }
        actions
    }

    /// When the next tick can change something (ms since the epoch), if a time-based
    /// request is pending or running; the driver sleeps until then, or one tick at most.
    pub(crate) fn next_deadline(&self) -> Option<i64> {
        let Request {
            trigger:
                trigger @ OnDemandTrigger::Time {
                    start_ms,
                    warmup_ms,
                    ..
                },
            ..
        } = self.request?
        else {
            return None;
        };
        match self.state {
            OnDemandState::WaitForRequest => Some(
                start_ms
                    .saturating_sub(warmup_ms)
                    .saturating_sub(CONTROLLER_TICK_MS),
            ),
            OnDemandState::Warmup => Some(start_ms),
            OnDemandState::CollectTrace => Some(end_ms(trigger)),
            OnDemandState::ProcessTrace | OnDemandState::Cancelling => None,
        }
    }

    /// The first iteration at which [`Machine::step`] can change something (`i64::MAX` when
    /// none): `step()` takes the engine's lock only from there on.
    pub(crate) fn next_iteration(&self) -> i64 {
        let Some(Request {
            trigger:
                OnDemandTrigger::Iteration {
                    start,
                    warmup,
                    iterations,
                    ..
                },
            ..
        }) = self.request
        else {
            return i64::MAX;
        };
        match self.state {
            OnDemandState::WaitForRequest => start - warmup,
            OnDemandState::Warmup => start,
            OnDemandState::CollectTrace => start + iterations,
            OnDemandState::ProcessTrace | OnDemandState::Cancelling => i64::MAX,
        }
    }

    /// The application reached iteration `current`: drives an iteration-based request.
    pub(crate) fn step(&mut self, current: i64) -> Vec<Action> {
        let Some(Request {
            id,
            trigger:
                OnDemandTrigger::Iteration {
                    mut start,
                    warmup,
                    iterations,
                    roundup,
                },
        }) = self.request
        else {
            return Vec::new();
        };
        let mut actions = Vec::new();
        if self.state == OnDemandState::WaitForRequest {
            if current < start - warmup {
                return actions;
            }
            if current > start - warmup {
                // Late: warm up from now; with a roundup, start on the next multiple.
                start = current + warmup;
                if let Some(r) = roundup.filter(|&r| r > 0) {
                    start = (start + r - 1) / r * r;
                }
                self.request = Some(Request {
                    id,
                    trigger: OnDemandTrigger::Iteration {
                        start,
                        warmup,
                        iterations,
                        roundup,
                    },
                });
                if current != start - warmup {
                    return actions;
                }
            }
            self.state = OnDemandState::Warmup;
            actions.push(Action::Prepare(id));
        }
        if self.state == OnDemandState::Warmup && current >= start {
            self.state = OnDemandState::CollectTrace;
            actions.push(Action::Start { id, late_ms: None });
        }
        if self.state == OnDemandState::CollectTrace && current >= start + iterations {
            self.state = OnDemandState::ProcessTrace;
            actions.push(Action::End(id));
        }
        actions
    }

    /// Cancels the pending or running request with `why`. A trace in `ProcessTrace` is
    /// still written (as Kineto finalizes it), so nothing happens then.
    pub(crate) fn cancel(&mut self, why: TraceFailed) -> Vec<Action> {
        let Some(Request { id, .. }) = self.request else {
            return Vec::new();
        };
        match self.state {
            OnDemandState::WaitForRequest => {
                self.request = None;
                vec![Action::Fail { id, why }]
            }
            OnDemandState::Warmup | OnDemandState::CollectTrace => {
                self.state = OnDemandState::Cancelling;
                vec![Action::Teardown { id, why }]
            }
            OnDemandState::ProcessTrace | OnDemandState::Cancelling => Vec::new(),
        }
    }

    /// The session of a cancelled (or failed) request is gone: back to `WaitForRequest`.
    pub(crate) fn torn_down(&mut self) {
        self.state = OnDemandState::WaitForRequest;
        self.request = None;
    }

    /// The trace was written (or failed to be): back to `WaitForRequest`.
    pub(crate) fn processed(&mut self) {
        self.torn_down();
    }
}

/// Where a time-based trigger's collection ends.
fn end_ms(trigger: OnDemandTrigger) -> i64 {
    match trigger {
        OnDemandTrigger::Time {
            start_ms,
            duration_ms,
            ..
        } => start_ms.saturating_add(duration_ms),
        OnDemandTrigger::Iteration { .. } => i64::MAX,
    }
}

/// Kineto's activation check: the start is not in the past and leaves the full warm-up.
fn check_schedule(trigger: OnDemandTrigger, now_ms: i64) -> Result<(), String> {
    let OnDemandTrigger::Time {
        start_ms,
        warmup_ms,
        ..
    } = trigger
    else {
        return Ok(());
    };
    if start_ms < now_ms {
        return Err(format!(
            "could not start at the scheduled time: the start {} is {} ms in the past",
            utc(start_ms),
            now_ms - start_ms
        ));
    }
    if start_ms - now_ms < warmup_ms {
        return Err(format!(
            "could not start at the scheduled time: {} ms left before the start {}, \
             but the warm-up needs {warmup_ms} ms",
            start_ms - now_ms,
            utc(start_ms)
        ));
    }
    Ok(())
}

/// `ms` since the Unix epoch as `YYYY-MM-DD HH:MM:SS.mmm UTC`, for messages.
pub(crate) fn utc(ms: i64) -> String {
    let t = crate::clock::UtcTime::from_unix_ms(ms);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03} UTC",
        t.year, t.month, t.day, t.hour, t.minute, t.second, t.millisecond
    )
}
