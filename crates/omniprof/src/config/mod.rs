//! Kineto `KEY=VALUE` configuration, each key declared once; documented on [`Config`].

// Every key is declared once, in the table in `keys` beside the `Config` holding their
// values, from which the parser, the accessors and the JSON view are expanded; `apply` reads
// a text onto a config, `parse` holds the line and value grammars, `on_demand` the rules for
// daemon requests, `error` what a parse refuses and `log_file` where the trace goes.
mod apply;
mod error;
// `pub(crate)`: the crate root's `config_keys` re-exports the keys code outside the parser
// writes into config text.
pub(crate) mod keys;
mod log_file;
mod on_demand;
mod parse;

pub(crate) use apply::CONTROLLER_TICK_MS;
pub use error::{ConfigError, ConfigErrorReason, ConfigWarning};
pub use keys::Config;
pub use on_demand::{MAX_START_AHEAD_ITERATIONS, MAX_START_AHEAD_MS};

pub use on_demand::{check_on_demand_log_file, on_demand_trace_dir, LogFileRefused, ONDEMAND_ENV};

#[cfg(test)]
mod tests;
