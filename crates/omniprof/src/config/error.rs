//! What a parse refuses ([`ConfigError`], why: [`ConfigErrorReason`]) and what it only warns
//! about ([`ConfigWarning`]).

use std::fmt;

use super::on_demand::{LogFileRefused, MAX_REQUEST_AGE_MS, MAX_START_AHEAD_MS};

/// Why a line or a value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigErrorReason {
    /// The line is not `KEY=VALUE` with exactly one `=`.
    #[error("invalid config line {0:?} (expected KEY=VALUE)")]
    Syntax(String),
    /// Not a base-10 integer in `[0, max]`.
    #[error("invalid integer {value:?} (expected a base-10 integer in [0, {max}])")]
    Integer {
        /// The text given.
        value: String,
        /// The largest value accepted.
        max: u64,
    },
    /// Not one of the boolean spellings.
    #[error("invalid boolean {0:?} (expected one of n y no yes f t false true 0 1)")]
    Bool(String),
    /// An item of an activity list that names no activity type.
    #[error("invalid activity type {0:?}")]
    ActivityType(String),
    /// An on-demand `ACTIVITIES_LOG_FILE` that may not be written (see
    /// [`Config::apply_on_demand_strict`]); `why` names the allowed directory.
    ///
    /// [`Config::apply_on_demand_strict`]: super::Config::apply_on_demand_strict
    #[error("log file {path:?} refused: {why}")]
    LogFileNotAllowed {
        /// The path given.
        path: String,
        /// Why it is refused.
        why: LogFileRefused,
    },
    /// A `PERF_EVENTS` item that names no perf event omniprof knows.
    #[error("unknown perf event {name:?} (known: {known})")]
    PerfEvent {
        /// The name given.
        name: String,
        /// The names omniprof knows, comma-separated.
        known: String,
    },
    /// `PROFILE_START_TIME` too far in the past to honour.
    #[error(
        "start time {start_ms} ms is more than {} s in the past (now {now_ms} ms)",
        MAX_REQUEST_AGE_MS / 1000
    )]
    StartTimeInPast {
        /// The start asked for, ms since the Unix epoch.
        start_ms: i64,
        /// Now, ms since the Unix epoch.
        now_ms: i64,
    },
    /// An on-demand `PROFILE_START_TIME` beyond the horizon: such a request would stay
    /// pending, refusing every other, for longer than anyone waits for it.
    #[error(
        "start time {start_ms} ms is more than {} s ahead (now {now_ms} ms): an on-demand \
         request may start at most {} s ahead",
        MAX_START_AHEAD_MS / 1000,
        MAX_START_AHEAD_MS / 1000
    )]
    StartTimeBeyondHorizon {
        /// The start asked for, ms since the Unix epoch.
        start_ms: i64,
        /// Now, ms since the Unix epoch.
        now_ms: i64,
    },
}

/// A config that could not be applied. The config it was applied to is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line of the text.
    pub line: usize,
    /// The key of the line, when the line got as far as having one.
    pub key: Option<String>,
    /// Why the line was refused.
    pub reason: ConfigErrorReason,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: ", self.line)?;
        }
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        write!(f, "{}", self.reason)
    }
}

// The reason is part of the message, so it is deliberately not also reported as `source()`
// (error-chain printers would show it twice).
impl std::error::Error for ConfigError {}

/// A line that was accepted but not (fully) applied: an unknown key, an on-demand log file
/// outside the allowed directory, or a value that validation replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning {
    /// 1-based line of the text; 0 for a warning of [`Config::validate`], which has no text.
    ///
    /// [`Config::validate`]: super::Config::validate
    pub line: usize,
    /// The line's key.
    pub key: String,
    /// What was not applied, and why.
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: ", self.line)?;
        }
        write!(f, "{}: {}", self.key, self.message)
    }
}
