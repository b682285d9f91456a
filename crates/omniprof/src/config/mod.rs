//! Kineto `KEY=VALUE` configuration, each key declared once; documented on [`Config`].

// Every key is declared once, in the table in `keys`, from which the parser, the accessors
// and the JSON view are expanded; `parse` holds the line and value grammars, `on_demand` the
// rules for daemon requests.
mod keys;
mod on_demand;
mod parse;

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{ActivitySet, ActivityType};
use on_demand::MAX_REQUEST_AGE_MS;
pub use on_demand::{MAX_START_AHEAD_ITERATIONS, MAX_START_AHEAD_MS};
use parse::ApplyContext;

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
pub use on_demand::{check_on_demand_log_file, on_demand_trace_dir, ONDEMAND_ENV};

/// Kineto's run-loop tick; an unset start time gets two of them as slack.
pub(crate) const CONTROLLER_TICK_MS: i64 = 1_000;

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
    #[error("log file {path:?} refused: {why}")]
    LogFileNotAllowed {
        /// The path given.
        path: String,
        /// Why it is refused.
        why: String,
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

/// Where the trace is written.
#[derive(Clone, Debug, PartialEq, Eq)]
enum LogFile {
    /// Kineto's default for the mode, which already names this process's pid.
    Default(String),
    /// `ACTIVITIES_LOG_FILE` as given; the writer inserts `_<pid>`.
    Given(String),
}

impl LogFile {
    fn trace_default() -> Self {
        Self::Default(format!(
            "/tmp/libkineto_activities_{}.json",
            std::process::id()
        ))
    }

    fn memory_snapshot_default() -> Self {
        Self::Default(format!(
            "/tmp/memory_snapshot_{}.pickle",
            std::process::id()
        ))
    }

    fn path(&self) -> &str {
        match self {
            Self::Default(path) | Self::Given(path) => path,
        }
    }
}

/// A profiler configuration: Kineto's core keys, the scope profiler's feature keys and
/// omniprof's own keys, with their Kineto defaults.
///
/// [`Config::default`] holds the raw defaults and has not been validated (its selection is
/// empty and its start time unset); every parse and apply validates.
///
/// Kineto `KEY=VALUE` configuration (`docs/config.md`).
///
/// omniprof reads the same text as Kineto: a `KINETO_CONFIG` file, a Dynolog on-demand
/// request, or PyTorch's `custom_profiler_config` string. One setting per line, `#` starts a
/// comment, keys are case-sensitive, an unknown key is a warning and a known key with a bad
/// value is an error. Unlike Kineto, a parse is all-or-nothing: on error the config is left
/// exactly as it was, and the [`ConfigError`] names the line, the key and the reason.
///
/// ```
/// use std::time::Duration;
/// use omniprof::trace::ActivityType;
/// use omniprof::Config;
///
/// let mut config = Config::parse(
///     "ACTIVITY_TYPES = cpu_op, runtime   # generic names are accepted\n\
///      ACTIVITIES_DURATION_MSECS = 250",
/// )
/// .unwrap();
/// assert!(config.activity_types().contains(ActivityType::CudaRuntime));
/// assert!(config.activity_types().enabled(ActivityType::XpuRuntime)); // gated by class
/// assert_eq!(config.activities_duration(), Duration::from_millis(250));
///
/// // A later text layers on top; a bad one changes nothing.
/// let err = config.apply("ACTIVITIES_ITERATIONS=5\nACTIVITY_TYPES=memcopy").unwrap_err();
/// assert_eq!(err.to_string(), r#"line 2: ACTIVITY_TYPES: invalid activity type "memcopy""#);
/// assert_eq!(config.iterations(), 0);
///
/// let warnings = config.apply("EVENTS=foo").unwrap(); // a removed Kineto key
/// assert_eq!(warnings[0].key, "EVENTS");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Every key's value; the key table (`keys.rs`) declares the fields and their accessors.
    values: keys::Values,
    /// Set by a key that asks for a trace (duration, iterations, log file).
    trace_request: bool,
    /// Whether `PROFILE_START_TIME` was given (non-zero). An unset start is derived again at
    /// every validation, so a text layered on top (an on-demand request over the base config)
    /// gets its start from its own parse time and its own warm-up.
    start_time_given: bool,
}

