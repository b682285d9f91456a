//! Which host op device time belongs to, one rule for every tool, checked against an
//! independent reference.
//!
//! - One attribution: on a trace with device work linked by `External id`, by its runtime
//!   call's correlation only, and linked to nothing, `summary`, `flamegraph --device`,
//!   `report`, `diff` and the Parquet `ops` table give each host op the same self device
//!   time, and leave the same time unlinked; so do they on the demo's OpenReg trace and on a
//!   `scripts/gen_trace.py` trace.
//! - The reference: HolisticTraceAnalysis's own op-to-kernel mapping (its call graph: a
//!   kernel's parent is the runtime call its `correlation` names, whose parent is the op
//!   around it) gives the same self and total device time per op as `summary` on those
//!   traces, except where the kernel's `External id` names another op than the one around
//!   its launch: there omniprof follows PyTorch's table, which gives a kernel to the op
//!   whose correlation it carries (`docs/stubs-and-summary.md` §4).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::process::Command;

use omniprof_test_support::cli::{arg, Cli};
use omniprof_test_support::data::gen_trace;
use omniprof_test_support::skip::{self, Needs};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use serde_json::Value;

const OMNIPROF: Cli = Cli::new(env!("CARGO_BIN_EXE_omniprof"));

/// One step on one thread, times in whole microseconds (HTA's unit), with device work:
/// - `gemm`, linked to `aten::addmm` by its `External id`;
/// - `relu_kernel`, with no `External id`: its runtime call's correlation leads to the call,
///   and the op around the call (`aten::clamp_min`) receives it;
/// - a copy launched by `aten::copy_` after its child `aten::empty` ended (an op that
///   outlives its children);
/// - `copy_kernel`, whose launch sits in `aten::_to_copy` inside `aten::to` while its
///   `External id` (and its launch's) names `aten::to`;
/// - `orphan_kernel` (no `External id`, no call with its correlation) and `stray_kernel`
///   (an `External id` no op has): linked to nothing.
const MIXED: &str = r#"{"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 100, "tid": 1, "ts": 1000, "dur": 400, "args": {"External id": 1}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 100, "tid": 1, "ts": 1010, "dur": 90, "args": {"External id": 2}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 100, "tid": 1, "ts": 1020, "dur": 70, "args": {"External id": 3}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 1030, "dur": 5, "args": {"External id": 3, "correlation": 501}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 100, "tid": 1, "ts": 1110, "dur": 40, "args": {"External id": 4}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::clamp_min", "pid": 100, "tid": 1, "ts": 1115, "dur": 25, "args": {"External id": 5}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 1120, "dur": 5, "args": {"correlation": 502}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 100, "tid": 1, "ts": 1160, "dur": 90, "args": {"External id": 6}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 100, "tid": 1, "ts": 1162, "dur": 8, "args": {"External id": 7}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 100, "tid": 1, "ts": 1200, "dur": 10, "args": {"External id": 6, "correlation": 503}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::to", "pid": 100, "tid": 1, "ts": 1260, "dur": 90, "args": {"External id": 8}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::_to_copy", "pid": 100, "tid": 1, "ts": 1262, "dur": 83, "args": {"External id": 9}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 1270, "dur": 5, "args": {"External id": 8, "correlation": 504}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1040, "dur": 20, "args": {"External id": 3, "correlation": 501, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7, "ts": 1130, "dur": 15, "args": {"correlation": 502, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 1215, "dur": 20, "args": {"External id": 6, "correlation": 503, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "copy_kernel", "pid": 0, "tid": 7, "ts": 1280, "dur": 20, "args": {"External id": 8, "correlation": 504, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "orphan_kernel", "pid": 0, "tid": 7, "ts": 1360, "dur": 10, "args": {"correlation": 999, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "stray_kernel", "pid": 0, "tid": 7, "ts": 1372, "dur": 8, "args": {"External id": 777, "correlation": 998, "device": 0, "stream": 7}}
]}
"#;

/// Self device nanoseconds per host op name (ops with none left out), and the device
/// nanoseconds no op takes.
#[derive(Debug, PartialEq, Eq)]
struct Attribution {
    by_op: BTreeMap<String, i64>,
    unlinked_ns: i64,
}

impl Attribution {
    fn new(pairs: impl IntoIterator<Item = (String, i64)>, unlinked_ns: i64) -> Self {
        let mut by_op = BTreeMap::new();
        for (name, ns) in pairs {
            *by_op.entry(name).or_insert(0) += ns;
        }
        by_op.retain(|_, ns| *ns != 0);
        Self { by_op, unlinked_ns }
    }
}

