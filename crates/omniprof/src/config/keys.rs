//! The config keys, each declared once, and the [`Config`] that holds their values.
//!
//! An entry of the table below holds everything about a key: its name and other spellings,
//! its grammar, its default, the field and accessor that hold it, and what setting or reading
//! it does beyond storing the value. The parser, the accessors and the key's place in
//! [`Config::to_json`] are expanded from it, so they cannot drift apart, and adding a key is
//! adding an entry.

use std::time::Duration;

use super::error::ConfigErrorReason;
use super::log_file::{has_scheme, LogFile};
use super::on_demand::{check_on_demand_log_file, MAX_REQUEST_AGE_MS, MAX_START_AHEAD_MS};
use super::parse::{
    Activities, Applied, ApplyContext, Bool, Grammar, List, LogPath, Msecs, OptionalU32, Secs,
    Text, I32, I64, U32, U64,
};
use crate::{ActivitySet, ActivityType};

/// Expands the key table. An entry is
///
/// ```text
/// /// The accessor's doc, after "`KEY`:".
/// KEY: Grammar | OTHER_SPELLING: Grammar = default => accessor() -> Type, on_set f, resolve g;
/// ```
///
/// Every spelling becomes a `&str` constant of that name. `=> field` without `() -> Type`
/// declares the field only, for a key whose accessor means more than the key and is written
/// by hand. The optional hooks:
///
/// - `on_set f`: `f(&mut Config, &value, &ApplyContext) -> Result<Applied, ConfigErrorReason>`
///   runs with each parsed value before it is stored; [`Applied::Ignored`] keeps the old one.
/// - `resolve g`: `g(&Config) -> value` is the effective value the accessor and the JSON view
///   show, for a default that depends on other keys.
/// - `unsupported "why"`: omniprof accepts and stores the key (Kineto's clients set it) but
///   has nothing it drives; setting it warns "accepted, not supported by omniprof: why", and
///   [`Config::unsupported_settings`] lists it while its value is not the default.
macro_rules! config_keys {
    ($(
        #[doc = $summary:literal]
        $(#[doc = $doc:literal])*
        $key:ident: $grammar:ident $(| $alias:ident: $alias_grammar:ident)* = $default:expr
            => $field:ident $(() -> $out:ty)?
            $(, on_set $on_set:path)?
            $(, resolve $resolve:path)?
            $(, unsupported $why:literal)?;
    )*) => {
        $(
            // `pub` so that `config` can re-export the keys code outside the parser writes;
            // the others stay inside the crate.
            #[doc = concat!("The key `", stringify!($key), "`.")]
            #[allow(unreachable_pub)]
            pub const $key: &str = stringify!($key);
            $(
                #[doc = concat!("The key `", stringify!($alias), "`.")]
                #[allow(unreachable_pub)]
                pub const $alias: &str = stringify!($alias);
            )*
        )*

        /// The value of every key, as set; the entries of the table say what each field holds.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub(super) struct Values {
            $(pub(super) $field: <$grammar as Grammar>::Value,)*
        }

        impl Default for Values {
            fn default() -> Self {
                Self {
                    $($field: $default,)*
                }
            }
        }

        impl Config {
            $(
                config_keys!(@accessor $grammar, $field, [$($out)?], [$($resolve)?],
                    #[doc = concat!(
                        "`", stringify!($key), "`",
                        $(" / `", stringify!($alias), "`",)*
                        ":", $summary
                    )]
                    $(#[doc = $doc])*
                );
            )*

            /// The keys omniprof accepts but does not act on that are set to something else
            /// than their default, each with why it has no effect: what a session warns
            /// about when it starts.
            ///
            /// ```
            /// let config = omniprof::Config::parse("REQUEST_GROUP_TRACE_ID=G").unwrap();
            /// assert_eq!(config.unsupported_settings()[0].0, "REQUEST_GROUP_TRACE_ID");
            /// ```
            pub fn unsupported_settings(&self) -> Vec<(&'static str, &'static str)> {
                let defaults = Values::default();
                let mut set = Vec::new();
                $($(
                    if self.values.$field != defaults.$field {
                        set.push(($key, $why));
                    }
                )?)*
                set
            }

            /// Applies one `KEY=VALUE`; `None` when no key is spelled `key`.
            pub(super) fn set_key(
                &mut self,
                key: &str,
                text: &str,
                ctx: &ApplyContext<'_>,
            ) -> Result<Option<Applied>, ConfigErrorReason> {
                $(
                    config_keys!(@set self, key, text, ctx, $field, [$($on_set)?],
                        [$($why)?], $key: $grammar $(, $alias: $alias_grammar)*);
                )*
                Ok(None)
            }

            /// Adds each key's value under its name, in table order.
            pub(super) fn insert_keys(
                &self,
                json: &mut serde_json::Map<String, serde_json::Value>,
            ) {
                $(
                    let value = config_keys!(@value self, $field, [$($resolve)?]);
                    if let Some(value) = <$grammar as Grammar>::json(value) {
                        json.insert($key.to_owned(), value);
                    }
                )*
            }
        }
    };

    // Helpers of the arm above.

    (@accessor $grammar:ident, $field:ident, [], $resolve:tt, $(#[$doc:meta])*) => {};
    (@accessor $grammar:ident, $field:ident, [$out:ty], $resolve:tt, $(#[$doc:meta])*) => {
        $(#[$doc])*
        pub fn $field(&self) -> $out {
            <$grammar as Grammar>::get(config_keys!(@value self, $field, $resolve))
        }
    };

    (@value $config:ident, $field:ident, []) => {
        &$config.values.$field
    };
    (@value $config:ident, $field:ident, [$resolve:path]) => {
        &$resolve($config)
    };

    (@set $config:ident, $key:ident, $text:ident, $ctx:ident, $field:ident, $on_set:tt,
        $why:tt, $($name:ident: $grammar:ident),+) => {
        $(
            if $key == $name {
                let value = <$grammar as Grammar>::parse($text)?;
                let applied = config_keys!(@store $config, $ctx, $field, value, $on_set);
                return Ok(Some(config_keys!(@unsupported applied, $why)));
            }
        )+
    };

    (@unsupported $applied:ident, []) => {
        $applied
    };
    (@unsupported $applied:ident, [$why:literal]) => {
        match $applied {
            Applied::Set => Applied::Unsupported($why),
            other => other,
        }
    };

    (@store $config:ident, $ctx:ident, $field:ident, $value:ident, []) => {{
        $config.values.$field = $value;
        Applied::Set
    }};
    (@store $config:ident, $ctx:ident, $field:ident, $value:ident, [$on_set:path]) => {{
        let applied = $on_set($config, &$value, $ctx)?;
        if matches!(applied, Applied::Set) {
            $config.values.$field = $value;
        }
        applied
    }};
}

config_keys! {
    /// the master switch, read through [`Config::activities_enabled`], which also counts a
    /// trace request.
    ACTIVITIES_ENABLED: Bool = true => activities_enabled;

    /// exactly the types named (generic names stored as their representative). Ask
    /// [`ActivitySet::enabled`] for class gating.
    ACTIVITY_TYPES: Activities = ActivitySet::empty() => activity_types() -> ActivitySet;

    /// how long a time-based trace collects.
    ACTIVITIES_DURATION_MSECS: Msecs | ACTIVITIES_DURATION_SECS: Secs = Duration::from_millis(500)
        => activities_duration() -> Duration, on_set request_trace;

    /// warmup before a time-based start.
    ACTIVITIES_WARMUP_PERIOD_SECS: Secs = Duration::from_secs(5)
        => warmup_duration() -> Duration;

    /// warmup steps before an iteration-based start.
    ACTIVITIES_WARMUP_ITERATIONS: U32 = 0 => warmup_iterations() -> u32;

    /// steps to collect (0 = time-based).
    ACTIVITIES_ITERATIONS: U32 = 0 => iterations() -> u32, on_set request_trace;

    /// the start in ms since the Unix epoch; after validation never 0 (an unset start
    /// becomes parse time + warmup + 2 s).
    PROFILE_START_TIME: I64 = 0 => start_time_ms() -> i64, on_set check_start_time;

    /// the step to start at, if set. It takes effect only when
    /// [`Config::has_start_iteration`].
    PROFILE_START_ITERATION: OptionalU32 = None => start_iteration() -> Option<u32>;

    /// start on the next multiple of this step count. Never `Some(0)` after validation.
    PROFILE_START_ITERATION_ROUNDUP: OptionalU32 = None
        => start_iteration_roundup() -> Option<u32>;

    /// the output path as stored: as given, or Kineto's default for this process,
    /// `/tmp/libkineto_activities_<pid>.json` (`/tmp/memory_snapshot_<pid>.pickle` in
    /// memory-snapshot mode). [`Config::log_file_url`] says where the trace goes.
    ACTIVITIES_LOG_FILE: LogPath = LogFile::trace_default()
        => log_file() -> &str, on_set check_log_file;

    /// written as trace metadata `trace_id` (empty = none).
    REQUEST_TRACE_ID: Text = String::new() => trace_id() -> &str;

    /// group id of a multi-process request (empty = none).
    REQUEST_GROUP_TRACE_ID: Text = String::new() => group_trace_id() -> &str,
        unsupported "no multi-process trace groups";

    /// device buffer budget in MiB.
    ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB: U32 = 128 => max_gpu_buffer_mb() -> u32,
        unsupported "backends size their own buffers";

    /// write streams' waits on events (`Stream Wait Event`; the CUDA backend writes those of
    /// streams that ran work).
    ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS: Bool = true
        => display_cuda_sync_wait_events() -> bool;

    /// opaque text for custom backends.
    CUSTOM_CONFIG: Text = String::new() => custom_config() -> &str;

    /// the client records op input shapes (the second spelling is deprecated): the Python
    /// package's PyTorch op observer records `Input Dims` when it is set; Rust code attaches
    /// shapes to its own ops (`with_input_shapes`).
    PROFILE_REPORT_INPUT_SHAPES: Bool | CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION: Bool = false
        => report_input_shapes() -> bool;

    /// the client records allocations into the trace: the Python package's PyTorch op
    /// observer records PyTorch's allocator reports as `[memory]` instants.
    PROFILE_PROFILE_MEMORY: Bool = false => profile_memory() -> bool;

    /// the client records op call stacks (the second spelling is deprecated): the Python
    /// package's tracer records Python calls as `python_function` events and each op's
    /// `Call stack`.
    PROFILE_WITH_STACK: Bool | PYTHON_STACK_TRACE: Bool = false => with_stack() -> bool;

    /// the client estimates op FLOPs: the Python package's PyTorch op observer writes
    /// PyTorch's count as each op's `flops` arg (and records shapes).
    PROFILE_WITH_FLOPS: Bool = false => with_flops() -> bool;

    /// the client records the module hierarchy of ops: the Python package's PyTorch op
    /// observer writes TorchScript's (`Module Hierarchy`), as torch.profiler's `with_modules`
    /// does (eager `nn.Module` calls come with `PROFILE_WITH_STACK`).
    PROFILE_WITH_MODULES: Bool = false => with_modules() -> bool;

    /// take a memory snapshot instead of a trace.
    PROFILE_MEMORY: Bool = false => memory_snapshot() -> bool, on_set snapshot_output;

    /// how long a memory snapshot records.
    PROFILE_MEMORY_DURATION_MSECS: Msecs = Duration::from_millis(1000)
        => memory_snapshot_duration() -> Duration, unsupported "no memory snapshots";

    /// verbose log level (−1 = off).
    VERBOSE_LOG_LEVEL: I32 = -1 => verbose_log_level() -> i32,
        unsupported "logging goes through the `log` crate (RUST_LOG, -v)";

    /// source files verbose logging is restricted to (empty = all).
    VERBOSE_LOG_MODULES: List = Vec::new() => verbose_log_modules() -> &[String],
        unsupported "logging goes through the `log` crate (RUST_LOG, -v)";

    /// how often the daemon is polled while idle.
    ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS: Secs = Duration::from_secs(5)
        => on_demand_update_interval() -> Duration,
        unsupported "on-demand requests arrive on a socket, not by polling";

    /// use the Dynolog IPC channel; defaults to whether `KINETO_USE_DAEMON` is set.
    ENABLE_IPC_FABRIC: Bool = std::env::var_os("KINETO_USE_DAEMON").is_some()
        => ipc_fabric() -> bool, unsupported "no Dynolog IPC (omniprof trigger instead)";

    /// per-thread CUPTI activity buffers (CUDA).
    CUPTI_PER_THREAD_BUFFER_ENABLED: Bool = false => cupti_per_thread_buffer() -> bool,
        unsupported "no CUDA backend";

    /// metrics for `hardware_counters`.
    CUPTI_PM_SAMPLING_METRICS: List = Vec::new() => pm_sampling_metrics() -> &[String];

    /// the device PM sampling reads; `None` means the sampler refuses to run.
    CUPTI_PM_SAMPLING_DEVICE_ID: OptionalU32 = None => pm_sampling_device_id() -> Option<u32>;

    /// roctracer's event limit (ROCm).
    ROCTRACER_MAX_EVENTS: U32 = 5_000_000 => roctracer_max_events() -> u32,
        unsupported "no ROCm backend";

    /// (omniprof's own) per-thread cap of host records; a range uses two records, an
    /// instant one. 16 bytes a record, allocated as used: the default (256 MiB at most per
    /// thread) holds millions of ops, more than a profiled window of training steps makes.
    OMNIPROF_MAX_HOST_RECORDS_PER_THREAD: U64 = 16_777_216
        => max_host_records_per_thread() -> u64;

    /// (omniprof's own) how long one call into a dynamic plugin (create, start, stop,
    /// processEvents, destroy) may run before the plugin is abandoned for the rest of the
    /// process.
    OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS: Msecs = Duration::from_secs(10)
        => plugin_call_timeout() -> Duration;

    /// (omniprof's own) time every op through the PyTorch PrivateUse1 backend's profiler
    /// stubs (the Python package's bridge, as `use_device` does in PyTorch's legacy
    /// profiler); the Python package sets it for a session that selects
    /// `ProfilerActivity.PrivateUse1`.
    OMNIPROF_PRIVATEUSE1_STUBS: Bool = false => privateuse1_stubs() -> bool;

    /// (omniprof's own) the Python package's PyTorch op observer records each ATen op's
    /// overload name (`Overload Name`), as torch.profiler does with
    /// `_ExperimentalConfig(capture_overload_names=True)`, which sets it.
    OMNIPROF_CAPTURE_OVERLOAD_NAMES: Bool = false => capture_overload_names() -> bool;

    /// (omniprof's own) let the Kineto profiler a PyTorch PrivateUse1 backend registered
    /// (`REGISTER_PRIVATEUSE1_PROFILER`) record its device, as torch.profiler does; the
    /// profiler stubs then time ops only where no such profiler is registered. The Python
    /// package clears it for `use_device=`, which times ops through the stubs alone, as
    /// PyTorch's legacy profiler does.
    OMNIPROF_PRIVATEUSE1_PROFILER: Bool = true => privateuse1_profiler() -> bool;

    /// (omniprof's own) how long resolving the device times of a profiler-stubs session
    /// (every `elapsed` call, at the trace's processing) may take; past it the rest of the
    /// ops go without device time and the trace's `backend_errors` says so.
    OMNIPROF_STUBS_ELAPSED_TIMEOUT_MSECS: Msecs = Duration::from_secs(10)
        => stubs_elapsed_timeout() -> Duration;

    /// (omniprof's own) events one backend may hand over per trace (Kineto bounds its
    /// device buffers the same way); the rest are dropped and counted.
    OMNIPROF_MAX_EVENTS_PER_BACKEND: U64 = 1_000_000 => max_events_per_backend() -> u64;

    /// (omniprof's own) link CUDA device work to the host op that launched it through
    /// CUPTI's external correlation: the op's and user range's correlation ids pushed to
    /// CUPTI around every op and user range (two CUPTI calls each), as Kineto does. Off, the
    /// CUDA backend calls CUPTI for no op and links each launch to the innermost op open on
    /// its thread at its time, which the recorder knows (`docs/cuda.md`, "How kernels link to
    /// ops"); it takes the external correlation anyway where the session records no runtime
    /// or no driver calls, whose records give a launch's thread and time.
    OMNIPROF_CUPTI_EXTERNAL_CORRELATION: Bool = false => cupti_external_correlation() -> bool;

    /// (omniprof's own) the length of a device's PM counter sampling intervals (the
    /// `gpu_pm_counter` types), in microseconds.
    OMNIPROF_PM_SAMPLING_PERIOD_USECS: U64 = 1_000 => pm_sampling_period_us() -> u64;

    // The scope profiler, made device-agnostic: Kineto's XPU feature config
    // (`xpupti_scope_profiler`) and the removed CUPTI range profiler's keys are other
    // spellings of the same settings.

    /// hardware metrics the scope profiler collects per kernel (empty = every metric the
    /// devices offer).
    SCOPE_PROFILER_METRICS: List | XPUPTI_PROFILER_METRICS: List
        | CUPTI_PROFILER_METRICS: List = Vec::new() => scope_profiler_metrics() -> &[String];

    /// one scope per kernel.
    SCOPE_PROFILER_ENABLE_PER_KERNEL: Bool | XPUPTI_PROFILER_ENABLE_PER_KERNEL: Bool
        | CUPTI_PROFILER_ENABLE_PER_KERNEL: Bool = false => scope_profiler_per_kernel() -> bool;

    /// how many kernels get metrics; further kernels get none and are counted. When unset
    /// (0), Kineto's client default: 1500 per-kernel, else 10.
    SCOPE_PROFILER_MAX_SCOPES: U64 | XPUPTI_PROFILER_MAX_SCOPES: U64
        | CUPTI_PROFILER_MAX_RANGES: U64 = 0
        => scope_profiler_max_scopes() -> u64, resolve scope_buffer_size;

    /// host perf counters (Linux `perf_event_open`) counted per recording thread, by name:
    /// `cycles`, `instructions`, `cache-misses`, `task-clock`, `page-faults`,
    /// `context-switches`, ... (`omniprof::PERF_EVENT_NAMES`).
    PERF_EVENTS: List = Vec::new() => perf_events() -> &[String], on_set check_perf_events;

    /// (omniprof's own) how often the host perf counters are sampled, in microseconds.
    OMNIPROF_PERF_EVENTS_PERIOD_USECS: U64 = 1_000 => perf_events_period_us() -> u64;
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
///
/// [`ConfigError`]: super::ConfigError
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Every key's value; the key table (`keys.rs`) declares the fields and their accessors.
    pub(super) values: Values,
    /// Set by a key that asks for a trace (duration, iterations, log file).
    pub(super) trace_request: bool,
    /// Whether `PROFILE_START_TIME` was given (non-zero). An unset start is derived again at
    /// every validation, so a text layered on top (an on-demand request over the base config)
    /// gets its start from its own parse time and its own warm-up.
    pub(super) start_time_given: bool,
}

impl Config {
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

/// Marks a trace request: the duration, iteration and log-file keys ask for a trace.
fn request_trace<T>(
    config: &mut Config,
    _: &T,
    _: &ApplyContext<'_>,
) -> Result<Applied, ConfigErrorReason> {
    config.trace_request = true;
    Ok(Applied::Set)
}

/// Refuses a `PROFILE_START_TIME` more than [`MAX_REQUEST_AGE_MS`] before the parse (a stale
/// request) and, in an on-demand config, one more than [`MAX_START_AHEAD_MS`] after it; 0
/// means unset (validation fills it in).
fn check_start_time(
    config: &mut Config,
    &start_ms: &i64,
    ctx: &ApplyContext<'_>,
) -> Result<Applied, ConfigErrorReason> {
    let now_ms = ctx.now_ms;
    if start_ms != 0 && now_ms.saturating_sub(start_ms) > MAX_REQUEST_AGE_MS {
        return Err(ConfigErrorReason::StartTimeInPast { start_ms, now_ms });
    }
    if ctx.on_demand_dir.is_some() && start_ms.saturating_sub(now_ms) > MAX_START_AHEAD_MS {
        return Err(ConfigErrorReason::StartTimeBeyondHorizon { start_ms, now_ms });
    }
    config.start_time_given = start_ms != 0;
    Ok(Applied::Set)
}

/// `ACTIVITIES_LOG_FILE` asks for a trace, even when an on-demand path is refused (as in
/// Kineto); an on-demand path outside the allowed directory is ignored with a warning, or
/// refused when the context says so.
fn check_log_file(
    config: &mut Config,
    log_file: &LogFile,
    ctx: &ApplyContext<'_>,
) -> Result<Applied, ConfigErrorReason> {
    request_trace(config, log_file, ctx)?;
    let Some(dir) = ctx.on_demand_dir else {
        return Ok(Applied::Set);
    };
    let path = log_file.path();
    Ok(match check_on_demand_log_file(path, dir) {
        Ok(()) => Applied::Set,
        Err(why) if ctx.refuse_log_file => {
            return Err(ConfigErrorReason::LogFileNotAllowed {
                path: path.to_owned(),
                why,
            })
        }
        Err(why) => Applied::Ignored(format!(
            "ignoring on-demand log file {path:?}: {why}; keeping {:?}",
            config.log_file()
        )),
    })
}

/// As in Kineto, turning snapshot mode on moves the output to the snapshot default (a later
/// `ACTIVITIES_LOG_FILE` still wins); turning it off leaves the path alone.
fn snapshot_output(
    config: &mut Config,
    &on: &bool,
    _: &ApplyContext<'_>,
) -> Result<Applied, ConfigErrorReason> {
    if on {
        config.values.log_file = LogFile::memory_snapshot_default();
    }
    Ok(Applied::Set)
}

/// Refuses a perf event name omniprof does not know, listing the ones it does.
fn check_perf_events(
    _: &mut Config,
    names: &[String],
    _: &ApplyContext<'_>,
) -> Result<Applied, ConfigErrorReason> {
    match names
        .iter()
        .find(|n| crate::perf_event::perf_event_by_name(n).is_none())
    {
        Some(name) => Err(ConfigErrorReason::PerfEvent {
            name: name.clone(),
            known: crate::perf_event::PERF_EVENT_NAMES.join(", "),
        }),
        None => Ok(Applied::Set),
    }
}

/// The scope buffer size with Kineto's client defaults applied. Resolved when read rather
/// than once at validation, so a later text that turns on per-kernel scopes still gets 1500.
fn scope_buffer_size(config: &Config) -> u64 {
    let values = &config.values;
    match values.scope_profiler_max_scopes {
        0 if !values.scope_profiler_metrics.is_empty() && values.scope_profiler_per_kernel => 1500,
        0 if !values.scope_profiler_metrics.is_empty() => 10,
        n => n,
    }
}
