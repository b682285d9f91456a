//! A trigger handler that does real work, for the tests of the trigger transport and the
//! `omniprof trigger` command.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use omniprof::export;
use omniprof::trigger::TriggerHandler;
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
    fn handle(&self, text: &str) -> Result<PathBuf, String> {
        let Ok(_one) = self.busy.try_lock() else {
            return Err("profiler busy".to_owned());
        };
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut config = Config::default();
        config.apply_on_demand(text).map_err(|e| e.to_string())?;
        let duration = config.activities_duration();
        let url = config.log_file_url(std::process::id());
        let path = PathBuf::from(url.strip_prefix("file://").unwrap_or(&url));

        let _serial = serial();
        let mut profiler = Profiler::builder()
            .config(config)
            .build()
            .map_err(|e| e.to_string())?;
        profiler.start().map_err(|e| e.to_string())?;
        let until = Instant::now() + duration;
        while Instant::now() < until {
            let _step = record_function(STEP);
            std::thread::sleep(Duration::from_millis(1));
        }
        let trace = profiler.stop().map_err(|e| e.to_string())?;
        export::save(&trace, &path).map_err(|e| e.to_string())?;
        Ok(path)
    }

    fn state(&self) -> String {
        match self.busy.try_lock() {
            Ok(_) => "idle".to_owned(),
            Err(_) => "tracing".to_owned(),
        }
    }
}
