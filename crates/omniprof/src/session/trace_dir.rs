//! The ready-made `on_trace_ready` handler: PyTorch's `tensorboard_trace_handler`, writing
//! each trace as `{worker}.{unix_time_ns}.pt.trace.json[.gz]` into a directory, the layout
//! TensorBoard's profiler plugin and HTA read.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::clock;
use crate::lock;
use crate::Trace;
use crate::WriteError;

/// The suffix TensorBoard's profiler plugin looks for.
const SUFFIX: &str = ".pt.trace.json";
const GZIP_SUFFIX: &str = ".gz";

/// Writes traces into a directory, one file per trace. Clones share what was written and the
/// errors met, so the handle kept by the caller sees what the callback given to the profiler
/// did.
///
/// ```
/// use omniprof::{tensorboard_trace_handler, Profiler, Schedule, ScheduleArgs};
///
/// let dir = std::env::temp_dir().join(format!("omniprof-doc-{}", std::process::id()));
/// let handler = tensorboard_trace_handler(&dir, Some("worker0"), false);
/// let schedule = Schedule::new(ScheduleArgs { wait: 0, warmup: 1, active: 1, repeat: 1, ..Default::default() })
///     .unwrap();
/// let mut profiler = Profiler::builder()
///     .schedule(schedule)
///     .on_trace_ready(handler.callback())
///     .build()
///     .unwrap();
/// profiler.start().unwrap();
/// for _ in 0..3 {
///     omniprof::scope!("train");
///     profiler.step().unwrap();
/// }
/// profiler.finish().unwrap();
/// let written = handler.written();
/// assert_eq!(written.len(), 1);
/// assert!(written[0].file_name().unwrap().to_str().unwrap().starts_with("worker0."));
/// assert!(handler.take_errors().is_empty());
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct TraceDirHandler {
    dir: PathBuf,
    worker: String,
    gzip: bool,
    outcome: Arc<Mutex<Outcome>>,
}

#[derive(Debug, Default)]
struct Outcome {
    written: Vec<PathBuf>,
    errors: Vec<WriteError>,
}

/// PyTorch's `tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False)`: a
/// [`TraceDirHandler`] writing into `dir` (created when missing) as `worker` (default
/// `{hostname}_{pid}`).
pub fn tensorboard_trace_handler(
    dir: impl Into<PathBuf>,
    worker_name: Option<&str>,
    use_gzip: bool,
) -> TraceDirHandler {
    TraceDirHandler::new(dir, worker_name, use_gzip)
}

impl TraceDirHandler {
    /// See [`tensorboard_trace_handler`].
    pub fn new(dir: impl Into<PathBuf>, worker_name: Option<&str>, use_gzip: bool) -> Self {
        let worker = worker_name.map_or_else(
            || format!("{}_{}", super::merge::host_name(), std::process::id()),
            str::to_owned,
        );
        Self {
            dir: dir.into(),
            worker,
            gzip: use_gzip,
            outcome: Arc::default(),
        }
    }

    /// The directory traces are written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The worker name that starts every file name.
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// Writes `trace` into the directory (creating it when missing) and returns its path.
    pub fn write(&self, trace: &Trace) -> Result<PathBuf, WriteError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| WriteError {
            path: self.dir.clone(),
            stage: "create the directory",
            source,
        })?;
        let mut name = format!("{}.{}{SUFFIX}", self.worker, clock::wall_now_ns());
        if self.gzip {
            name.push_str(GZIP_SUFFIX);
        }
        let path = self.dir.join(name);
        crate::save(trace, &path)?;
        self.outcome().written.push(path.clone());
        Ok(path)
    }

    /// The callback for [`ProfilerBuilder::on_trace_ready`](crate::ProfilerBuilder::on_trace_ready):
    /// writes each trace; a failure is logged as a warning naming the path and kept for
    /// [`take_errors`](Self::take_errors), and the profiler goes on.
    pub fn callback(&self) -> impl FnMut(Trace) + Send + 'static {
        let handler = self.clone();
        move |trace| {
            if let Err(e) = handler.write(&trace) {
                log::warn!("omniprof: trace handler: {e}; the trace is lost");
                handler.outcome().errors.push(e);
            }
        }
    }

    /// The files written so far, in order.
    pub fn written(&self) -> Vec<PathBuf> {
        self.outcome().written.clone()
    }

    /// The write failures met since the last call.
    pub fn take_errors(&self) -> Vec<WriteError> {
        std::mem::take(&mut self.outcome().errors)
    }

    fn outcome(&self) -> MutexGuard<'_, Outcome> {
        // The lists stay valid whatever a panicking holder did.
        lock(&self.outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_for_tensorboard() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("nested/traces");
        let handler = tensorboard_trace_handler(&target, None, true);
        let trace = Trace::new(1_000, 2_000);
        let path = handler.write(&trace).unwrap();
        assert_eq!(path.parent().unwrap(), target);
        let name = path.file_name().unwrap().to_str().unwrap();
        let expected_worker = format!(
            "{}_{}",
            super::super::merge::host_name(),
            std::process::id()
        );
        let rest = name.strip_prefix(&format!("{expected_worker}.")).unwrap();
        let time = rest.strip_suffix(".pt.trace.json.gz").unwrap();
        assert!(time.parse::<i64>().unwrap() > 0, "{name}");
        assert_eq!(handler.written(), [path]);
    }

    #[test]
    fn a_failed_write_is_kept_and_the_callback_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the directory should be: it cannot be created.
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, b"").unwrap();
        let handler = tensorboard_trace_handler(&blocked, Some("w"), false);
        let mut callback = handler.callback();
        callback(Trace::new(0, 1));
        callback(Trace::new(0, 1));
        let errors = handler.take_errors();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].path, blocked);
        assert!(errors[0].to_string().contains("blocked"), "{}", errors[0]);
        assert!(handler.take_errors().is_empty());
        assert!(handler.written().is_empty());
    }
}
