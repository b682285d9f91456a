//! The running flight recorder: starting and stopping the rings and the backends that feed
//! them (the PyTorch op observer) or record device work continuously beside them (OpenReg),
//! the dumper thread that writes the dumps the triggers ask
//! for and watches for a hang, and the dumps themselves.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::dump_dir::{self, DumpDir};
use super::reason::DumpReason;
use super::steps::StepWatch;
use crate::config::Config;
use crate::keys::metadata;
use crate::record::{self, RingBounds, RingsRefused};
use crate::session::{self, Backends};
use crate::{lock, wait_timeout};
use crate::{ActivitySet, ActivityType, Trace, Value};

/// What went wrong starting the flight recorder or writing a dump.
#[derive(Debug, thiserror::Error)]
pub enum FlightError {
    /// A flight recorder already runs in this process.
    #[error("a flight recorder already runs in this process")]
    Running,
    /// A profiling session records: start the flight recorder before it, or after it stops.
    #[error(
        "a profiling session records in this process; start the flight recorder before it \
         (the session then views the recorder's rings) or after it stops"
    )]
    SessionRecording,
    /// The recorder was stopped.
    #[error("the flight recorder was stopped")]
    Stopped,
    /// The builder's values cannot be used.
    #[error("flight recorder: {0}")]
    Invalid(String),
    /// The dump could not be written.
    #[error("cannot write the flight recorder's dump {}: {source}", path.display())]
    Write {
        /// Where it was to go.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// A dump written.
#[derive(Clone, Debug, PartialEq)]
pub struct Dump {
    /// Where it was written.
    pub path: PathBuf,
    /// Host events (ops, ranges, instants) in it.
    pub events: usize,
    /// Records the rings overwrote while still inside the window, since the recorder
    /// started; also in the trace's `flight_overwritten_records` metadata.
    pub overwritten: u64,
    /// The memory bound cut the window short: the dump holds less than the window asked.
    pub cut_short: bool,
}

/// What the flight recorder holds and has done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlightStats {
    /// Bytes of record chunks the rings hold now.
    pub held_bytes: usize,
    /// The rings' bound.
    pub max_bytes: usize,
    /// Records overwritten while still inside the window.
    pub overwritten: u64,
    /// Dumps written into the dump directory.
    pub dumps_written: u64,
    /// Triggers that wrote nothing: rate-limited, or the directory or the write refused.
    pub dumps_skipped: u64,
}

/// Configures a [`FlightRecorder`]; every value has a default.
#[derive(Clone, Debug)]
pub struct FlightRecorderBuilder {
    window: Duration,
    max_bytes: usize,
    dump_dir: Option<PathBuf>,
    keep: usize,
    min_interval: Duration,
    slow_factor: f64,
    warmup_steps: usize,
    hang_after: Option<Duration>,
    serve: bool,
    answer_peers: bool,
    config: Config,
}

/// The defaults, stated once.
impl Default for FlightRecorderBuilder {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(30),
            max_bytes: 64 << 20,
            dump_dir: None,
            keep: 5,
            min_interval: Duration::from_secs(30),
            slow_factor: 3.0,
            warmup_steps: 10,
            hang_after: None,
            serve: false,
            answer_peers: std::env::var("WORLD_SIZE")
                .ok()
                .and_then(|w| w.trim().parse::<u64>().ok())
                .is_some_and(|w| w > 1),
            config: Config::default(),
        }
    }
}

