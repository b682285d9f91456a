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

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::activity::{ActivitySet, ActivityType};

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

/// The environment variable naming the directory on-demand traces may be written to.
const ON_DEMAND_TRACE_DIR_ENV: &str = "KINETO_ONDEMAND_TRACE_DIR";
/// Used when [`ON_DEMAND_TRACE_DIR_ENV`] is unset or empty.
const DEFAULT_ON_DEMAND_TRACE_DIR: &str = "/tmp/";
/// Set (to anything) when the process talks to the Dynolog daemon.
const USE_DAEMON_ENV: &str = "KINETO_USE_DAEMON";
/// How far in the past `PROFILE_START_TIME` may lie: older requests are stale.
const MAX_REQUEST_AGE_MS: i64 = 10_000;
/// Kineto's run-loop tick; an unset start time gets two of them as slack.
const CONTROLLER_TICK_MS: i64 = 1_000;
/// Default per-thread cap of host records (a range uses two, an instant one).
const DEFAULT_MAX_HOST_RECORDS_PER_THREAD: u64 = 4_194_304;
/// Scope-profiler buffer sizes filled in when metrics are set but the size is not.
const SCOPES_PER_KERNEL_DEFAULT: u64 = 1500;
const SCOPES_DEFAULT: u64 = 10;

