//! Requests to the engine: submitting one ([`request_on_demand`], which documents on-demand
//! tracing as a whole), waiting on its [`Ticket`], cancelling it, and asking the engine's
//! status.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::base;
use super::cancel::{CancelledRequest, NotCancelled};
use super::engine;
use super::error::{Refused, TraceFailed};
use super::machine::OnDemandTrigger;
use super::status::OnDemandStatus;
use crate::config::Config;
use crate::iteration::iteration;

/// Starts the profiler thread; idempotent. [`request_on_demand`] calls it too.
pub(crate) fn enable_on_demand() -> std::io::Result<()> {
    engine::engine().start_thread()
}

/// An accepted request: wait on it for the trace's path.
#[derive(Clone, Debug)]
pub struct Ticket {
    id: u64,
    slot: Arc<engine::Slot>,
    notes: Vec<String>,
}

impl Ticket {
    /// The request's number, as shown by [`on_demand_status`].
    pub fn id(&self) -> u64 {
        self.id
    }

    /// What the user should know about this request's trace, one line each: an
    /// iteration-based request that arrived before the application's first [`step`](crate::step) falls
    /// back to a time-based trace (as Kineto's does). The trace's metadata holds the same
    /// lines under [`NOTES_METADATA`](super::NOTES_METADATA).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Waits up to `timeout` for the outcome: the path of the written trace, or why there
    /// is none ([`TraceFailed::TimedOut`] if it is not decided yet).
    pub fn wait(&self, timeout: Duration) -> Result<PathBuf, TraceFailed> {
        self.slot.wait(timeout).map(|written| written.path)
    }

    /// [`wait`](Self::wait), with what the user should know of the trace: this request's
    /// [`notes`](Self::notes), then what the trace lost (a backend's errors or dropped
    /// records, host events dropped at the per-thread cap), one line each.
    pub fn wait_with_notes(
        &self,
        timeout: Duration,
    ) -> Result<(PathBuf, Vec<String>), TraceFailed> {
        let written = self.slot.wait(timeout)?;
        let mut notes = self.notes.clone();
        notes.extend(written.problems);
        Ok((written.path, notes))
    }
}

