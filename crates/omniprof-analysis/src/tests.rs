use omniprof_test_support::data::{reference_table, reference_trace as pytorch_path};

use super::*;
use crate::key_averages::us;
use crate::render::table;
use omniprof_read::TraceReader;
use omniprof_trace::Trace;
use omniprof_trace::Value;
use omniprof_trace::{Activity, ActivityType, Flow, FlowKind};
use std::collections::HashMap;

fn pytorch_trace() -> Trace {
    TraceReader::new()
        .read_path(pytorch_path())
        .into_trace()
        .unwrap()
}

fn options(sort_by: Option<SortKey>, row_limit: Option<usize>) -> TableOptions {
    TableOptions {
        sort_by,
        row_limit,
        ..Default::default()
    }
}

#[test]
fn the_pytorch_trace_prints_pytorchs_table() {
    let summary = key_averages(&pytorch_trace(), &Default::default());
    let table = summary.table(&options(Some(SortKey::CpuTimeTotal), Some(12)));
    assert_eq!(table, reference_table(), "got:\n{table}");
    // 18 rows in all; the widest name (`aten::resolve_conj`) is not printed above.
    assert_eq!(summary.rows.len(), 18);
    let sum = summary
        .rows
        .iter()
        .find(|r| &*r.name == "aten::sum")
        .unwrap();
    assert_eq!((sum.count, sum.cpu_time_total_ns), (3, 19_375_609));
}

/// Two calls whose exact average ends in a half (173.0995 µs): PyTorch sums each call's
/// float microseconds (end and start relative to the trace's start, divided by 1000, then
/// subtracted) and prints `173.099us`; the exact nanosecond sum would print `173.100us`.
/// Device time the same way: 125.1355 µs prints as PyTorch's `125.136us`.
#[test]
fn averages_that_end_in_a_half_round_as_pytorchs() {
    let mut t = Trace::new(0, 1_000_000);
    t.activities.push(Activity::new(
        ActivityType::UserAnnotation,
        "step",
        1,
        1,
        0,
        500_000,
    ));
    for (corr, (start, end), kernel) in [
        (1, (36_020, 198_456), (9_870, 140_268)),
        (2, (224_482, 408_245), (181_874, 301_747)),
    ] {
        let mut op = Activity::new(ActivityType::CpuOp, "aten::add", 1, 1, start, end);
        op.correlation = corr;
        t.activities.push(op);
        let mut k = Activity::new(
            ActivityType::ConcurrentKernel,
            "add_kernel",
            0,
            7,
            kernel.0,
            kernel.1,
        );
        k.linked_correlation = Some(corr);
        t.activities.push(k);
    }
    t.activities
        .sort_by_key(|a| (a.start_ns, std::cmp::Reverse(a.end_ns)));
    let summary = key_averages(&t, &Default::default());
    let row = |name: &str| summary.rows.iter().find(|r| &*r.name == name).unwrap();
    let add = row("aten::add");
    assert_eq!(add.cpu_time_total_ns, 346_199);
    assert_eq!(table::format_time(add.cpu_time_avg_us()), "173.099us");
    assert_eq!(
        table::format_time(us(add.cpu_time_total_ns) / 2.0),
        "173.100us"
    );
    assert_eq!(add.device_time_total_ns, 250_271);
    assert_eq!(table::format_time(add.device_time_avg_us()), "125.136us");
    assert_eq!(
        table::format_time(us(add.device_time_total_ns) / 2.0),
        "125.135us"
    );
    assert_eq!(
        table::format_time(row("add_kernel").device_time_avg_us()),
        "125.136us"
    );
    let printed = summary.table(&options(None, None));
    let line = printed
        .lines()
        .find(|l| l.trim_start().starts_with("aten::add"))
        .unwrap();
    assert!(
        line.contains("173.099us") && line.contains("125.136us"),
        "{printed}"
    );
}

/// Two rows whose self CPU times are both 3,685 ns: PyTorch's floats (end and start, late in
/// the trace, divided by 1000 and then subtracted) are 3.684999… for the first and
/// 3.685000… for the second, so its table sorted by self CPU time lists the second first,
/// where the exact nanoseconds (a tie, which the sort keeps in order) would not.
#[test]
fn rows_whose_nanoseconds_tie_sort_by_pytorchs_floats() {
    const LATE: i64 = 5_716_463_808_357;
    let at = |name: &str, start: i64, end: i64| {
        Activity::new(ActivityType::CpuOp, name, 1, 1, start, end)
    };
    let t = trace(vec![
        at("trace start", 0, 1_000),
        at("first", LATE, LATE + 3_685),
        at("second", LATE + 10_001, LATE + 10_001 + 3_685),
        at("parent", LATE + 20_000, LATE + 40_000),
        at("child", LATE + 21_000, LATE + 22_001),
        at("child", LATE + 23_003, LATE + 24_500),
    ]);
    let summary = key_averages(&t, &Default::default());
    let row = |name: &str| summary.rows.iter().find(|r| &*r.name == name).unwrap();
    let (first, second) = (row("first"), row("second"));
    assert_eq!(first.self_cpu_time_total_ns, second.self_cpu_time_total_ns);
    let pytorch = |start: i64, end: i64| end as f64 / 1000.0 - start as f64 / 1000.0;
    assert_eq!(first.self_cpu_time_total_us, pytorch(LATE, LATE + 3_685));
    assert!(first.self_cpu_time_total_us < second.self_cpu_time_total_us);
    // Self = total less the children's totals summed in order (from 0, as Python's `sum`).
    let children = pytorch(LATE + 21_000, LATE + 22_001) + pytorch(LATE + 23_003, LATE + 24_500);
    assert_eq!(
        row("parent").self_cpu_time_total_us,
        pytorch(LATE + 20_000, LATE + 40_000) - children
    );
    let printed = summary.table(&options(Some(SortKey::SelfCpuTimeTotal), None));
    let names: Vec<&str> = printed
        .lines()
        .skip(3)
        .filter_map(|l| l.split_whitespace().next())
        .take(5)
        .collect();
    assert_eq!(
        names,
        ["parent", "second", "first", "child", "trace"],
        "{printed}"
    );
}

/// The rows of what `read` streams into a builder, read again as often as the builder asks
/// (see [`ReadAgain`]).
fn streamed(read: impl Fn(&mut KeyAveragesBuilder)) -> KeyAverages {
    let mut builder = KeyAveragesBuilder::new(Default::default());
    loop {
        read(&mut builder);
        match builder.finish() {
            Ok(summary) => return summary,
            Err(again) => builder = again.builder(),
        }
    }
}

#[test]
fn streaming_gives_the_same_rows_as_the_trace() {
    let read = |builder: &mut KeyAveragesBuilder| {
        TraceReader::new()
            .stream_path(pytorch_path(), |item| builder.add_item(&item))
            .unwrap();
    };
    // PyTorch writes its profiler's span, where host times count from, after the ops: ops
    // folded before it are read again, knowing it.
    let mut first = KeyAveragesBuilder::new(Default::default());
    read(&mut first);
    let again = first.finish().unwrap_err();
    assert_eq!(again.reason(), &OutOfOrder::OriginMoved);
    let mut second = again.builder();
    read(&mut second);
    let whole = key_averages(&pytorch_trace(), &Default::default());
    assert_eq!(second.finish().unwrap(), whole);
    assert_eq!(streamed(read), whole);
}

#[test]
fn grouping_by_overload_name_splits_rows_and_adds_the_column() {
    let mut trace = Trace::new(0, 1_000_000);
    for (i, (name, overload)) in [
        ("aten::add", Some("Tensor")),
        ("aten::add", Some("Scalar")),
        ("aten::add", Some("Tensor")),
        ("aten::sum", None),
        ("aten::sum", Some("dim_IntList")),
    ]
    .into_iter()
    .enumerate()
    {
        let t = 10_000 * i as i64;
        let mut op = Activity::new(ActivityType::CpuOp, name, 1, 1, t, t + 5_000);
        if let Some(overload) = overload {
            op.args
                .push(("Overload Name".into(), Value::from(overload)));
        }
        trace.activities.push(op);
    }
    let by_overload = KeyAveragesOptions {
        group_by_overload_name: true,
        ..Default::default()
    };
    let rows = |summary: &KeyAverages| -> Vec<(String, Option<String>, u64)> {
        summary
            .rows
            .iter()
            .map(|r| {
                (
                    r.name.to_string(),
                    r.overload_name.as_deref().map(String::from),
                    r.count,
                )
            })
            .collect()
    };
    let grouped = key_averages(&trace, &by_overload);
    let row =
        |name: &str, overload: &str, count| (name.to_owned(), Some(overload.to_owned()), count);
    assert_eq!(
        rows(&grouped),
        [
            row("aten::add", "Tensor", 2),
            row("aten::add", "Scalar", 1),
            row("aten::sum", "", 1),
            row("aten::sum", "dim_IntList", 1),
        ]
    );
    let table = grouped.table(&TableOptions::default());
    let lines: Vec<&str> = table.lines().collect();
    // The column is as wide as the names' (`aten::add` + 4), right-aligned.
    assert!(
        lines[1].starts_with("         Name  Overload Name    Self CPU %"),
        "{table}"
    );
    assert!(
        lines[3].starts_with("    aten::add         Tensor  "),
        "{table}"
    );
    assert!(
        lines[5].starts_with("    aten::sum                       20.00%"),
        "{table}"
    );
    // Not grouped: one row per name, no column, as PyTorch prints it.
    let plain = key_averages(&trace, &Default::default());
    assert_eq!(
        rows(&plain),
        [
            ("aten::add".to_owned(), None, 3),
            ("aten::sum".to_owned(), None, 2)
        ]
    );
    assert!(!plain
        .table(&TableOptions::default())
        .contains("Overload Name"));

    // Each event has its own, as PyTorch's `events()` (`""` for the default overload), and
    // their table the column.
    let events = function_events(&trace, &Default::default());
    let overloads: Vec<&str> = events.events.iter().map(|e| &*e.overload_name).collect();
    assert_eq!(overloads, ["Tensor", "Scalar", "Tensor", "", "dim_IntList"]);
    let table = events.table(&TableOptions::default());
    assert!(
        table
            .lines()
            .nth(3)
            .unwrap()
            .starts_with("    aten::add         Tensor  "),
        "{table}"
    );
}

