//! A trigger handler that does real work, for the tests of the trigger transport and the
//! `omniprof trigger` command.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use omniprof::on_demand::{TriggerHandler, TriggerRefused};
use omniprof::{record_function, Config, Profiler};

use crate::lock::serial;

/// The range every session recorded by [`Recorder`] holds.
pub const STEP: &str = "triggered step";

/// Runs each request as a real session: parses it as on-demand, records [`STEP`] ranges for
/// the requested duration (taking [`serial`]), and saves the trace where the config says.
/// One request at a time: a second one while the first runs is refused with
/// `profiler busy`.
#[derive(Debug, Default)]
pub struct Recorder {
    busy: Mutex<()>,
    calls: AtomicUsize,
}

impl Recorder {
    /// How many requests reached the handler.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl TriggerHandler for Recorder {
    fn handle(&self, text: &str) -> Result<PathBuf, TriggerRefused> {
        let Ok(_one) = self.busy.try_lock() else {
            return Err(TriggerRefused::new("profiler busy"));
        };
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut config = Config::default();
        config.apply_on_demand(text).map_err(refused)?;
        let duration = config.activities_duration();
        let url = config.log_file_url(std::process::id());
        let path = PathBuf::from(url.strip_prefix("file://").unwrap_or(&url));

        let _serial = serial();
        let mut profiler = Profiler::builder()
            .config(config)
            .build()
            .map_err(refused)?;
        profiler.start().map_err(refused)?;
        let until = Instant::now() + duration;
        while Instant::now() < until {
            let _step = record_function(STEP);
            std::thread::sleep(Duration::from_millis(1));
        }
        let trace = profiler.stop().map_err(refused)?;
        omniprof::trace::save(&trace, &path).map_err(refused)?;
        Ok(path)
    }

    fn state(&self) -> String {
        match self.busy.try_lock() {
            Ok(_) => "idle".to_owned(),
            Err(_) => "tracing".to_owned(),
        }
    }
}

/// A failure of the session, as the client hears it.
fn refused(why: impl std::fmt::Display) -> TriggerRefused {
    TriggerRefused::new(why.to_string())
}

/// A logger that keeps every line logged at `info` or above, so that a test can count what
/// the traced process would have printed on its stderr. One per process: the `log` crate
/// takes a single logger.
#[derive(Debug, Default)]
pub struct CountingLogger {
    lines: Mutex<Vec<String>>,
}

impl CountingLogger {
    /// Installs the logger of this process (once; later calls return the same one).
    pub fn install() -> &'static CountingLogger {
        static LOGGER: std::sync::OnceLock<CountingLogger> = std::sync::OnceLock::new();
        let mut first = false;
        let logger = LOGGER.get_or_init(|| {
            first = true;
            CountingLogger::default()
        });
        if first {
            log::set_logger(logger).expect("no other logger in this test binary");
            log::set_max_level(log::LevelFilter::Info);
        }
        logger
    }

    /// The lines logged so far that contain `needle`, in order.
    pub fn lines_containing(&self, needle: &str) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }
}

impl log::Log for CountingLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let line = record.args().to_string();
            self.lines
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(line);
        }
    }

    fn flush(&self) {}
}
