//! Two traces' key-averages rows side by side: what got slower (or faster) between two runs.
//!
//! Rows are matched by their key (name, host or device, user range or not, stub-timed or
//! not, input shapes when grouped by them). For each of calls, self and total host time and
//! self and total device time a [`DiffRow`] holds the base value, the new value, their delta
//! (new − base, exact) and ratio (new / base, `None` when the base is 0). A row only in the
//! new trace is [`Change::New`], only in the base [`Change::Vanished`]. Rows are sorted by
//! the largest regression first: by the delta of a [`SortKey`] when one is given, else of
//! self host plus self device time. The text table cuts a name as the summary's does (55
//! characters, ending in `...`); the CSV and JSON keep it whole.
//!
//! ```
//! use omniprof_analysis::{diff, Change};
//! use omniprof_analysis::{key_averages, KeyAveragesOptions};
//! use omniprof_trace::{Activity, ActivityType, Trace};
//!
//! let run = |mm_ns: i64| {
//!     let mut t = Trace::new(0, 10_000);
//!     t.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, mm_ns));
//!     key_averages(&t, &KeyAveragesOptions::default())
//! };
//! let d = diff(&run(1_000), &run(1_500), None);
//! assert_eq!(d.rows[0].change, Change::Both);
//! assert_eq!(d.rows[0].self_cpu.delta(), 500);
//! assert_eq!(d.rows[0].self_cpu.ratio(), Some(1.5));
//! ```

use std::fmt::Write;
use std::sync::Arc;

use serde::Serialize;

use crate::key_averages::{KeyAverages, Row, SortKey, MAX_NAME_WIDTH};
use crate::render::csv::field;
use crate::render::table::{fit_name, format_time};
use omniprof_trace::FastMap;

/// Whether a row is in both traces or only one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// In both traces.
    Both,
    /// Only in the new trace.
    New,
    /// Only in the base trace.
    Vanished,
}

impl Change {
    fn label(self) -> &'static str {
        match self {
            Self::Both => "",
            Self::New => "new",
            Self::Vanished => "vanished",
        }
    }
}

/// One compared value: calls, or nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pair {
    /// In the base trace.
    pub base: i64,
    /// In the new trace.
    pub new: i64,
}

impl Pair {
    /// new − base (saturating).
    pub fn delta(&self) -> i64 {
        self.new.saturating_sub(self.base)
    }

    /// new / base; `None` when the base is 0.
    pub fn ratio(&self) -> Option<f64> {
        (self.base != 0).then(|| self.new as f64 / self.base as f64)
    }
}

/// A row of both traces.
#[derive(Clone, Debug, PartialEq)]
pub struct DiffRow {
    /// The op's name.
    pub name: Arc<str>,
    /// Its input shapes, when grouping by them.
    pub input_shapes: Option<Arc<str>>,
    /// Device work rather than a host op.
    pub on_device: bool,
    /// In both traces, or only one.
    pub change: Change,
    /// Calls.
    pub count: Pair,
    /// Self CPU time, ns.
    pub self_cpu: Pair,
    /// Total CPU time, ns.
    pub cpu_total: Pair,
    /// Self device time, ns.
    pub self_device: Pair,
    /// Total device time, ns.
    pub device_total: Pair,
    /// The change of the sort key, which ordered the rows.
    sort_delta: f64,
}

/// The rows of two traces, largest regression first.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceDiff {
    /// The rows, largest regression first.
    pub rows: Vec<DiffRow>,
    /// The device the device columns are named after (the new trace's).
    pub device_name: String,
    /// Some row, kept or not, is in both traces.
    common: bool,
    /// Some row, kept or not, has device time.
    device_time: bool,
}

/// What makes two rows the same op.
type RowKey<'a> = (&'a str, Option<&'a str>, bool, bool, bool);

fn key(r: &Row) -> RowKey<'_> {
    (
        &r.name,
        r.input_shapes.as_deref(),
        r.on_device,
        r.is_legacy,
        r.is_user_annotation,
    )
}

/// Matches the rows of `base` and `new` and sorts them, largest regression of `sort_by`
/// first (`None`: of self host plus self device time).
pub fn diff(base: &KeyAverages, new: &KeyAverages, sort_by: Option<SortKey>) -> TraceDiff {
    diff_top(base, new, sort_by, usize::MAX).0
}