#[test]
fn grouping_by_shapes_splits_rows_and_adds_the_column() {
    let by_shapes = KeyAveragesOptions {
        group_by_input_shapes: true,
        ..Default::default()
    };
    let summary = key_averages(&pytorch_trace(), &by_shapes);
    let strided: Vec<_> = summary
        .rows
        .iter()
        .filter(|r| &*r.name == "aten::as_strided")
        .map(|r| (r.input_shapes.as_deref().unwrap(), r.count))
        .collect();
    assert_eq!(
        strided,
        [
            ("[[], [], [], []]", 3),
            ("[[1, 1], [], [], []]", 3),
            ("[[2, 1, 1], [], [], []]", 3)
        ]
    );
    let table = summary.table(&options(Some(SortKey::CpuTimeTotal), Some(2)));
    let lines: Vec<&str> = table.lines().collect();
    // Widest shapes: `[[2, 1, 1], [1, 1, 1], []]` (26) + 4.
    assert!(
        lines[0].ends_with(&format!("------  {}  ", "-".repeat(30))),
        "{table}"
    );
    assert!(
        lines[1].ends_with("# of Calls                    Input Shapes  "),
        "{table}"
    );
    assert!(lines[3].ends_with("             1                              []  "));
    assert!(lines[4].ends_with("             3        [[256, 256], [256, 256]]  "));
}

/// A host op on (1, tid).
fn op(name: &str, tid: i64, start_us: i64, end_us: i64) -> Activity {
    Activity::new(
        ActivityType::CpuOp,
        name,
        1,
        tid,
        start_us * 1000,
        end_us * 1000,
    )
}

fn trace(activities: Vec<Activity>) -> Trace {
    let mut t = Trace::new(0, 1_000_000);
    t.activities = activities;
    t
}

/// (name, count, self CPU, CPU total, self device, device total) in µs, in row order.
fn rows(summary: &KeyAverages) -> Vec<(&str, u64, i64, i64, i64, i64)> {
    summary
        .rows
        .iter()
        .map(|r| {
            (
                &*r.name,
                r.count,
                r.self_cpu_time_total_ns / 1000,
                r.cpu_time_total_ns / 1000,
                r.self_device_time_total_ns / 1000,
                r.device_time_total_ns / 1000,
            )
        })
        .collect()
}

#[test]
fn ops_nest_per_thread() {
    // Thread 1: a [0, 100] ⊃ b [10, 30], b [40, 50]. Thread 2: b [20, 90] ⊃ c [30, 35];
    // b on thread 2 overlaps a in time but is not its child.
    let t = trace(vec![
        op("a", 1, 0, 100),
        op("b", 1, 10, 30),
        op("b", 2, 20, 90),
        op("c", 2, 30, 35),
        op("b", 1, 40, 50),
    ]);
    let summary = key_averages(&t, &Default::default());
    assert_eq!(
        rows(&summary),
        [
            ("a", 1, 70, 100, 0, 0),
            ("b", 3, 95, 100, 0, 0),
            ("c", 1, 5, 5, 0, 0)
        ]
    );
    assert_eq!(summary.self_cpu_time_total_ns(), 170_000);
}

#[test]
fn an_op_that_outlives_an_open_op_closes_it_as_in_pytorch() {
    // `r` starts inside `a` and ends after it: `a` closes, and `c` [50, 60] is `r`'s child
    // (PyTorch's `EventList._build_tree` gives the same: a 100/100, r 130/140, c 10/10).
    let t = trace(vec![
        op("a", 1, 0, 100),
        Activity::new(ActivityType::UserAnnotation, "r", 1, 1, 10_000, 150_000),
        op("c", 1, 50, 60),
    ]);
    let summary = key_averages(&t, &Default::default());
    assert_eq!(
        rows(&summary),
        [
            ("a", 1, 100, 100, 0, 0),
            ("r", 1, 130, 140, 0, 0),
            ("c", 1, 10, 10, 0, 0)
        ]
    );
    assert!(!summary.rows[1].is_async && summary.rows[1].is_user_annotation);
    assert_eq!(summary.self_cpu_time_total_ns(), 240_000);
}

#[test]
fn a_same_named_only_child_collapses() {
    // sum [0, 100] ⊃ sum [5, 95] ⊃ fill [10, 20]; mean [200, 300] ⊃ {mean, mean}.
    let t = trace(vec![
        op("sum", 1, 0, 100),
        op("sum", 1, 5, 95),
        op("fill", 1, 10, 20),
        op("mean", 1, 200, 300),
        op("mean", 1, 210, 220),
        op("mean", 1, 230, 240),
    ]);
    assert_eq!(
        rows(&key_averages(&t, &Default::default())),
        [
            ("sum", 1, 90, 100, 0, 0),
            ("fill", 1, 10, 10, 0, 0),
            ("mean", 3, 100, 120, 0, 0)
        ]
    );
}

#[test]
fn unfinished_ops_end_at_the_window_end() {
    let mut open = op("open", 1, 100, 100);
    open.args.push(("finished".into(), Value::Bool(false)));
    let mut t = trace(vec![open, op("inner", 1, 200, 300)]);
    t.window.end_ns = 1_000_000;
    assert_eq!(
        rows(&key_averages(&t, &Default::default())),
        [("open", 1, 800, 900, 0, 0), ("inner", 1, 100, 100, 0, 0)]
    );
}

/// A device activity on stream 7 of device 0, linked to `linked`.
fn device(kind: ActivityType, name: &str, start_us: i64, end_us: i64, linked: u64) -> Activity {
    let mut a = Activity::new(kind, name, 0, 7, start_us * 1000, end_us * 1000);
    a.linked_correlation = Some(linked);
    a
}

fn with_correlation(mut a: Activity, correlation: u64) -> Activity {
    a.correlation = correlation;
    a
}

/// `step` [0, 1000] ⊃ `mm` (corr 2) [100, 400] ⊃ `cudaLaunchKernel` [150, 160], and `mm`
/// [500, 900] (corr 3); kernels of 200 and 100 µs for the first `mm`, 300 µs for the second.
fn linked_trace() -> Trace {
    let mut launch = Activity::new(
        ActivityType::CudaRuntime,
        "cudaLaunchKernel",
        1,
        1,
        150_000,
        160_000,
    );
    launch.correlation = 2; // Its own runtime correlation: the same number must not link.
    launch.linked_correlation = Some(2);
    trace(vec![
        with_correlation(
            Activity::new(ActivityType::UserAnnotation, "step", 1, 1, 0, 1_000_000),
            1,
        ),
        with_correlation(op("mm", 1, 100, 400), 2),
        launch,
        device(ActivityType::ConcurrentKernel, "gemm", 200, 400, 2),
        device(ActivityType::GpuMemcpy, "Memcpy DtoD", 410, 510, 2),
        with_correlation(op("mm", 1, 500, 900), 3),
        device(ActivityType::ConcurrentKernel, "gemm", 600, 900, 3),
        device(ActivityType::GpuUserAnnotation, "step", 200, 900, 1),
    ])
}

/// An MTIA-style trace: no `External id` anywhere; each kernel shares its `correlation` with
/// the runtime call that launched it, which runs inside a host op on the same thread.
fn correlation_only_trace() -> Trace {
    let call = |tid: i64, start_us: i64, correlation: u64| {
        let mut a = Activity::new(
            ActivityType::MtiaRuntime,
            "launch",
            1,
            tid,
            start_us * 1000,
            (start_us + 10) * 1000,
        );
        a.correlation = correlation;
        a
    };
    let kernel = |start_us: i64, end_us: i64, correlation: u64| {
        let mut a = Activity::new(
            ActivityType::ConcurrentKernel,
            "k",
            0,
            7,
            start_us * 1000,
            end_us * 1000,
        );
        a.correlation = correlation;
        a
    };
    trace(vec![
        // Thread 1: step ⊃ mm ⊃ launch 11; launch 12 directly in step.
        Activity::new(ActivityType::UserAnnotation, "step", 1, 1, 0, 1_000_000),
        op("mm", 1, 100, 400),
        call(1, 150, 11),
        call(1, 500, 12),
        // Thread 2: relu ⊃ launch 13; launch 14 inside no op.
        op("relu", 2, 100, 300),
        call(2, 200, 13),
        call(2, 600, 14),
        kernel(200, 400, 11),
        kernel(500, 550, 12),
        kernel(600, 700, 13),
        kernel(800, 900, 14),
    ])
}

#[test]
fn device_work_without_external_id_goes_to_the_op_enclosing_its_launch() {
    let summary = key_averages(&correlation_only_trace(), &Default::default());
    let device = |name: &str| {
        let row = summary.rows.iter().find(|r| &*r.name == name).unwrap();
        (
            row.self_device_time_total_ns / 1000,
            row.device_time_total_ns / 1000,
        )
    };
    assert_eq!(device("mm"), (200, 200));
    assert_eq!(
        device("step"),
        (50, 250),
        "launch 12 is directly in the step"
    );
    assert_eq!(
        device("relu"),
        (100, 100),
        "by correlation across threads' rows"
    );
    assert_eq!(
        device("launch"),
        (0, 0),
        "a call never receives device work"
    );
    assert_eq!(device("k"), (450, 450));
}