impl FlightRecorderBuilder {
    /// How far back the recorder keeps (default 30 s).
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// The bound on the rings' record memory for the whole process (default 64 MiB; at
    /// least one 64 KiB chunk per recording thread is kept whatever the bound).
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Where triggered dumps go (none by default: only [`FlightRecorder::dump`] writes).
    /// Created when missing; refused, with one warning, when it is a link, another user's,
    /// or not writable.
    pub fn dump_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dump_dir = Some(dir.into());
        self
    }

    /// The triggered dumps kept in the directory, newest first (default 5); older ones of
    /// this recorder are deleted.
    pub fn keep(mut self, dumps: usize) -> Self {
        self.keep = dumps;
        self
    }

    /// The least time between two dumps the recorder triggers itself, for a slow step or a
    /// hang (default 30 s, the window: a dump holds all that happened since the one before).
    /// Failures and requests are not held back by it, only by a queue of four.
    pub fn min_interval(mut self, interval: Duration) -> Self {
        self.min_interval = interval;
        self
    }

    /// A step is slow when it took more than `factor` times the median of the steps before
    /// it (default 3), once `warmup_steps` steps have ended (default 10).
    pub fn slow_step(mut self, factor: f64, warmup_steps: usize) -> Self {
        self.slow_factor = factor;
        self.warmup_steps = warmup_steps;
        self
    }

    /// Dumps when no step ends for `after`, counted from the first step (off by default).
    pub fn hang_after(mut self, after: Duration) -> Self {
        self.hang_after = Some(after);
        self
    }

    /// Serves `omniprof trigger --pid P --dump` on the process's trigger socket (off by
    /// default). The socket is on-demand tracing's
    /// ([`serve_triggers`](crate::on_demand::serve_triggers)), so the process then also
    /// takes on-demand trace requests (recorded as views of the rings).
    pub fn serve_dump_requests(mut self, serve: bool) -> Self {
        self.serve = serve;
        self
    }

    /// Answers the other ranks of a job that share the dump directory: when one writes a
    /// slow-step, hang or failure dump for step N, this rank writes a `peer` dump for step
    /// N too (its window then holds step N if it ended within the window), so every rank's
    /// view of the step lines up. The recorder's thread reads the directory's names once a
    /// second. On by default in a job of more than one rank (torchrun's `WORLD_SIZE`).
    pub fn answer_peers(mut self, answer: bool) -> Self {
        self.answer_peers = answer;
        self
    }

    /// What the op observer records beyond names and times, as a session's config text
    /// sets it (`PROFILE_REPORT_INPUT_SHAPES=true`, ...).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Starts recording. Fails when another flight recorder runs, or a profiling session
    /// records (see [`FlightError::SessionRecording`]).
    pub fn start(self) -> Result<FlightRecorder, FlightError> {
        if self.window.is_zero() || self.max_bytes == 0 {
            return Err(FlightError::Invalid(
                "the window and the memory bound must be above zero".into(),
            ));
        }
        if self.slow_factor.is_nan() || self.slow_factor <= 1.0 {
            return Err(FlightError::Invalid(format!(
                "the slow-step factor must be above 1, not {}",
                self.slow_factor
            )));
        }
        let mut current = lock(&CURRENT);
        if current.is_some() {
            return Err(FlightError::Running);
        }
        // Configured first: the rings tell their correlation listeners from the first op.
        let (mut backends, sitting_out) = flight_backends(&self.config, self.window);
        record::start_rings(
            RingBounds {
                window: self.window,
                max_bytes: self.max_bytes,
            },
            backends.listeners(),
        )
        .map_err(|refused| match refused {
            RingsRefused::Running => FlightError::Running,
            RingsRefused::SessionRecording => FlightError::SessionRecording,
        })?;
        backends.start();
        backends.window_opened();
        let shared = Arc::new(Shared {
            dir: self.dump_dir.clone().map(DumpDir::new),
            steps: Mutex::new(StepWatch::new(self.slow_factor, self.warmup_steps)),
            backends: Mutex::new(Some(backends)),
            sitting_out: Mutex::new(sitting_out),
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            warnings: Mutex::new(Vec::new()),
            written: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            pid: std::process::id(),
            options: self,
        });
        *current = Some(Arc::clone(&shared));
        drop(current);
        shared.warn_sitting_out();
        session::on_claim(lend_backends, resume_backends);
        #[cfg(unix)]
        crate::trigger::on_dump_request(request_dump);
        lock(&shared.steps).begin_range(crate::iteration::iteration() + 1);
        crate::iteration::every_step(on_step, true);
        let dumper = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("omniprof-flight".into())
            .spawn(move || dumper.run());
        if let Err(e) = spawned {
            shared.warn(format!(
                "omniprof: no flight recorder thread ({e}); triggered dumps and the hang \
                 watch are off"
            ));
        }
        #[cfg(unix)]
        if shared.options.serve {
            if let Err(e) = crate::on_demand::serve_triggers() {
                shared.warn(format!(
                    "omniprof: the flight recorder cannot take `omniprof trigger --dump` \
                     requests: {e}"
                ));
            }
        }
        Ok(FlightRecorder { shared })
    }
}