fn ns(us: &Value) -> i64 {
    (us.as_f64().unwrap_or_else(|| panic!("not a number: {us}")) * 1000.0).round() as i64
}

/// The host rows of a key-averages JSON (`summary`, the report's Operators view): (name,
/// self device ns, device total ns); and the device work's total (GPU user annotations,
/// projections of host ranges, are no work).
fn key_average_rows(json: &Value) -> (Vec<(String, i64, i64)>, i64) {
    let rows = json["rows"].as_array().expect("rows");
    let host = rows
        .iter()
        .filter(|r| r["on_device"] == false)
        .map(|r| {
            let name = r["name"].as_str().unwrap().to_owned();
            (
                name,
                ns(&r["self_device_time_total_us"]),
                ns(&r["device_time_total_us"]),
            )
        })
        .collect();
    let device = rows
        .iter()
        .filter(|r| r["on_device"] == true && r["user_annotation"] == false)
        .map(|r| ns(&r["self_device_time_total_us"]))
        .sum();
    (host, device)
}

fn summary_json(trace: &Path) -> Value {
    let out = OMNIPROF.ok([
        "summary",
        arg(trace),
        "--format",
        "json",
        "--row-limit",
        "-1",
    ]);
    serde_json::from_str(&out).unwrap()
}

/// `summary`'s attribution: what device time the host rows hold, and the rest.
fn by_summary(trace: &Path) -> Attribution {
    let (host, device) = key_average_rows(&summary_json(trace));
    let linked: i64 = host.iter().map(|(_, s, _)| s).sum();
    Attribution::new(host.into_iter().map(|(n, s, _)| (n, s)), device - linked)
}

/// `flamegraph --device`'s: each stack's time to the frame above its device leaf.
fn by_flamegraph(trace: &Path, dir: &Path) -> Attribution {
    let folded = dir.join("device.folded");
    OMNIPROF.ok([
        "flamegraph",
        "--device",
        "--folded",
        arg(trace),
        "-o",
        arg(&folded),
    ]);
    let text = std::fs::read_to_string(&folded).unwrap();
    let mut pairs = Vec::new();
    let mut unlinked = 0;
    for line in text.lines() {
        let (stack, ns) = line.rsplit_once(' ').unwrap();
        let ns: i64 = ns.parse().unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        match frames.as_slice() {
            ["[unlinked]", _] => unlinked += ns,
            [.., op, _kernel] => pairs.push((op.to_string(), ns)),
            _ => panic!("a device stack without an op: {line}"),
        }
    }
    Attribution::new(pairs, unlinked)
}

/// The report's: its Operators view (the summary's rows, as the page holds them).
fn by_report(trace: &Path, dir: &Path) -> Attribution {
    let page = dir.join("report.html");
    OMNIPROF.ok(["report", arg(trace), "-o", arg(&page)]);
    let html = std::fs::read_to_string(&page).unwrap();
    let open = r#"<script type="application/json" id="model">"#;
    let start = html.find(open).expect("a model") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    let model: Value = serde_json::from_str(&html[start..end]).unwrap();
    let (host, device) = key_average_rows(&model["operators"]);
    let linked: i64 = host.iter().map(|(_, s, _)| s).sum();
    Attribution::new(host.into_iter().map(|(n, s, _)| (n, s)), device - linked)
}

/// `diff`'s: the trace against itself, its rows' `new` self device time. (Its rows do not
/// say which device rows are GPU user annotations: `annotations` names them.)
fn by_diff(trace: &Path, annotations: &[String]) -> Attribution {
    let out = OMNIPROF.ok(["diff", arg(trace), arg(trace), "--format", "json"]);
    let json: Value = serde_json::from_str(&out).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let of = |r: &Value| ns(&r["self_device_time_total_us"]["new"]);
    let host = rows.iter().filter(|r| r["on_device"] == false);
    let work = |r: &&Value| r["on_device"] == true && !annotations.iter().any(|a| r["name"] == **a);
    let device: i64 = rows.iter().filter(work).map(of).sum();
    let linked: i64 = host.clone().map(of).sum();
    Attribution::new(
        host.map(|r| (r["name"].as_str().unwrap().to_owned(), of(r))),
        device - linked,
    )
}

