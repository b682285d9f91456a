//! Kineto `KEY=VALUE` configuration (`reference/config.md`).
//!
//! omniprof reads the same text as Kineto: a `KINETO_CONFIG` file, a Dynolog on-demand
//! request, or PyTorch's `custom_profiler_config` string. One setting per line, `#` starts a
//! comment, keys are case-sensitive, an unknown key is a warning and a known key with a bad
//! value is an error. Unlike Kineto, a parse is all-or-nothing: on error the config is left
//! exactly as it was, and the [`ConfigError`] names the line, the key and the reason.
//!
//! ```
//! use std::time::Duration;
//! use omniprof::{ActivityType, Config};
//!
//! let mut config = Config::parse(
//!     "ACTIVITY_TYPES = cpu_op, runtime   # generic names are accepted\n\
//!      ACTIVITIES_DURATION_MSECS = 250",
//! )
//! .unwrap();
//! assert!(config.activity_types().contains(ActivityType::CudaRuntime));
//! assert!(config.activity_types().enabled(ActivityType::XpuRuntime)); // gated by class
//! assert_eq!(config.activities_duration(), Duration::from_millis(250));
//!
//! // A later text layers on top; a bad one changes nothing.
//! let err = config.apply("ACTIVITIES_ITERATIONS=5\nACTIVITY_TYPES=memcopy").unwrap_err();
//! assert_eq!(err.to_string(), r#"line 2: ACTIVITY_TYPES: invalid activity type "memcopy""#);
//! assert_eq!(config.iterations(), 0);
//!
//! let warnings = config.apply("EVENTS=foo").unwrap(); // a removed Kineto key
//! assert_eq!(warnings[0].key, "EVENTS");
//! ```

mod on_demand;
mod parse;

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::activity::{ActivitySet, ActivityType};
use on_demand::{check_on_demand_log_file, check_start_time, MAX_REQUEST_AGE_MS};
use parse::{
    parse_activity_list, parse_bool, parse_i32, parse_int, parse_list, parse_u32, INT64_MAX,
};

