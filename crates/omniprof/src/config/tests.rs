use std::time::Duration;

use serde_json::json;

use super::parse::{trim, ApplyContext};
use super::*;
use crate::{ActivitySet, ActivityType};
use ActivityType::*;

/// A fixed parse time, so start-time vectors are exact.
const NOW: i64 = 1_700_000_000_000;

fn ctx() -> ApplyContext<'static> {
    ApplyContext {
        now_ms: NOW,
        on_demand_dir: None,
        refuse_log_file: false,
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
        parse("XPUPTI_PROFILER_METRICS=metric1\nXPUPTI_PROFILER_ENABLE_PER_KERNEL=false").unwrap();
    assert_eq!(config.scope_profiler_max_scopes(), 10);
    let config =
        parse("XPUPTI_PROFILER_METRICS=metric2\nXPUPTI_PROFILER_ENABLE_PER_KERNEL=true").unwrap();
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
fn scope_profiler_keys_have_xpu_and_cupti_spellings() {
    for prefix in ["SCOPE_PROFILER", "XPUPTI_PROFILER", "CUPTI_PROFILER"] {
        let config = parse(&format!(
            "{prefix}_METRICS = flops, elements\n{prefix}_ENABLE_PER_KERNEL = yes"
        ))
        .unwrap();
        assert_eq!(config.scope_profiler_metrics(), ["flops", "elements"]);
        assert!(config.scope_profiler_per_kernel());
        assert_eq!(config.scope_profiler_max_scopes(), 1500, "{prefix}");
    }
    for key in [
        "SCOPE_PROFILER_MAX_SCOPES",
        "XPUPTI_PROFILER_MAX_SCOPES",
        "CUPTI_PROFILER_MAX_RANGES",
    ] {
        assert_eq!(
            parse(&format!("{key}=7"))
                .unwrap()
                .scope_profiler_max_scopes(),
            7
        );
        assert!(parse(&format!("{key}=-7")).is_err());
    }
    let config = parse("PERF_EVENTS = task-clock, page-faults").unwrap();
    assert_eq!(config.perf_events(), ["task-clock", "page-faults"]);
    assert_eq!(
        parse("OMNIPROF_PM_SAMPLING_PERIOD_USECS=250")
            .unwrap()
            .pm_sampling_period_us(),
        250
    );
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
        parse("CLIENT_INTERFACE_ENABLE_OP_INPUTS_COLLECTION=1\nPYTHON_STACK_TRACE=yes").unwrap();
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
            refuse_log_file: false,
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

#[test]
fn strict_on_demand_log_file_is_refused_naming_path_and_directory() {
    for (value, why) in [
        (
            "/etc/cron.d/payload",
            "outside the allowed directory \"/tmp/\"",
        ),
        (
            "/tmp/../etc/x.json",
            "contains \"..\" (must stay inside the allowed directory \"/tmp/\")",
        ),
    ] {
        let mut config = Config::default();
        let err = config
            .apply_with(
                &format!("ACTIVITIES_DURATION_MSECS=10\nACTIVITIES_LOG_FILE={value}"),
                &ApplyContext {
                    now_ms: NOW,
                    on_demand_dir: Some("/tmp"),
                    refuse_log_file: true,
                },
            )
            .unwrap_err();
        assert_eq!(err.line, 2);
        assert_eq!(
            err.to_string(),
            format!("line 2: ACTIVITIES_LOG_FILE: log file {value:?} refused: {why}")
        );
        assert_eq!(config, Config::default(), "nothing applied");
    }
}

#[test]
fn unset_start_time_follows_the_layered_warmup() {
    // A base config validated first, then a request with a longer warm-up: the derived start
    // leaves that warm-up, instead of keeping the base's.
    let mut config = parse("ACTIVITIES_DURATION_MSECS=10").unwrap();
    assert_eq!(config.start_time_ms(), NOW + 7_000);
    apply(&mut config, "ACTIVITIES_WARMUP_PERIOD_SECS=30").unwrap();
    assert_eq!(config.start_time_ms(), NOW + 32_000);
    // A given start stays through later layers.
    apply(&mut config, &format!("PROFILE_START_TIME={}", NOW + 50_000)).unwrap();
    apply(&mut config, "ACTIVITIES_WARMUP_PERIOD_SECS=1").unwrap();
    assert_eq!(config.start_time_ms(), NOW + 50_000);
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
    let text = "EVENTS=a\nMETRICS=x\nREQUEST_TIMESTAMP=5\nENABLE_SIGUSR2=1";
    let warnings = apply(&mut config, text).unwrap();
    assert_eq!(
        warnings
            .iter()
            .map(|w| (w.line, w.key.as_str()))
            .collect::<Vec<_>>(),
        [
            (1, "EVENTS"),
            (2, "METRICS"),
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
        OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=1024\n\
        OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS=2500\n\
        OMNIPROF_STUBS_ELAPSED_TIMEOUT_MSECS=1500\n\
        OMNIPROF_PRIVATEUSE1_STUBS=true\n\
        OMNIPROF_PRIVATEUSE1_PROFILER=false\n\
        OMNIPROF_CUPTI_EXTERNAL_CORRELATION=1\n\
        OMNIPROF_MAX_EVENTS_PER_BACKEND=5000";
    let mut config = Config::default();
    // Every key is accepted; those omniprof does not act on say so, and only those.
    let warnings = apply(&mut config, text).unwrap();
    let unsupported: Vec<&str> = warnings.iter().map(|w| w.key.as_str()).collect();
    assert_eq!(
        unsupported,
        [
            "REQUEST_GROUP_TRACE_ID",
            "ACTIVITIES_MAX_GPU_BUFFER_SIZE_MB",
            "VERBOSE_LOG_LEVEL",
            "VERBOSE_LOG_MODULES",
            "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS",
            "ENABLE_IPC_FABRIC",
            "CUPTI_PER_THREAD_BUFFER_ENABLED",
            "ROCTRACER_MAX_EVENTS",
        ]
    );
    assert!(warnings.iter().all(|w| w
        .message
        .starts_with("accepted, not supported by omniprof: ")));
    let set: Vec<&str> = config
        .unsupported_settings()
        .iter()
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(
        set, unsupported,
        "all set to something else than their default"
    );
    let json = config.to_json();
    let mut expected = json!({
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
        "OMNIPROF_PLUGIN_CALL_TIMEOUT_MSECS": 2500,
        "OMNIPROF_MAX_EVENTS_PER_BACKEND": 5000,
        "OMNIPROF_PM_SAMPLING_PERIOD_USECS": 1000,
        "SCOPE_PROFILER_METRICS": [],
        "SCOPE_PROFILER_ENABLE_PER_KERNEL": false,
        "SCOPE_PROFILER_MAX_SCOPES": 0,
        "PERF_EVENTS": [],
        "OMNIPROF_PERF_EVENTS_PERIOD_USECS": 1000,
    });
    // Past what one json! literal can hold.
    expected["OMNIPROF_STUBS_ELAPSED_TIMEOUT_MSECS"] = json!(1500);
    expected["OMNIPROF_PRIVATEUSE1_STUBS"] = json!(true);
    expected["OMNIPROF_CAPTURE_OVERLOAD_NAMES"] = json!(false);
    expected["OMNIPROF_PRIVATEUSE1_PROFILER"] = json!(false);
    expected["OMNIPROF_CUPTI_EXTERNAL_CORRELATION"] = json!(true);
    assert_eq!(json, expected);
    assert_eq!(config.max_gpu_buffer_bytes(), 64 << 20);
    assert_eq!(config.verbose_log_modules(), ["a.cpp", "b.cpp"]);
    assert_eq!(
        config.plugin_call_timeout(),
        std::time::Duration::from_millis(2500)
    );
    assert_eq!(config.max_events_per_backend(), 5000);
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
    assert_eq!(config.max_host_records_per_thread(), 16_777_216);
    assert!(!config.cupti_external_correlation());
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