/// The Parquet `ops` table's: device rows joined to their `host_op_id`'s row.
fn by_parquet(trace: &Path, dir: &Path) -> Attribution {
    let tables = dir.join("tables");
    OMNIPROF.ok([
        "convert",
        arg(trace),
        "-o",
        arg(&tables),
        "--format",
        "parquet",
    ]);
    let file = File::open(tables.join("ops/rank=0/part-0.parquet")).unwrap();
    let reader = SerializedFileReader::new(file).unwrap();
    let rows: Vec<BTreeMap<String, Field>> = reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            row.unwrap()
                .get_column_iter()
                .map(|(name, field)| (name.clone(), field.clone()))
                .collect()
        })
        .collect();
    let long = |row: &BTreeMap<String, Field>, column: &str| match &row[column] {
        Field::Long(v) => Some(*v),
        Field::Null => None,
        other => panic!("{column}: {other:?}"),
    };
    let names: BTreeMap<i64, String> = rows
        .iter()
        .map(|r| match &r["name"] {
            Field::Str(name) => (long(r, "op_id").unwrap(), name.clone()),
            other => panic!("name: {other:?}"),
        })
        .collect();
    let mut pairs = Vec::new();
    let mut unlinked = 0;
    let work = |r: &&BTreeMap<String, Field>| {
        r["on_device"] == Field::Bool(true) && r["user_annotation"] == Field::Bool(false)
    };
    for row in rows.iter().filter(work) {
        let ns = long(row, "self_device_ns").unwrap();
        match long(row, "host_op_id") {
            Some(op) => pairs.push((names[&op].clone(), ns)),
            None => unlinked += ns,
        }
    }
    Attribution::new(pairs, unlinked)
}

/// Every tool's attribution of `trace`, asserted equal; that one.
fn one_attribution(trace: &Path) -> Attribution {
    let dir = tempfile::tempdir().unwrap();
    let summary = by_summary(trace);
    let json = summary_json(trace);
    let annotations: Vec<String> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["on_device"] == true && r["user_annotation"] == true)
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        by_flamegraph(trace, dir.path()),
        summary,
        "flamegraph --device"
    );
    assert_eq!(by_report(trace, dir.path()), summary, "report");
    assert_eq!(by_diff(trace, &annotations), summary, "diff");
    assert_eq!(by_parquet(trace, dir.path()), summary, "Parquet ops");
    summary
}

#[test]
fn every_tool_gives_device_work_linked_by_external_id_runtime_call_or_nothing_to_the_same_op() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("mixed.json");
    std::fs::write(&trace, MIXED).unwrap();
    let expected = [
        ("aten::addmm", 20_000),
        ("aten::clamp_min", 15_000),
        ("aten::copy_", 20_000),
        ("aten::to", 20_000),
    ];
    assert_eq!(
        one_attribution(&trace),
        Attribution::new(expected.map(|(n, ns)| (n.to_owned(), ns)), 18_000)
    );
}

#[test]
fn every_tool_gives_the_demos_and_a_generated_traces_device_work_to_the_same_ops() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo.pt.trace.json");
    OMNIPROF.ok(["demo", "--steps", "5", "-o", arg(&demo)]);
    let generated = gen_trace(&dir.path().join("gen.json"), &["--ops", "2000"]);
    for trace in [demo, generated] {
        let attribution = one_attribution(&trace);
        assert!(attribution.by_op.len() >= 3, "{attribution:?}");
        assert_eq!(attribution.unlinked_ns, 0, "{}", trace.display());
    }
}

/// HTA's attribution of a trace: per op name (`ProfilerStep#<n>` as `ProfilerStep*`), the
/// self and total device nanoseconds, from its call graph; and the device time it links to
/// no op. HTA keeps whole microseconds (rounding starts up and ends down, which unnests
/// sub-microsecond launches from their ops): the script multiplies every time by 1000, so
/// that a nanosecond is one of HTA's microseconds, each event nests as it did and HTA's
/// times are exact nanoseconds. The totals sum each op's device time up its ancestors, as
/// PyTorch's device total does.
const HTA_ATTRIBUTION: &str = r#"
import json, os, sys, tempfile
from collections import defaultdict
from decimal import Decimal

from hta.common.call_stack import CallGraph
from hta.trace_analysis import TraceAnalysis

doc = json.load(open(sys.argv[1]), parse_float=Decimal)
for e in doc["traceEvents"]:
    for key in ("ts", "dur"):
        if key in e:
            e[key] = int(Decimal(e[key]) * 1000)
doc.pop("baseTimeNanoseconds", None)
work = tempfile.mkdtemp()
with open(os.path.join(work, "rank0.pt.trace.json"), "w") as f:
    json.dump(doc, f, default=str)

analyzer = TraceAnalysis(trace_dir=work)
rank = analyzer.t.get_ranks()[0]
CallGraph(analyzer.t, ranks=[rank])  # each event's `parent`; device work's is its launch
df = analyzer.t.get_trace(rank)
names = analyzer.t.symbol_table.get_sym_table()

def name(i):
    n = names[int(df.at[i, "name"])]
    return "ProfilerStep*" if n.startswith("ProfilerStep#") else n

