//! Kineto `KEY=VALUE` configuration (placeholder until the parser lands).

use crate::activity::ActivitySet;

/// A profiler configuration.
#[derive(Clone, Debug, Default)]
pub struct Config {
    max_records: Option<u64>,
}

impl Config {
    pub fn apply(&mut self, text: &str) -> Result<(), String> {
        if let Some(v) = text.strip_prefix("OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=") {
            self.max_records = Some(v.parse().map_err(|_| "bad".to_string())?);
        }
        Ok(())
    }
    pub fn activity_types(&self) -> ActivitySet {
        ActivitySet::default_set()
    }
    pub fn max_host_records_per_thread(&self) -> u64 {
        self.max_records.unwrap_or(4_194_304)
    }
    pub fn trace_id(&self) -> Option<&str> {
        None
    }
}