/// The first `rows` rows of [`diff`] (the largest regressions), and how many it left out.
/// It holds at most twice `rows` rows at a time, besides the two traces' rows and an index
/// of the base's keys: of a million distinct names, the page's thousand rows take a
/// thousand rows' room, not two million.
///
/// ```
/// use omniprof_analysis::{diff_top, key_averages, KeyAveragesOptions};
/// use omniprof_trace::{Activity, ActivityType, Trace};
///
/// let run = |ops: &[(&str, i64)]| {
///     let mut t = Trace::new(0, 10_000);
///     for &(name, ns) in ops {
///         t.activities.push(Activity::new(ActivityType::CpuOp, name, 1, 1, 0, ns));
///     }
///     key_averages(&t, &KeyAveragesOptions::default())
/// };
/// let base = run(&[("a", 100), ("b", 100), ("c", 100)]);
/// let new = run(&[("a", 900), ("b", 100), ("c", 500)]);
/// let (top, left_out) = diff_top(&base, &new, None, 2);
/// let names: Vec<&str> = top.rows.iter().map(|r| &*r.name).collect();
/// assert_eq!((names, left_out), (vec!["a", "c"], 1));
/// ```
pub fn diff_top(
    base: &KeyAverages,
    new: &KeyAverages,
    sort_by: Option<SortKey>,
    rows: usize,
) -> (TraceDiff, u64) {
    // Per base key: its (last) row, and whether the new trace has the key.
    let mut base_rows: FastMap<RowKey, (&Row, bool)> =
        base.rows.iter().map(|r| (key(r), (r, false))).collect();
    let mut top = Top::new(rows);
    let (mut common, mut device_time) = (false, false);
    let mut push = |row: DiffRow| {
        common |= row.change == Change::Both;
        device_time |= row.self_device.base != 0 || row.self_device.new != 0;
        top.push(row);
    };
    for r in &new.rows {
        let b = base_rows.get_mut(&key(r)).map(|(b, matched)| {
            *matched = true;
            *b
        });
        push(diff_row(b, Some(r), sort_by));
    }
    for r in &base.rows {
        if !base_rows[&key(r)].1 {
            push(diff_row(Some(r), None, sort_by));
        }
    }
    let (rows, left_out) = top.finish();
    let diff = TraceDiff {
        rows,
        device_name: new.device_name.clone(),
        common,
        device_time,
    };
    (diff, left_out)
}

/// The first rows of those pushed, in the diff's order (largest regression first, then by
/// name, then as pushed: what a stable sort of them all gives), holding at most twice as
/// many as it keeps.
struct Top {
    keep: usize,
    rows: Vec<(DiffRow, u64)>,
    pushed: u64,
}

impl Top {
    fn new(keep: usize) -> Self {
        Self {
            keep,
            rows: Vec::new(),
            pushed: 0,
        }
    }

    fn order(a: &(DiffRow, u64), b: &(DiffRow, u64)) -> std::cmp::Ordering {
        b.0.sort_delta
            .total_cmp(&a.0.sort_delta)
            .then_with(|| a.0.name.cmp(&b.0.name))
            .then(a.1.cmp(&b.1))
    }

    fn push(&mut self, row: DiffRow) {
        self.rows.push((row, self.pushed));
        self.pushed += 1;
        if self.rows.len() > self.keep.saturating_mul(2).max(1) {
            self.cut();
        }
    }

    /// Down to the `keep` first.
    fn cut(&mut self) {
        if self.rows.len() > self.keep {
            if self.keep > 0 {
                self.rows.select_nth_unstable_by(self.keep - 1, Self::order);
            }
            self.rows.truncate(self.keep);
        }
    }

    /// The rows kept, in order, and how many were left out.
    fn finish(mut self) -> (Vec<DiffRow>, u64) {
        self.cut();
        self.rows.sort_by(Self::order);
        let left_out = self.pushed - self.rows.len() as u64;
        (self.rows.into_iter().map(|(r, _)| r).collect(), left_out)
    }
}