#[test]
fn linked_device_work_is_the_ops_device_time() {
    let summary = key_averages(&linked_trace(), &Default::default());
    assert_eq!(
        rows(&summary),
        [
            ("step", 1, 300, 1000, 0, 600),
            ("mm", 2, 690, 700, 600, 600),
            ("cudaLaunchKernel", 1, 10, 10, 0, 0),
            // Starts with `gemm` but ends later: first.
            ("step", 1, 0, 0, 700, 700),
            ("gemm", 2, 0, 0, 500, 500),
            ("Memcpy DtoD", 1, 0, 0, 100, 100),
        ]
    );
    // The base of the device shares: device work without the GPU user annotation.
    assert_eq!(summary.self_device_time_total_ns(), 600_000);
    assert_eq!(summary.device_name, "cuda");
    let table = summary.table(&options(Some(SortKey::SelfDeviceTimeTotal), Some(3)));
    let expected = "\
--------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  
                Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg     Self CUDA   Self CUDA %    CUDA total  CUDA time avg    # of Calls  
--------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  
                step         0.00%       0.000us         0.00%       0.000us       0.000us     700.000us       116.67%     700.000us     700.000us             1  
                  mm        69.00%     690.000us        70.00%     700.000us     350.000us     600.000us       100.00%     600.000us     300.000us             2  
                gemm         0.00%       0.000us         0.00%       0.000us       0.000us     500.000us        83.33%     500.000us     250.000us             2  
--------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  
Self CPU time total: 1.000ms
Self CUDA time total: 600.000us
";
    assert_eq!(table, expected, "got:\n{table}");
}

#[test]
fn stub_device_time_is_legacy_and_names_the_device() {
    let stub = |name: &str, start: i64, end: i64, device_us: f64| {
        let mut a = op(name, 1, start, end);
        a.args
            .push(("device_time_us".into(), Value::from(device_us)));
        a
    };
    let mut t = trace(vec![
        stub("linear", 0, 100, 80.0),
        stub("addmm", 10, 60, 50.0),
        stub("relu", 60, 90, 0.0),
    ]);
    t.set_metadata("device_type", Value::from("OpenReg"));
    let summary = key_averages(&t, &Default::default());
    assert_eq!(
        rows(&summary),
        [
            ("linear", 1, 20, 100, 30, 80),
            ("addmm", 1, 50, 50, 50, 50),
            ("relu", 1, 30, 30, 0, 0)
        ]
    );
    assert!(summary.rows[0].is_legacy && !summary.rows[2].is_legacy);
    // Legacy host rows are the base of the device shares.
    assert_eq!(summary.self_device_time_total_ns(), 80_000);
    let table = summary.table(&Default::default());
    let header = table.lines().nth(1).unwrap();
    assert!(
        header.ends_with(
            "  Self OPENREG  Self OPENREG %  OPENREG total  OPENREG time avg    # of Calls  "
        ),
        "{header}"
    );
    assert!(table.ends_with("Self CPU time total: 100.000us\nSelf OPENREG time total: 80.000us\n"));
    let renamed = KeyAveragesOptions {
        device_name: Some("xpu".into()),
        ..Default::default()
    };
    assert_eq!(key_averages(&t, &renamed).device_label(), "XPU");
}

#[test]
fn a_device_interval_carrying_stub_time_is_its_ops_drawing_and_makes_no_row() {
    let mut addmm = op("addmm", 1, 10, 60);
    addmm.correlation = 7;
    addmm.args.push(("device_time_us".into(), Value::from(50)));
    let mut drawn = Activity::new(
        ActivityType::GpuUserAnnotation,
        "addmm",
        0,
        0,
        20_000,
        70_000,
    );
    drawn.linked_correlation = Some(7);
    drawn.args.push(("device_time_us".into(), Value::from(50)));
    let summary = key_averages(&trace(vec![addmm, drawn]), &Default::default());
    assert_eq!(rows(&summary), [("addmm", 1, 50, 50, 50, 50)]);
    assert_eq!(summary.self_device_time_total_ns(), 50_000);
}

#[test]
fn sort_keys_sort_descending_and_keep_ties_in_order() {
    let t = trace(vec![
        op("x", 1, 0, 10),
        op("y", 1, 20, 50),
        op("z", 1, 60, 70),
        op("y", 1, 80, 90),
        op("z", 1, 100, 130),
    ]);
    let summary = key_averages(&t, &Default::default());
    let names = |key: Option<SortKey>, limit: Option<usize>| -> Vec<String> {
        summary
            .select(&options(key, limit))
            .iter()
            .map(|r| r.name.to_string())
            .collect()
    };
    assert_eq!(names(None, None), ["x", "y", "z"]);
    assert_eq!(names(Some(SortKey::CpuTimeTotal), None), ["y", "z", "x"]);
    assert_eq!(names(Some(SortKey::CpuTime), None), ["y", "z", "x"]);
    assert_eq!(names(Some(SortKey::Count), None), ["y", "z", "x"]);
    // All zero: input order.
    assert_eq!(
        names(Some(SortKey::SelfDeviceTimeTotal), None),
        ["x", "y", "z"]
    );
    assert_eq!(names(Some(SortKey::CpuTimeTotal), Some(2)), ["y", "z"]);
    assert_eq!(
        names(Some(SortKey::CpuTimeTotal), Some(0)),
        Vec::<String>::new()
    );
    let table = summary.table(&options(None, Some(0)));
    assert_eq!(table.lines().count(), 5, "{table}");
}

#[test]
fn sort_keys_parse_pytorchs_names_and_aliases() {
    for (name, key) in [
        ("cpu_time", SortKey::CpuTime),
        ("cpu_time_total", SortKey::CpuTimeTotal),
        ("self_cpu_time_total", SortKey::SelfCpuTimeTotal),
        ("device_time", SortKey::DeviceTime),
        ("cuda_time", SortKey::DeviceTime),
        ("cuda_time_total", SortKey::DeviceTimeTotal),
        ("xpu_time_total", SortKey::DeviceTimeTotal),
        ("self_privateuse1_time_total", SortKey::SelfDeviceTimeTotal),
        ("self_device_time_total", SortKey::SelfDeviceTimeTotal),
        ("count", SortKey::Count),
        ("cpu_memory_usage", SortKey::CpuMemoryUsage),
        ("self_cpu_memory_usage", SortKey::SelfCpuMemoryUsage),
        ("device_memory_usage", SortKey::DeviceMemoryUsage),
        ("cuda_memory_usage", SortKey::DeviceMemoryUsage),
        ("self_xpu_memory_usage", SortKey::SelfDeviceMemoryUsage),
        (
            "self_privateuse1_memory_usage",
            SortKey::SelfDeviceMemoryUsage,
        ),
        ("flops", SortKey::Flops),
    ] {
        assert_eq!(name.parse(), Ok(key), "{name}");
    }
    let err = "memory".parse::<SortKey>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown sort key \"memory\"; expected one of: cpu_time, cpu_time_total, \
         self_cpu_time_total, device_time, device_time_total, self_device_time_total, count, \
         cpu_memory_usage, self_cpu_memory_usage, device_memory_usage, \
         self_device_memory_usage (cuda, xpu or privateuse1 in place of device), flops"
    );
}

#[test]
fn long_names_and_empty_summaries() {
    let long = "n".repeat(70);
    let summary = key_averages(&trace(vec![op(&long, 1, 0, 10)]), &Default::default());
    let table = summary.table(&Default::default());
    assert!(table
        .lines()
        .nth(3)
        .unwrap()
        .starts_with(&format!("{}...  ", "n".repeat(52))));
    assert_eq!(table.lines().next().unwrap().find(' '), Some(55));
    assert_eq!(
        key_averages(&trace(vec![]), &Default::default()).table(&Default::default()),
        ""
    );
}

#[test]
fn a_zero_cpu_total_prints_nan() {
    let summary = key_averages(&trace(vec![op("x", 1, 5, 5)]), &Default::default());
    let table = summary.table(&Default::default());
    assert!(
        table.contains("   x           NaN       0.000us           NaN"),
        "{table}"
    );
}

#[test]
fn csv_and_json_carry_every_row_field() {
    let summary = key_averages(&linked_trace(), &Default::default());
    let csv = summary.csv(&options(Some(SortKey::CpuTimeTotal), Some(2)));
    assert_eq!(
        csv,
        "name,count,self_cpu_time_total_us,cpu_time_total_us,cpu_time_avg_us,\
         self_device_time_total_us,device_time_total_us,device_time_avg_us,on_device,user_annotation,\
         cpu_memory_usage,self_cpu_memory_usage,device_memory_usage,self_device_memory_usage,flops\n\
         step,1,300.000,1000.000,1000.000,0.000,600.000,600.000,false,true,0,0,0,0,0\n\
         mm,2,690.000,700.000,350.000,600.000,600.000,300.000,false,false,0,0,0,0,0\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&summary.json(&options(None, None))).unwrap();
    assert_eq!(json["device"], "CUDA");
    assert_eq!(json["self_cpu_time_total_us"], 1000.0);
    assert_eq!(json["self_device_time_total_us"], 600.0);
    assert_eq!(
        (&json["profile_memory"], &json["with_flops"]),
        (&false.into(), &false.into())
    );
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    assert_eq!(
        rows[1],
        serde_json::json!({
            "name": "mm", "count": 2, "self_cpu_time_total_us": 690.0,
            "cpu_time_total_us": 700.0, "cpu_time_avg_us": 350.0,
            "self_device_time_total_us": 600.0, "device_time_total_us": 600.0,
            "device_time_avg_us": 300.0, "on_device": false, "user_annotation": false,
            "cpu_memory_usage": 0, "self_cpu_memory_usage": 0, "device_memory_usage": 0,
            "self_device_memory_usage": 0, "flops": 0
        })
    );
    let by_shapes = KeyAveragesOptions {
        group_by_input_shapes: true,
        ..Default::default()
    };
    let summary = key_averages(&linked_trace(), &by_shapes);
    assert!(summary
        .csv(&options(None, Some(1)))
        .starts_with("name,input_shapes,count,"));
    assert!(summary
        .json(&options(None, Some(1)))
        .contains(r#""input_shapes":"[]""#));
}

#[test]
fn a_late_base_time_still_orders_events() {
    // `baseTimeNanoseconds` after `traceEvents`: the events were timed from 0 until then.
    let json = r#"{"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
      {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 3},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 3}
    ], "baseTimeNanoseconds": 5000000}"#;
    let streamed = streamed(|builder| {
        TraceReader::new()
            .stream(json.as_bytes(), |item| builder.add_item(&item))
            .unwrap();
    });
    let whole = key_averages(
        &TraceReader::new()
            .read(json.as_bytes())
            .into_trace()
            .unwrap(),
        &Default::default(),
    );
    assert_eq!(streamed, whole);
    let names: Vec<&str> = streamed.rows.iter().map(|r| &*r.name).collect();
    assert_eq!(names, ["a", "k", "b"]);
}