def parent(i):
    p = df.at[i, "parent"]
    return int(p) if p == p else -1

rows = defaultdict(lambda: [0, 0])
unlinked = 0
for k in df.index[df["stream"].ne(-1)]:
    ns = int(df.at[k, "dur"])
    launch = int(df.at[k, "index_correlation"])
    op = parent(launch) if launch > 0 else -1
    if op < 0:
        unlinked += ns
        continue
    rows[name(op)][0] += ns
    below = None
    while op >= 0:
        # PyTorch's tree folds an op into its same-named parent (`aten::sum` in
        # `aten::sum`): the pair's row counts the time once.
        if name(op) != below:
            rows[name(op)][1] += ns
        below = name(op)
        op = parent(op)
print(json.dumps({"rows": rows, "unlinked_ns": unlinked}))
"#;

/// Per op name, (self, total) device nanoseconds; ops with none left out.
type DeviceTimes = BTreeMap<String, (i64, i64)>;

fn hta_attribution(python: &str, trace: &Path) -> (DeviceTimes, i64) {
    let out = Command::new(python)
        .args(["-c", HTA_ATTRIBUTION, arg(trace)])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "HTA failed on {}: {}\n{stdout}",
        trace.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let rows = json["rows"].as_object().unwrap();
    let rows = rows
        .iter()
        .map(|(name, v)| {
            let times = (v[0].as_i64().unwrap(), v[1].as_i64().unwrap());
            (name.clone(), times)
        })
        .filter(|(_, t)| *t != (0, 0))
        .collect();
    (rows, json["unlinked_ns"].as_i64().unwrap())
}

/// `summary`'s (self, total) device nanoseconds per host row, rows with none left out.
fn summary_device_times(trace: &Path) -> DeviceTimes {
    let (host, _) = key_average_rows(&summary_json(trace));
    host.into_iter()
        .map(|(name, own, total)| (name, (own, total)))
        .filter(|(_, t)| *t != (0, 0))
        .collect()
}

/// A row where two tables differ: its name, summary's (self, total), HTA's.
type Differing = (String, (i64, i64), (i64, i64));

/// The rows where two tables differ.
fn differing(ours: &DeviceTimes, theirs: &DeviceTimes) -> Vec<Differing> {
    let mut names: Vec<&String> = ours.keys().chain(theirs.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|n| {
            let get = |t: &DeviceTimes| t.get(n).copied().unwrap_or_default();
            (n.clone(), get(ours), get(theirs))
        })
        .filter(|(_, a, b)| a != b)
        .collect()
}

/// The reference: HTA's call graph, on the hand-made trace, the demo's and a generated one.
/// Every row agrees but two of the hand-made trace's: `copy_kernel`'s launch sits in
/// `aten::_to_copy`, which HTA gives it to, while its `External id` names `aten::to`, which
/// PyTorch's table (and so omniprof's) gives it to. CI installs HTA and requires the check;
/// elsewhere it skips with a line the test run shows.
#[test]
fn each_ops_device_time_is_htas_except_where_the_external_id_names_an_outer_op() {
    let Ok(python) = std::env::var("OMNIPROF_HTA_PYTHON") else {
        return skip::skip(
            "HTA attribution check",
            Needs::Hta,
            "OMNIPROF_HTA_PYTHON is not set (bash .ci/run installs HTA and sets it)",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let mixed = dir.path().join("mixed.json");
    std::fs::write(&mixed, MIXED).unwrap();
    let (theirs, unlinked) = hta_attribution(&python, &mixed);
    assert_eq!(unlinked, 18_000, "orphan_kernel and stray_kernel");
    let ours = summary_device_times(&mixed);
    assert_eq!(ours.len(), 7, "{ours:?}");
    assert_eq!(
        differing(&ours, &theirs),
        [
            ("aten::_to_copy".to_owned(), (0, 0), (20_000, 20_000)),
            ("aten::to".to_owned(), (20_000, 20_000), (0, 20_000)),
        ]
    );

    // The demo: four threads of 40 steps (HTA reads a trace of small correlation ids with
    // the wrong integer width, so the demo runs its default length).
    let demo = dir.path().join("demo.pt.trace.json");
    OMNIPROF.ok(["demo", "-o", arg(&demo)]);
    let generated = gen_trace(&dir.path().join("gen.json"), &["--ops", "2000"]);
    for trace in [demo, generated] {
        let (theirs, unlinked) = hta_attribution(&python, &trace);
        let ours = summary_device_times(&trace);
        assert!(ours.len() >= 6, "{}: {ours:?}", trace.display());
        assert_eq!(differing(&ours, &theirs), [], "{}", trace.display());
        assert_eq!(unlinked, 0, "{}", trace.display());
    }
}