fn diff_row(base: Option<&Row>, new: Option<&Row>, sort_by: Option<SortKey>) -> DiffRow {
    let row = new.or(base).expect("a row of one trace or the other");
    let pair = |f: fn(&Row) -> i64| Pair {
        base: base.map_or(0, f),
        new: new.map_or(0, f),
    };
    let self_cpu = pair(|r| r.self_cpu_time_total_ns);
    let self_device = pair(|r| r.self_device_time_total_ns);
    let sort_delta = match sort_by {
        Some(k) => new.map_or(0.0, |r| r.sort_value(k)) - base.map_or(0.0, |r| r.sort_value(k)),
        None => (self_cpu.delta().saturating_add(self_device.delta())) as f64,
    };
    DiffRow {
        name: Arc::clone(&row.name),
        input_shapes: row.input_shapes.clone(),
        on_device: row.on_device,
        change: match (base, new) {
            (Some(_), Some(_)) => Change::Both,
            (None, _) => Change::New,
            (_, None) => Change::Vanished,
        },
        count: pair(|r| r.count as i64),
        self_cpu,
        cpu_total: pair(|r| r.cpu_time_total_ns),
        self_device,
        device_total: pair(|r| r.device_time_total_ns),
        sort_delta,
    }
}

/// A signed time delta: `+1.250ms`, `-3.000us`, `0.000us`.
fn format_delta(ns: i64) -> String {
    let text = format_time(ns.unsigned_abs() as f64 / 1000.0);
    match ns.signum() {
        1 => format!("+{text}"),
        -1 => format!("-{text}"),
        _ => text,
    }
}

