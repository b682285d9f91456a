//! The driver around the [`Machine`]: the shared state, the profiler thread, and the work
//! each [`Action`] stands for (sessions, processing, the file).
//!
//! Locking: one mutex guards the machine and the request's session. Nothing slow runs under
//! it on behalf of the application: `step()` takes it only from the iteration where its
//! request needs it ([`Machine::next_iteration`]), ending a recording there is cheap, and
//! merging, writing and tearing down happen with the session taken out of the lock.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::cancel::{CancelledRequest, NotCancelled};
use super::error::{Refused, TraceFailed};
use super::machine::{Action, Machine, OnDemandState, OnDemandTrigger};
use super::status::{OnDemandStatus, RequestSummary};
use crate::config::{Config, CONTROLLER_TICK_MS};
use crate::session::Profiler;
use crate::{lock, wait_timeout, wait_timeout_while, wait_while};

/// The profiler thread's name (Kineto's is "Kineto Activity Profiler").
pub(super) const THREAD_NAME: &str = "omniprof on-demand";

/// Where a request's outcome is delivered to its [`super::Ticket`].
#[derive(Debug, Default)]
pub(super) struct Slot {
    outcome: Mutex<Option<Result<Written, TraceFailed>>>,
    done: Condvar,
}

/// A written trace: its path, and what the trace lost that the user should hear of (a
/// backend left out, records dropped), one line each.
#[derive(Clone, Debug)]
pub(super) struct Written {
    pub(super) path: PathBuf,
    pub(super) problems: Vec<String>,
}

impl Slot {
    fn resolve(&self, outcome: Result<Written, TraceFailed>) {
        *lock(&self.outcome) = Some(outcome);
        self.done.notify_all();
    }

    pub(super) fn wait(&self, timeout: Duration) -> Result<Written, TraceFailed> {
        let guard = lock(&self.outcome);
        let (guard, _) =
            wait_timeout_while(&self.done, guard, timeout, |outcome| outcome.is_none());
        guard.clone().unwrap_or(Err(TraceFailed::TimedOut(timeout)))
    }
}

/// The request the machine holds: its config, its ticket's slot and, from warm-up on, its
/// session.
struct Current {
    id: u64,
    config: Config,
    slot: Arc<Slot>,
    session: Option<Profiler>,
    /// Written into the trace's metadata ([`NOTES_METADATA`]).
    notes: Vec<String>,
}

struct Shared {
    machine: Machine,
    current: Option<Current>,
    /// A request whose recording ended, for the profiler thread to process.
    ended: Option<Current>,
    next_id: u64,
}

pub(super) struct Engine {
    shared: Mutex<Shared>,
    /// Wakes the profiler thread (a request, an ended recording).
    wake: Condvar,
    /// Signals that the machine left `ProcessTrace` or `Cancelling`.
    settled: Condvar,
    /// Whether the profiler thread runs.
    thread: Mutex<bool>,
}

/// The trace metadata key of a request's notes (see [`Ticket::notes`](super::Ticket::notes)):
/// a list of strings.
pub const NOTES_METADATA: &str = "on_demand_notes";

/// A synchronous session is about to claim the profiler: cancel the on-demand request, and
/// wait for a trace being written to release the recorder.
fn preempt() {
    if let Some(engine) = existing() {
        if engine.cancel(TraceFailed::Preempted, true) {
            log::info!("omniprof on-demand: preempted by a synchronous profiling session");
        }
    }
}

static ENGINE: OnceLock<Engine> = OnceLock::new();

/// The engine, created on first use.
pub(super) fn engine() -> &'static Engine {
    ENGINE.get_or_init(|| {
        // The engine hears of iterations and of synchronous sessions through hooks, so the
        // iteration counter and the session engine need not know it.
        crate::iteration::watch(|iteration| engine().on_step(iteration));
        crate::session::on_prepare_preempt(preempt);
        Engine {
            shared: Mutex::new(Shared {
                machine: Machine::default(),
                current: None,
                ended: None,
                next_id: 1,
            }),
            wake: Condvar::new(),
            settled: Condvar::new(),
            thread: Mutex::new(false),
        }
    })
}