/// The rows of `activities` added in that order to a builder keeping every op.
fn kept(activities: &[Activity]) -> KeyAverages {
    let mut builder = KeyAveragesBuilder::keeping_every_op(Default::default());
    for a in activities {
        builder.add_activity(a);
    }
    builder.finish().unwrap()
}

/// `activities` folded, with the most items the builder held at once.
fn folded(activities: &[Activity]) -> (KeyAverages, Option<usize>) {
    let mut builder = KeyAveragesBuilder::new(Default::default());
    for a in activities {
        builder.add_activity(a);
    }
    let high_water = builder.held_high_water();
    (builder.finish().unwrap(), high_water)
}

#[test]
fn identical_events_on_one_thread_hold_at_most_twice_the_depth_bound_and_count_the_rest() {
    // 200,000 copies of one event: same thread, start and end, so each nests in the one
    // before. Unbounded, all of them waited at their shared start (5.9 GB for 20M).
    let events = vec![op("aten::add", 1, 0, 10); 200_000];
    let (summary, high_water) = folded(&events);
    // The waiting ops are cut back to the bound each time they reach twice it.
    assert_eq!(high_water, Some(2 * MAX_STACK_DEPTH - 1));
    assert_eq!(summary.too_deep, 200_000 - MAX_STACK_DEPTH as u64);
    // A builder holding every op leaves out the same ops; the rows are those of the first
    // `MAX_STACK_DEPTH` ops: a chain of same-named only children, which PyTorch collapses
    // into the outermost.
    assert_eq!(summary, kept(&events));
    assert_eq!(summary.rows, kept(&events[..MAX_STACK_DEPTH]).rows);
    assert_eq!(rows(&summary), [("aten::add", 1, 10, 10, 0, 0)]);
}

#[test]
fn ops_nested_deeper_than_the_bound_are_counted_and_their_time_stays_with_their_parent() {
    // 200,000 ops each starting 1 µs after the one around it and ending 1 µs before it,
    // named `a` and `b` in turn (so none collapses into its parent).
    let n = 200_000i64;
    let events: Vec<Activity> = (0..n)
        .map(|i| op(if i % 2 == 0 { "a" } else { "b" }, 1, i, 2 * n - i))
        .collect();
    let (summary, high_water) = folded(&events);
    // The open ops, and the next op waiting for a later start.
    assert_eq!(high_water, Some(MAX_STACK_DEPTH + 1));
    assert_eq!(summary.too_deep, n as u64 - MAX_STACK_DEPTH as u64);
    assert_eq!(summary, kept(&events));
    assert_eq!(summary.rows, kept(&events[..MAX_STACK_DEPTH]).rows);
    // Op i (i < 1024) lasts 2n - 2i µs; each but the deepest has 2 µs of its own, the
    // deepest (op 1023, a `b`) keeps the time of the ops left out inside it.
    let half = MAX_STACK_DEPTH as i64 / 2;
    let total = |i: i64| 2 * n - 2 * i;
    let a_total: i64 = (0..half).map(|k| total(2 * k)).sum();
    let b_total: i64 = (0..half).map(|k| total(2 * k + 1)).sum();
    let deepest = MAX_STACK_DEPTH as i64 - 1;
    assert_eq!(
        rows(&summary),
        [
            ("a", half as u64, 2 * half, a_total, 0, 0),
            (
                "b",
                half as u64,
                2 * (half - 1) + total(deepest),
                b_total,
                0,
                0
            ),
        ]
    );
}

#[test]
fn a_long_sequential_trace_keeps_only_its_open_ops() {
    // 100,000 `aten::linear` ops one after another, each holding an `aten::addmm` that
    // launches a kernel, linked by `External id` and written before the op.
    let mut activities = Vec::new();
    for i in 0..100_000i64 {
        let corr = 2 * i as u64 + 1;
        activities.push(device(
            ActivityType::ConcurrentKernel,
            "gemm",
            10 * i + 2,
            10 * i + 4,
            corr,
        ));
        activities.push(with_correlation(
            op("aten::linear", 1, 10 * i, 10 * i + 8),
            corr + 1,
        ));
        activities.push(with_correlation(
            op("aten::addmm", 1, 10 * i + 1, 10 * i + 6),
            corr,
        ));
    }
    let mut builder = KeyAveragesBuilder::new(Default::default());
    for a in &activities {
        builder.add_activity(a);
    }
    // At most: the two ops of one iteration and the next op, waiting for a later start.
    assert_eq!(builder.held_high_water(), Some(3));
    let summary = builder.finish().unwrap();
    assert_eq!(summary, kept(&activities));
    assert_eq!(
        rows(&summary),
        [
            ("aten::linear", 100_000, 300_000, 800_000, 0, 200_000),
            ("aten::addmm", 100_000, 500_000, 500_000, 200_000, 200_000),
            ("gemm", 100_000, 0, 0, 200_000, 200_000),
        ]
    );
}

#[test]
fn ops_out_of_time_order_are_read_again_and_summed_exactly() {
    // Each parent after its first child, and thread 2 after thread 1: the first read holds
    // `b` and meets `a`, which starts before what it may still place.
    let activities = vec![
        op("b", 1, 10, 30),
        op("a", 1, 0, 100),
        op("c", 1, 200, 300),
        op("c", 1, 400, 500),
        op("b", 2, 20, 90),
        op("a", 2, 5, 95),
        mem(2, 50, 64, 0),
    ];
    let mut first = KeyAveragesBuilder::new(Default::default());
    for a in &activities {
        first.add_activity(a);
    }
    let again = first.finish().unwrap_err();
    assert_eq!(
        again.reason(),
        &OutOfOrder::Late {
            what: "host op",
            start_ns: 0,
            after_ns: 10_000
        }
    );
    let mut second = again.builder();
    for a in &activities {
        second.add_activity(a);
    }
    let summary = second.finish().unwrap();
    assert_eq!(summary, kept(&activities));
    assert_eq!(
        rows(&summary),
        [
            ("a", 2, 100, 190, 0, 0),
            ("b", 2, 90, 90, 0, 0),
            ("c", 2, 200, 200, 0, 0),
        ]
    );
}

#[test]
fn dropped_names_and_profiler_steps() {
    let t = trace(vec![
        op("ProfilerStep#1", 1, 0, 100),
        op("aten::is_leaf", 1, 10, 20),
        op("ProfilerStep#2", 1, 200, 300),
    ]);
    assert_eq!(
        rows(&key_averages(&t, &Default::default())),
        [("ProfilerStep*", 2, 200, 200, 0, 0)]
    );
}

#[test]
fn extreme_times_saturate_instead_of_overflowing() {
    let mut t = trace(vec![
        Activity::new(ActivityType::CpuOp, "wide", 1, 1, i64::MIN, i64::MAX),
        Activity::new(ActivityType::CpuOp, "wide", 1, 2, i64::MIN, i64::MAX),
        with_correlation(op("x", 1, 0, 1), 5),
        device(ActivityType::ConcurrentKernel, "k", 0, 1, 5),
    ]);
    t.activities[3].end_ns = i64::MAX;
    let summary = key_averages(&t, &Default::default());
    assert_eq!(summary.rows[0].cpu_time_total_ns, i64::MAX);
    assert_eq!(summary.self_cpu_time_total_ns(), i64::MAX);
    assert!(summary.table(&Default::default()).contains("Self CUDA"));
}

proptest::proptest! {
    /// Any mix of ops, ranges, runtime calls and linked device work summarizes without
    /// panicking, every op counted once, and self times never exceed totals.
    #[test]
    fn any_trace_summarizes(
        events in proptest::collection::vec(
            (0usize..5, 0u8..4, 0i64..3, 0i64..1_000, 0i64..300, 0u64..6, proptest::bool::ANY),
            0..60,
        )
    ) {
        let names = ["a", "b", "a", "ProfilerStep#3", "aten::is_leaf"];
        let kinds = [
            ActivityType::CpuOp,
            ActivityType::UserAnnotation,
            ActivityType::CudaRuntime,
            ActivityType::ConcurrentKernel,
        ];
        let mut t = trace(Vec::new());
        for (name, kind, tid, start, dur, corr, flag) in events {
            let mut a = Activity::new(kinds[kind as usize], names[name], 1, tid, start, start + dur);
            a.correlation = corr;
            if kind >= 2 {
                a.linked_correlation = Some(corr);
            }
            if flag {
                a.args.push(("device_time_us".into(), Value::from(dur as f64 / 7.0)));
                a.args.push(("finished".into(), Value::from(false)));
            }
            t.activities.push(a);
        }
        for by_shapes in [false, true] {
            let options = KeyAveragesOptions { group_by_input_shapes: by_shapes, ..Default::default() };
            let summary = key_averages(&t, &options);
            let dropped = t.activities.iter().filter(|a| &*a.name == "aten::is_leaf").count();
            let counted: u64 = summary.rows.iter().map(|r| r.count).sum();
            proptest::prop_assert!(counted as usize <= t.activities.len() - dropped);
            // Self times may be negative (children that overlap each other, as in PyTorch),
            // never above the total.
            for r in &summary.rows {
                proptest::prop_assert!(r.self_cpu_time_total_ns <= r.cpu_time_total_ns);
            }
            for key in SortKey::ALL {
                let _ = summary.table(&options_for(key));
                let _ = summary.csv(&options_for(key));
                let _ = summary.json(&options_for(key));
            }
        }
    }
}

/// One random host item: (kind, name, tid, start, duration, flags); see [`random_trace`].
type HostItem = (u8, usize, i64, i64, i64, u8);

