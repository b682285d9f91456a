//! The trigger socket the daemon keeps for a process that polls it: `omniprof trigger --pid`
//! reaches a Kineto client through it as it reaches an omniprof process, and `--list` shows
//! it. A trigger's config waits for the process's next idle poll; the process then writes
//! its own trace, and the trigger is answered when the file appears.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use omniprof::on_demand::{TriggerHandler, TriggerRefused, DAEMON_POLL_INTERVAL};
use omniprof::Config;

use super::registry::{Origin, Progress, Registry};

/// How long a request waits to be taken: three polls of an idle process, and slack for a
/// loaded machine.
const DELIVERY_WAIT: Duration = Duration::from_secs(3 * 5 + 5);
/// After the process polls as idle again, how long the trace still has to appear (the
/// file is renamed into place as the profiler finishes).
const WRITE_GRACE: Duration = Duration::from_secs(2);
/// The longest a trigger waits for its trace (its client gives up sooner, on its own
/// timeout).
const WAIT_FOR_TRACE: Duration = Duration::from_secs(3600);
/// How often the waiting trigger looks for the file.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// Serves triggers of process `pid` through the daemon's table.
pub(super) struct KinetoProxy {
    pub(super) registry: Arc<Registry>,
    pub(super) pid: u32,
}

impl TriggerHandler for KinetoProxy {
    fn handle(&self, config_text: &str) -> Result<PathBuf, TriggerRefused> {
        let pid = self.pid;
        let path = trace_path(config_text, pid)?;
        let id = self
            .registry
            .submit(pid, config_text, Origin::Trigger)
            .map_err(TriggerRefused::new)?;
        let outcome = self.await_trace(id, &path);
        self.registry.finish(pid, id);
        outcome.map(|()| path)
    }

    fn state(&self) -> String {
        self.registry.state_line(self.pid, Instant::now())
    }

    fn command(&self) -> Option<String> {
        self.registry.command(self.pid)
    }
}

impl KinetoProxy {
    /// Waits until request `id` is taken and its trace appears at `path`.
    fn await_trace(&self, id: u64, path: &std::path::Path) -> Result<(), TriggerRefused> {
        let pid = self.pid;
        let started = Instant::now();
        while started.elapsed() < WAIT_FOR_TRACE {
            match self.registry.progress(pid, id, LOOK_EVERY) {
                Progress::Gone => {
                    return Err(TriggerRefused::new(format!(
                        "process {pid} exited or stopped polling the daemon before its trace \
                         was written"
                    )))
                }
                Progress::Replaced => {
                    return Err(TriggerRefused::new(format!(
                        "the request to process {pid} was withdrawn"
                    )))
                }
                Progress::Waiting { since, busy_polls } if since.elapsed() > DELIVERY_WAIT => {
                    let why = if busy_polls > 0 {
                        format!(
                            "its profiler was busy at {busy_polls} polls (a trace of its own \
                             running?)"
                        )
                    } else {
                        format!(
                            "it did not poll (a Kineto client polls every {}s)",
                            DAEMON_POLL_INTERVAL.as_secs()
                        )
                    };
                    return Err(TriggerRefused::new(format!(
                        "process {pid} did not take the request within {}s: {why}",
                        DELIVERY_WAIT.as_secs()
                    )));
                }
                Progress::Waiting { .. } => {}
                Progress::Delivered { idle_since } => {
                    if path.is_file() {
                        return Ok(());
                    }
                    if idle_since.is_some_and(|t| t.elapsed() > WRITE_GRACE) {
                        return Err(TriggerRefused::new(format!(
                            "process {pid} took the request but wrote no trace at {}: its \
                             profiler is idle again, so it refused or failed the request \
                             (KINETO_LOG_LEVEL=0 in its environment makes Kineto log why)",
                            path.display()
                        )));
                    }
                }
            }
        }
        Err(TriggerRefused::new(format!(
            "no trace from process {pid} within {}s",
            WAIT_FOR_TRACE.as_secs()
        )))
    }
}

/// Where process `pid` writes the trace `config_text` asks for: the log file with `_<pid>`
/// inserted before `.pt.trace.json` (or `.json`), as Kineto and omniprof both name it.
fn trace_path(config_text: &str, pid: u32) -> Result<PathBuf, TriggerRefused> {
    let config = Config::parse(config_text)
        .map_err(|e| TriggerRefused::new(format!("invalid config: {e}")))?;
    let url = config.log_file_url(pid);
    url.strip_prefix("file://")
        .map(PathBuf::from)
        .ok_or_else(|| {
            TriggerRefused::new(format!(
            "the daemon cannot see a trace written to {url}: only a file path can be waited for"
        ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_path_inserts_the_pid_as_kineto_does() {
        let path = trace_path("ACTIVITIES_LOG_FILE=/tmp/x/t_1.pt.trace.json", 42).unwrap();
        assert_eq!(path, PathBuf::from("/tmp/x/t_1_42.pt.trace.json"));
        let path = trace_path("ACTIVITIES_LOG_FILE=/tmp/gpu_trace.json", 7).unwrap();
        assert_eq!(path, PathBuf::from("/tmp/gpu_trace_7.json"));
    }
}