/// The key names, spelled once so the parser and [`Config::to_json`] cannot drift apart.
mod keys {
    pub const ACTIVITIES_ENABLED: &str = "ACTIVITIES_ENABLED";
    pub const ACTIVITY_TYPES: &str = "ACTIVITY_TYPES";
    pub const ACTIVITIES_DURATION_SECS: &str = "ACTIVITIES_DURATION_SECS";
    pub const ACTIVITIES_DURATION_MSECS: &str = "ACTIVITIES_DURATION_MSECS";
    pub const ACTIVITIES_WARMUP_PERIOD_SECS: &str = "ACTIVITIES_WARMUP_PERIOD_SECS";
    pub const ACTIVITIES_WARMUP_ITERATIONS: &str = "ACTIVITIES_WARMUP_ITERATIONS";
    pub const ACTIVITIES_ITERATIONS: &str = "ACTIVITIES_ITERATIONS";
    pub const PROFILE_START_TIME: &str = "PROFILE_START_TIME";
    pub const PROFILE_START_ITERATION: &str = "PROFILE_START_ITERATION";
    pub const PROFILE_START_ITERATION_ROUNDUP: &str = "PROFILE_START_ITERATION_ROUNDUP";
    pub const ACTIVITIES_LOG_FILE: &str = "ACTIVITIES_LOG_FILE";
    pub const REQUEST_TRACE_ID: &str = "REQUEST_TRACE_ID";
    pub const REQUEST_GROUP_TRACE_ID: &str = "REQUEST_GROUP_TRACE_ID";
    pub const ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB: &str = "ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB";
    pub const ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS: &str =
        "ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS";
    pub const CUSTOM_CONFIG: &str = "CUSTOM_CONFIG";
    pub const PROFILE_REPORT_INPUT_SHAPES: &str = "PROFILE_REPORT_INPUT_SHAPES";
    pub const PROFILE_PROFILE_MEMORY: &str = "PROFILE_PROFILE_MEMORY";
    pub const PROFILE_WITH_STACK: &str = "PROFILE_WITH_STACK";
    pub const PROFILE_WITH_FLOPS: &str = "PROFILE_WITH_FLOPS";
    pub const PROFILE_WITH_MODULES: &str = "PROFILE_WITH_MODULES";
    pub const CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION: &str =
        "CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION";
    pub const PYTHON_STACK_TRACE: &str = "PYTHON_STACK_TRACE";
    pub const PROFILE_MEMORY: &str = "PROFILE_MEMORY";
    pub const PROFILE_MEMORY_DURATION_MSECS: &str = "PROFILE_MEMORY_DURATION_MSECS";
    pub const VERBOSE_LOG_LEVEL: &str = "VERBOSE_LOG_LEVEL";
    pub const VERBOSE_LOG_MODULES: &str = "VERBOSE_LOG_MODULES";
    pub const ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS: &str = "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS";
    pub const ENABLE_IPC_FABRIC: &str = "ENABLE_IPC_FABRIC";
    pub const CUPTI_PER_THREAD_BUFFER_ENABLED: &str = "CUPTI_PER_THREAD_BUFFER_ENABLED";
    pub const CUPTI_PM_SAMPLING_METRICS: &str = "CUPTI_PM_SAMPLING_METRICS";
    pub const CUPTI_PM_SAMPLING_DEVICE_ID: &str = "CUPTI_PM_SAMPLING_DEVICE_ID";
    pub const ROCTRACER_MAX_EVENTS: &str = "ROCTRACER_MAX_EVENTS";
    pub const OMNIPROF_MAX_HOST_RECORDS_PER_THREAD: &str = "OMNIPROF_MAX_HOST_RECORDS_PER_THREAD";
    pub const XPUPTI_PROFILER_METRICS: &str = "XPUPTI_PROFILER_METRICS";
    pub const XPUPTI_PROFILER_ENABLE_PER_KERNEL: &str = "XPUPTI_PROFILER_ENABLE_PER_KERNEL";
    pub const XPUPTI_PROFILER_MAX_SCOPES: &str = "XPUPTI_PROFILER_MAX_SCOPES";
}

/// Set (to anything) when the process talks to the Dynolog daemon.
const USE_DAEMON_ENV: &str = "KINETO_USE_DAEMON";
/// Kineto's run-loop tick; an unset start time gets two of them as slack.
const CONTROLLER_TICK_MS: i64 = 1_000;
/// Default per-thread cap of host records (a range uses two, an instant one).
const DEFAULT_MAX_HOST_RECORDS_PER_THREAD: u64 = 4_194_304;
/// Scope-profiler buffer sizes filled in when metrics are set but the size is not.
const SCOPES_PER_KERNEL_DEFAULT: u64 = 1500;
const SCOPES_DEFAULT: u64 = 10;

/// Why a line or a value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigErrorReason {
    /// The line is not `KEY=VALUE` with exactly one `=`.
    #[error("invalid config line {0:?} (expected KEY=VALUE)")]
    Syntax(String),
    /// Not a base-10 integer in `[0, max]`.
    #[error("invalid integer {value:?} (expected a base-10 integer in [0, {max}])")]
    Integer { value: String, max: u64 },
    /// Not one of the boolean spellings.
    #[error("invalid boolean {0:?} (expected one of n y no yes f t false true 0 1)")]
    Bool(String),
    /// An item of an activity list that names no activity type.
    #[error("invalid activity type {0:?}")]
    ActivityType(String),
    /// `PROFILE_START_TIME` too far in the past to honour.
    #[error(
        "start time {start_ms} ms is more than {} s in the past (now {now_ms} ms)",
        MAX_REQUEST_AGE_MS / 1000
    )]
    StartTimeInPast { start_ms: i64, now_ms: i64 },
}

/// A config that could not be applied. The config it was applied to is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line of the text.
    pub line: usize,
    /// The key of the line, when the line got as far as having one.
    pub key: Option<String>,
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
    pub key: String,
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