/// A trace of random host items, in time order, with unique correlation ids. Kinds: 0, 1 op,
/// 2 user range, 3 runtime call, 4 memory record, 5 out-of-memory record. Flags: 1
/// unfinished, 2 stub device time, 4 launches a kernel (linked to the op by `External id`
/// and written first; for a call, announced by an `ac2g` flow and written `lag` items after
/// it, linked to the op around it or, without one, to the call by its correlation id), 8
/// device memory.
fn random_trace(mut host: Vec<HostItem>, lag: usize) -> Vec<Activity> {
    host.sort_by_key(|h| h.3);
    let names = ["a", "b", "a", "c"];
    let mut first = Vec::new();
    let mut items: Vec<Activity> = Vec::new();
    let mut later: Vec<(usize, Activity)> = Vec::new();
    for (i, &(kind, name, tid, start, dur, flags)) in host.iter().enumerate() {
        let a = match kind {
            4 | 5 => {
                let mut a = mem(tid, 0, (start % 7) * 100 - 200, i64::from(flags & 8 != 0));
                a.start_ns = start;
                a.end_ns = start;
                if kind == 5 {
                    a.name = omniprof_trace::keys::name::OUT_OF_MEMORY.into();
                }
                a
            }
            _ => {
                let kinds = [
                    ActivityType::CpuOp,
                    ActivityType::CpuOp,
                    ActivityType::UserAnnotation,
                    ActivityType::CudaRuntime,
                ];
                let mut a = Activity::new(
                    kinds[kind as usize],
                    names[name],
                    1,
                    tid,
                    start,
                    start + dur,
                );
                a.correlation = i as u64 + 1;
                if flags & 1 != 0 {
                    a.args.push(("finished".into(), Value::from(false)));
                }
                if flags & 2 != 0 {
                    a.args
                        .push(("device_time_us".into(), Value::from(dur as f64 / 7.0)));
                }
                let mut kernel = Activity::new(
                    ActivityType::ConcurrentKernel,
                    "k",
                    0,
                    7,
                    start + 1,
                    start + 1 + dur / 3,
                );
                if kind == 3 {
                    // The innermost op of the thread around the call, as PyTorch links it.
                    let around = host[..i]
                        .iter()
                        .enumerate()
                        .filter(|(_, h)| h.0 < 3 && h.2 == tid && h.3 + h.4 >= start + dur)
                        .map(|(j, _)| j as u64 + 1)
                        .next_back();
                    a.correlation += 10_000;
                    a.linked_correlation = Some(around.unwrap_or(0));
                    if flags & 4 != 0 {
                        kernel.correlation = a.correlation;
                        kernel.linked_correlation = around;
                        a.flow = Some(Flow {
                            id: a.correlation,
                            kind: FlowKind::Ac2g,
                            start: true,
                        });
                        kernel.flow = Some(Flow {
                            id: a.correlation,
                            kind: FlowKind::Ac2g,
                            start: false,
                        });
                        later.push((items.len() + 1 + lag, kernel));
                    }
                } else if flags & 4 != 0 {
                    kernel.linked_correlation = Some(a.correlation);
                    first.push(kernel);
                }
                a
            }
        };
        items.push(a);
    }
    // Each delayed kernel goes in after the item it is due after (stable for equal places).
    let mut out = first;
    let mut later = later.into_iter().peekable();
    for (i, a) in items.into_iter().enumerate() {
        out.push(a);
        while let Some((_, k)) = later.next_if(|(at, _)| *at <= i + 1) {
            out.push(k);
        }
    }
    out.extend(later.map(|(_, k)| k));
    out
}

/// The rows of `activities` (the window first, and spans where `spans` says), with a
/// builder that folds (read again as often as it asks) and with one keeping every op.
fn both(
    activities: &[Activity],
    spans: &[(usize, i64)],
) -> (Result<KeyAverages, ReadAgain>, KeyAverages, KeyAverages) {
    let feed = |builder: &mut KeyAveragesBuilder| {
        builder.set_window(omniprof_trace::Window::new(0, 2_000));
        for (i, a) in activities.iter().enumerate() {
            for &(_, start) in spans.iter().filter(|(at, _)| *at == i) {
                builder.add_span_start(start);
            }
            builder.add_activity(a);
        }
    };
    let mut first = KeyAveragesBuilder::new(Default::default());
    feed(&mut first);
    let mut kept = KeyAveragesBuilder::keeping_every_op(Default::default());
    feed(&mut kept);
    (first.finish(), streamed(feed), kept.finish().unwrap())
}

fn host_items() -> impl proptest::strategy::Strategy<Value = Vec<HostItem>> {
    proptest::collection::vec(
        (0u8..6, 0usize..4, 0i64..3, 0i64..1_000, 0i64..300, 0u8..16),
        0..80,
    )
}

proptest::proptest! {
    /// Host items in time order, device work before its op or announced by a flow: folded
    /// in one read, to exactly the rows of a builder keeping every op.
    #[test]
    fn items_in_time_order_fold_in_one_read_to_the_same_rows(
        host in host_items(),
        lag in 0usize..6,
    ) {
        let activities = random_trace(host, lag);
        let (first, _, kept) = both(&activities, &[]);
        proptest::prop_assert_eq!(first.map_err(|e| e.to_string()), Ok(kept));
    }

    /// Any order, with spans anywhere: read again as often as asked, the rows are exactly
    /// those of a builder keeping every op.
    #[test]
    fn items_in_any_order_give_the_same_rows(
        host in host_items(),
        lag in 0usize..6,
        order in proptest::collection::vec(proptest::num::u32::ANY, 200),
        spans in proptest::collection::vec((0usize..100, 0i64..1_000), 0..3),
    ) {
        let mut activities = random_trace(host, lag);
        let mut keyed: Vec<(u32, Activity)> =
            activities.drain(..).zip(order.iter().cycle()).map(|(a, &k)| (k, a)).collect();
        keyed.sort_by_key(|(k, _)| *k);
        let activities: Vec<Activity> = keyed.into_iter().map(|(_, a)| a).collect();
        let (_, streamed, kept) = both(&activities, &spans);
        proptest::prop_assert_eq!(streamed, kept);
    }
}

fn options_for(key: SortKey) -> TableOptions {
    options(Some(key), Some(5))
}

fn memory_trace() -> Trace {
    TraceReader::new()
        .read_path(omniprof_test_support::data::memory_trace())
        .into_trace()
        .unwrap()
}

#[test]
fn the_pytorch_memory_trace_prints_pytorchs_memory_and_flops_columns() {
    let summary = key_averages(&memory_trace(), &Default::default());
    assert!(summary.profile_memory && summary.with_flops);
    let table = summary.table(&Default::default());
    assert_eq!(
        table,
        omniprof_test_support::data::memory_table("table"),
        "got:\n{table}"
    );
    let table = summary.table(&options(Some(SortKey::Flops), Some(100)));
    assert_eq!(
        table,
        omniprof_test_support::data::memory_table("table-flops"),
        "got:\n{table}"
    );
}

#[test]
fn a_header_and_top_level_rows_print_as_in_pytorch() {
    let summary = key_averages(&memory_trace(), &Default::default());
    let table = summary.table(&TableOptions {
        sort_by: Some(SortKey::SelfCpuMemoryUsage),
        row_limit: Some(8),
        header: Some("HEAD".into()),
        top_level_events_only: true,
        ..Default::default()
    });
    assert_eq!(
        table,
        omniprof_test_support::data::memory_table("table-top"),
        "got:\n{table}"
    );
}

#[test]
fn the_pytorch_memory_trace_lists_pytorchs_events() {
    let events = function_events(&memory_trace(), &Default::default());
    let table = events.table(&Default::default());
    assert_eq!(
        table,
        omniprof_test_support::data::memory_table("events"),
        "got:\n{table}"
    );
}

/// A `[memory]` record on thread `tid` at `t_us`: `bytes` of `device_type` memory.
fn mem(tid: i64, t_us: i64, bytes: i64, device_type: i64) -> Activity {
    let mut a = Activity::new(
        ActivityType::CpuInstantEvent,
        omniprof_trace::keys::name::MEMORY,
        1,
        tid,
        t_us * 1000,
        t_us * 1000,
    );
    a.args
        .push((omniprof_trace::keys::arg::BYTES.into(), Value::from(bytes)));
    a.args.push((
        omniprof_trace::keys::arg::DEVICE_TYPE.into(),
        Value::from(device_type),
    ));
    a
}

fn with_flops(mut a: Activity, flops: i64) -> Activity {
    a.args
        .push((omniprof_trace::keys::arg::FLOPS.into(), Value::from(flops)));
    a
}

/// (name, count, CPU memory, self CPU memory, device memory, self device memory) per row.
fn memory_rows(summary: &KeyAverages) -> Vec<(&str, u64, i64, i64, i64, i64)> {
    summary
        .rows
        .iter()
        .map(|r| {
            (
                &*r.name,
                r.count,
                r.cpu_memory_usage,
                r.self_cpu_memory_usage,
                r.device_memory_usage,
                r.self_device_memory_usage,
            )
        })
        .collect()
}

#[test]
fn memory_records_count_for_an_op_at_both_ends_of_its_interval() {
    // a [10, 20]: the records at 10 and 20 are its; those at 9 and 21 are nobody's.
    let summary = key_averages(
        &trace(vec![
            op("a", 1, 10, 20),
            mem(1, 10, 100, 0),
            mem(1, 20, 200, 0),
            mem(1, 21, 400, 0),
            mem(1, 9, 800, 0),
        ]),
        &Default::default(),
    );
    assert!(summary.profile_memory);
    assert_eq!(
        memory_rows(&summary),
        [("[memory]", 2, 1200, 1200, 0, 0), ("a", 1, 300, 300, 0, 0)]
    );
    let memory = &summary.rows[0];
    assert_eq!(
        (memory.cpu_time_total_ns, memory.self_cpu_time_total_ns),
        (0, 0)
    );
}