/// The flight recorder's backends, configured as a session's: the host backends, which
/// record host ops and user ranges into the rings (the PyTorch op observer); and the
/// backends of the default device types (device work and the runtime and driver calls that
/// launch it) that can record continuously
/// ([`ProfilerSession::record_continuously`](crate::backends::ProfilerSession::record_continuously)).
/// Also the names of those that cannot, which sit the recorder out.
fn flight_backends(config: &Config, window: Duration) -> (Backends, Vec<String>) {
    session::initialize();
    let host: ActivitySet = [ActivityType::CpuOp, ActivityType::UserAnnotation]
        .into_iter()
        .collect();
    // Host types of their own (Python frames, instants, ...) are the host backends' alone.
    let device: ActivitySet = ActivitySet::default_set()
        .iter()
        .filter(|t| t.is_device() || !t.has_own_external_id())
        .collect();
    let mut backends = Backends::configure(host, config, None).unwrap_or_default();
    let mut continuous = Backends::configure(device, config, None).unwrap_or_default();
    let sitting_out = continuous.keep_continuous(window);
    backends.join(continuous);
    (backends, sitting_out)
}

/// The flight recorder of this process (at most one), from [`FlightRecorder::builder`];
/// [`stop`](Self::stop) ends it (dropping the handle does not: a program started by an
/// environment switch keeps it to the end).
///
/// ```
/// use std::time::Duration;
/// use omniprof::{DumpReason, FlightRecorder};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let recorder = FlightRecorder::builder().dump_dir(dir.path()).start().unwrap();
/// omniprof::scope!("work");
/// recorder.trigger(DumpReason::Request);
/// assert!(recorder.flush(Duration::from_secs(60)));
/// assert_eq!(recorder.dumps().len(), 1);
/// recorder.stop();
/// ```
pub struct FlightRecorder {
    shared: Arc<Shared>,
}

impl FlightRecorder {
    /// A builder with the defaults (30 s, 64 MiB, no dump directory).
    pub fn builder() -> FlightRecorderBuilder {
        FlightRecorderBuilder::default()
    }

    /// The running recorder of this process, if any.
    pub fn current() -> Option<FlightRecorder> {
        lock(&CURRENT)
            .clone()
            .map(|shared| FlightRecorder { shared })
    }

    /// The window, ending now, as a trace (what [`dump`](Self::dump) writes), with the
    /// recorder's metadata.
    pub fn snapshot(&self) -> Result<Trace, FlightError> {
        self.shared
            .window(PathBuf::new(), None)
            .map(|(trace, _)| trace)
    }

    /// Writes the window, ending now, to `path` as a Kineto-format trace (Chrome JSON,
    /// gzipped when the name ends in `.gz`), now, on this thread.
    pub fn dump(&self, path: impl AsRef<Path>) -> Result<Dump, FlightError> {
        let path = path.as_ref();
        let (trace, dump) = self.shared.window(path.to_path_buf(), None)?;
        crate::trace::save(&trace, path).map_err(|e| FlightError::Write {
            path: path.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok(dump)
    }

    /// Asks for a dump into the dump directory, named for `reason` and the current step,
    /// written by the recorder's thread (rate-limited as
    /// [`FlightRecorderBuilder::min_interval`] says). [`flush`](Self::flush) waits for it.
    pub fn trigger(&self, reason: DumpReason) {
        // A skip is counted and reported by the recorder.
        let _ = self
            .shared
            .request(reason, crate::iteration::iteration() + 1);
    }

    /// Waits up to `timeout` for the dumps asked for so far to be written; false when some
    /// are still pending.
    pub fn flush(&self, timeout: Duration) -> bool {
        if self.shared.forked() {
            return false;
        }
        let deadline = Instant::now() + timeout;
        let mut queue = lock(&self.shared.queue);
        while !queue.pending.is_empty() || queue.busy {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            queue = wait_timeout(&self.shared.wake, queue, left).0;
        }
        true
    }

    /// The dumps written into the dump directory that are still kept, oldest first.
    pub fn dumps(&self) -> Vec<PathBuf> {
        lock(&self.shared.queue).kept.clone()
    }

    /// The warnings since the last call (also logged): a refused directory, skipped
    /// triggers, a window the memory bound cut short.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.shared.warnings))
    }

    /// What the recorder holds and has done.
    pub fn stats(&self) -> FlightStats {
        let used = record::rings_use();
        FlightStats {
            held_bytes: used.map_or(0, |u| u.held_chunks * record::CHUNK_BYTES),
            max_bytes: self.shared.options.max_bytes,
            overwritten: used.map_or(0, |u| u.overwritten),
            dumps_written: self.shared.written.load(Ordering::Relaxed),
            dumps_skipped: self.shared.skipped.load(Ordering::Relaxed),
        }
    }

    /// Stops recording (a profiling session viewing the rings goes on until it stops) and
    /// the recorder's thread, after the dumps asked for are written.
    pub fn stop(self) {
        let mut current = lock(&CURRENT);
        if !current
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, &self.shared))
        {
            return;
        }
        *current = None;
        drop(current);
        crate::iteration::every_step(on_step, false);
        self.flush(Duration::from_secs(60));
        lock(&self.shared.queue).stopping = true;
        self.shared.wake.notify_all();
        if let Some(mut backends) = lock(&self.shared.backends).take() {
            backends.stop();
        }
        lock(&self.shared.steps).end_range();
        record::stop_rings();
        // A session viewing the rings keeps its own listeners.
        if !session::recorder_claimed() {
            record::correlation::set_session_listeners(Vec::new());
        }
    }
}