/// Largest value of the int32 grammar.
const INT32_MAX: u64 = i32::MAX as u64;
/// Largest value of the int64 grammar.
const INT64_MAX: u64 = i64::MAX as u64;

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

    /// Like [`Config::apply`] for a config that came from the daemon: `ACTIVITIES_LOG_FILE`
    /// must lie inside `$KINETO_ONDEMAND_TRACE_DIR` (default `/tmp/`), contain no `..`, and
    /// not escape that directory through a symlink. A path that fails is ignored with a
    /// warning; the parse still succeeds.
    pub fn apply_on_demand(&mut self, text: &str) -> Result<Vec<ConfigWarning>, ConfigError> {
        let dir = match std::env::var(ON_DEMAND_TRACE_DIR_ENV) {
            Ok(dir) if !dir.is_empty() => dir,
            _ => DEFAULT_ON_DEMAND_TRACE_DIR.to_owned(),
        };
        self.apply_with(
            text,
            &ApplyContext {
                now_ms: now_ms(),
                on_demand_dir: Some(&dir),
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

    fn apply_with(
        &mut self,
        text: &str,
        ctx: &ApplyContext<'_>,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        // All-or-nothing: work on a copy and commit only when every line was accepted.
        let mut next = self.clone();
        let mut warnings = Vec::new();
        // The last line that set each key, so validation warnings can point at it.
        let mut key_lines: HashMap<&str, usize> = HashMap::new();
        for (index, raw) in text.split('\n').enumerate() {
            let line = index + 1;
            let setting = raw.find('#').map_or(raw, |hash| &raw[..hash]);
            if trim(setting).is_empty() {
                continue;
            }
            let mut parts = setting.split('=');
            let (Some(key), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(ConfigError {
                    line,
                    key: None,
                    reason: ConfigErrorReason::Syntax(trim(setting).to_owned()),
                });
            };
            let (key, value) = (trim(key), trim(value));
            let applied = next.set(key, value, ctx).map_err(|reason| ConfigError {
                line,
                key: Some(key.to_owned()),
                reason,
            })?;
            let message = match applied {
                Applied::Set => {
                    key_lines.insert(key, line);
                    continue;
                }
                Applied::UnknownKey => "unrecognized config key; line ignored".to_owned(),
                Applied::Ignored(message) => message,
            };
            warnings.push(ConfigWarning {
                line,
                key: key.to_owned(),
                message,
            });
        }
        for mut warning in next.validate_at(ctx.now_ms) {
            warning.line = key_lines.get(warning.key.as_str()).copied().unwrap_or(0);
            warnings.push(warning);
        }
        *self = next;
        log_warnings(&warnings);
        Ok(warnings)
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

/// Trims what the config grammar counts as whitespace. `\r` is deliberately not included.
fn trim(s: &str) -> &str {
    s.trim_matches([' ', '\t', '\n'])
}

/// The integer grammar: base 10, optional sign, in `[0, max]` (`-0` is 0).
fn parse_int(value: &str, max: u64) -> Result<u64, ConfigErrorReason> {
    let invalid = || ConfigErrorReason::Integer {
        value: value.to_owned(),
        max,
    };
    let (negative, digits) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    // Beyond u64 is a parse error, so huge values are rejected rather than saturated.
    let n: u64 = digits.parse().map_err(|_| invalid())?;
    if (negative && n != 0) || n > max {
        return Err(invalid());
    }
    Ok(n)
}

/// The int32 grammar, for a value that is a count or a size.
fn parse_u32(value: &str) -> Result<u32, ConfigErrorReason> {
    // Bounded by INT32_MAX, so the conversion is exact.
    parse_int(value, INT32_MAX).map(|n| n as u32)
}

/// The int32 grammar, for a value whose default is negative.
fn parse_i32(value: &str) -> Result<i32, ConfigErrorReason> {
    // Bounded by INT32_MAX, so the conversion is exact.
    parse_int(value, INT32_MAX).map(|n| n as i32)
}

fn parse_bool(value: &str) -> Result<bool, ConfigErrorReason> {
    const FALSE: [&str; 5] = ["n", "no", "f", "false", "0"];
    const TRUE: [&str; 5] = ["y", "yes", "t", "true", "1"];
    let is = |spellings: [&str; 5]| spellings.iter().any(|s| s.eq_ignore_ascii_case(value));
    if is(TRUE) {
        Ok(true)
    } else if is(FALSE) {
        Ok(false)
    } else {
        Err(ConfigErrorReason::Bool(value.to_owned()))
    }
}

/// A list: split on `,`, items trimmed, empty items dropped.
fn parse_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// An activity list. Kineto lower-cases the value first; [`ActivityType::parse`] folds ASCII
/// case itself, so skipping that step accepts the same names and lets the error quote the
/// item as it was written.
fn parse_activity_list(value: &str) -> Result<ActivitySet, ConfigErrorReason> {
    ActivitySet::parse_list(value).map_err(|e| ConfigErrorReason::ActivityType(e.name))
}

/// Refuses a start time more than [`MAX_REQUEST_AGE_MS`] before `now_ms` (a stale request);
/// a future one is fine.
fn check_start_time(start_ms: i64, now_ms: i64) -> Result<(), ConfigErrorReason> {
    if now_ms.saturating_sub(start_ms) > MAX_REQUEST_AGE_MS {
        return Err(ConfigErrorReason::StartTimeInPast { start_ms, now_ms });
    }
    Ok(())
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

/// Checks an on-demand `ACTIVITIES_LOG_FILE` against the allowed directory `dir`; the error
/// says why it is refused.
fn check_on_demand_log_file(path: &str, dir: &str) -> Result<(), String> {
    let dir = if dir.ends_with('/') {
        dir.to_owned()
    } else {
        format!("{dir}/")
    };
    if !path.starts_with(&dir) {
        return Err(format!("outside the allowed directory {dir:?}"));
    }
    if path.contains("..") {
        return Err("contains \"..\"".to_owned());
    }
    if !resolves_inside(Path::new(path), Path::new(&dir)) {
        return Err(format!(
            "its directory resolves (through a symlink) outside {dir:?}"
        ));
    }
    Ok(())
}

/// Whether the directory of `path`, with symlinks resolved, lies inside `dir`. Missing
/// directories are resolved from their nearest existing ancestor, since that is where a
/// writer creating them would put them.
fn resolves_inside(path: &Path, dir: &Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let Some(parent) = path.parent() else {
        return false;
    };
    let mut missing = Vec::new();
    let mut ancestor = parent;
    loop {
        if let Ok(real) = std::fs::canonicalize(ancestor) {
            let resolved: PathBuf = real.join(missing.iter().rev().collect::<PathBuf>());
            return resolved.starts_with(&dir);
        }
        match (ancestor.file_name(), ancestor.parent()) {
            (Some(name), Some(up)) => {
                missing.push(name);
                ancestor = up;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ActivityType::*;

    /// A fixed parse time, so start-time vectors are exact.
    const NOW: i64 = 1_700_000_000_000;

    fn ctx() -> ApplyContext<'static> {
        ApplyContext {
            now_ms: NOW,
            on_demand_dir: None,
        }
    }

    fn apply(config: &mut Config, text: &str) -> Result<Vec<ConfigWarning>, ConfigError> {
        config.apply_with(text, &ctx())
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        apply(&mut config, text).map(|_| config)
    }

    fn set(types: &[ActivityType]) -> ActivitySet {
        types.iter().copied().collect()
    }

    /// A freshly validated default config, to compare "nothing set" against.
    fn validated_default() -> Config {
        parse("").unwrap()
    }

    #[test]
    fn whitespace() {
        for text in ["", " ", "\t", "\n", "    ", "\t \n  \t\t\n\n"] {
            assert_eq!(parse(text).unwrap(), validated_default(), "{text:?}");
        }
        let err = parse("\r\n").unwrap_err();
        assert_eq!(err.line, 1);
        assert_eq!(err.reason, ConfigErrorReason::Syntax("\r".into()));
    }

    #[test]
    fn comments() {
        for text in ["# comment", "   # ~!@#$", "\t#abc", "###\n##"] {
            assert_eq!(parse(text).unwrap(), validated_default(), "{text:?}");
        }
        for text in [
            "ACTIVITIES_WARMUP_ITERATIONS=1 ##ok",
            "ACTIVITIES_WARMUP_ITERATIONS=1 ## FOO=2",
            "ACTIVITIES_WARMUP_ITERATIONS = 1 # Warm up for one iteration",
        ] {
            let mut config = Config::default();
            let warnings = apply(&mut config, text).unwrap();
            assert_eq!(config.warmup_iterations(), 1, "{text:?}");
            assert!(warnings.is_empty(), "{text:?}");
        }
        let err = parse("util ## not ok").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"line 1: invalid config line "util" (expected KEY=VALUE)"#
        );
        let err = parse("## ok \n blah # not OK").unwrap_err();
        assert_eq!(err.line, 2);
        assert_eq!(err.key, None);
        assert_eq!(err.reason, ConfigErrorReason::Syntax("blah".into()));
    }

    #[test]
    fn format() {
        assert_eq!(parse("foo").unwrap_err().line, 1);
        assert_eq!(parse("=foo=").unwrap_err().line, 1);
        assert!(matches!(
            parse("foo = 1,2,3 ; bar = 4,5,6").unwrap_err().reason,
            ConfigErrorReason::Syntax(_)
        ));
        assert!(matches!(
            parse("a=b=c").unwrap_err().reason,
            ConfigErrorReason::Syntax(_)
        ));
        for (text, key) in [("foo=", "foo"), ("foo=1,2,3", "foo")] {
            let mut config = Config::default();
            let warnings = apply(&mut config, text).unwrap();
            assert_eq!(config, validated_default());
            assert_eq!(warnings.len(), 1);
            assert_eq!(warnings[0].line, 1);
            assert_eq!(warnings[0].key, key);
        }
    }

    #[test]
    fn default_activity_types() {
        let mut config = Config::default();
        assert!(config.activity_types().is_empty());
        assert!(config.validate_at(NOW).is_empty());
        assert_eq!(config.activity_types(), ActivitySet::default_set());
        assert_eq!(config.activity_types().len(), 18);
    }

    #[test]
    fn activity_types_same_config() {
        let defaults = set(&[
            CpuOp,
            CpuInstantEvent,
            PythonFunction,
            UserAnnotation,
            GpuUserAnnotation,
            GpuMemcpy,
            GpuMemset,
            ConcurrentKernel,
            ExternalCorrelation,
            Overhead,
            CudaRuntime,
            CudaDriver,
            CudaSync,
            CudaEvent,
            MtiaRuntime,
            MtiaInsight,
            MtiaCcpEvents,
            MtiaCounters,
        ]);
        let mut config = Config::default();
        let err = apply(&mut config, "ACTIVITY_TYPES").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"line 1: invalid config line "ACTIVITY_TYPES" (expected KEY=VALUE)"#
        );
        assert_eq!(config, Config::default());
        apply(&mut config, "ACTIVITY_TYPES=").unwrap();
        assert_eq!(config.activity_types(), defaults);
        let before = config.clone();
        apply(&mut config, "=ACTIVITY_TYPES=").unwrap_err();
        assert_eq!(config, before);

        let mut config = Config::default();
        apply(&mut config, "ACTIVITY_TYPES=gpu_memcpy,gpu_MeMsEt,kernel").unwrap();
        assert_eq!(
            config.activity_types(),
            set(&[GpuMemcpy, GpuMemset, ConcurrentKernel])
        );
        apply(&mut config, "ACTIVITY_TYPES = cuda_Runtime,").unwrap();
        assert_eq!(config.activity_types(), set(&[CudaRuntime]));
        let err = apply(&mut config, "ACTIVITY_TYPES = memcopy,cuda_runtime").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"line 1: ACTIVITY_TYPES: invalid activity type "memcopy""#
        );
        // omniprof differs from Kineto: the selection is unchanged, not emptied.
        assert_eq!(config.activity_types(), set(&[CudaRuntime]));
        for (text, expected) in [
            ("ACTIVITY_TYPES = cpu_op", set(&[CpuOp])),
            ("ACTIVITY_TYPES = xpu_Runtime", set(&[XpuRuntime])),
            (
                "ACTIVITY_TYPES = xpu_scope_profiler",
                set(&[XpuScopeProfiler]),
            ),
            (
                "ACTIVITY_TYPES=privateuse1_Runtime,privateuse1_driver",
                set(&[PrivateUse1Runtime, PrivateUse1Driver]),
            ),
        ] {
            apply(&mut config, text).unwrap();
            assert_eq!(config.activity_types(), expected, "{text:?}");
        }
    }

    #[test]
    fn generic_names_pr_1212() {
        let config = parse("ACTIVITY_TYPES = runtime, driver, kernel").unwrap();
        let selected = config.activity_types();
        assert_eq!(selected, set(&[CudaRuntime, CudaDriver, ConcurrentKernel]));
        assert_eq!(
            selected
                .iter()
                .map(ActivityType::as_i32)
                .collect::<Vec<_>>(),
            [5, 7, 8]
        );
        for t in [
            CudaRuntime,
            CudaDriver,
            MtiaRuntime,
            MtiaCcpEvents,
            XpuRuntime,
            PrivateUse1Runtime,
            PrivateUse1Driver,
        ] {
            assert!(selected.enabled(t), "{t}");
        }
        assert!(!selected.enabled(CpuOp));
    }

    #[test]
    fn profile_start_time() {
        let config = parse(&format!("PROFILE_START_TIME = {NOW}")).unwrap();
        assert_eq!(config.start_time_ms(), NOW);
        let config = parse("PROFILE_START_TIME = 0").unwrap();
        assert_eq!(config.start_time_ms(), NOW + 5_000 + 2_000);
        let config = parse("ACTIVITIES_WARMUP_PERIOD_SECS=1\nPROFILE_START_TIME=0").unwrap();
        assert_eq!(config.start_time_ms(), NOW + 1_000 + 2_000);
        let err = parse(&format!("\nPROFILE_START_TIME = {}", NOW - 15_000)).unwrap_err();
        assert_eq!(err.line, 2);
        assert_eq!(err.key.as_deref(), Some("PROFILE_START_TIME"));
        assert_eq!(
            err.reason,
            ConfigErrorReason::StartTimeInPast {
                start_ms: NOW - 15_000,
                now_ms: NOW
            }
        );
        // The boundary: exactly 10 s old is still accepted; a future time is fine.
        assert!(parse(&format!("PROFILE_START_TIME={}", NOW - 10_000)).is_ok());
        assert!(parse(&format!("PROFILE_START_TIME={}", NOW - 10_001)).is_err());
        assert!(parse(&format!("PROFILE_START_TIME={}", NOW + 60_000)).is_ok());
    }

    #[test]
    fn request_trace_ids() {
        assert_eq!(parse("REQUEST_TRACE_ID=XYZ").unwrap().trace_id(), "XYZ");
        assert_eq!(
            parse("REQUEST_GROUP_TRACE_ID=ABC")
                .unwrap()
                .group_trace_id(),
            "ABC"
        );
    }

    #[test]
    fn value_grammars() {
        let mut config = Config::default();
        apply(&mut config, "ACTIVITIES_WARMUP_ITERATIONS=10").unwrap();
        assert_eq!(config.warmup_iterations(), 10);
        for bad in ["-10", "1.5", "", "string"] {
            let err = apply(&mut config, &format!("ACTIVITIES_WARMUP_ITERATIONS={bad}"));
            assert_eq!(
                err.unwrap_err().reason,
                ConfigErrorReason::Integer {
                    value: bad.into(),
                    max: 2_147_483_647
                }
            );
            assert_eq!(config.warmup_iterations(), 10);
        }
        apply(&mut config, "ACTIVITIES_DURATION_SECS  =  \t100").unwrap();
        assert_eq!(config.activities_duration(), Duration::from_secs(100));
        apply(&mut config, "ACTIVITIES_DURATION_SECS=-1").unwrap_err();
        assert_eq!(config.activities_duration(), Duration::from_secs(100));

        for (spellings, expected) in [
            (["yes", "YES", "Y", "T", "true", "1"], true),
            (["no", "NO", "N", "F", "false", "0"], false),
        ] {
            for value in spellings {
                let mut config = parse(&format!("ACTIVITIES_ENABLED={}", !expected)).unwrap();
                apply(&mut config, &format!("ACTIVITIES_ENABLED={value}")).unwrap();
                assert_eq!(config.activities_enabled(), expected, "{value}");
            }
        }
        let mut config = parse("ACTIVITIES_ENABLED=false").unwrap();
        for bad in ["  ", "2", "-1", "yep"] {
            let err = apply(&mut config, &format!("ACTIVITIES_ENABLED={bad}")).unwrap_err();
            assert_eq!(err.reason, ConfigErrorReason::Bool(trim(bad).into()));
            assert!(!config.activities_enabled());
        }
    }

    #[test]
    fn more_integer_grammar() {
        for (value, expected) in [("+5", 5), ("-0", 0), ("+0", 0), ("007", 7)] {
            let config = parse(&format!("ACTIVITIES_WARMUP_ITERATIONS={value}")).unwrap();
            assert_eq!(config.warmup_iterations(), expected, "{value}");
        }
        for bad in [
            "2147483648",
            "1e3",
            "0x10",
            "10ms",
            "+",
            "-",
            "+-1",
            "1 0",
            "٣",
        ] {
            assert!(
                parse(&format!("ACTIVITIES_WARMUP_ITERATIONS={bad}")).is_err(),
                "{bad}"
            );
        }
        let config = parse("ACTIVITIES_WARMUP_ITERATIONS=2147483647").unwrap();
        assert_eq!(config.warmup_iterations(), 2_147_483_647);
        let config = parse("OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=9223372036854775807").unwrap();
        assert_eq!(config.max_host_records_per_thread(), i64::MAX as u64);
        assert!(parse("OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=9223372036854775808").is_err());
    }

    #[test]
    fn scope_profiler_feature_config() {
        let config = parse("XPUPTI_PROFILER_METRICS = metric1,metric2,metric3").unwrap();
        assert_eq!(
            config.scope_profiler_metrics(),
            ["metric1", "metric2", "metric3"]
        );
        let config = parse("XPUPTI_PROFILER_ENABLE_PER_KERNEL = true").unwrap();
        assert!(config.scope_profiler_per_kernel());
        let config = parse("XPUPTI_PROFILER_MAX_SCOPES = 314159").unwrap();
        assert_eq!(config.scope_profiler_max_scopes(), 314_159);
        let config =
            parse("XPUPTI_PROFILER_METRICS=metric1\nXPUPTI_PROFILER_ENABLE_PER_KERNEL=false")
                .unwrap();
        assert_eq!(config.scope_profiler_max_scopes(), 10);
        let config =
            parse("XPUPTI_PROFILER_METRICS=metric2\nXPUPTI_PROFILER_ENABLE_PER_KERNEL=true")
                .unwrap();
        assert_eq!(config.scope_profiler_max_scopes(), 1500);
        // Without metrics there is nothing to size.
        assert_eq!(validated_default().scope_profiler_max_scopes(), 0);
        // Layering: a later text enabling per-kernel scopes gets the per-kernel default.
        let mut config = parse("XPUPTI_PROFILER_METRICS=m").unwrap();
        assert_eq!(config.scope_profiler_max_scopes(), 10);
        apply(&mut config, "XPUPTI_PROFILER_ENABLE_PER_KERNEL=1").unwrap();
        assert_eq!(config.scope_profiler_max_scopes(), 1500);
    }

    #[test]
    fn omniprof_vectors() {
        assert_eq!(
            parse("ACTIVITIES_WARMUP_ITERATIONS=+5")
                .unwrap()
                .warmup_iterations(),
            5
        );
        assert_eq!(
            parse("ACTIVITIES_WARMUP_ITERATIONS=-0")
                .unwrap()
                .warmup_iterations(),
            0
        );
        let err = parse("ACTIVITIES_WARMUP_ITERATIONS=2147483648").unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1: ACTIVITIES_WARMUP_ITERATIONS: invalid integer \"2147483648\" \
             (expected a base-10 integer in [0, 2147483647])"
        );
        let err = parse("PROFILE_START_TIME=99999999999999999999").unwrap_err();
        assert_eq!(
            err.reason,
            ConfigErrorReason::Integer {
                value: "99999999999999999999".into(),
                max: i64::MAX as u64
            }
        );

        let mut config = Config::default();
        let warnings = apply(&mut config, "\nPROFILE_START_ITERATION_ROUNDUP=0").unwrap();
        assert_eq!(config.start_iteration_roundup(), None);
        assert_eq!(config.to_json()["PROFILE_START_ITERATION_ROUNDUP"], -1);
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].line, 2);
        assert_eq!(warnings[0].key, "PROFILE_START_ITERATION_ROUNDUP");

        let config = parse("PROFILE_START_ITERATION_ROUNDUP=100").unwrap();
        assert_eq!(config.start_iteration_roundup(), Some(100));
        assert_eq!(config.start_iteration(), Some(0));

        let config = parse("ACTIVITIES_DURATION_MSECS=250\nACTIVITIES_DURATION_SECS=2").unwrap();
        assert_eq!(config.activities_duration(), Duration::from_millis(2000));

        let mut config = Config::default();
        let warnings = apply(&mut config, "Activity_Types=cpu_op").unwrap();
        assert_eq!(warnings[0].key, "Activity_Types");
        assert_eq!(config.activity_types(), ActivitySet::default_set());

        let err = parse("ACTIVITY_TYPES=cpu_op\r").unwrap_err();
        assert_eq!(
            err.reason,
            ConfigErrorReason::ActivityType("cpu_op\r".into())
        );
        assert_eq!(
            err.to_string(),
            r#"line 1: ACTIVITY_TYPES: invalid activity type "cpu_op\r""#
        );

        assert_eq!(
            parse("CUSTOM_CONFIG=a b c").unwrap().custom_config(),
            "a b c"
        );
    }

    #[test]
    fn all_or_nothing() {
        let mut config = parse("ACTIVITIES_ITERATIONS=3\nREQUEST_TRACE_ID=a").unwrap();
        let before = config.clone();
        let err = apply(
            &mut config,
            "REQUEST_TRACE_ID=b\nACTIVITY_TYPES=cpu_op\nfoo=1\nACTIVITIES_ENABLED=maybe",
        )
        .unwrap_err();
        assert_eq!(err.line, 4);
        assert_eq!(config, before);
        // A successful second text layers on top without resetting the first.
        apply(&mut config, "REQUEST_TRACE_ID=b").unwrap();
        assert_eq!(config.trace_id(), "b");
        assert_eq!(config.iterations(), 3);
    }

    #[test]
    fn api_activity_set_overrides_the_texts() {
        let mut config = parse("ACTIVITY_TYPES=cpu_op").unwrap();
        config.set_activity_types(set(&[ConcurrentKernel]));
        assert_eq!(config.activity_types(), set(&[ConcurrentKernel]));
        config.set_activity_types(ActivitySet::empty());
        assert_eq!(config.activity_types(), ActivitySet::default_set());
    }

    #[test]
    fn start_iteration_including_warmup() {
        let config = parse(
            "PROFILE_START_ITERATION=10\nACTIVITIES_WARMUP_ITERATIONS=3\nACTIVITIES_ITERATIONS=2",
        )
        .unwrap();
        assert!(config.has_start_iteration());
        assert_eq!(config.start_iteration_including_warmup(), Some(7));
        // Without ACTIVITIES_ITERATIONS the start iteration is not used.
        let config = parse("PROFILE_START_ITERATION=10").unwrap();
        assert!(!config.has_start_iteration());
        assert_eq!(config.start_iteration_including_warmup(), None);
    }

    #[test]
    fn trace_request_overrides_master_switch() {
        let config = parse("ACTIVITIES_ENABLED=false").unwrap();
        assert!(!config.is_trace_request());
        assert!(!config.activities_enabled());
        for key in [
            "ACTIVITIES_DURATION_SECS=1",
            "ACTIVITIES_DURATION_MSECS=1",
            "ACTIVITIES_ITERATIONS=1",
            "ACTIVITIES_LOG_FILE=/tmp/x.json",
        ] {
            let config = parse(&format!("ACTIVITIES_ENABLED=false\n{key}")).unwrap();
            assert!(config.is_trace_request(), "{key}");
            assert!(config.activities_enabled(), "{key}");
        }
    }

    #[test]
    fn deprecated_spellings_and_memory_snapshot() {
        let config =
            parse("CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION=1\nPYTHON_STACK_TRACE=yes")
                .unwrap();
        assert!(config.report_input_shapes() && config.with_stack());
        let pid = std::process::id();
        let config = parse("PROFILE_MEMORY=true\nPROFILE_MEMORY_DURATION_MSECS=250").unwrap();
        assert!(config.memory_snapshot());
        assert!(!config.profile_memory());
        assert_eq!(
            config.memory_snapshot_duration(),
            Duration::from_millis(250)
        );
        assert_eq!(
            config.log_file(),
            format!("/tmp/memory_snapshot_{pid}.pickle")
        );
        let config = parse("PROFILE_MEMORY=true\nACTIVITIES_LOG_FILE=/d/m.pickle").unwrap();
        assert_eq!(config.log_file(), "/d/m.pickle");
    }

    #[test]
    fn log_file_pid_insertion() {
        let pid = std::process::id();
        let config = validated_default();
        assert_eq!(
            config.log_file(),
            format!("/tmp/libkineto_activities_{pid}.json")
        );
        assert_eq!(
            config.log_file_url(pid),
            format!("file:///tmp/libkineto_activities_{pid}.json")
        );
        for (path, written) in [
            ("/data/t.json", "/data/t_1234.json"),
            ("/data/w.pt.trace.json", "/data/w_1234.pt.trace.json"),
            ("/data/a.json.gz", "/data/a_1234.json.gz"),
            ("/data/x.jsonl", "/data/x_1234.jsonl"),
            ("/data/trace", "/data/trace"),
        ] {
            let config = parse(&format!("ACTIVITIES_LOG_FILE={path}")).unwrap();
            assert_eq!(config.log_file(), path);
            assert_eq!(config.log_file_url(1234), format!("file://{written}"));
        }
        let config = parse("ACTIVITIES_LOG_FILE=s3://bucket/t.json").unwrap();
        assert_eq!(config.log_file_url(7), "s3://bucket/t_7.json");
    }

    #[test]
    fn base_config_log_file_is_unrestricted() {
        let config = parse("ACTIVITIES_LOG_FILE=/home/user/custom/trace.json").unwrap();
        assert_eq!(config.log_file(), "/home/user/custom/trace.json");
    }

    fn apply_on_demand(
        config: &mut Config,
        text: &str,
        dir: &str,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        config.apply_with(
            text,
            &ApplyContext {
                now_ms: NOW,
                on_demand_dir: Some(dir),
            },
        )
    }

    #[test]
    fn on_demand_log_file() {
        let mut config = Config::default();
        let warnings = apply_on_demand(
            &mut config,
            "ACTIVITIES_LOG_FILE=/tmp/my_trace.json",
            "/tmp/",
        )
        .unwrap();
        assert!(warnings.is_empty());
        assert_eq!(config.log_file(), "/tmp/my_trace.json");

        let default_path = validated_default().log_file().to_owned();
        assert!(default_path.starts_with("/tmp/"));
        for (value, why) in [
            ("/etc/cron.d/payload", "outside the allowed directory"),
            ("/tmp/../etc/cron.d/payload", "contains \"..\""),
            ("/tmpx/t.json", "outside the allowed directory"),
        ] {
            let mut config = Config::default();
            let text = format!("\nACTIVITIES_LOG_FILE={value}");
            let warnings = apply_on_demand(&mut config, &text, "/tmp").unwrap();
            assert_eq!(config.log_file(), default_path, "{value}");
            assert!(config.is_trace_request());
            assert_eq!(warnings.len(), 1, "{value}");
            assert_eq!(warnings[0].line, 2);
            assert_eq!(warnings[0].key, "ACTIVITIES_LOG_FILE");
            assert!(warnings[0].message.contains(why), "{}", warnings[0].message);
        }
        // A rejected path keeps the previous one, not the default.
        let mut config = parse("ACTIVITIES_LOG_FILE=/tmp/kept.json").unwrap();
        apply_on_demand(&mut config, "ACTIVITIES_LOG_FILE=/etc/x.json", "/tmp/").unwrap();
        assert_eq!(config.log_file(), "/tmp/kept.json");
    }

    #[cfg(unix)]
    #[test]
    fn on_demand_log_file_symlink_escape() {
        let allowed = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), allowed.path().join("link")).unwrap();
        std::fs::create_dir(allowed.path().join("real")).unwrap();
        let dir = allowed.path().to_str().unwrap();

        for (relative, ok) in [
            ("t.json", true),
            ("real/t.json", true),
            ("missing/deeper/t.json", true),
            ("link/t.json", false),
            ("link/missing/t.json", false),
        ] {
            let path = format!("{dir}/{relative}");
            let mut config = Config::default();
            let warnings =
                apply_on_demand(&mut config, &format!("ACTIVITIES_LOG_FILE={path}"), dir).unwrap();
            assert_eq!(config.log_file() == path, ok, "{relative}");
            assert_eq!(warnings.is_empty(), ok, "{relative}");
            if !ok {
                assert!(
                    warnings[0].message.contains("symlink"),
                    "{}",
                    warnings[0].message
                );
            }
        }
    }

    #[test]
    fn unknown_and_removed_keys_warn() {
        let mut config = Config::default();
        let text = "EVENTS=a\nCUPTI_PROFILER_METRICS=x\nREQUEST_TIMESTAMP=5\nENABLE_SIGUSR2=1";
        let warnings = apply(&mut config, text).unwrap();
        assert_eq!(
            warnings
                .iter()
                .map(|w| (w.line, w.key.as_str()))
                .collect::<Vec<_>>(),
            [
                (1, "EVENTS"),
                (2, "CUPTI_PROFILER_METRICS"),
                (3, "REQUEST_TIMESTAMP"),
                (4, "ENABLE_SIGUSR2")
            ]
        );
        assert_eq!(
            warnings[0].to_string(),
            "line 1: EVENTS: unrecognized config key; line ignored"
        );
    }

    #[test]
    fn every_core_key_parses() {
        let text = "\
            ACTIVITIES_ENABLED=0\n\
            ACTIVITY_TYPES=cpu_op\n\
            ACTIVITIES_DURATION_MSECS=750\n\
            ACTIVITIES_WARMUP_PERIOD_SECS=2\n\
            ACTIVITIES_WARMUP_ITERATIONS=4\n\
            ACTIVITIES_ITERATIONS=6\n\
            PROFILE_START_ITERATION=8\n\
            PROFILE_START_ITERATION_ROUNDUP=10\n\
            ACTIVITIES_LOG_FILE=/data/t.json\n\
            REQUEST_TRACE_ID=T\n\
            REQUEST_GROUP_TRACE_ID=G\n\
            ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB=64\n\
            ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS=f\n\
            CUSTOM_CONFIG=x y\n\
            PROFILE_REPORT_INPUT_SHAPES=1\n\
            PROFILE_PROFILE_MEMORY=1\n\
            PROFILE_WITH_STACK=1\n\
            PROFILE_WITH_FLOPS=1\n\
            PROFILE_WITH_MODULES=1\n\
            VERBOSE_LOG_LEVEL=2\n\
            VERBOSE_LOG_MODULES=a.cpp, ,b.cpp,\n\
            ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=9\n\
            ENABLE_IPC_FABRIC=1\n\
            CUPTI_PER_THREAD_BUFFER_ENABLED=1\n\
            CUPTI_PM_SAMPLING_METRICS=m1,m2\n\
            CUPTI_PM_SAMPLING_DEVICE_ID=3\n\
            ROCTRACER_MAX_EVENTS=11\n\
            OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=1024";
        let mut config = Config::default();
        assert!(apply(&mut config, text).unwrap().is_empty());
        let json = config.to_json();
        let expected = json!({
            "activity_types": ["cpu_op"],
            "enabled": ["cpu_op"],
            "trace_request": true,
            "ACTIVITIES_ENABLED": false,
            "ACTIVITIES_DURATION_MSECS": 750,
            "ACTIVITIES_WARMUP_PERIOD_SECS": 2,
            "ACTIVITIES_WARMUP_ITERATIONS": 4,
            "ACTIVITIES_ITERATIONS": 6,
            "PROFILE_START_TIME": NOW + 4_000,
            "PROFILE_START_ITERATION": 8,
            "PROFILE_START_ITERATION_ROUNDUP": 10,
            "ACTIVITIES_LOG_FILE": "/data/t.json",
            "REQUEST_TRACE_ID": "T",
            "REQUEST_GROUP_TRACE_ID": "G",
            "ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB": 64,
            "ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS": false,
            "CUSTOM_CONFIG": "x y",
            "PROFILE_REPORT_INPUT_SHAPES": true,
            "PROFILE_PROFILE_MEMORY": true,
            "PROFILE_WITH_STACK": true,
            "PROFILE_WITH_FLOPS": true,
            "PROFILE_WITH_MODULES": true,
            "PROFILE_MEMORY": false,
            "PROFILE_MEMORY_DURATION_MSECS": 1000,
            "VERBOSE_LOG_LEVEL": 2,
            "VERBOSE_LOG_MODULES": ["a.cpp", "b.cpp"],
            "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS": 9,
            "ENABLE_IPC_FABRIC": true,
            "CUPTI_PER_THREAD_BUFFER_ENABLED": true,
            "CUPTI_PM_SAMPLING_METRICS": ["m1", "m2"],
            "CUPTI_PM_SAMPLING_DEVICE_ID": 3,
            "ROCTRACER_MAX_EVENTS": 11,
            "OMNIPROF_MAX_HOST_RECORDS_PER_THREAD": 1024,
            "XPUPTI_PROFILER_METRICS": [],
            "XPUPTI_PROFILER_ENABLE_PER_KERNEL": false,
            "XPUPTI_PROFILER_MAX_SCOPES": 0,
        });
        assert_eq!(json, expected);
        assert_eq!(config.max_gpu_buffer_bytes(), 64 << 20);
        assert_eq!(config.verbose_log_modules(), ["a.cpp", "b.cpp"]);
    }

    #[test]
    fn defaults() {
        let config = validated_default();
        assert!(config.activities_enabled());
        assert!(!config.is_trace_request());
        assert_eq!(config.activities_duration(), Duration::from_millis(500));
        assert_eq!(config.warmup_duration(), Duration::from_secs(5));
        assert_eq!((config.warmup_iterations(), config.iterations()), (0, 0));
        assert_eq!(config.start_iteration(), None);
        assert_eq!(config.start_iteration_roundup(), None);
        assert_eq!(config.max_gpu_buffer_mb(), 128);
        assert!(config.display_cuda_sync_wait_events());
        assert_eq!(config.verbose_log_level(), -1);
        assert_eq!(config.on_demand_update_interval(), Duration::from_secs(5));
        assert_eq!(config.pm_sampling_device_id(), None);
        assert_eq!(config.roctracer_max_events(), 5_000_000);
        assert_eq!(config.max_host_records_per_thread(), 4_194_304);
        assert_eq!(config.memory_snapshot_duration(), Duration::from_secs(1));
        assert_eq!(config.trace_id(), "");
    }

    #[test]
    fn to_json_enabled_is_class_gated() {
        let json = parse("ACTIVITY_TYPES=runtime").unwrap().to_json();
        assert_eq!(json["activity_types"], json!(["cuda_runtime"]));
        assert_eq!(
            json["enabled"],
            json!([
                "cuda_runtime",
                "mtia_runtime",
                "glow_runtime",
                "hpu_op",
                "xpu_runtime",
                "privateuse1_runtime"
            ])
        );
    }

    #[test]
    fn typed_values_as_text() {
        // The vectors of the removed typed builder, written as the text it stood for.
        let config = parse(
            "ACTIVITY_TYPES=cpu_op\nACTIVITIES_DURATION_MSECS=2500\n\
             ACTIVITIES_WARMUP_ITERATIONS=2\nACTIVITIES_ITERATIONS=4\n\
             PROFILE_START_ITERATION=6\nPROFILE_START_ITERATION_ROUNDUP=0\n\
             REQUEST_TRACE_ID=id\nXPUPTI_PROFILER_METRICS=GpuTime\n\
             XPUPTI_PROFILER_ENABLE_PER_KERNEL=1",
        )
        .unwrap();
        assert_eq!(config.activity_types(), set(&[CpuOp]));
        assert_eq!(config.activities_duration(), Duration::from_millis(2500));
        assert_eq!(config.start_iteration_including_warmup(), Some(4));
        assert_eq!(config.start_iteration_roundup(), None);
        assert_eq!(config.start_time_ms(), NOW + 7_000);
        assert_eq!(config.scope_profiler_max_scopes(), 1500);
        assert!(config.is_trace_request());

        let err = parse(&format!("PROFILE_START_TIME={}", NOW - 20_000)).unwrap_err();
        assert_eq!(err.line, 1);
        assert!(
            err.to_string()
                .starts_with("line 1: PROFILE_START_TIME: start time"),
            "{err}"
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Lines built from real keys and tricky values, to reach deep into the parser.
        fn config_text() -> impl Strategy<Value = String> {
            let key = prop::sample::select(vec![
                "ACTIVITY_TYPES",
                "ACTIVITIES_ENABLED",
                "ACTIVITIES_DURATION_SECS",
                "PROFILE_START_TIME",
                "PROFILE_START_ITERATION_ROUNDUP",
                "ACTIVITIES_LOG_FILE",
                "XPUPTI_PROFILER_MAX_SCOPES",
                "VERBOSE_LOG_MODULES",
                "unknown",
                "",
            ]);
            let value = prop::string::string_regex("[-+0-9a-zA-Z_,./ \t\r#=é]{0,24}").unwrap();
            prop::collection::vec((key, value), 0..8).prop_map(|lines| {
                lines
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
        }

        proptest! {
            #[test]
            fn arbitrary_text_never_panics(text in any::<String>()) {
                let mut config = Config::default();
                let _ = apply(&mut config, &text);
                let _ = apply_on_demand(&mut config, &text, "/tmp/");
            }

            #[test]
            fn a_failed_apply_changes_nothing(first in config_text(), second in config_text()) {
                let mut config = Config::default();
                let _ = apply(&mut config, &first);
                let before = config.clone();
                match apply(&mut config, &second) {
                    Ok(_) => prop_assert!(!config.activity_types().is_empty()),
                    Err(err) => {
                        prop_assert_eq!(&config, &before);
                        prop_assert!(err.line >= 1);
                        let prefix = format!("line {}: ", err.line);
                        prop_assert!(err.to_string().starts_with(&prefix));
                    }
                }
            }
        }
    }
}