#[test]
fn memory_records_of_another_thread_count_for_the_op_as_in_pytorch() {
    let summary = key_averages(
        &trace(vec![op("a", 1, 10, 20), mem(2, 15, 64, 1)]),
        &Default::default(),
    );
    assert_eq!(memory_rows(&summary), [("a", 1, 0, 0, 64, 64)]);
}

#[test]
fn self_memory_is_the_ops_less_its_childrens() {
    // p [0, 100] ⊃ c [10, 20]; q [90, 150] starts in p and ends after it (not p's child).
    let summary = key_averages(
        &trace(vec![
            op("p", 1, 0, 100),
            op("c", 1, 10, 20),
            op("q", 1, 90, 150),
            mem(1, 5, 1, 0),
            mem(1, 15, 2, 0),
            mem(1, 15, 4, 1),
            mem(1, 50, -8, 2),
            mem(1, 120, 16, 5),
            mem(1, 130, 32, 7),
        ]),
        &Default::default(),
    );
    assert_eq!(
        memory_rows(&summary),
        [
            ("p", 1, -5, -7, 4, 0),
            ("c", 1, 2, 2, 4, 4),
            ("q", 1, 16, 16, 0, 0),
        ]
    );
}

#[test]
fn out_of_memory_records_are_rows_and_children_of_the_op_around_them() {
    let mut oom = mem(1, 15, 64, 1);
    oom.name = omniprof_trace::keys::name::OUT_OF_MEMORY.into();
    let summary = key_averages(&trace(vec![op("a", 1, 10, 20), oom]), &Default::default());
    assert!(summary.profile_memory);
    assert_eq!(
        memory_rows(&summary),
        [("a", 1, 0, 0, 0, -64), ("[OutOfMemory]", 1, 0, 0, 64, 64)]
    );
    assert!(summary.rows[1].has_cpu_parent);
}

#[test]
fn a_folded_out_of_memory_record_takes_no_usage_from_the_op_that_held_its_node_before() {
    // a [0, 100] ⊃ b [10, 20] with a record in b, so a's children's usage is b's; the
    // `[OutOfMemory]` op, placed once c comes, takes the node a leaves.
    let mut oom = mem(1, 200, 64, 0);
    oom.name = omniprof_trace::keys::name::OUT_OF_MEMORY.into();
    let t = trace(vec![
        op("a", 1, 0, 100),
        op("b", 1, 10, 20),
        mem(1, 15, 100, 0),
        oom,
        op("c", 1, 300, 310),
    ]);
    let expected = [
        ("a", 1, 100, 0, 0, 0),
        ("b", 1, 100, 100, 0, 0),
        ("[OutOfMemory]", 1, 64, 64, 0, 0),
        ("c", 1, 0, 0, 0, 0),
    ];
    assert_eq!(
        memory_rows(&key_averages(&t, &Default::default())),
        expected
    );
    // Folding from the record on.
    let (folded, _) = listed(&t, 3);
    assert_eq!(memory_rows(&folded), expected);
}

#[test]
fn flops_sum_per_row_and_turn_the_column_on() {
    let summary = key_averages(
        &trace(vec![
            with_flops(op("mm", 1, 0, 10), 1000),
            with_flops(op("mm", 1, 20, 30), 3000),
            op("mm", 1, 40, 50),
            op("add", 1, 60, 70),
        ]),
        &Default::default(),
    );
    assert!(summary.with_flops && !summary.profile_memory);
    let flops: Vec<(&str, u64)> = summary.rows.iter().map(|r| (&*r.name, r.flops)).collect();
    assert_eq!(flops, [("mm", 4000), ("add", 0)]);
    let without = key_averages(&trace(vec![op("mm", 1, 0, 10)]), &Default::default());
    assert!(!without.with_flops);
}

#[test]
fn memory_and_flops_columns_print_as_pytorchs_build_table() {
    // PyTorch 2.15's `_build_table` of the same events (EventList of FunctionEvents with
    // these usages and FLOPs, use_device="cuda", profile_memory and with_flops on).
    let summary = key_averages(
        &trace(vec![
            op("aten::empty", 1, 0, 10),
            mem(1, 5, 1024, 0),
            mem(1, 5, 2048, 1),
            with_flops(op("aten::mm", 1, 20, 30), 4096),
            mem(1, 25, -512, 1),
            with_flops(op("aten::mm", 1, 40, 45), 2048),
        ]),
        &Default::default(),
    );
    let expected = "\
---------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  
           Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg       CPU Mem  Self CPU Mem      CUDA Mem  Self CUDA Mem    # of Calls  Total KFLOPs  
---------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  
    aten::empty        40.00%      10.000us        40.00%      10.000us      10.000us       1.00 KB       1.00 KB       2.00 KB       2.00 KB             1            --  
       aten::mm        60.00%      15.000us        60.00%      15.000us       7.500us           0 B           0 B        -512 B        -512 B             2         6.144  
---------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  
Self CPU time total: 25.000us
";
    assert_eq!(summary.table(&Default::default()), expected);
}

#[test]
fn memory_columns_can_be_forced_and_device_ones_need_self_device_memory() {
    let options = KeyAveragesOptions {
        profile_memory: true,
        with_flops: true,
        ..Default::default()
    };
    let summary = key_averages(&trace(vec![op("a", 1, 0, 10)]), &options);
    assert!(summary.profile_memory && summary.with_flops);
    let table = summary.table(&Default::default());
    let header = table.lines().nth(1).unwrap();
    assert!(
        header.ends_with("   CPU Mem  Self CPU Mem    # of Calls  "),
        "{table}"
    );
    assert!(
        table.contains("         0 B           0 B             1  \n"),
        "{table}"
    );
}

#[test]
fn memory_and_flops_format_as_pytorchs_functions() {
    use crate::render::table::{auto_scale_flops, format_flops, format_memory};
    // PyTorch 2.15's `_format_memory` of each.
    for (bytes, text) in [
        (0, "0 B"),
        (4, "4 B"),
        (-4, "-4 B"),
        (1023, "1023 B"),
        (1024, "1.00 KB"),
        (-1024, "-1.00 KB"),
        (1536, "1.50 KB"),
        (1_048_575, "1024.00 KB"),
        (1_048_576, "1.00 MB"),
        (5 * (1 << 30) + 1, "5.00 GB"),
        (-3 * (1 << 20), "-3.00 MB"),
        (1 << 40, "1024.00 GB"),
    ] {
        assert_eq!(format_memory(bytes), text, "{bytes}");
    }
    // PyTorch's `auto_scale_flops(f)` and the cell `f"{f * scale:8.3f}"`.
    for (flops, scale, unit, cell) in [
        (1, 1.0, "FLOPs", "   1.000"),
        (999, 1.0, "FLOPs", " 999.000"),
        (1000, 0.001, "KFLOPs", "   1.000"),
        (4096, 0.001, "KFLOPs", "   4.096"),
        (524_288, 0.001, "KFLOPs", " 524.288"),
        (1_000_000_000, 1e-9, "GFLOPs", "   1.000"),
        (1 << 53, 1e-15, "PFLOPs", "   9.007"),
        (1_000_000_000_000_000_000, 1e-15, "PFLOPs", "1000.000"),
    ] {
        assert_eq!(auto_scale_flops(flops), (scale, unit), "{flops}");
        assert_eq!(format_flops(flops, scale), cell, "{flops}");
    }
    assert_eq!(format_flops(0, 1.0), "--");
}

#[test]
fn total_average_sums_every_row_and_takes_the_last_rows_flags() {
    let summary = key_averages(&memory_trace(), &Default::default());
    let total = summary.total_average().unwrap();
    // PyTorch 2.15's `key_averages().total_average()` of the same trace.
    assert_eq!(&*total.name, "Total");
    assert_eq!(total.count, 66);
    assert_eq!(total.flops, 2_105_344);
    assert_eq!(
        (total.cpu_memory_usage, total.self_cpu_memory_usage),
        (270_144, 0)
    );
    assert_eq!(
        total.self_cpu_time_total_ns,
        summary.self_cpu_time_total_ns()
    );
    // The last row, `aten::fill_`, is inside `aten::sum`.
    let last = summary.rows.last().unwrap();
    assert_eq!(&*last.name, "aten::fill_");
    assert!(!total.is_async && total.has_cpu_parent);
    assert_eq!(
        key_averages(&trace(vec![]), &Default::default()).total_average(),
        None
    );
}

#[test]
fn function_events_list_pytorchs_events_with_their_tree_and_memory() {
    let mut step = op("ProfilerStep#7", 1, 0, 100);
    step.kind = ActivityType::UserAnnotation;
    step.correlation = 5;
    let mut mm = with_flops(op("mm", 1, 10, 20), 64);
    mm.correlation = 6;
    mm.args.push((
        omniprof_trace::keys::arg::INPUT_DIMS.into(),
        Value::from(vec![vec![2i64, 2]]),
    ));
    let events = function_events(
        &trace(vec![
            mem(1, 150, 8, 0),
            step,
            mm,
            mem(1, 15, 32, 0),
            mem(1, 120, -8, 0),
        ]),
        &Default::default(),
    );
    #[allow(clippy::type_complexity)]
    let summary: Vec<(
        u64,
        &str,
        &str,
        f64,
        f64,
        i64,
        i64,
        Option<usize>,
        Vec<usize>,
    )> = events
        .events
        .iter()
        .map(|e| {
            (
                e.id,
                &*e.name,
                &*e.trace_name,
                e.start_us,
                e.end_us,
                e.cpu_memory_usage,
                e.self_cpu_memory_usage,
                e.parent,
                e.children.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                5,
                "ProfilerStep*",
                "ProfilerStep#7",
                0.0,
                100.0,
                32,
                0,
                None,
                vec![1]
            ),
            (6, "mm", "mm", 10.0, 20.0, 32, 32, Some(0), vec![]),
            (
                8,
                "[memory]",
                "[memory]",
                120.0,
                120.0,
                -8,
                -8,
                None,
                vec![]
            ),
            (7, "[memory]", "[memory]", 150.0, 150.0, 8, 8, None, vec![]),
        ]
    );
    assert_eq!(&*events.events[1].input_shapes, "[[2, 2]]");
    assert_eq!(events.events[1].flops, 64);
    assert!(events.events[0].is_user_annotation && !events.events[1].on_device);
    assert!(events.profile_memory && events.with_flops);
    let rows = events.as_rows();
    assert_eq!(rows.rows.len(), 4);
    assert_eq!(rows.rows[2].count, 1);
}