impl std::fmt::Debug for FlightRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightRecorder")
            .field("options", &self.shared.options)
            .finish()
    }
}

/// Failures and requests queued at most; past this they are skipped.
const MAX_QUEUED: usize = 4;

/// The outcomes kept for requests waiting on their dump.
const MAX_RESULTS: usize = 16;

/// The running recorder, for the step hook and the trigger socket.
static CURRENT: Mutex<Option<Arc<Shared>>> = Mutex::new(None);

/// How long a dump request over the socket waits for its dump.
const REQUEST_WAIT: Duration = Duration::from_secs(300);

/// Writes a dump on request (`omniprof trigger --dump`) and returns its path, or why none
/// was written (no recorder runs, rate-limited, the directory refused).
fn request_dump() -> Result<PathBuf, String> {
    let shared = lock(&CURRENT)
        .clone()
        .ok_or("no flight recorder runs in this process")?;
    let ticket = shared.request(DumpReason::Request, crate::iteration::iteration() + 1)?;
    let deadline = Instant::now() + REQUEST_WAIT;
    let mut queue = lock(&shared.queue);
    loop {
        if let Some(at) = queue.results.iter().position(|(t, _)| *t == ticket) {
            return queue.results.remove(at).1;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || queue.stopping {
            return Err("the dump was not written in time".into());
        }
        queue = wait_timeout(&shared.wake, queue, left).0;
    }
}

/// Step `iteration` ended (the hook [`step`](crate::step) calls while a recorder runs):
/// the step watch closes its range and may ask for a slow step's dump.
fn on_step(iteration: i64) {
    with_steps(|w| w.ended(iteration, Instant::now()));
}

/// A profiling session claims the recorder: the recorder's backends stop, so the session's
/// own (the op observer with the session's flags) can attach; the session records into
/// the rings it views.
fn lend_backends() {
    if let Some(shared) = lock(&CURRENT).clone() {
        if let Some(mut backends) = lock(&shared.backends).take() {
            backends.stop();
        }
    }
}

/// The session let the recorder go: the recorder's backends start again.
fn resume_backends() {
    if let Some(shared) = lock(&CURRENT).clone() {
        let mut held = lock(&shared.backends);
        if held.is_none() {
            let (mut backends, sitting_out) =
                flight_backends(&shared.options.config, shared.options.window);
            // Threads that first record from now on tell these.
            record::correlation::set_session_listeners(backends.listeners());
            backends.start();
            backends.window_opened();
            *held = Some(backends);
            *lock(&shared.sitting_out) = sitting_out;
        }
    }
}

/// Runs `f` on the running recorder's step watch and queues the dump it asks for.
fn with_steps(f: impl FnOnce(&mut StepWatch) -> Option<(DumpReason, i64)>) {
    let Some(shared) = lock(&CURRENT).clone() else {
        return;
    };
    let asked = f(&mut lock(&shared.steps));
    if let Some((reason, step)) = asked {
        let _ = shared.request(reason, step);
    }
}

/// What the recorder and its thread share.
struct Shared {
    options: FlightRecorderBuilder,
    dir: Option<DumpDir>,
    steps: Mutex<StepWatch>,
    /// Lent to a profiling session while one runs (`None`).
    backends: Mutex<Option<Backends>>,
    /// The backends that cannot record continuously.
    sitting_out: Mutex<Vec<String>>,
    queue: Mutex<Queue>,
    wake: Condvar,
    warnings: Mutex<Vec<String>>,
    written: AtomicU64,
    skipped: AtomicU64,
    /// The process the recorder's thread runs in: a forked child has none (fork copies only
    /// the calling thread), so it asks for no dump and waits for none.
    pid: u32,
}

/// The dumps asked for and written.
#[derive(Default)]
struct Queue {
    /// Reason, step and ticket of each dump asked for.
    pending: Vec<(DumpReason, i64, u64)>,
    /// The last dumps' outcomes by ticket, for the requests that wait for theirs.
    results: Vec<(u64, Result<PathBuf, String>)>,
    next_ticket: u64,
    /// A dump is being written.
    busy: bool,
    stopping: bool,
    last_dump: Option<Instant>,
    /// Whether the rate limit was already reported.
    limited_reported: bool,
    /// The dumps kept in the directory, oldest first.
    kept: Vec<PathBuf>,
    /// Dumps written so far, numbering the files.
    count: u64,
}

impl Shared {
    /// Whether this is a forked child of the recorder's process.
    fn forked(&self) -> bool {
        std::process::id() != self.pid
    }

    fn warn(&self, message: String) {
        log::warn!("{message}");
        lock(&self.warnings).push(message);
    }

    /// Names the backends that sit the recorder out, once, at its start.
    fn warn_sitting_out(&self) {
        let names = lock(&self.sitting_out).join(", ");
        if !names.is_empty() {
            self.warn(format!(
                "omniprof: the flight recorder records no device work from {names}: they \
                 cannot record continuously (their profiling sessions still record them)"
            ));
        }
    }

    /// Queues a dump and returns its ticket, or why it is skipped.
    fn request(&self, reason: DumpReason, step: i64) -> Result<u64, String> {
        if self.forked() {
            return Err(format!(
                "process {} was forked from the flight recorder's process: it writes no dumps",
                std::process::id()
            ));
        }
        let mut queue = lock(&self.queue);
        if queue.stopping {
            return Err("the flight recorder is stopping".into());
        }
        // What the recorder notices itself is held to one dump per interval; a failure (it
        // happens once) and a request (someone asked) are only held to a short queue.
        let limited = if reason.is_automatic() {
            queue
                .last_dump
                .is_some_and(|at| at.elapsed() < self.options.min_interval)
                || !queue.pending.is_empty()
                || queue.busy
        } else {
            queue.pending.len() >= MAX_QUEUED
        };
        if limited {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            let why = format!(
                "flight recorder dumps are rate-limited to one per {:?}",
                self.options.min_interval
            );
            if !std::mem::replace(&mut queue.limited_reported, true) {
                drop(queue);
                self.warn(format!(
                    "omniprof: {why}; a {} dump at step {step} and those like it within the \
                     interval are skipped (FlightStats::dumps_skipped counts them)",
                    reason.as_str()
                ));
            }
            return Err(why);
        }
        queue.last_dump = Some(Instant::now());
        queue.next_ticket += 1;
        let ticket = queue.next_ticket;
        queue.pending.push((reason, step, ticket));
        self.wake.notify_all();
        Ok(ticket)
    }

    /// The recorder's thread: writes the dumps asked for, and asks for one when no step
    /// ended for the hang timeout.
    fn run(&self) {
        let poll = self.options.hang_after.map_or(Duration::from_secs(1), |t| {
            (t / 4).min(Duration::from_secs(1))
        });
        let started = std::time::SystemTime::now();
        let mut answered = std::collections::HashSet::new();
        let mut queue = lock(&self.queue);
        loop {
            if let Some((reason, step, ticket)) = queue.pending.first().copied() {
                queue.busy = true;
                drop(queue);
                let result = self.write_dump(reason, step);
                queue = lock(&self.queue);
                queue.pending.remove(0);
                queue.busy = false;
                if queue.results.len() == MAX_RESULTS {
                    drop(queue.results.remove(0));
                }
                queue.results.push((ticket, result));
                self.wake.notify_all();
                continue;
            }
            if queue.stopping {
                return;
            }
            queue = wait_timeout(&self.wake, queue, poll).0;
            if let Some(after) = self.options.hang_after {
                let hung = lock(&self.steps).hung(after);
                if let Some(step) = hung {
                    drop(queue);
                    let _ = self.request(DumpReason::Hang, step);
                    queue = lock(&self.queue);
                }
            }
            if let Some(dir) = self.dir.as_ref().filter(|_| self.options.answer_peers) {
                drop(queue);
                for step in dir.peers_asking(started, &mut answered) {
                    let _ = self.request(DumpReason::Peer, step);
                }
                queue = lock(&self.queue);
            }
        }
    }

    /// Writes a dump into the directory; the path, or why it was not written.
    fn write_dump(&self, reason: DumpReason, step: i64) -> Result<PathBuf, String> {
        let Some(dir) = &self.dir else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            let why = "the flight recorder has no dump directory".to_owned();
            self.warn(format!(
                "omniprof: {why}; the {} dump at step {step} was not written",
                reason.as_str()
            ));
            return Err(why);
        };
        let count = {
            let mut queue = lock(&self.queue);
            queue.count += 1;
            queue.count
        };
        let name = dump_dir::file_name(reason, step, count);
        let written = dir.create(&name).and_then(|(path, file)| {
            let (trace, _) = self
                .window(path.clone(), Some((reason, step)))
                .map_err(|e| e.to_string())?;
            dump_dir::write(&trace, &path, file).map(|()| path)
        });
        match written {
            Ok(path) => {
                self.written.fetch_add(1, Ordering::Relaxed);
                let old = {
                    let mut queue = lock(&self.queue);
                    queue.kept.push(path.clone());
                    let extra = queue.kept.len().saturating_sub(self.options.keep);
                    queue.kept.drain(..extra).collect::<Vec<_>>()
                };
                for path in old {
                    let _ = std::fs::remove_file(path);
                }
                Ok(path)
            }
            Err(why) => {
                self.skipped.fetch_add(1, Ordering::Relaxed);
                if dir.first_refusal() {
                    self.warn(format!(
                        "omniprof: the flight recorder's {} dump at step {step} was not \
                         written: {why}",
                        reason.as_str()
                    ));
                }
                Err(why)
            }
        }
    }

    /// The window as a trace, with the recorder's metadata and its warning when the memory
    /// bound cut it short.
    fn window(
        &self,
        path: PathBuf,
        why: Option<(DumpReason, i64)>,
    ) -> Result<(Trace, Dump), FlightError> {
        let pid = std::process::id() as i64;
        let ring = record::ring_window(pid).ok_or(FlightError::Stopped)?;
        let events = ring.host.activities.len();
        let mut trace = {
            let mut held = lock(&self.backends);
            let mut lent = Backends::default();
            let backends = held.as_mut().unwrap_or(&mut lent);
            let mut trace =
                session::window_trace(ring.host, pid, ring.window, &self.options.config, backends);
            let continuous = backends.continuous().join(", ");
            if !continuous.is_empty() {
                trace.set_metadata(metadata::FLIGHT_DEVICE_BACKENDS, Value::from(continuous));
            }
            trace
        };
        let sitting_out = lock(&self.sitting_out).join(", ");
        if !sitting_out.is_empty() {
            trace.set_metadata(metadata::FLIGHT_SITTING_OUT, Value::from(sitting_out));
        }
        let window_s = self.options.window.as_secs_f64();
        trace.set_metadata(metadata::FLIGHT_WINDOW_S, Value::Float(window_s));
        trace.set_metadata(
            metadata::FLIGHT_MAX_BYTES,
            Value::UInt(self.options.max_bytes as u64),
        );
        trace.set_metadata(
            metadata::FLIGHT_OVERWRITTEN_RECORDS,
            Value::UInt(ring.used.overwritten),
        );
        trace.set_metadata(metadata::FLIGHT_CUT_SHORT, Value::Bool(ring.cut_short));
        if let Some((reason, step)) = why {
            trace.set_metadata(metadata::FLIGHT_REASON, Value::from(reason.as_str()));
            trace.set_metadata(metadata::FLIGHT_STEP, Value::Int(step));
        }
        if ring.cut_short {
            self.warn(format!(
                "omniprof: the flight recorder's memory bound ({} MiB) held only the last \
                 {:.1} s of the {window_s} s window in {}: {} records were overwritten \
                 inside the window since it started (raise max_bytes)",
                self.options.max_bytes >> 20,
                held_seconds(&trace),
                path.display(),
                ring.used.overwritten
            ));
        }
        let dump = Dump {
            path,
            events,
            overwritten: ring.used.overwritten,
            cut_short: ring.cut_short,
        };
        Ok((trace, dump))
    }
}

/// The seconds between a trace's first host event and its end.
fn held_seconds(trace: &Trace) -> f64 {
    let first = trace.activities.iter().map(|a| a.start_ns).min();
    first.map_or(0.0, |f| (trace.window.end_ns - f) as f64 / 1e9)
}