/// The XPU scope profiler's feature config (feature name `xpupti_scope_profiler`). Its keys
/// are matched after the core keys, as Kineto matches registered feature configs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ScopeProfilerConfig {
    metrics: Vec<String>,
    per_kernel: bool,
    /// 0 = not set; see [`ScopeProfilerConfig::max_scopes`].
    max_scopes: u64,
}

impl ScopeProfilerConfig {
    /// Applies one line; `Ok(false)` when the key is not this feature's.
    fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigErrorReason> {
        match key {
            keys::XPUPTI_PROFILER_METRICS => self.metrics = parse_list(value),
            keys::XPUPTI_PROFILER_ENABLE_PER_KERNEL => self.per_kernel = parse_bool(value)?,
            keys::XPUPTI_PROFILER_MAX_SCOPES => self.max_scopes = parse_int(value, INT64_MAX)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The buffer size with Kineto's client defaults applied. Resolved when read rather than
    /// once at validation, so a later text that turns on per-kernel scopes still gets 1500.
    fn max_scopes(&self) -> u64 {
        match self.max_scopes {
            0 if !self.metrics.is_empty() && self.per_kernel => SCOPES_PER_KERNEL_DEFAULT,
            0 if !self.metrics.is_empty() => SCOPES_DEFAULT,
            n => n,
        }
    }
}

/// What applying one line did.
enum Applied {
    Set,
    UnknownKey,
    /// Accepted but ignored, with the reason (an on-demand log file that is not allowed).
    Ignored(String),
}

/// What a parse needs from the outside world, passed in so tests can fix it.
struct ApplyContext<'a> {
    /// The parse time, in ms since the Unix epoch.
    now_ms: i64,
    /// `Some(allowed directory)` for an on-demand (daemon) config.
    on_demand_dir: Option<&'a str>,
}

/// A profiler configuration: Kineto's core keys, the scope profiler's feature keys and
/// omniprof's own keys, with their Kineto defaults.
///
/// [`Config::default`] holds the raw defaults and has not been validated (its selection is
/// empty and its start time unset); every parse and apply validates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    activities_enabled: bool,
    activity_types: ActivitySet,
    activities_duration: Duration,
    warmup_duration: Duration,
    warmup_iterations: u32,
    iterations: u32,
    start_time_ms: i64,
    start_iteration: Option<u32>,
    start_iteration_roundup: Option<u32>,
    log_file: LogFile,
    trace_id: String,
    group_trace_id: String,
    max_gpu_buffer_mb: u32,
    display_cuda_sync_wait_events: bool,
    custom_config: String,
    report_input_shapes: bool,
    profile_memory: bool,
    with_stack: bool,
    with_flops: bool,
    with_modules: bool,
    memory_snapshot: bool,
    memory_snapshot_duration: Duration,
    verbose_log_level: i32,
    verbose_log_modules: Vec<String>,
    on_demand_update_interval: Duration,
    ipc_fabric: bool,
    cupti_per_thread_buffer: bool,
    pm_sampling_metrics: Vec<String>,
    pm_sampling_device_id: Option<u32>,
    roctracer_max_events: u32,
    max_host_records_per_thread: u64,
    scope_profiler: ScopeProfilerConfig,
    /// Set by a key that asks for a trace (duration, iterations, log file).
    trace_request: bool,
}