fn format_ratio(pair: &Pair) -> String {
    pair.ratio().map_or("-".into(), |r| format!("{r:.2}x"))
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

impl TraceDiff {
    /// True when at least one row is in both traces (of [`diff_top`]: kept or not).
    pub fn has_common_rows(&self) -> bool {
        self.common
    }

    /// Whether either trace has device time (of [`diff_top`]: in a row kept or not).
    fn has_device_time(&self) -> bool {
        self.device_time
    }

    /// The rows as a text table (times as the summary prints them, deltas signed); the
    /// device columns only when either trace has device time. Empty without rows.
    pub fn table(&self, row_limit: Option<usize>) -> String {
        if self.rows.is_empty() {
            return String::new();
        }
        let device = self.device_name.to_uppercase();
        let mut headers: Vec<String> = [
            "Name",
            "Change",
            "Calls",
            "Calls Δ",
            "Self CPU base",
            "Self CPU",
            "Self CPU Δ",
            "Self CPU ×",
            "CPU total Δ",
        ]
        .map(String::from)
        .to_vec();
        let with_device = self.has_device_time();
        if with_device {
            headers.extend([
                format!("Self {device} base"),
                format!("Self {device}"),
                format!("Self {device} Δ"),
                format!("Self {device} ×"),
                format!("{device} total Δ"),
            ]);
        }
        let rows = &self.rows[..row_limit.map_or(self.rows.len(), |n| n.min(self.rows.len()))];
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let mut c = vec![
                    fit_name(&r.name, Some(MAX_NAME_WIDTH)),
                    r.change.label().into(),
                    r.count.new.to_string(),
                    format!("{:+}", r.count.delta()),
                    format_time(us(r.self_cpu.base)),
                    format_time(us(r.self_cpu.new)),
                    format_delta(r.self_cpu.delta()),
                    format_ratio(&r.self_cpu),
                    format_delta(r.cpu_total.delta()),
                ];
                if with_device {
                    c.extend([
                        format_time(us(r.self_device.base)),
                        format_time(us(r.self_device.new)),
                        format_delta(r.self_device.delta()),
                        format_ratio(&r.self_device),
                        format_delta(r.device_total.delta()),
                    ]);
                }
                c
            })
            .collect();
        let widths: Vec<usize> = (0..headers.len())
            .map(|i| {
                cells
                    .iter()
                    .map(|c| c[i].chars().count())
                    .chain([headers[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| -> String {
            let mut out = String::new();
            for (i, (cell, &width)) in cells.iter().zip(&widths).enumerate() {
                let pad = width - cell.chars().count();
                // The name is left-aligned, numbers right-aligned.
                if i == 0 {
                    let _ = write!(out, "{cell}{}  ", " ".repeat(pad));
                } else {
                    let _ = write!(out, "{}{cell}  ", " ".repeat(pad));
                }
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
            out
        };
        let separator = line(&widths.iter().map(|&w| "-".repeat(w)).collect::<Vec<_>>());
        let mut out = separator.clone();
        out.push_str(&line(&headers));
        out.push_str(&separator);
        for c in &cells {
            out.push_str(&line(c));
        }
        out.push_str(&separator);
        out
    }

    /// One line per row with a header: for calls and each time (µs), the base, new, delta
    /// and ratio (empty when the base is 0).
    pub fn csv(&self, row_limit: Option<usize>) -> String {
        let mut out = String::from("name,input_shapes,on_device,change");
        for metric in METRICS {
            let _ = write!(
                out,
                ",{metric}_base,{metric}_new,{metric}_delta,{metric}_ratio"
            );
        }
        out.push('\n');
        for r in self.limited(row_limit) {
            let _ = write!(
                out,
                "{},{},{},{}",
                field(&r.name),
                field(r.input_shapes.as_deref().unwrap_or("")),
                r.on_device,
                r.change.label_or_both(),
            );
            for (i, pair) in r.pairs().iter().enumerate() {
                let ratio = pair.ratio().map_or(String::new(), |x| format!("{x:.6}"));
                if i == 0 {
                    let _ = write!(out, ",{},{},{},{ratio}", pair.base, pair.new, pair.delta());
                } else {
                    let _ = write!(
                        out,
                        ",{:.3},{:.3},{:.3},{ratio}",
                        us(pair.base),
                        us(pair.new),
                        us(pair.delta())
                    );
                }
            }
            out.push('\n');
        }
        out
    }

    /// `{"device": .., "rows": [{"name", "input_shapes", "on_device", "change", "count":
    /// {"base", "delta", "new", "ratio"}, "cpu_time_total_us": {..}, ..}]}`: after the four
    /// fields of the op, the compared columns in name order.
    ///
    /// The rows are written into the text one at a time, each from a borrowed struct: the
    /// text is the only thing that grows with the rows, as the CSV's does (a `serde_json`
    /// map per row, with a boxed value per column, took ten times the text).
    pub fn json(&self, row_limit: Option<usize>) -> String {
        // Fields in name order, as the map this replaces wrote them.
        #[derive(Serialize)]
        struct JsonPair {
            base: f64,
            delta: f64,
            new: f64,
            ratio: Option<f64>,
        }
        impl JsonPair {
            /// `count` in calls, the times in µs.
            fn of(pair: Pair, in_us: bool) -> Self {
                let scale = |v: i64| if in_us { us(v) } else { v as f64 };
                Self {
                    base: scale(pair.base),
                    new: scale(pair.new),
                    delta: scale(pair.delta()),
                    ratio: pair.ratio(),
                }
            }
        }
        // The columns in name order, as the map this replaces wrote them.
        #[derive(Serialize)]
        struct JsonRow<'a> {
            name: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            input_shapes: Option<&'a str>,
            on_device: bool,
            change: Change,
            count: JsonPair,
            cpu_time_total_us: JsonPair,
            device_time_total_us: JsonPair,
            self_cpu_time_total_us: JsonPair,
            self_device_time_total_us: JsonPair,
        }
        let mut out = Vec::new();
        out.extend_from_slice(b"{\"device\":");
        serde_json::to_writer(&mut out, &self.device_name.to_uppercase())
            .expect("a string serializes");
        out.extend_from_slice(b",\"rows\":[");
        for (i, r) in self.limited(row_limit).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let row = JsonRow {
                name: &r.name,
                input_shapes: r.input_shapes.as_deref(),
                on_device: r.on_device,
                change: r.change,
                count: JsonPair::of(r.count, false),
                cpu_time_total_us: JsonPair::of(r.cpu_total, true),
                device_time_total_us: JsonPair::of(r.device_total, true),
                self_cpu_time_total_us: JsonPair::of(r.self_cpu, true),
                self_device_time_total_us: JsonPair::of(r.self_device, true),
            };
            serde_json::to_writer(&mut out, &row)
                .expect("strings, numbers and booleans always serialize");
        }
        out.extend_from_slice(b"]}");
        String::from_utf8(out).expect("serde_json writes UTF-8")
    }

    fn limited(&self, row_limit: Option<usize>) -> impl Iterator<Item = &DiffRow> {
        self.rows.iter().take(row_limit.unwrap_or(usize::MAX))
    }
}

/// The compared columns, as CSV and JSON name them (`count` in calls, the others in µs).
const METRICS: [&str; 5] = [
    "count",
    "self_cpu_time_total_us",
    "cpu_time_total_us",
    "self_device_time_total_us",
    "device_time_total_us",
];

impl DiffRow {
    /// The pairs in [`METRICS`] order.
    fn pairs(&self) -> [Pair; 5] {
        [
            self.count,
            self.self_cpu,
            self.cpu_total,
            self.self_device,
            self.device_total,
        ]
    }
}

impl Change {
    /// The change as CSV writes it (`both` rather than nothing).
    fn label_or_both(self) -> &'static str {
        match self {
            Self::Both => "both",
            other => other.label(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{key_averages, KeyAveragesOptions};
    use omniprof_trace::{Activity, ActivityType, Trace};

    /// A trace of `(name, start, end)` host ops on one thread, and a kernel launched by the
    /// first op (none when `kernel_ns` is 0).
    fn run(ops: &[(&str, i64, i64)], kernel_ns: i64) -> KeyAverages {
        let mut t = Trace::new(0, 1_000_000);
        for (i, &(name, start, end)) in ops.iter().enumerate() {
            let mut a = Activity::new(ActivityType::CpuOp, name, 1, 1, start, end);
            a.correlation = i as u64 + 1;
            t.activities.push(a);
        }
        if kernel_ns > 0 {
            let mut k = Activity::new(ActivityType::ConcurrentKernel, "gemm", 0, 7, 0, kernel_ns);
            k.linked_correlation = Some(1);
            t.activities.push(k);
        }
        key_averages(&t, &KeyAveragesOptions::default())
    }

    #[test]
    fn the_top_rows_are_the_first_rows_of_the_whole_diff_ties_included() {
        // 300 ops of 30 names in the base, 40 in the new trace (10 new, some vanished),
        // durations repeating so that many rows tie on their delta.
        let ops = |names: std::ops::Range<usize>, seed: i64| -> KeyAverages {
            let names: Vec<String> = names.map(|i| format!("op{i}")).collect();
            let ops: Vec<(&str, i64, i64)> = (0..300)
                .map(|i| {
                    let start = i as i64 * 100;
                    (
                        &*names[i % names.len()],
                        start,
                        start + (i as i64 * seed) % 7,
                    )
                })
                .collect();
            run(&ops, 0)
        };
        let (base, new) = (ops(0..30, 3), ops(5..45, 5));
        let whole = diff(&base, &new, None);
        assert_eq!(whole.rows.len(), 45);
        for keep in [0, 1, 2, 7, 20, 44, 45, 100] {
            let (top, left_out) = diff_top(&base, &new, None, keep);
            let first = &whole.rows[..keep.min(45)];
            assert_eq!(top.rows, first, "keep {keep}");
            assert_eq!(left_out, 45 - first.len() as u64, "keep {keep}");
            // Said of every row, kept or not.
            assert!(top.has_common_rows(), "keep {keep}");
        }
    }

    #[test]
    fn known_differences_give_exactly_those_deltas() {
        let base = run(
            &[
                ("aten::mm", 0, 1_000),
                ("aten::relu", 2_000, 2_500),
                ("old", 3_000, 3_100),
            ],
            400,
        );
        let new = run(
            &[
                ("aten::mm", 0, 1_800),
                ("aten::relu", 2_000, 2_400),
                ("aten::relu", 2_500, 2_700),
                ("fresh", 3_000, 3_050),
            ],
            1_000,
        );
        let d = diff(&base, &new, None);
        let names: Vec<(&str, Change)> = d.rows.iter().map(|r| (&*r.name, r.change)).collect();
        // Sorted by self host + self device delta: mm +800 host, gemm +600 device, relu +100,
        // fresh +50, old -100.
        assert_eq!(
            names,
            [
                ("aten::mm", Change::Both),
                ("gemm", Change::Both),
                ("aten::relu", Change::Both),
                ("fresh", Change::New),
                ("old", Change::Vanished),
            ]
        );
        let mm = &d.rows[0];
        assert_eq!((mm.self_cpu.delta(), mm.cpu_total.delta()), (800, 800));
        assert_eq!(
            (mm.self_device.delta(), mm.device_total.delta()),
            (600, 600)
        );
        assert_eq!(mm.self_cpu.ratio(), Some(1.8));
        let relu = &d.rows[2];
        assert_eq!(
            (relu.count.base, relu.count.new, relu.count.delta()),
            (1, 2, 1)
        );
        assert_eq!((relu.self_cpu.base, relu.self_cpu.new), (500, 600));
        assert_eq!(d.rows[3].self_cpu, Pair { base: 0, new: 50 });
        assert_eq!(d.rows[3].self_cpu.ratio(), None);
        assert_eq!(d.rows[4].self_cpu, Pair { base: 100, new: 0 });
        let table = d.table(None);
        assert!(table.contains("+0.800us"), "{table}");
        assert!(table.contains("vanished"), "{table}");
        assert!(table.contains("Self CUDA Δ"), "{table}");
        let by_count = diff(&base, &new, Some(SortKey::Count));
        assert_eq!(&*by_count.rows[0].name, "aten::relu");
        let csv = d.csv(None);
        assert_eq!(
            csv.lines().nth(1).unwrap(),
            "aten::mm,,false,both,1,1,0,1.000000,1.000,1.800,0.800,1.800000,1.000,1.800,0.800,\
             1.800000,0.400,1.000,0.600,2.500000,0.400,1.000,0.600,2.500000"
        );
        let json: serde_json::Value = serde_json::from_str(&d.json(Some(1))).unwrap();
        assert_eq!(json["rows"][0]["self_cpu_time_total_us"]["delta"], 0.8);
        assert_eq!(json["rows"][0]["count"]["new"], 1.0);
        assert_eq!(json["rows"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn json_rows_are_written_one_by_one_in_the_documented_layout() {
        let base = run(&[("aten::mm", 0, 1_000)], 0);
        let new = run(&[("aten::mm", 0, 1_500), ("fresh", 2_000, 2_250)], 0);
        assert_eq!(
            diff(&base, &new, None).json(None),
            r#"{"device":"CUDA","rows":[{"name":"aten::mm","on_device":false,"change":"both","count":{"base":1.0,"delta":0.0,"new":1.0,"ratio":1.0},"cpu_time_total_us":{"base":1.0,"delta":0.5,"new":1.5,"ratio":1.5},"device_time_total_us":{"base":0.0,"delta":0.0,"new":0.0,"ratio":null},"self_cpu_time_total_us":{"base":1.0,"delta":0.5,"new":1.5,"ratio":1.5},"self_device_time_total_us":{"base":0.0,"delta":0.0,"new":0.0,"ratio":null}},{"name":"fresh","on_device":false,"change":"new","count":{"base":0.0,"delta":1.0,"new":1.0,"ratio":null},"cpu_time_total_us":{"base":0.0,"delta":0.25,"new":0.25,"ratio":null},"device_time_total_us":{"base":0.0,"delta":0.0,"new":0.0,"ratio":null},"self_cpu_time_total_us":{"base":0.0,"delta":0.25,"new":0.25,"ratio":null},"self_device_time_total_us":{"base":0.0,"delta":0.0,"new":0.0,"ratio":null}}]}"#
        );
    }

    #[test]
    fn the_table_cuts_a_long_name_as_the_summary_does() {
        let long = format!("aten::{}", "x".repeat(2000));
        let d = diff(
            &run(&[(&long, 0, 1_000)], 0),
            &run(&[(&long, 0, 1_500)], 0),
            None,
        );
        let table = d.table(None);
        let row = table.lines().nth(3).unwrap();
        let cut = format!("aten::{}...", "x".repeat(46));
        assert!(row.starts_with(&format!("{cut}  ")), "{row}");
        assert_eq!(row.split_whitespace().nth(1), Some("1"), "{row}");
        assert!(table.lines().all(|l| l.chars().count() < 200), "{table}");
        assert!(d.csv(None).contains(&long));
    }

    #[test]
    fn identical_traces_give_all_zero_deltas() {
        let ops = [("aten::mm", 0, 1_000), ("aten::relu", 2_000, 2_500)];
        let d = diff(&run(&ops, 300), &run(&ops, 300), None);
        assert!(d.has_common_rows());
        for r in &d.rows {
            assert_eq!(r.change, Change::Both);
            for p in r.pairs() {
                assert_eq!(p.delta(), 0, "{}", r.name);
            }
        }
    }

    #[test]
    fn traces_with_nothing_in_common_have_no_common_rows() {
        let d = diff(&run(&[("a", 0, 10)], 0), &run(&[("b", 0, 10)], 0), None);
        assert!(!d.has_common_rows());
        assert!(d.rows.iter().all(|r| r.change != Change::Both));
    }
}
