//! The tables of a three-rank job, read back with the `parquet` crate's own reader: a file
//! per table and rank, exactly the trace's activities, flows and header, and an `ops` table
//! whose sums per name are `key_averages`' rows for that rank; bad input fails naming the
//! file, or with `partial` keeps what was read.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use omniprof_analysis::{key_averages, KeyAveragesOptions};
use omniprof_parquet::{convert, ConvertOptions, ParquetError};
use omniprof_parquet::{SCHEMA_VERSION, SCHEMA_VERSION_KEY, TABLES};
use omniprof_read::TraceReader;
use omniprof_test_support::data::gen_trace;
use omniprof_trace::ActivityType;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

/// Every row of a Parquet file, as column name → value.
fn rows(path: &Path) -> Vec<BTreeMap<String, Field>> {
    let reader = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
    let version = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|kv| kv.key == SCHEMA_VERSION_KEY))
        .and_then(|kv| kv.value.clone());
    assert_eq!(
        version,
        Some(SCHEMA_VERSION.to_string()),
        "{}",
        path.display()
    );
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            row.unwrap()
                .get_column_iter()
                .map(|(name, field)| (name.clone(), field.clone()))
                .collect()
        })
        .collect()
}

fn long(row: &BTreeMap<String, Field>, column: &str) -> i64 {
    match &row[column] {
        Field::Long(v) => *v,
        other => panic!("{column}: {other:?}"),
    }
}

fn string(row: &BTreeMap<String, Field>, column: &str) -> String {
    match &row[column] {
        Field::Str(v) => v.clone(),
        other => panic!("{column}: {other:?}"),
    }
}

fn flag(row: &BTreeMap<String, Field>, column: &str) -> bool {
    match &row[column] {
        Field::Bool(v) => *v,
        other => panic!("{column}: {other:?}"),
    }
}

fn table(out: &Path, name: &str, rank: i64) -> Vec<BTreeMap<String, Field>> {
    rows(&out.join(name).join(format!("rank={rank}/part-0.parquet")))
}