#[test]
fn the_pytorch_memory_trace_prints_top_level_events_with_a_header() {
    let events = function_events(&memory_trace(), &Default::default());
    let table = events.table(&TableOptions {
        top_level_events_only: true,
        row_limit: Some(3),
        max_name_column_width: Some(10),
        ..Default::default()
    });
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[1],
        "This report only display top-level ops statistics"
    );
    assert_eq!(lines[0].len(), lines[2].len() - 2);
    assert!(lines[5].starts_with("aten::r...  "), "{table}");
    assert_eq!(lines.len(), 10);
}

fn stack_trace() -> Trace {
    TraceReader::new()
        .read_path(omniprof_test_support::data::stack_trace())
        .into_trace()
        .unwrap()
}

/// The stack trace without its `Call stack` args: stacks come from the Python events.
fn without_call_stacks(mut t: Trace) -> Trace {
    let mut removed = 0;
    for a in &mut t.activities {
        let before = a.args.len();
        a.args
            .retain(|(k, _)| &**k != omniprof_trace::keys::arg::CALL_STACK);
        removed += before - a.args.len();
    }
    assert!(removed > 50, "{removed} Call stack args");
    t
}

fn by_stack(n: usize) -> KeyAveragesOptions {
    KeyAveragesOptions {
        group_by_stack_n: n,
        ..Default::default()
    }
}

#[test]
fn the_pytorch_stack_trace_prints_pytorchs_source_location_column() {
    // With FLOPs too: PyTorch prints each row's FLOPs under `Source Location` and its first
    // frame under `Total FLOPs`, and the further frames in the last column.
    let options = TableOptions {
        sort_by: Some(SortKey::SelfCpuTimeTotal),
        row_limit: Some(6),
        max_src_column_width: Some(40),
        ..Default::default()
    };
    let expected = omniprof_test_support::data::stack_report("table");
    for trace in [stack_trace(), without_call_stacks(stack_trace())] {
        let table = key_averages(&trace, &by_stack(5)).table(&options);
        assert_eq!(table, expected, "got:\n{table}");
    }
}

#[test]
fn the_pytorch_stack_trace_exports_pytorchs_folded_stacks() {
    let expected = omniprof_test_support::data::stack_report("folded");
    assert_eq!(expected.lines().count(), 81);
    for trace in [stack_trace(), without_call_stacks(stack_trace())] {
        let events = function_events(&trace, &Default::default());
        let folded = events.export_stacks(stacks::StackMetric::SelfCpuTimeTotal);
        assert_eq!(folded, expected);
    }
}

#[test]
fn grouping_by_stack_splits_rows_by_their_first_frames() {
    let trace = stack_trace();
    let plain = key_averages(&trace, &Default::default());
    let grouped = key_averages(&trace, &by_stack(5));
    assert!(plain.rows.iter().all(|r| r.stack.is_none()));
    let calls = |s: &KeyAverages, name: &str| -> u64 {
        s.rows
            .iter()
            .filter(|r| &*r.name == name)
            .map(|r| r.count)
            .sum()
    };
    // `aten::t` runs twice in the forward pass (under `linear`) and twice in the backward
    // (under `AddmmBackward0` and `TBackward0`, which take the forward op's stack).
    assert_eq!(calls(&plain, "aten::t"), 4);
    assert_eq!(calls(&grouped, "aten::t"), 4);
    let t: Vec<&Row> = grouped
        .rows
        .iter()
        .filter(|r| &*r.name == "aten::t")
        .collect();
    assert_eq!(t.len(), 1);
    let frames: Vec<&str> = t[0]
        .stack
        .as_deref()
        .unwrap()
        .iter()
        .map(|f| &**f)
        .collect();
    assert_eq!(
        frames,
        [
            "<built-in function linear>",
            "torch/nn/modules/linear.py(130): forward",
            "torch/nn/modules/module.py(1791): _call_impl",
            "nn.Module: Linear_0",
            "gen_pytorch_stack_trace.py(30): forward",
        ]
    );
    // The engine's wrapper keeps its own frames: one row per distinct first five.
    let wrapper = grouped
        .rows
        .iter()
        .find(|r| {
            r.name
                .starts_with("autograd::engine::evaluate_function: AddmmBackward0")
        })
        .unwrap();
    assert_eq!(
        wrapper.stack.as_deref().unwrap()[0].as_ref(),
        "<built-in method run_backward of torch._C._EngineBase object at 0x7ff7d614d3a0>"
    );
    // No Python function makes a row unless asked.
    assert!(grouped.rows.iter().all(|r| !r.name.contains(".py(")));
    let with_python = key_averages(
        &trace,
        &KeyAveragesOptions {
            include_python_functions: true,
            ..by_stack(5)
        },
    );
    assert!(with_python
        .rows
        .iter()
        .any(|r| &*r.name == "nn.Module: Linear_0"));
}

#[test]
fn python_functions_nest_as_host_events_but_make_no_rows() {
    let mut py = op("t.py(3): step", 1, 0, 100);
    py.kind = ActivityType::PythonFunction;
    let mut inner = op("t.py(7): helper", 1, 20, 40);
    inner.kind = ActivityType::PythonFunction;
    // The op runs Python inside it (a custom backward, say): its self time excludes it.
    let t = trace(vec![py, op("aten::mm", 1, 10, 60), inner]);
    let summary = key_averages(&t, &Default::default());
    assert_eq!(rows(&summary), [("aten::mm", 1, 30, 50, 0, 0)]);
    assert!(summary.rows[0].has_cpu_parent);
    assert_eq!(summary.self_cpu_time_total_ns(), 30_000);
    let events = function_events(&t, &Default::default());
    let names: Vec<(&str, bool, i64)> = events
        .events
        .iter()
        .map(|e| (&*e.name, e.is_python_function, e.self_cpu_time_total_ns))
        .collect();
    assert_eq!(
        names,
        [
            ("t.py(3): step", true, 50_000),
            ("aten::mm", false, 30_000),
            ("t.py(7): helper", true, 20_000)
        ]
    );
    let frames: Vec<&str> = events.events[2].stack.iter().map(|f| &**f).collect();
    assert_eq!(frames, ["t.py(3): step"]);
}

#[test]
fn json_and_csv_carry_the_stack_when_grouping_by_it() {
    let mut py = op("t.py(3): step", 1, 0, 100);
    py.kind = ActivityType::PythonFunction;
    let t = trace(vec![
        py,
        op("aten::mm", 1, 10, 60),
        op("aten::mm", 2, 70, 80),
    ]);
    let summary = key_averages(&t, &by_stack(5));
    let options = TableOptions::default();
    let json: serde_json::Value = serde_json::from_str(&summary.json(&options)).unwrap();
    let stacks: Vec<&serde_json::Value> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["stack"])
        .collect();
    assert_eq!(
        stacks,
        [
            &serde_json::json!(["t.py(3): step"]),
            &serde_json::json!([])
        ]
    );
    let csv = summary.csv(&options);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("name,stack,count,"), "{csv}");
    assert!(lines[1].starts_with("aten::mm,t.py(3): step;,1,"), "{csv}");
    assert!(lines[2].starts_with("aten::mm,,1,"), "{csv}");
    // Not grouping: no stack anywhere.
    let plain = key_averages(&t, &Default::default());
    assert!(!plain.json(&options).contains("stack"));
    assert!(!plain.csv(&options).contains("stack"));
}

/// Lists the events of `trace` streamed item by item, draining after each (folding after
/// `fold_after` ops), reading again when the builder asks, and dropping what the stopped
/// read listed; returns the rows and every listed event.
fn listed(trace: &Trace, fold_after: usize) -> (KeyAverages, Vec<SummedEvent>) {
    let mut builder = KeyAveragesBuilder::new(KeyAveragesOptions::default());
    builder.fold_after = fold_after;
    loop {
        builder.list_events();
        let mut events = Vec::new();
        builder.add_trace(trace);
        events.extend(builder.drain_events());
        match builder.finish_listing() {
            Ok((summary, rest)) => {
                events.extend(rest);
                return (summary, events);
            }
            Err(again) => builder = again.builder(),
        }
    }
}

/// Same-named only children whose own children are final before their fate is known:
/// `x` [0, 100] ⊃ `x` [10, 90] ⊃ {`y` [20, 30] ⊃ `w` [22, 24], `z` [40, 50]} (absorbed, so
/// `y` and `z` are the outer `x`'s children); `x` [100, 200] ⊃ `x` [110, 150] ⊃ `y`
/// [120, 130], then a sibling `s` [160, 170] (kept); three levels of `v` (absorbed twice).
fn absorbed_children_trace() -> Trace {
    trace(vec![
        op("x", 1, 0, 100),
        op("x", 1, 10, 90),
        op("y", 1, 20, 30),
        op("w", 1, 22, 24),
        op("z", 1, 40, 50),
        op("x", 1, 100, 200),
        op("x", 1, 110, 150),
        op("y", 1, 120, 130),
        op("s", 1, 160, 170),
        op("v", 1, 300, 400),
        op("v", 1, 310, 390),
        op("v", 1, 320, 380),
        op("y", 1, 330, 340),
        op("z", 1, 350, 360),
        op("a", 1, 500, 510),
    ])
}

/// A listed op's name and start (µs), its parent's, and its depth.
type Shape = (String, i64, Option<(String, i64)>, Option<u32>);