impl Default for Config {
    /// Kineto's defaults. `ENABLE_IPC_FABRIC` defaults to whether `KINETO_USE_DAEMON` is set.
    fn default() -> Self {
        Self {
            activities_enabled: true,
            activity_types: ActivitySet::empty(),
            activities_duration: Duration::from_millis(500),
            warmup_duration: Duration::from_secs(5),
            warmup_iterations: 0,
            iterations: 0,
            start_time_ms: 0,
            start_iteration: None,
            start_iteration_roundup: None,
            log_file: LogFile::trace_default(),
            trace_id: String::new(),
            group_trace_id: String::new(),
            max_gpu_buffer_mb: 128,
            display_cuda_sync_wait_events: true,
            custom_config: String::new(),
            report_input_shapes: false,
            profile_memory: false,
            with_stack: false,
            with_flops: false,
            with_modules: false,
            memory_snapshot: false,
            memory_snapshot_duration: Duration::from_millis(1000),
            verbose_log_level: -1,
            verbose_log_modules: Vec::new(),
            on_demand_update_interval: Duration::from_secs(5),
            ipc_fabric: std::env::var_os(USE_DAEMON_ENV).is_some(),
            cupti_per_thread_buffer: false,
            pm_sampling_metrics: Vec::new(),
            pm_sampling_device_id: None,
            roctracer_max_events: 5_000_000,
            max_host_records_per_thread: DEFAULT_MAX_HOST_RECORDS_PER_THREAD,
            scope_profiler: ScopeProfilerConfig::default(),
            trace_request: false,
        }
    }
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
            },
        )
    }

    /// Fills in what an unset or inconsistent config leaves open (`config.md` section 4).
    /// Parsing already does this; call it after changing a [`Config::default`] by other means.
    pub fn validate(&mut self) -> Vec<ConfigWarning> {
        let warnings = self.validate_at(now_ms());
        log_warnings(&warnings);
        warnings
    }

    /// Applies one `KEY=VALUE`: core keys first, then the feature configs.
    fn set(
        &mut self,
        key: &str,
        value: &str,
        ctx: &ApplyContext<'_>,
    ) -> Result<Applied, ConfigErrorReason> {
        use keys::*;
        match key {
            ACTIVITIES_ENABLED => self.activities_enabled = parse_bool(value)?,
            ACTIVITY_TYPES => self.activity_types = parse_activity_list(value)?,
            ACTIVITIES_DURATION_SECS => {
                self.set_duration(Duration::from_secs(parse_u32(value)?.into()));
            }
            ACTIVITIES_DURATION_MSECS => {
                self.set_duration(Duration::from_millis(parse_u32(value)?.into()));
            }
            ACTIVITIES_WARMUP_PERIOD_SECS => {
                self.warmup_duration = Duration::from_secs(parse_u32(value)?.into());
            }
            ACTIVITIES_WARMUP_ITERATIONS => self.warmup_iterations = parse_u32(value)?,
            ACTIVITIES_ITERATIONS => self.set_iterations(parse_u32(value)?),
            PROFILE_START_TIME => {
                // Bounded by INT64_MAX, so the conversion is exact.
                let start_ms = parse_int(value, INT64_MAX)? as i64;
                // 0 means "unset": validation fills it in.
                if start_ms != 0 {
                    check_start_time(start_ms, ctx.now_ms)?;
                }
                self.start_time_ms = start_ms;
            }
            PROFILE_START_ITERATION => self.start_iteration = Some(parse_u32(value)?),
            PROFILE_START_ITERATION_ROUNDUP => {
                self.start_iteration_roundup = Some(parse_u32(value)?);
            }
            ACTIVITIES_LOG_FILE => {
                // Kineto marks the request even when an on-demand path is refused.
                self.trace_request = true;
                if let Some(dir) = ctx.on_demand_dir {
                    if let Err(why) = check_on_demand_log_file(value, dir) {
                        return Ok(Applied::Ignored(format!(
                            "ignoring on-demand log file {value:?}: {why}; keeping {:?}",
                            self.log_file.path()
                        )));
                    }
                }
                self.set_log_file(value.to_owned());
            }
            REQUEST_TRACE_ID => self.trace_id = value.to_owned(),
            REQUEST_GROUP_TRACE_ID => self.group_trace_id = value.to_owned(),
            ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB => self.max_gpu_buffer_mb = parse_u32(value)?,
            ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS => {
                self.display_cuda_sync_wait_events = parse_bool(value)?;
            }
            CUSTOM_CONFIG => self.custom_config = value.to_owned(),
            PROFILE_REPORT_INPUT_SHAPES | CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION => {
                self.report_input_shapes = parse_bool(value)?;
            }
            PROFILE_PROFILE_MEMORY => self.profile_memory = parse_bool(value)?,
            PROFILE_WITH_STACK | PYTHON_STACK_TRACE => self.with_stack = parse_bool(value)?,
            PROFILE_WITH_FLOPS => self.with_flops = parse_bool(value)?,
            PROFILE_WITH_MODULES => self.with_modules = parse_bool(value)?,
            PROFILE_MEMORY => self.set_memory_snapshot(parse_bool(value)?),
            PROFILE_MEMORY_DURATION_MSECS => {
                self.memory_snapshot_duration = Duration::from_millis(parse_u32(value)?.into());
            }
            VERBOSE_LOG_LEVEL => self.verbose_log_level = parse_i32(value)?,
            VERBOSE_LOG_MODULES => self.verbose_log_modules = parse_list(value),
            ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS => {
                self.on_demand_update_interval = Duration::from_secs(parse_u32(value)?.into());
            }
            ENABLE_IPC_FABRIC => self.ipc_fabric = parse_bool(value)?,
            CUPTI_PER_THREAD_BUFFER_ENABLED => self.cupti_per_thread_buffer = parse_bool(value)?,
            CUPTI_PM_SAMPLING_METRICS => self.pm_sampling_metrics = parse_list(value),
            CUPTI_PM_SAMPLING_DEVICE_ID => self.pm_sampling_device_id = Some(parse_u32(value)?),
            ROCTRACER_MAX_EVENTS => self.roctracer_max_events = parse_u32(value)?,
            OMNIPROF_MAX_HOST_RECORDS_PER_THREAD => {
                self.max_host_records_per_thread = parse_int(value, INT64_MAX)?;
            }
            _ if self.scope_profiler.set(key, value)? => {}
            _ => return Ok(Applied::UnknownKey),
        }
        Ok(Applied::Set)
    }

    // Setters of keys whose effect reaches further than their own field.

    fn set_duration(&mut self, duration: Duration) {
        self.activities_duration = duration;
        self.trace_request = true;
    }

    fn set_iterations(&mut self, iterations: u32) {
        self.iterations = iterations;
        self.trace_request = true;
    }

    fn set_log_file(&mut self, path: String) {
        self.log_file = LogFile::Given(path);
        self.trace_request = true;
    }

    /// As in Kineto, turning snapshot mode on moves the output to the snapshot default (a
    /// later `ACTIVITIES_LOG_FILE` still wins); turning it off leaves the path alone.
    fn set_memory_snapshot(&mut self, on: bool) {
        self.memory_snapshot = on;
        if on {
            self.log_file = LogFile::memory_snapshot_default();
        }
    }

    /// Section 4 of `config.md`, against the parse time `now_ms`. Warnings carry line 0; the
    /// caller attributes them to lines.
    fn validate_at(&mut self, now_ms: i64) -> Vec<ConfigWarning> {
        let mut warnings = Vec::new();
        if self.start_time_ms == 0 {
            let warmup_ms = i64::try_from(self.warmup_duration.as_millis()).unwrap_or(i64::MAX);
            self.start_time_ms = now_ms
                .saturating_add(warmup_ms)
                .saturating_add(2 * CONTROLLER_TICK_MS);
        }
        if self.start_iteration_roundup == Some(0) {
            // A roundup of 0 would divide by zero when the start step is computed.
            warnings.push(ConfigWarning {
                line: 0,
                key: keys::PROFILE_START_ITERATION_ROUNDUP.to_owned(),
                message: "must be at least 1; ignored".to_owned(),
            });
            self.start_iteration_roundup = None;
        }
        if self.start_iteration_roundup.is_some() && !self.has_start_iteration() {
            // A roundup alone means "start on the next multiple", i.e. iteration-based.
            self.start_iteration = Some(0);
        }
        if self.activity_types.is_empty() {
            self.activity_types = ActivitySet::default_set();
        }
        warnings
    }

    /// `ACTIVITIES_ENABLED`, or a trace request: like Kineto, a request (duration, iterations
    /// or log file set) is honoured even when the master switch is off.
    pub fn activities_enabled(&self) -> bool {
        self.activities_enabled || self.trace_request
    }

    /// Whether a key that asks for a trace was set (`ACTIVITIES_DURATION_SECS`,
    /// `ACTIVITIES_DURATION_MSECS`, `ACTIVITIES_ITERATIONS`, `ACTIVITIES_LOG_FILE`).
    pub fn is_trace_request(&self) -> bool {
        self.trace_request
    }

    /// `ACTIVITY_TYPES`: exactly the types named (generic names stored as their
    /// representative). Ask [`ActivitySet::enabled`] for class gating.
    pub fn activity_types(&self) -> ActivitySet {
        self.activity_types
    }

    /// Replaces the selection, as PyTorch's API activity set does after both config texts
    /// are parsed (`config.md` section 5). An empty set selects the default set.
    pub fn set_activity_types(&mut self, types: ActivitySet) {
        self.activity_types = if types.is_empty() {
            ActivitySet::default_set()
        } else {
            types
        };
    }

    /// `ACTIVITIES_DURATION_SECS` / `_MSECS`: how long a time-based trace collects.
    pub fn activities_duration(&self) -> Duration {
        self.activities_duration
    }

    /// `ACTIVITIES_WARMUP_PERIOD_SECS`: warmup before a time-based start.
    pub fn warmup_duration(&self) -> Duration {
        self.warmup_duration
    }

    /// `ACTIVITIES_WARMUP_ITERATIONS`: warmup steps before an iteration-based start.
    pub fn warmup_iterations(&self) -> u32 {
        self.warmup_iterations
    }

    /// `ACTIVITIES_ITERATIONS`: steps to collect (0 = time-based).
    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    /// `PROFILE_START_TIME` in ms since the Unix epoch; after validation never 0 (an unset
    /// start becomes parse time + warmup + 2 s).
    pub fn start_time_ms(&self) -> i64 {
        self.start_time_ms
    }

    /// `PROFILE_START_ITERATION`, if set. It takes effect only when
    /// [`Config::has_start_iteration`].
    pub fn start_iteration(&self) -> Option<u32> {
        self.start_iteration
    }

    /// Whether the trace starts on a step rather than at a time: a start iteration is set and
    /// `ACTIVITIES_ITERATIONS` > 0. Iteration-based starting wins over the start time.
    pub fn has_start_iteration(&self) -> bool {
        self.start_iteration.is_some() && self.iterations > 0
    }

    /// The step at which warmup begins (start iteration − warmup iterations; may be
    /// negative), or `None` when the trace is not iteration-based.
    pub fn start_iteration_including_warmup(&self) -> Option<i64> {
        let start = self
            .start_iteration
            .filter(|_| self.has_start_iteration())?;
        Some(i64::from(start) - i64::from(self.warmup_iterations))
    }

    /// `PROFILE_START_ITERATION_ROUNDUP`: start on the next multiple of this step count.
    /// Never `Some(0)` after validation.
    pub fn start_iteration_roundup(&self) -> Option<u32> {
        self.start_iteration_roundup
    }

    /// The output path as stored: `ACTIVITIES_LOG_FILE` as given, or Kineto's default for
    /// this process, `/tmp/libkineto_activities_<pid>.json` (`/tmp/memory_snapshot_<pid>.pickle`
    /// in memory-snapshot mode).
    pub fn log_file(&self) -> &str {
        self.log_file.path()
    }

    /// The URL the trace of process `pid` is written to. A given path without a `scheme://`
    /// prefix gets `file://`, and `_<pid>` is inserted before the first `.pt.trace.json`, else
    /// before the first `.json`, else nowhere (`/data/t.json` → `file:///data/t_<pid>.json`).
    /// A default path already names the process, so it only gets `file://`.
    pub fn log_file_url(&self, pid: u32) -> String {
        match &self.log_file {
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

    /// `REQUEST_TRACE_ID`, written as trace metadata `trace_id` (empty = none).
    pub fn trace_id(&self) -> &str {
        &self.trace_id
    }

    /// `REQUEST_GROUP_TRACE_ID`: group id of a multi-process request (empty = none).
    pub fn group_trace_id(&self) -> &str {
        &self.group_trace_id
    }

    /// `ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB`: device buffer budget in MiB.
    pub fn max_gpu_buffer_mb(&self) -> u32 {
        self.max_gpu_buffer_mb
    }

    /// The device buffer budget in bytes.
    pub fn max_gpu_buffer_bytes(&self) -> u64 {
        u64::from(self.max_gpu_buffer_mb) << 20
    }

    /// `ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS`: emit stream-wait sync events.
    pub fn display_cuda_sync_wait_events(&self) -> bool {
        self.display_cuda_sync_wait_events
    }

    /// `CUSTOM_CONFIG`: opaque text for custom backends.
    pub fn custom_config(&self) -> &str {
        &self.custom_config
    }

    /// `PROFILE_REPORT_INPUT_SHAPES` (deprecated spelling
    /// `CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION`).
    pub fn report_input_shapes(&self) -> bool {
        self.report_input_shapes
    }

    /// `PROFILE_PROFILE_MEMORY`: the client records allocations into the trace.
    pub fn profile_memory(&self) -> bool {
        self.profile_memory
    }

    /// `PROFILE_WITH_STACK` (deprecated spelling `PYTHON_STACK_TRACE`).
    pub fn with_stack(&self) -> bool {
        self.with_stack
    }

    /// `PROFILE_WITH_FLOPS`.
    pub fn with_flops(&self) -> bool {
        self.with_flops
    }

    /// `PROFILE_WITH_MODULES`.
    pub fn with_modules(&self) -> bool {
        self.with_modules
    }

    /// `PROFILE_MEMORY`: take a memory snapshot instead of a trace.
    pub fn memory_snapshot(&self) -> bool {
        self.memory_snapshot
    }

    /// `PROFILE_MEMORY_DURATION_MSECS`: how long a memory snapshot records.
    pub fn memory_snapshot_duration(&self) -> Duration {
        self.memory_snapshot_duration
    }

    /// `VERBOSE_LOG_LEVEL` (−1 = off).
    pub fn verbose_log_level(&self) -> i32 {
        self.verbose_log_level
    }

    /// `VERBOSE_LOG_MODULES`: source files verbose logging is restricted to (empty = all).
    pub fn verbose_log_modules(&self) -> &[String] {
        &self.verbose_log_modules
    }

    /// `ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS`: how often the daemon is polled while idle.
    pub fn on_demand_update_interval(&self) -> Duration {
        self.on_demand_update_interval
    }

    /// `ENABLE_IPC_FABRIC`: use the Dynolog IPC channel.
    pub fn ipc_fabric(&self) -> bool {
        self.ipc_fabric
    }

    /// `CUPTI_PER_THREAD_BUFFER_ENABLED` (CUDA).
    pub fn cupti_per_thread_buffer(&self) -> bool {
        self.cupti_per_thread_buffer
    }

    /// `CUPTI_PM_SAMPLING_METRICS`: metrics for `hardware_counters`.
    pub fn pm_sampling_metrics(&self) -> &[String] {
        &self.pm_sampling_metrics
    }

    /// `CUPTI_PM_SAMPLING_DEVICE_ID`; `None` means the sampler refuses to run.
    pub fn pm_sampling_device_id(&self) -> Option<u32> {
        self.pm_sampling_device_id
    }

    /// `ROCTRACER_MAX_EVENTS` (ROCm).
    pub fn roctracer_max_events(&self) -> u32 {
        self.roctracer_max_events
    }

    /// `OMNIPROF_MAX_HOST_RECORDS_PER_THREAD` (omniprof): per-thread cap of host records; a
    /// range uses two records, an instant one.
    pub fn max_host_records_per_thread(&self) -> u64 {
        self.max_host_records_per_thread
    }

    /// `XPUPTI_PROFILER_METRICS`: hardware metrics the scope profiler collects.
    pub fn scope_profiler_metrics(&self) -> &[String] {
        &self.scope_profiler.metrics
    }

    /// `XPUPTI_PROFILER_ENABLE_PER_KERNEL`: one scope per kernel.
    pub fn scope_profiler_per_kernel(&self) -> bool {
        self.scope_profiler.per_kernel
    }

    /// `XPUPTI_PROFILER_MAX_SCOPES`: collection buffer size in scopes. When unset (0) and
    /// metrics are set, Kineto's client default: 1500 per-kernel, else 10.
    pub fn scope_profiler_max_scopes(&self) -> u64 {
        self.scope_profiler.max_scopes()
    }

    /// The resolved config: `activity_types` (as selected), `enabled` (every type on after
    /// class gating), `trace_request`, and every key under its Kineto name with its effective
    /// value (durations in the key's unit, unset integers as −1).
    pub fn to_json(&self) -> serde_json::Value {
        use keys::*;
        let names = |set: ActivitySet| set.iter().map(ActivityType::name).collect::<Vec<_>>();
        let or_minus_one = |value: Option<u32>| value.map_or(-1, i64::from);
        json!({
            "activity_types": names(self.activity_types),
            "enabled": names(self.activity_types.enabled_types()),
            "trace_request": self.trace_request,
            ACTIVITIES_ENABLED: self.activities_enabled,
            ACTIVITIES_DURATION_MSECS: duration_ms(self.activities_duration),
            ACTIVITIES_WARMUP_PERIOD_SECS: self.warmup_duration.as_secs(),
            ACTIVITIES_WARMUP_ITERATIONS: self.warmup_iterations,
            ACTIVITIES_ITERATIONS: self.iterations,
            PROFILE_START_TIME: self.start_time_ms,
            PROFILE_START_ITERATION: or_minus_one(self.start_iteration),
            PROFILE_START_ITERATION_ROUNDUP: or_minus_one(self.start_iteration_roundup),
            ACTIVITIES_LOG_FILE: self.log_file.path(),
            REQUEST_TRACE_ID: self.trace_id,
            REQUEST_GROUP_TRACE_ID: self.group_trace_id,
            ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB: self.max_gpu_buffer_mb,
            ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS: self.display_cuda_sync_wait_events,
            CUSTOM_CONFIG: self.custom_config,
            PROFILE_REPORT_INPUT_SHAPES: self.report_input_shapes,
            PROFILE_PROFILE_MEMORY: self.profile_memory,
            PROFILE_WITH_STACK: self.with_stack,
            PROFILE_WITH_FLOPS: self.with_flops,
            PROFILE_WITH_MODULES: self.with_modules,
            PROFILE_MEMORY: self.memory_snapshot,
            PROFILE_MEMORY_DURATION_MSECS: duration_ms(self.memory_snapshot_duration),
            VERBOSE_LOG_LEVEL: self.verbose_log_level,
            VERBOSE_LOG_MODULES: self.verbose_log_modules,
            ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS: self.on_demand_update_interval.as_secs(),
            ENABLE_IPC_FABRIC: self.ipc_fabric,
            CUPTI_PER_THREAD_BUFFER_ENABLED: self.cupti_per_thread_buffer,
            CUPTI_PM_SAMPLING_METRICS: self.pm_sampling_metrics,
            CUPTI_PM_SAMPLING_DEVICE_ID: or_minus_one(self.pm_sampling_device_id),
            ROCTRACER_MAX_EVENTS: self.roctracer_max_events,
            OMNIPROF_MAX_HOST_RECORDS_PER_THREAD: self.max_host_records_per_thread,
            XPUPTI_PROFILER_METRICS: self.scope_profiler.metrics,
            XPUPTI_PROFILER_ENABLE_PER_KERNEL: self.scope_profiler.per_kernel,
            XPUPTI_PROFILER_MAX_SCOPES: self.scope_profiler.max_scopes(),
        })
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

fn log_warnings(warnings: &[ConfigWarning]) {
    for warning in warnings {
        log::warn!("config: {warning}");
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
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