/// Submits a request: `config_text` in Kineto's format, applied over the base config with
/// the on-demand rules, except that a log file outside the allowed directory is refused
/// rather than ignored. Starts the profiler thread if needed.
///
/// ```
/// use omniprof::on_demand::Refused;
///
/// let err = omniprof::on_demand::request_on_demand("ACTIVITIES_LOG_FILE=/etc/cron.d/x.json").unwrap_err();
/// assert!(matches!(err, Refused::Config(_)));
/// assert!(err.to_string().contains("/etc/cron.d/x.json"), "{err}");
/// ```
///
/// On-demand tracing of a running process: Kineto's asynchronous engine
/// (`docs/lifecycle.md` §1, §3).
///
/// A request is Kineto config text (as a trigger or a daemon sends it), layered over the base
/// config (`OMNIPROF_CONFIG_ENV` / `KINETO_CONFIG_ENV`). It is time-based (start time,
/// warm-up, duration) or iteration-based (start iteration, warm-up iterations, iterations,
/// roundup), counted by [`step`](crate::step). The engine's states are Kineto's
/// ([`OnDemandState`]): `WaitForRequest` → `Warmup` → `CollectTrace` → `ProcessTrace`, and
/// `Cancelling`. A profiler thread (named `omniprof on-demand`) ticks time-based requests,
/// merges every trace and writes it to the config's log file, so the application's `step()`
/// and recording threads never wait for processing or file writes.
///
/// Arbitration: one request at a time (a second one is refused, saying until when the
/// profiler is busy); a request is refused while a synchronous [`Profiler`] session is
/// active; and a synchronous session's `prepare` preempts a pending or running on-demand
/// trace, which then writes no file.
///
/// ```no_run
/// use std::time::Duration;
///
/// omniprof::on_demand::enable_on_demand_from_env(); // OMNIPROF_ONDEMAND=1 opts the process in
/// // On the application's training loop: one step() per iteration.
/// omniprof::step();
///
/// // From a trigger (e.g. the socket server): ten iterations from the next one.
/// let ticket = omniprof::on_demand::request_on_demand(
///     "PROFILE_START_ITERATION=0\nACTIVITIES_ITERATIONS=10\n\
///      ACTIVITIES_LOG_FILE=/tmp/job.json",
/// )
/// .unwrap_or_else(|refused| panic!("refused: {refused}"));
/// match ticket.wait(Duration::from_secs(60)) {
///     Ok(path) => println!("trace written to {}", path.display()),
///     Err(failed) => eprintln!("no trace: {failed}"),
/// }
/// println!("{}", omniprof::on_demand::on_demand_status());
/// ```
///
/// [`Profiler`]: crate::Profiler
/// [`OnDemandState`]: super::OnDemandState
pub fn request_on_demand(config_text: &str) -> Result<Ticket, Refused> {
    let mut config = base::load()?;
    config.apply_on_demand_strict(config_text)?;
    if !config.activities_enabled() {
        return Err(Refused::Declined(
            "declined: the config disables the activity profiler (ACTIVITIES_ENABLED=false)"
                .to_owned(),
        ));
    }
    if config.memory_snapshot() {
        return Err(Refused::Declined(
            "declined: memory snapshots (PROFILE_MEMORY) are not supported".to_owned(),
        ));
    }
    let engine = engine::engine();
    engine.start_thread().map_err(|e| {
        Refused::Declined(format!(
            "cannot start the profiler thread {:?}: {e}",
            engine::THREAD_NAME
        ))
    })?;
    let at = iteration();
    let trigger = OnDemandTrigger::from_config(&config, at)?;
    let notes = fallback_note(&config, at, trigger)
        .into_iter()
        .collect::<Vec<_>>();
    let (id, slot) = engine.submit(config, trigger, notes.clone())?;
    Ok(Ticket { id, slot, notes })
}

/// Says so when an iteration-based `config` became time-based `trigger` because the
/// application had not stepped yet (`iteration` −1): without it the user asks for three
/// iterations and silently gets 500 ms of however many steps.
fn fallback_note(config: &Config, iteration: i64, trigger: OnDemandTrigger) -> Option<String> {
    let OnDemandTrigger::Time { duration_ms, .. } = trigger else {
        return None;
    };
    (iteration < 0 && config.has_start_iteration()).then(|| {
        format!(
            "the application had not called omniprof::step() yet when the request arrived, so \
             the iteration-based request ({} iterations) fell back to a time-based trace of \
             {duration_ms} ms (as Kineto's does); trigger again once it steps for a trace of \
             iterations",
            config.iterations()
        )
    })
}

/// Cancels the pending or running request; its ticket gets [`TraceFailed::Cancelled`] and no
/// file is written. A trace already being written is finished. Returns whether a request
/// was cancelled.
pub fn cancel_on_demand() -> bool {
    engine::existing().is_some_and(|e| e.cancel(TraceFailed::Cancelled, false))
}

/// Cancels the pending or running request, as [`cancel_on_demand`] does, and says which it
/// was (its number, state and trigger); or why nothing was cancelled: no request, or a trace
/// already being written (which is finished). For `omniprof trigger --cancel`, the way out
/// of a request that would wait too long.
///
/// ```
/// use omniprof::on_demand::{cancel_on_demand_request, NotCancelled};
///
/// let err = cancel_on_demand_request().unwrap_err();
/// assert_eq!(err, NotCancelled::NoRequest);
/// assert!(err.to_string().starts_with("nothing to cancel"), "{err}");
/// ```
pub fn cancel_on_demand_request() -> Result<CancelledRequest, NotCancelled> {
    engine::engine().cancel_described(TraceFailed::Cancelled)
}

/// The engine's state and request.
///
/// ```
/// let status = omniprof::on_demand::on_demand_status();
/// println!("{status}"); // e.g. "WaitForRequest at iteration -1"
/// ```
pub fn on_demand_status() -> OnDemandStatus {
    engine::engine().status()
}