/// The engine, if anything has used it yet.
pub(super) fn existing() -> Option<&'static Engine> {
    ENGINE.get()
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Engine {
    /// Starts the profiler thread unless it runs.
    pub(super) fn start_thread(&'static self) -> std::io::Result<()> {
        let mut running = lock(&self.thread);
        if !*running {
            std::thread::Builder::new()
                .name(THREAD_NAME.to_owned())
                .spawn(|| self.run())?;
            *running = true;
        }
        Ok(())
    }

    pub(super) fn thread_running(&self) -> bool {
        *lock(&self.thread)
    }

    /// Accepts a request with `config` and `trigger`, or refuses it.
    pub(super) fn submit(
        &self,
        config: Config,
        trigger: OnDemandTrigger,
        notes: Vec<String>,
    ) -> Result<(u64, Arc<Slot>), Refused> {
        let mut shared = lock(&self.shared);
        let id = shared.next_id;
        let sync_active = crate::session::recorder_claimed();
        let iteration = crate::iteration::iteration();
        shared
            .machine
            .submit(id, trigger, now_ms(), iteration, sync_active)?;
        shared.next_id += 1;
        let slot = Arc::new(Slot::default());
        shared.current = Some(Current {
            id,
            config,
            slot: Arc::clone(&slot),
            session: None,
            notes,
        });
        publish(&shared.machine);
        self.wake.notify_all();
        Ok((id, slot))
    }

    /// The application's `step()` reached `iteration`, at or after the one the machine asked for.
    pub(super) fn on_step(&self, iteration: i64) {
        let mut shared = lock(&self.shared);
        let actions = shared.machine.step(iteration);
        self.carry_out(shared, actions);
    }

    /// Cancels the pending or running request with `why`; true if there was one to cancel.
    /// With `wait_for_processing`, a trace being written is waited for first (a synchronous
    /// session needs the recorder it still holds).
    pub(super) fn cancel(&self, why: TraceFailed, wait_for_processing: bool) -> bool {
        let mut shared = lock(&self.shared);
        if wait_for_processing {
            shared = wait_while(&self.settled, shared, |s| {
                matches!(
                    s.machine.state(),
                    OnDemandState::ProcessTrace | OnDemandState::Cancelling
                )
            });
        }
        let actions = shared.machine.cancel(why);
        let cancelled = !actions.is_empty();
        self.carry_out(shared, actions);
        cancelled
    }

    /// [`Engine::cancel`] without waiting, saying what was cancelled or why nothing was.
    pub(super) fn cancel_described(
        &self,
        why: TraceFailed,
    ) -> Result<CancelledRequest, NotCancelled> {
        let shared = lock(&self.shared);
        let state = shared.machine.state();
        let Some((id, trigger)) = shared.machine.request() else {
            return Err(NotCancelled::NoRequest);
        };
        let mut shared = shared;
        let actions = shared.machine.cancel(why);
        if actions.is_empty() {
            return Err(NotCancelled::BeingWritten { id, state });
        }
        self.carry_out(shared, actions);
        Ok(CancelledRequest { id, state, trigger })
    }

    pub(super) fn status(&self) -> OnDemandStatus {
        let shared = lock(&self.shared);
        let request = shared.machine.request().map(|(id, trigger)| {
            let log_file = shared
                .current
                .as_ref()
                .or(shared.ended.as_ref())
                .map(|c| c.config.log_file_url(std::process::id()))
                .unwrap_or_default();
            RequestSummary {
                id,
                trigger,
                log_file,
            }
        });
        OnDemandStatus {
            state: shared.machine.state(),
            request,
            iteration: crate::iteration::iteration(),
            thread_running: self.thread_running(),
        }
    }

    /// Does what `actions` say, releasing the lock for teardown.
    fn carry_out<'a>(&'a self, mut shared: MutexGuard<'a, Shared>, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Prepare(id) => {
                    let result = shared.current.as_mut().filter(|c| c.id == id).map(|c| {
                        let mut session = Profiler::builder()
                            .config(c.config.clone())
                            .on_demand()
                            .build()?;
                        session.prepare()?;
                        c.session = Some(session);
                        Ok::<_, crate::SessionError>(())
                    });
                    if let Some(Err(e)) = result {
                        shared = self.abort(shared, id, TraceFailed::Session(e.to_string()));
                    }
                }
                Action::Start { id, late_ms } => {
                    if let Some(late) = late_ms {
                        log::info!("omniprof on-demand: Tracing started {late} ms late!");
                    }
                    let result = shared
                        .current
                        .as_mut()
                        .filter(|c| c.id == id)
                        .and_then(|c| c.session.as_mut())
                        .map(Profiler::start);
                    if let Some(Err(e)) = result {
                        shared = self.abort(shared, id, TraceFailed::Session(e.to_string()));
                    }
                }
                Action::End(id) => {
                    let Some(mut current) = shared.current.take_if(|c| c.id == id) else {
                        continue;
                    };
                    if let Some(Err(e)) = current.session.as_mut().map(Profiler::end_recording) {
                        shared.machine.processed();
                        current
                            .slot
                            .resolve(Err(TraceFailed::Session(e.to_string())));
                        self.settled.notify_all();
                        continue;
                    }
                    shared.ended = Some(current);
                    self.wake.notify_all();
                }
                Action::Teardown { id, why } => shared = self.abort(shared, id, why),
                Action::Fail { id, why } => {
                    if let Some(current) = shared.current.take_if(|c| c.id == id) {
                        current.slot.resolve(Err(why));
                    }
                }
            }
        }
        publish(&shared.machine);
    }

    /// Tears request `id`'s session down outside the lock (backends may take a while to
    /// stop), then settles the machine and fails the ticket with `why`.
    fn abort<'a>(
        &'a self,
        mut shared: MutexGuard<'a, Shared>,
        id: u64,
        why: TraceFailed,
    ) -> MutexGuard<'a, Shared> {
        let current = shared.current.take_if(|c| c.id == id);
        publish(&shared.machine);
        drop(shared);
        let slot = current.map(|current| {
            drop(current.session);
            current.slot
        });
        let mut shared = lock(&self.shared);
        shared.machine.torn_down();
        self.settled.notify_all();
        // As in `run`: the ticket is answered once the machine is free.
        if let Some(slot) = slot {
            slot.resolve(Err(why));
        }
        shared
    }

    /// The profiler thread: ticks the machine, and processes ended recordings.
    fn run(&self) {
        let mut shared = lock(&self.shared);
        loop {
            if let Some(ended) = shared.ended.take() {
                drop(shared);
                let outcome = process(ended.session, &ended.config, ended.notes);
                match &outcome {
                    Ok(written) => log::info!(
                        "omniprof on-demand: request #{} written to {}",
                        ended.id,
                        written.path.display()
                    ),
                    Err(e) => log::warn!("omniprof on-demand: request #{}: {e}", ended.id),
                }
                shared = lock(&self.shared);
                shared.machine.processed();
                publish(&shared.machine);
                self.settled.notify_all();
                // Resolved once the machine is free: a request made as soon as the ticket
                // is answered is not refused as busy.
                ended.slot.resolve(outcome);
                continue;
            }
            let now = now_ms();
            let actions = shared.machine.tick(now);
            if !actions.is_empty() {
                self.carry_out(shared, actions);
                shared = lock(&self.shared);
                continue;
            }
            let wait_ms = shared
                .machine
                .next_deadline()
                .map_or(CONTROLLER_TICK_MS, |at| {
                    at.saturating_sub(now).clamp(0, CONTROLLER_TICK_MS)
                });
            let timeout = Duration::from_millis(u64::try_from(wait_ms).unwrap_or(0));
            shared = wait_timeout(&self.wake, shared, timeout).0;
        }
    }
}