impl Config {
    /// Parses `text` onto the defaults and validates. Warnings are logged; use
    /// [`Config::apply`] on [`Config::default`] to receive them.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        config.apply(text)?;
        Ok(config)
    }

    /// Applies `text` on top of this config (nothing is reset), then validates. On error the
    /// config is unchanged. Returns the warnings, which are also logged.
    pub fn apply(&mut self, text: &str) -> Result<Vec<ConfigWarning>, ConfigError> {
        self.apply_with(
            text,
            &ApplyContext {
                now_ms: now_ms(),
                on_demand_dir: None,
                refuse_log_file: false,
            },
        )
    }

    /// Fills in what an unset or inconsistent config leaves open (`docs/config.md` section 4).
    /// Parsing already does this; call it after changing a [`Config::default`] by other means.
    pub fn validate(&mut self) -> Vec<ConfigWarning> {
        let warnings = self.validate_at(now_ms());
        log_warnings(&warnings);
        warnings
    }

    /// Section 4 of `docs/config.md`, against the parse time `now_ms`. Warnings carry line 0; the
    /// caller attributes them to lines.
    fn validate_at(&mut self, now_ms: i64) -> Vec<ConfigWarning> {
        let mut warnings = Vec::new();
        if !self.start_time_given {
            let warmup_ms = i64::try_from(self.warmup_duration().as_millis()).unwrap_or(i64::MAX);
            self.values.start_time_ms = now_ms
                .saturating_add(warmup_ms)
                .saturating_add(2 * CONTROLLER_TICK_MS);
        }
        if self.start_iteration_roundup() == Some(0) {
            // A roundup of 0 would divide by zero when the start step is computed.
            warnings.push(ConfigWarning {
                line: 0,
                key: keys::PROFILE_START_ITERATION_ROUNDUP.to_owned(),
                message: "must be at least 1; ignored".to_owned(),
            });
            self.values.start_iteration_roundup = None;
        }
        if self.start_iteration_roundup().is_some() && !self.has_start_iteration() {
            // A roundup alone means "start on the next multiple", i.e. iteration-based.
            self.values.start_iteration = Some(0);
        }
        if self.activity_types().is_empty() {
            self.values.activity_types = ActivitySet::default_set();
        }
        warnings
    }

    /// `ACTIVITIES_ENABLED`, or a trace request: like Kineto, a request (duration, iterations
    /// or log file set) is honoured even when the master switch is off.
    pub fn activities_enabled(&self) -> bool {
        self.values.activities_enabled || self.trace_request
    }

    /// Whether a key that asks for a trace was set (`ACTIVITIES_DURATION_SECS`,
    /// `ACTIVITIES_DURATION_MSECS`, `ACTIVITIES_ITERATIONS`, `ACTIVITIES_LOG_FILE`).
    pub fn is_trace_request(&self) -> bool {
        self.trace_request
    }

    /// Replaces the selection, as PyTorch's API activity set does after both config texts
    /// are parsed (`docs/config.md` section 5). An empty set selects the default set.
    pub fn set_activity_types(&mut self, types: ActivitySet) {
        self.values.activity_types = if types.is_empty() {
            ActivitySet::default_set()
        } else {
            types
        };
    }

    /// Whether the trace starts on a step rather than at a time: a start iteration is set and
    /// `ACTIVITIES_ITERATIONS` > 0. Iteration-based starting wins over the start time.
    pub fn has_start_iteration(&self) -> bool {
        self.start_iteration().is_some() && self.iterations() > 0
    }

    /// The step at which warmup begins (start iteration − warmup iterations; may be
    /// negative), or `None` when the trace is not iteration-based.
    pub fn start_iteration_including_warmup(&self) -> Option<i64> {
        let start = self
            .start_iteration()
            .filter(|_| self.has_start_iteration())?;
        Some(i64::from(start) - i64::from(self.warmup_iterations()))
    }

    /// The URL the trace of process `pid` is written to. A given path without a `scheme://`
    /// prefix gets `file://`, and `_<pid>` is inserted before the first `.pt.trace.json`, else
    /// before the first `.json`, else nowhere (`/data/t.json` → `file:///data/t_<pid>.json`).
    /// A default path already names the process, so it only gets `file://`.
    pub fn log_file_url(&self, pid: u32) -> String {
        match &self.values.log_file {
            LogFile::Default(path) => format!("file://{path}"),
            LogFile::Given(path) => {
                let url = if has_scheme(path) {
                    path.clone()
                } else {
                    format!("file://{path}")
                };
                match url.find(".pt.trace.json").or_else(|| url.find(".json")) {
                    Some(at) => format!("{}_{pid}{}", &url[..at], &url[at..]),
                    None => url,
                }
            }
        }
    }

    /// The device buffer budget in bytes.
    pub fn max_gpu_buffer_bytes(&self) -> u64 {
        u64::from(self.max_gpu_buffer_mb()) << 20
    }

    /// The resolved config: `activity_types` (as selected), `enabled` (every type on after
    /// class gating), `trace_request`, and every key under its Kineto name with its effective
    /// value (durations in the key's unit, unset integers as −1).
    pub fn to_json(&self) -> serde_json::Value {
        let names = |set: ActivitySet| set.iter().map(ActivityType::name).collect::<Vec<_>>();
        let mut json = serde_json::Map::new();
        json.insert(
            "activity_types".to_owned(),
            names(self.activity_types()).into(),
        );
        let enabled = names(self.activity_types().enabled_types());
        json.insert("enabled".to_owned(), enabled.into());
        json.insert("trace_request".to_owned(), self.trace_request.into());
        self.insert_keys(&mut json);
        json.into()
    }
}

