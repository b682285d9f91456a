//! Kineto `KEY=VALUE` configuration, each key declared once; documented on [`Config`].

// Every key is declared once, in the table in `keys` beside the `Config` holding their
// values, from which the parser, the accessors and the JSON view are expanded; `apply` reads
// a text onto a config, `parse` holds the line and value grammars, `on_demand` the rules for
// daemon requests, `error` what a parse refuses and `log_file` where the trace goes.
mod apply;
mod error;
mod keys;
mod log_file;
mod on_demand;
mod parse;

pub(crate) use apply::CONTROLLER_TICK_MS;
pub use error::{ConfigError, ConfigErrorReason, ConfigWarning};
pub use keys::Config;
pub use on_demand::{MAX_START_AHEAD_ITERATIONS, MAX_START_AHEAD_MS};

// The keys that code outside the parser writes into config text (the `trigger` and
// `plugins check` commands, the Python package's `record_shapes`).
pub use keys::{
    ACTIVITIES_DURATION_MSECS, ACTIVITIES_ITERATIONS, ACTIVITIES_LOG_FILE,
    ACTIVITIES_WARMUP_PERIOD_SECS, ACTIVITY_TYPES, OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS,
    OMNIPROF_PRIVATEUSE1_PROFILER, OMNIPROF_PRIVATEUSE1_STUBS,
    OMNIPROF_STUBS_ELAPSED_TIMEOUT_MSECS, PROFILE_PROFILE_MEMORY, PROFILE_REPORT_INPUT_SHAPES,
    PROFILE_START_ITERATION, PROFILE_START_ITERATION_ROUNDUP, PROFILE_START_TIME,
    PROFILE_WITH_FLOPS, PROFILE_WITH_MODULES, PROFILE_WITH_STACK,
};
pub use on_demand::{check_on_demand_log_file, on_demand_trace_dir, LogFileRefused, ONDEMAND_ENV};

#[cfg(test)]
mod tests;