/// Tells `step()` from which iteration on the machine needs it.
fn publish(machine: &Machine) {
    crate::iteration::watch_from(machine.next_iteration());
}

/// Merges an ended session and writes its trace to the config's log file.
/// The request's notes go into the trace's metadata; what the trace lost comes back with
/// its path, for the client to print.
fn process(
    session: Option<Profiler>,
    config: &Config,
    notes: Vec<String>,
) -> Result<Written, TraceFailed> {
    let mut session = session.ok_or_else(|| TraceFailed::Session("no session".to_owned()))?;
    let mut trace = session
        .process()
        .map_err(|e| TraceFailed::Session(e.to_string()))?;
    if !notes.is_empty() {
        let notes = notes
            .into_iter()
            .map(|n| crate::Value::Str(n.into()))
            .collect();
        trace
            .metadata
            .push((NOTES_METADATA.to_owned(), crate::Value::List(notes)));
    }
    let url = config.log_file_url(std::process::id());
    let path = PathBuf::from(
        url.strip_prefix("file://")
            .ok_or_else(|| TraceFailed::Write {
                path: PathBuf::from(&url),
                error: "only file:// URLs can be written".to_owned(),
            })?,
    );
    write_trace(&trace, &path)?;
    Ok(Written {
        problems: problems(&trace, config),
        path,
    })
}

/// What `trace` lost, as the user should hear it: each backend left out or short of
/// records (`backend_errors`), and host events dropped at the per-thread cap.
fn problems(trace: &crate::Trace, config: &Config) -> Vec<String> {
    let mut out: Vec<String> = trace
        .health
        .backend_errors
        .iter()
        .map(|e| format!("the trace lacks records of a backend: {e}"))
        .collect();
    let dropped = trace.health.dropped_events.unwrap_or(0);
    if dropped > 0 {
        out.push(format!(
            "{dropped} host events were dropped: a thread reached its cap of {} records \
             (OMNIPROF_MAX_HOST_RECORDS_PER_THREAD)",
            config.max_host_records_per_thread()
        ));
    }
    out
}

/// Writes `trace` at `path`, held inside the allowed directory (see `write.rs`).
#[cfg(unix)]
fn write_trace(trace: &crate::Trace, path: &std::path::Path) -> Result<(), TraceFailed> {
    super::write::save(trace, path)
}

/// Writes `trace` at `path` (no directory handles here: the path is checked by name).
#[cfg(not(unix))]
fn write_trace(trace: &crate::Trace, path: &std::path::Path) -> Result<(), TraceFailed> {
    let write_error = |error: String| TraceFailed::Write {
        path: path.to_owned(),
        error,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| write_error(format!("cannot create directory {}: {e}", dir.display())))?;
    }
    crate::save(trace, path).map_err(|e| write_error(e.to_string()))?;
    Ok(())
}