#[test]
fn three_ranks_give_each_rank_its_traces_rows_and_the_summarys_sums() {
    let dir = tempfile::tempdir().unwrap();
    // Given out of rank order: each trace's rank is its distributedInfo's.
    let traces: Vec<PathBuf> = [2, 0, 1]
        .iter()
        .map(|r| {
            gen_trace(
                &dir.path().join(format!("rank{r}.json")),
                &[
                    "--ops",
                    "2000",
                    "--threads",
                    "3",
                    "--seed",
                    &(r + 5).to_string(),
                    "--rank",
                    &r.to_string(),
                ],
            )
        })
        .collect();
    let out = dir.path().join("tables");
    let converted = convert(&traces, &out, ConvertOptions::default()).unwrap();
    assert_eq!(
        converted.iter().map(|t| t.rank).collect::<Vec<_>>(),
        [2, 0, 1]
    );
    for t in TABLES {
        let mut ranks: Vec<String> = std::fs::read_dir(out.join(t.name))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        ranks.sort();
        assert_eq!(ranks, ["rank=0", "rank=1", "rank=2"], "{}", t.name);
    }
    for (trace_path, converted) in traces.iter().zip(&converted) {
        let rank = converted.rank;
        let trace = TraceReader::new()
            .read_path(trace_path)
            .into_trace()
            .unwrap();

        let slices = table(&out, "slices", rank);
        assert_eq!(slices.len(), trace.activities.len());
        // 2000 ops, 600 launches with their 600 kernels, and the rank's 10 steps (a
        // ProfilerStep range and its all-reduce kernel each).
        assert_eq!(slices.len(), 3220);
        for (i, (row, a)) in slices.iter().zip(&trace.activities).enumerate() {
            assert_eq!(long(row, "slice_id"), i as i64);
            assert_eq!(string(row, "name"), &*a.name);
            assert_eq!(string(row, "category"), a.kind.name());
            assert_eq!(
                (
                    long(row, "pid"),
                    long(row, "tid"),
                    long(row, "start_ns"),
                    long(row, "dur_ns")
                ),
                (a.device, a.resource, a.start_ns, a.duration_ns())
            );
        }
        let kernels = slices
            .iter()
            .filter(|r| string(r, "category") == ActivityType::ConcurrentKernel.name())
            .count();
        assert_eq!(kernels, 610);
        let flows = table(&out, "flows", rank);
        assert_eq!(flows.len(), 1200);
        assert_eq!(flows.iter().filter(|r| flag(r, "is_start")).count(), 600);
        assert!(table(&out, "instants", rank).is_empty());
        assert!(table(&out, "counters", rank).is_empty());
        let metadata = table(&out, "metadata", rank);
        let info = metadata
            .iter()
            .find(|r| string(r, "key") == "distributedInfo")
            .unwrap();
        assert_eq!(
            string(info, "value"),
            format!(r#"{{"backend": "nccl", "rank": {rank}, "world_size": 8}}"#)
        );

        // The ops table per name is the summary's rows, to the nanosecond.
        let sums = ops_sums(&out, rank);
        assert_eq!(sums, summary_sums(&trace));
        // 8 `block_<n>` ranges, 8 ops, the launch, 3 kernels, the steps and their all-reduce.
        assert_eq!(sums.len(), 22);
        assert_eq!(sums[&("aten::sum".to_owned(), false)][0], 200);
    }
}

type Sums = BTreeMap<(String, bool), [i64; 5]>;

/// Per (name, on device) of a rank's `ops`: calls, self and total host ns, self and total
/// device ns.
fn ops_sums(out: &Path, rank: i64) -> Sums {
    let mut sums = Sums::new();
    for row in table(out, "ops", rank) {
        assert!(!flag(&row, "python_function"));
        let s = sums
            .entry((string(&row, "name"), flag(&row, "on_device")))
            .or_default();
        s[0] += 1;
        s[1] += long(&row, "self_host_ns");
        s[2] += long(&row, "host_total_ns");
        s[3] += long(&row, "self_device_ns");
        s[4] += long(&row, "device_total_ns");
    }
    sums
}

/// The same of `key_averages`' rows.
fn summary_sums(trace: &omniprof_trace::Trace) -> Sums {
    key_averages(trace, &KeyAveragesOptions::default())
        .rows
        .iter()
        .map(|r| {
            (
                (r.name.to_string(), r.on_device),
                [
                    r.count as i64,
                    r.self_cpu_time_total_ns,
                    r.cpu_time_total_ns,
                    r.self_device_time_total_ns,
                    r.device_time_total_ns,
                ],
            )
        })
        .collect()
}

#[test]
fn a_trace_whose_span_comes_last_is_read_again_and_its_ops_still_sum_to_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    // More host ops than the summary holds before folding (65,536), then PyTorch's span,
    // where host times count from, last: the summary reads such a trace twice.
    let path = gen_trace(
        &dir.path().join("late.json"),
        &["--ops", "80000", "--rank", "0"],
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let end = text
        .rfind(r#"{"ph": "i", "s": "g", "name": "Record Window End""#)
        .unwrap();
    let span = r#"{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 500, "dur": 99999999, "args": {"Op count": 0}},"#;
    std::fs::write(&path, format!("{}{span}\n  {}", &text[..end], &text[end..])).unwrap();
    let out = dir.path().join("tables");
    convert(std::slice::from_ref(&path), &out, ConvertOptions::default()).unwrap();
    let trace = TraceReader::new().read_path(&path).into_trace().unwrap();
    assert_eq!(trace.spans.len(), 1);
    let sums = ops_sums(&out, 0);
    assert_eq!(sums, summary_sums(&trace));
    assert_eq!(sums[&("aten::sum".to_owned(), false)][0], 8000);
}

/// A table's rows in the file of a rank's `part`-th trace.
fn part(out: &Path, name: &str, rank: i64, part: usize) -> Vec<Row> {
    rows(
        &out.join(name)
            .join(format!("rank={rank}/part-{part}.parquet")),
    )
}

/// The id columns of each table (omniprof's numbering, not the trace's) and what they
/// count: slices, instants or ops.
const ID_COLUMNS: [(&str, &[(&str, usize)]); 4] = [
    ("slices", &[("slice_id", 0), ("op_id", 2)]),
    ("instants", &[("instant_id", 1), ("op_id", 2)]),
    ("flows", &[("slice_id", 0), ("instant_id", 1)]),
    (
        "ops",
        &[("op_id", 2), ("parent_op_id", 2), ("host_op_id", 2)],
    ),
];

#[test]
fn a_ranks_later_traces_are_its_later_parts_with_ids_past_the_earlier_parts() {
    let dir = tempfile::tempdir().unwrap();
    let a = gen_trace(&dir.path().join("a.json"), &["--ops", "20", "--rank", "4"]);
    let b = gen_trace(
        &dir.path().join("b.json"),
        &["--ops", "30", "--seed", "9", "--rank", "4"],
    );
    // Its rank after its events: its ids were numbered before the rank was known.
    let c = dir.path().join("c.json");
    std::fs::write(
        &c,
        r#"{"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 1, "dur": 10},
{"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 2, "dur": 5}
], "distributedInfo": {"rank": 4}}"#,
    )
    .unwrap();
    let traces = [a, b, c];
    let out = dir.path().join("tables");
    let converted = convert(&traces, &out, ConvertOptions::default()).unwrap();
    assert_eq!(
        converted.iter().map(|t| t.rank).collect::<Vec<_>>(),
        [4, 4, 4]
    );
    // Each part is its trace's tables converted alone, its ids past the earlier parts'.
    let mut past = [0i64; 3];
    for (k, trace) in traces.iter().enumerate() {
        let alone = dir.path().join(format!("alone-{k}"));
        convert(
            std::slice::from_ref(trace),
            &alone,
            ConvertOptions::default(),
        )
        .unwrap();
        let mut used = past;
        for (name, columns) in ID_COLUMNS {
            let want: Vec<Row> = part(&alone, name, 4, 0)
                .into_iter()
                .map(|mut row| {
                    for &(column, counts) in columns {
                        if let Field::Long(id) = row.get_mut(column).unwrap() {
                            assert!(*id < 1 << 62, "{name}.{column} {id}");
                            *id += past[counts];
                            used[counts] = used[counts].max(*id + 1);
                        }
                    }
                    row
                })
                .collect();
            assert_eq!(
                part(&out, name, 4, k),
                want,
                "{name} of {}",
                trace.display()
            );
        }
        for name in ["counters", "device_properties"] {
            assert_eq!(part(&out, name, 4, k), part(&alone, name, 4, 0), "{name}");
        }
        let rank = part(&out, "metadata", 4, k)
            .into_iter()
            .find(|r| string(r, "key") == "omniprof.rank")
            .map(|r| string(&r, "value"));
        assert_eq!(
            rank.unwrap(),
            format!(r#"{{"rank": 4, "from": "distributedInfo", "part": {k}}}"#)
        );
        past = used;
    }
    // 36 and 54 slices of the generated traces (no instants), 2 of the last, each an op.
    assert_eq!(past, [92, 0, 92]);
    assert_eq!(part(&out, "flows", 4, 1).len(), 18);
    let entries: Vec<_> = std::fs::read_dir(out.join("slices")).unwrap().collect();
    assert_eq!(entries.len(), 1);
}

#[test]
fn a_truncated_trace_fails_or_with_partial_keeps_the_rows_before_its_cut() {
    let dir = tempfile::tempdir().unwrap();
    let whole = gen_trace(&dir.path().join("whole.json"), &["--ops", "200"]);
    let text = std::fs::read(&whole).unwrap();
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();

    let out = dir.path().join("failed");
    let e = convert(std::slice::from_ref(&cut), &out, ConvertOptions::default()).unwrap_err();
    assert!(matches!(e, ParquetError::Read(_)), "{e}");
    assert!(e.to_string().contains("cut.json"), "{e}");
    assert!(!out.join("slices/rank=0").exists());

    let out = dir.path().join("partial");
    let options = ConvertOptions {
        partial: true,
        ..Default::default()
    };
    let converted = convert(std::slice::from_ref(&cut), &out, options).unwrap();
    assert!(converted[0].error.is_some());
    let read = TraceReader::new().read_path(&cut);
    assert!(read.error.is_some());
    assert_eq!(table(&out, "slices", 0).len(), read.trace.activities.len());
    assert!(!read.trace.activities.is_empty());
}

fn opt_long(row: &BTreeMap<String, Field>, column: &str) -> Option<i64> {
    match &row[column] {
        Field::Null => None,
        Field::Long(v) => Some(*v),
        other => panic!("{column}: {other:?}"),
    }
}

type Row = BTreeMap<String, Field>;

/// The `ops` rows of `gen_trace.py --rank 0` traces of 2,000 ops, which the summary holds
/// to the end, and of 80,000, more than it holds before it folds (65,536), with each
/// one's block count; converted once for the tests that read them.
fn held_and_folded_ops() -> &'static [(i64, Vec<Row>)] {
    static OPS: std::sync::OnceLock<Vec<(i64, Vec<Row>)>> = std::sync::OnceLock::new();
    OPS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        [2_000, 80_000]
            .into_iter()
            .map(|ops: i64| {
                let path = gen_trace(
                    &dir.path().join(format!("t{ops}.json")),
                    &["--ops", &ops.to_string(), "--rank", "0"],
                );
                let out = dir.path().join(format!("tables{ops}"));
                convert(std::slice::from_ref(&path), &out, ConvertOptions::default()).unwrap();
                (ops / 10, table(&out, "ops", 0))
            })
            .collect()
    })
}