/// The current time in ms since the Unix epoch (0 if the clock is before it).
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

/// How many warnings other than unknown keys one text logs one by one; the rest are counted.
const LOGGED_WARNINGS: usize = 5;
/// How many unknown keys the summary line of one text names.
const NAMED_UNKNOWN_KEYS: usize = 3;

/// Logs the warnings of one text in a bounded number of lines, whatever its size: unknown
/// keys as one summary line (how many, and the first few with their lines), the others one
/// per line up to [`LOGGED_WARNINGS`], then a count. A trigger message of 64 KiB of unknown
/// keys printed thousands of lines on the traced process's stderr before.
fn log_warnings(warnings: &[ConfigWarning]) {
    for line in warning_lines(warnings) {
        log::warn!("{line}");
    }
}

/// The lines [`log_warnings`] logs.
fn warning_lines(warnings: &[ConfigWarning]) -> Vec<String> {
    let (unknown, other): (Vec<_>, Vec<_>) = warnings
        .iter()
        .partition(|w| w.message == parse::UNRECOGNIZED);
    let mut lines: Vec<String> = other
        .iter()
        .take(LOGGED_WARNINGS)
        .map(|w| format!("config: {w}"))
        .collect();
    if other.len() > LOGGED_WARNINGS {
        lines.push(format!(
            "config: {} more warnings not shown",
            other.len() - LOGGED_WARNINGS
        ));
    }
    if !unknown.is_empty() {
        let named: Vec<String> = unknown
            .iter()
            .take(NAMED_UNKNOWN_KEYS)
            .map(|w| format!("{:?} (line {})", w.key, w.line))
            .collect();
        let more = if unknown.len() > NAMED_UNKNOWN_KEYS {
            ", ..."
        } else {
            ""
        };
        let plural = if unknown.len() == 1 { "" } else { "s" };
        lines.push(format!(
            "config: {} unrecognized key{plural} ignored: {}{more}",
            unknown.len(),
            named.join(", ")
        ));
    }
    lines
}

/// Whether `path` starts with a URL scheme (`s3://...`), which selects the writer.
fn has_scheme(path: &str) -> bool {
    path.split_once("://").is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

#[cfg(test)]
mod tests;