#[test]
fn listed_parents_are_listed_ops_and_the_same_whether_folded_or_held() {
    // (name, start, parent's name and start, depth) of each host op, folded and held.
    let shape = |fold_after: usize| {
        let (_, events) = listed(&absorbed_children_trace(), fold_after);
        let by_id: HashMap<u64, &SummedEvent> = events.iter().map(|e| (e.id, e)).collect();
        let mut shape: Vec<Shape> = events
            .iter()
            .map(|e| {
                let parent = e.parent.map(|p| {
                    let p = by_id.get(&p).expect("a listed parent");
                    (p.name.to_string(), p.start_ns / 1000)
                });
                (e.name.to_string(), e.start_ns / 1000, parent, e.depth)
            })
            .collect();
        shape.sort();
        shape
    };
    let x = |start: i64| Some(("x".to_string(), start));
    let v = Some(("v".to_string(), 300));
    let expected = vec![
        ("a".to_string(), 500, None, Some(0)),
        ("s".to_string(), 160, x(100), Some(1)),
        ("v".to_string(), 300, None, Some(0)),
        ("w".to_string(), 22, Some(("y".to_string(), 20)), Some(3)),
        ("x".to_string(), 0, None, Some(0)),
        ("x".to_string(), 100, None, Some(0)),
        ("x".to_string(), 110, x(100), Some(1)),
        ("y".to_string(), 20, x(0), Some(2)),
        ("y".to_string(), 120, x(110), Some(2)),
        ("y".to_string(), 330, v.clone(), Some(3)),
        ("z".to_string(), 40, x(0), Some(2)),
        ("z".to_string(), 350, v, Some(3)),
    ];
    assert_eq!(shape(0), expected);
    assert_eq!(shape(usize::MAX), expected);
}

#[test]
fn listed_device_work_names_the_op_whose_device_time_it_is_whether_folded_or_held() {
    // Three levels of `v`, each with a kernel: the innermost's is the outer op's device
    // time, the two others' are no op's (PyTorch's collapse keeps the innermost record).
    let chain = trace(vec![
        with_correlation(op("v", 1, 0, 100), 11),
        device(ActivityType::ConcurrentKernel, "k0", 1, 2, 11),
        with_correlation(op("v", 1, 10, 90), 12),
        device(ActivityType::ConcurrentKernel, "k1", 11, 13, 12),
        with_correlation(op("v", 1, 20, 80), 13),
        device(ActivityType::ConcurrentKernel, "k2", 21, 25, 13),
        op("a", 1, 200, 210),
    ]);
    let (_, events) = listed(&chain, usize::MAX);
    let mut hosts: Vec<(String, Option<i64>)> = events
        .iter()
        .filter(|e| e.on_device)
        .map(|e| {
            let host = e
                .host_op
                .map(|h| events.iter().find(|o| o.id == h).unwrap().start_ns);
            (e.name.to_string(), host)
        })
        .collect();
    hosts.sort();
    assert_eq!(
        hosts,
        [
            ("k0".to_string(), None),
            ("k1".to_string(), None),
            ("k2".to_string(), Some(0))
        ]
    );
    for trace in [linked_trace(), correlation_only_trace(), chain] {
        let attribution = |fold_after: usize| {
            let (_, events) = listed(&trace, fold_after);
            let by_id: HashMap<u64, &SummedEvent> = events.iter().map(|e| (e.id, e)).collect();
            // Each host op's own device time is the work that names it.
            let mut through: HashMap<u64, i64> = HashMap::new();
            let mut pairs = Vec::new();
            for e in events.iter().filter(|e| e.on_device) {
                let host = e.host_op.map(|h| {
                    *through.entry(h).or_default() += e.self_device_ns;
                    let h = by_id.get(&h).expect("a listed host op");
                    (h.name.to_string(), h.start_ns)
                });
                pairs.push((e.name.to_string(), e.start_ns, host));
            }
            for e in events.iter().filter(|e| !e.on_device && !e.legacy) {
                assert_eq!(through.get(&e.id).copied().unwrap_or(0), e.self_device_ns);
                assert_eq!(e.host_op, None);
            }
            pairs.sort();
            pairs
        };
        let held = attribution(usize::MAX);
        assert!(held.iter().any(|p| p.2.is_some()));
        assert_eq!(attribution(0), held);
    }
}

#[test]
fn the_listed_events_sum_to_the_rows_whether_folded_or_held() {
    for trace in [
        pytorch_trace(),
        linked_trace(),
        correlation_only_trace(),
        absorbed_children_trace(),
    ] {
        for fold_after in [0, usize::MAX] {
            let (summary, events) = listed(&trace, fold_after);
            let mut sums: Vec<(&str, bool, u64, i64, i64, i64, i64)> = Vec::new();
            for e in events.iter().filter(|e| !e.python) {
                let i = match sums
                    .iter()
                    .position(|s| (s.0, s.1) == (&*e.name, e.on_device))
                {
                    Some(i) => i,
                    None => {
                        sums.push((&e.name, e.on_device, 0, 0, 0, 0, 0));
                        sums.len() - 1
                    }
                };
                let s = &mut sums[i];
                s.2 += 1;
                s.3 += e.self_host_ns;
                s.4 += e.host_total_ns;
                s.5 += e.self_device_ns;
                s.6 += e.device_total_ns;
            }
            let mut expected: Vec<_> = summary
                .rows
                .iter()
                .map(|r| {
                    (
                        &*r.name,
                        r.on_device,
                        r.count,
                        r.self_cpu_time_total_ns,
                        r.cpu_time_total_ns,
                        r.self_device_time_total_ns,
                        r.device_time_total_ns,
                    )
                })
                .collect();
            sums.sort();
            expected.sort();
            assert_eq!(sums, expected, "fold after {fold_after}");
            // Each event once; every parent is a listed host op.
            let mut ids: Vec<u64> = events.iter().map(|e| e.id).collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), events.len());
            let orphans = events
                .iter()
                .filter_map(|e| e.parent)
                .filter(|p| ids.binary_search(p).is_err())
                .count();
            assert_eq!(orphans, 0, "fold after {fold_after}");
        }
    }
}

#[test]
fn a_builder_lists_no_event_unless_asked() {
    let mut builder = KeyAveragesBuilder::new(KeyAveragesOptions::default());
    builder.add_trace(&linked_trace());
    assert_eq!(builder.drain_events().count(), 0);
    let (summary, events) = builder.finish_listing().unwrap();
    assert!(!summary.rows.is_empty());
    assert!(events.is_empty());
}

/// PyTorch's `prof.key_averages()` is its events' `key_averages()`: averaging the events
/// gives the rows the trace's summary has, for every way of grouping them, on traces with
/// shapes, stacks, memory, device work and Python functions.
#[test]
fn averaging_the_events_gives_the_summarys_rows() {
    let groupings = [
        KeyAveragesOptions::default(),
        KeyAveragesOptions {
            group_by_input_shapes: true,
            ..Default::default()
        },
        KeyAveragesOptions {
            group_by_overload_name: true,
            ..Default::default()
        },
        by_stack(1),
        by_stack(5),
        KeyAveragesOptions {
            group_by_stack_n: 3,
            include_python_functions: true,
            group_by_input_shapes: true,
            ..Default::default()
        },
    ];
    let traces = [
        ("pytorch", pytorch_trace()),
        ("stack", stack_trace()),
        ("memory", memory_trace()),
        ("linked", linked_trace()),
        ("absorbed children", absorbed_children_trace()),
    ];
    let mut compared = 0;
    for (name, trace) in &traces {
        for options in &groupings {
            let summary = key_averages(trace, options);
            let events = function_events(trace, options);
            let averaged = events.key_averages(options);
            // The same rows, which know their first events besides.
            assert!(averaged.rows.iter().all(|r| r.first_event.is_some()));
            let rows: Vec<Row> = (averaged.rows.iter().cloned())
                .map(|r| Row {
                    first_event: None,
                    ..r
                })
                .collect();
            assert_eq!(rows, summary.rows, "{name} trace, {options:?}");
            assert_eq!(
                averaged.table(&TableOptions::default()),
                summary.table(&TableOptions::default()),
                "{name} trace, {options:?}"
            );
            compared += summary.rows.len();
        }
    }
    assert!(compared > 200, "{compared} rows compared");
}

/// Each host op lists the device work linked to it (PyTorch's `FunctionEvent.kernels`), and
/// events carry their type, `External id` and link as PyTorch's do.
#[test]
fn host_ops_list_the_device_work_linked_to_them() {
    let events = function_events(&linked_trace(), &Default::default());
    let of = |name: &str, id: u64| {
        let e = events
            .events
            .iter()
            .find(|e| &*e.name == name && e.id == id);
        e.unwrap_or_else(|| panic!("no {name} {id}"))
    };
    let kernels = |e: &FunctionEvent| -> Vec<(String, i64, f64)> {
        let k = e.kernels.iter();
        k.map(|k| (k.name.to_string(), k.device, k.duration_us))
            .collect()
    };
    let first_mm = of("mm", 2);
    assert_eq!(
        kernels(first_mm),
        [
            ("gemm".to_string(), 0, 200.0),
            ("Memcpy DtoD".to_string(), 0, 100.0)
        ]
    );
    assert_eq!(kernels(of("mm", 3)), [("gemm".to_string(), 0, 300.0)]);
    assert_eq!(
        (
            first_mm.activity_type,
            first_mm.external_id,
            first_mm.linked_correlation_id
        ),
        (Some(ActivityType::CpuOp), 2, 0)
    );
    // The runtime call is linked to the op but is no device work: no kernels of its own,
    // and not the op's.
    let launch = of("cudaLaunchKernel", 2);
    assert_eq!(
        (
            launch.kernels.len(),
            launch.linked_correlation_id,
            launch.external_id
        ),
        (0, 2, 2)
    );
    let gemm = events.events.iter().find(|e| &*e.name == "gemm").unwrap();
    assert_eq!(
        (
            gemm.activity_type,
            gemm.external_id,
            gemm.linked_correlation_id,
            gemm.kernels.len()
        ),
        (Some(ActivityType::ConcurrentKernel), 2, 2, 0)
    );
}