#[test]
fn every_parent_is_a_row_of_ops_and_depths_count_the_nesting_whether_folded_or_held() {
    // Each block's inner `aten::sum` is absorbed into the outer one, when folding after
    // its launch was final: the launch then names the outer one.
    for (blocks, rows) in held_and_folded_ops() {
        let blocks = *blocks;
        let by_id: BTreeMap<i64, &BTreeMap<String, Field>> =
            rows.iter().map(|r| (long(r, "op_id"), r)).collect();
        let (mut nested, mut below_absorbed, mut top) = (0, 0, 0);
        for row in rows {
            let depth = opt_long(row, "depth");
            let Some(parent) = opt_long(row, "parent_op_id") else {
                let outside = flag(row, "on_device") || flag(row, "is_async");
                assert_eq!(depth, (!outside).then_some(0), "{row:?}");
                top += i64::from(!outside);
                continue;
            };
            let parent = by_id.get(&parent).expect("the parent's row");
            let parent_depth = opt_long(parent, "depth").unwrap();
            if depth == Some(parent_depth + 1) {
                nested += 1;
            } else {
                // The absorbed inner `aten::sum` still counts as a level.
                assert_eq!(depth, Some(parent_depth + 2), "{row:?}");
                assert_eq!(string(row, "name"), "cudaLaunchKernel");
                assert_eq!(string(parent, "name"), "aten::sum");
                below_absorbed += 1;
            }
        }
        // Each block: its range at the top; 8 ops and 2 launches one level down from their
        // parent; the sum's launch below the absorbed inner sum. And the 10 steps.
        assert_eq!(
            (top, nested, below_absorbed),
            (blocks + 10, 10 * blocks, blocks)
        );
    }
}

#[test]
fn device_work_names_the_host_op_whose_device_time_it_is_whether_folded_or_held() {
    for (blocks, rows) in held_and_folded_ops() {
        let blocks = *blocks;
        // Device time per host op through `host_op_id`, against each host op's own (self)
        // device time: the same, op by op.
        let mut through: BTreeMap<i64, i64> = BTreeMap::new();
        let mut names: BTreeMap<(String, String), i64> = BTreeMap::new();
        let by_id: BTreeMap<i64, &BTreeMap<String, Field>> =
            rows.iter().map(|r| (long(r, "op_id"), r)).collect();
        let mut unattributed = BTreeMap::new();
        for row in rows.iter().filter(|r| flag(r, "on_device")) {
            let Some(host) = opt_long(row, "host_op_id") else {
                *unattributed.entry(string(row, "name")).or_insert(0) += 1;
                continue;
            };
            *through.entry(host).or_default() += long(row, "self_device_ns");
            let name = string(by_id[&host], "name");
            *names.entry((string(row, "name"), name)).or_default() += 1;
        }
        let own: BTreeMap<i64, i64> = rows
            .iter()
            .filter(|r| !flag(r, "on_device") && long(r, "self_device_ns") != 0)
            .map(|r| (long(r, "op_id"), long(r, "self_device_ns")))
            .collect();
        assert_eq!(through, own);
        // The steps' all-reduce kernels carry no id that leads to an op.
        assert_eq!(
            unattributed,
            BTreeMap::from([("ncclDevKernel_AllReduce_Sum_f32_RING_LL".to_owned(), 10)])
        );
        assert!(rows
            .iter()
            .filter(|r| !flag(r, "on_device"))
            .all(|r| opt_long(r, "host_op_id").is_none()));
        let pairs: Vec<((&str, &str), i64)> = names
            .iter()
            .map(|((k, h), n)| ((k.as_str(), h.as_str()), *n))
            .collect();
        assert_eq!(
            pairs,
            [
                (("elementwise_kernel", "aten::clamp_min"), blocks),
                (("gemm_kernel", "aten::addmm"), blocks),
                // The inner sum launched it; the outer one absorbed the inner.
                (("reduce_kernel", "aten::sum"), blocks),
            ]
        );
    }
}
