//! The report's model: per view, the numbers the analyses compute, serialized to the JSON
//! the page draws; and the page itself.

use serde::Serialize;
use serde_json::value::RawValue;

use omniprof_analysis::{counter_stats, diff_top, CounterStats, KernelMetricsBuilder};
use omniprof_analysis::{KernelMetrics, KeyAverages};
use omniprof_analysis::{MemoryCurve, MemoryCurveBuilder, RankProfile, RankProfileBuilder};
use omniprof_analysis::{
    RankComparison, RankTrace, SortKey, StepTimeBuilder, StepTimes, TableOptions,
};
use omniprof_trace::keys::arg;
use omniprof_trace::{ActivityClass, FastMap, Trace, TraceItem};

use crate::table_rows::{self, LeftOut};

/// The most points a counter's line keeps (every n-th sample beyond).
pub(crate) const MAX_COUNTER_POINTS: usize = 2000;

/// The most counter lines the page charts (those of the most samples): a chart takes far
/// more than a row to draw, and traces have tens (a value per device and perf event).
pub const MAX_COUNTER_CHARTS: usize = 100;

/// The most rows of the Overview's top ops and kernels, and the Memory view's top
/// allocating ops.
pub(crate) const TOP_ROWS: usize = 10;

/// Everything one trace gives the report besides its key averages.
pub struct TraceReportBuilder {
    steps: StepTimeBuilder,
    metrics: KernelMetricsBuilder,
    memory: MemoryCurveBuilder,
    rank: RankProfileBuilder,
    kernels: KernelTimesBuilder,
    /// The counter samples (their own store: the report keeps no activity).
    counters: Trace,
    events: u64,
}

impl Default for TraceReportBuilder {
    fn default() -> Self {
        Self {
            steps: StepTimeBuilder::default(),
            metrics: KernelMetricsBuilder::default(),
            memory: MemoryCurveBuilder::default(),
            rank: RankProfileBuilder::new(),
            kernels: KernelTimesBuilder::default(),
            counters: Trace::new(0, 0),
            events: 0,
        }
    }
}

impl TraceReportBuilder {
    /// Takes one item of the trace.
    pub fn add_item(&mut self, item: &TraceItem) {
        self.events += 1;
        self.steps.add_item(item);
        self.metrics.add_item(item);
        self.memory.add_item(item);
        self.rank.add_item(item);
        match item {
            TraceItem::Activity(a) => self.kernels.add(a),
            TraceItem::Counter(track, sample) => {
                self.counters
                    .counters
                    .add(track, sample.ts_ns, sample.values.iter().cloned());
            }
            TraceItem::Window(w) => self.counters.window = *w,
            _ => {}
        }
    }

    /// The args the report reads besides the summary's: the memory records' totals and
    /// device. Kernel metrics are not among them (any arg may be one): when
    /// [`Self::has_metrics`], the caller reads the trace again with every arg into a
    /// [`KernelMetricsBuilder`] and gives it to [`Self::set_metrics`].
    pub const ARGS: [&'static str; 3] = [arg::TOTAL_ALLOCATED, arg::TOTAL_RESERVED, arg::DEVICE_ID];

    /// Whether the trace has kernel metrics (see [`Self::ARGS`]).
    pub fn has_metrics(&self) -> bool {
        self.metrics.has_metrics()
    }

    /// Replaces the kernel metrics with those of a read with every arg.
    pub fn set_metrics(&mut self, metrics: KernelMetricsBuilder) {
        self.metrics = metrics;
    }

    /// Takes a trace held whole: its activities, then its counter samples and window.
    pub fn add_trace(&mut self, trace: &Trace) {
        for a in &trace.activities {
            self.add_item(&TraceItem::Activity(a.clone()));
        }
        for series in trace.counters.series() {
            for sample in &series.samples {
                self.add_item(&TraceItem::Counter(series.track.clone(), sample.clone()));
            }
        }
        self.add_item(&TraceItem::Window(trace.window));
        for (key, value) in &trace.metadata {
            self.add_item(&TraceItem::Metadata(key.clone(), value.clone()));
        }
    }

    /// What was taken, analysed.
    pub fn finish(self) -> TraceParts {
        let stats = counter_stats(&self.counters);
        let series = self
            .counters
            .counters
            .series()
            .iter()
            .flat_map(|s| {
                let mut names: Vec<&str> = Vec::new();
                for sample in &s.samples {
                    for (name, _) in &sample.values {
                        if !names.contains(&&**name) {
                            names.push(name);
                        }
                    }
                }
                let step = s.samples.len().div_ceil(MAX_COUNTER_POINTS).max(1);
                names
                    .into_iter()
                    .map(|name| CounterLine {
                        counter: s.track.name.to_string(),
                        device: s.track.device,
                        resource: s.track.resource,
                        value: name.to_owned(),
                        samples: s.samples.iter().filter(|x| x.value(name).is_some()).count()
                            as u64,
                        points: s
                            .samples
                            .iter()
                            .step_by(step)
                            .filter_map(|x| Some((x.ts_ns, x.value(name)?)))
                            .collect(),
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        TraceParts {
            steps: self.steps.finish(),
            metrics: self.metrics.finish(),
            memory: self.memory.finish(),
            rank: self.rank.finish(),
            kernels: self.kernels.finish(),
            counters: stats.rows,
            counter_lines: series,
            events: self.events,
        }
    }
}

/// One kernel name's calls and time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelTimes {
    /// The kernel's name.
    pub name: String,
    /// Its calls.
    pub calls: u64,
    /// The calls' total time.
    pub total_ns: i64,
    /// The shortest call.
    pub min_ns: i64,
    /// The longest call.
    pub max_ns: i64,
    /// The total over the calls.
    pub mean_ns: f64,
}

/// Per kernel name, [`KernelTimes`], in the order of first calls.
#[derive(Debug, Default)]
struct KernelTimesBuilder {
    rows: Vec<KernelTimes>,
    index: FastMap<std::sync::Arc<str>, usize>,
}

impl KernelTimesBuilder {
    fn add(&mut self, a: &omniprof_trace::Activity) {
        if a.kind.class() != Some(ActivityClass::Kernel) {
            return;
        }
        let d = a.duration_ns();
        match self.index.get(&a.name) {
            Some(&i) => {
                let r = &mut self.rows[i];
                r.calls += 1;
                r.total_ns = r.total_ns.saturating_add(d);
                r.min_ns = r.min_ns.min(d);
                r.max_ns = r.max_ns.max(d);
            }
            None => {
                self.index.insert(a.name.clone(), self.rows.len());
                self.rows.push(KernelTimes {
                    name: a.name.to_string(),
                    calls: 1,
                    total_ns: d,
                    min_ns: d,
                    max_ns: d,
                    mean_ns: 0.0,
                });
            }
        }
    }

    /// Longest total first.
    fn finish(mut self) -> Vec<KernelTimes> {
        self.rows.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
        for r in &mut self.rows {
            r.mean_ns = r.total_ns as f64 / r.calls as f64;
        }
        self.rows
    }
}

/// One counter value's line: (absolute nanoseconds, value) points, at most
/// `MAX_COUNTER_POINTS` (2,000).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CounterLine {
    /// The series' name, its rows (device and resource, as the trace has them) and the
    /// value's name.
    pub counter: String,
    /// The series' device row.
    pub device: i64,
    /// The series' resource row (a stream, a thread).
    pub resource: i64,
    /// The value's name.
    pub value: String,
    /// (absolute nanoseconds, value), by time.
    pub points: Vec<(i64, f64)>,
    /// The samples that hold the value (its points are every n-th of them).
    pub samples: u64,
}

/// What a [`TraceReportBuilder`] made of one trace.
#[derive(Debug)]
pub struct TraceParts {
    /// The Overview's split.
    pub steps: StepTimes,
    /// The kernels' hardware metrics.
    pub metrics: KernelMetrics,
    /// The Memory view's curves.
    pub memory: Vec<MemoryCurve>,
    /// The Distributed view's profile of this rank.
    pub rank: RankProfile,
    /// The Kernels view's times.
    pub kernels: Vec<KernelTimes>,
    /// `summary --counters`' rows.
    pub counters: Vec<CounterStats>,
    /// The counters' lines.
    pub counter_lines: Vec<CounterLine>,
    /// Items read.
    pub events: u64,
}

/// One trace as the report takes it.
#[derive(Debug)]
pub struct ReportInput {
    /// How the page names it (its path).
    pub label: String,
    /// Its key averages.
    pub summary: KeyAverages,
    /// The rest.
    pub parts: TraceParts,
    /// Why it was read only in part (`--partial`).
    pub error: Option<String>,
}

/// One trace in the page's list.
#[derive(Debug, Serialize)]
pub struct TraceEntry {
    /// Its path, the rank it claims, the items read, and why it was cut, if it was.
    pub label: String,
    /// The rank it claims (`distributedInfo`).
    pub rank: Option<u64>,
    /// The items read.
    pub events: u64,
    /// Why it was read only in part.
    pub error: Option<String>,
}

/// The page's data, view by view.
#[derive(Debug, Serialize)]
pub struct ReportModel {
    /// The traces, by rank.
    pub traces: Vec<TraceEntry>,
    /// The Overview: the steps of the first rank (every trace that claims it, joined as
    /// [`StepTimes::absorb`] joins them; a trace without a rank alone), and the top rows
    /// of the key averages (of the traces together).
    pub steps: StepTimes,
    /// The rows with the most self CPU time (`summary --format json`).
    pub top_ops: Box<RawValue>,
    /// The rows with the most self device time.
    pub top_kernels: Box<RawValue>,
    /// The Operators view: [`KeyAverages::json`] of the rows, at most
    /// [`MAX_TABLE_ROWS`](crate::MAX_TABLE_ROWS) (those with the most self time), with the totals of every row:
    /// one trace's as `summary` prints them, several traces' summed over those read whole
    /// (`summary DIR`).
    pub operators: Box<RawValue>,
    /// The Kernels view, of the first trace: at most [`MAX_TABLE_ROWS`](crate::MAX_TABLE_ROWS), the longest.
    pub kernels: Vec<KernelTimes>,
    /// The first trace's `summary --metrics --format json`, of the kernels with the most
    /// device time whose metrics make at most [`MAX_TABLE_ROWS`](crate::MAX_TABLE_ROWS)
    /// rows (one per kernel and metric).
    pub kernel_metrics: Box<RawValue>,
    /// The first trace's `summary --counters` rows, the first
    /// [`MAX_TABLE_ROWS`](crate::MAX_TABLE_ROWS).
    pub counters: Vec<CounterStats>,
    /// The first trace's counter lines, at most [`MAX_COUNTER_CHARTS`] (those of the most
    /// samples).
    pub counter_lines: Vec<CounterLine>,
    /// The Memory view, of the first trace, and the top allocating rows.
    pub memory: Vec<MemoryCurve>,
    /// The rows that allocated most (self device memory, else self CPU memory).
    pub top_memory: Box<RawValue>,
    /// The Distributed view: [`RankComparison::json`], with two traces or more.
    pub ranks: Option<Box<RawValue>>,
    /// The Diff view: [`TraceDiff::json`](omniprof_analysis::TraceDiff::json) of the base trace's
    /// rows against these, at most [`MAX_TABLE_ROWS`](crate::MAX_TABLE_ROWS) (the largest regressions).
    pub diff: Option<Box<RawValue>>,
    /// The rows the long tables (and the counter charts) leave out.
    pub left_out: LeftOut,
}

impl ReportModel {
    /// The model of a job's traces (one or more), with the diff against `base`'s key
    /// averages when given.
    pub fn new(inputs: Vec<ReportInput>, base: Option<&KeyAverages>) -> Self {
        let mut inputs = inputs;
        inputs.sort_by(|a, b| {
            let key = |i: &ReportInput| (i.parts.rank.rank.is_none(), i.parts.rank.rank);
            key(a).cmp(&key(b))
        });
        // One trace's rows as `summary` prints them (in the order of first events); a
        // job's summed over the ranks read whole, in name order, as `summary DIR` does.
        let whole = match inputs.as_mut_slice() {
            // Taken, not copied: a million distinct names make rows of hundreds of MB.
            [one] => std::mem::replace(&mut one.summary, KeyAverages::merged([])),
            _ => KeyAverages::merged(
                inputs
                    .iter()
                    .filter(|i| i.error.is_none())
                    .map(|i| &i.summary),
            ),
        };
        let raw = |s: String| RawValue::from_string(s).expect("the analyses write JSON");
        let top = |sort_by| {
            raw(whole.json(&TableOptions {
                sort_by: Some(sort_by),
                row_limit: Some(TOP_ROWS),
                ..Default::default()
            }))
        };
        let top_ops = top(SortKey::SelfCpuTimeTotal);
        let top_kernels = top(SortKey::SelfDeviceTimeTotal);
        let top_memory = top(if whole.has_device_time() {
            SortKey::SelfDeviceMemoryUsage
        } else {
            SortKey::SelfCpuMemoryUsage
        });
        let (operators, operators_left_out) = table_rows::operators(&whole);
        let operators = raw(operators);
        let mut left_out = LeftOut {
            operators: operators_left_out,
            ..LeftOut::default()
        };
        let diff = base.map(|b| {
            let (d, left) = diff_top(b, &whole, None, table_rows::MAX_TABLE_ROWS);
            left_out.diff = left;
            raw(d.json(None))
        });
        drop(whole);
        let traces = inputs
            .iter()
            .map(|i| TraceEntry {
                label: i.label.clone(),
                rank: i.parts.rank.rank,
                events: i.parts.events,
                error: i.error.clone(),
            })
            .collect();
        let ranks = (inputs.len() > 1).then(|| {
            let report = RankComparison::new(
                inputs
                    .iter()
                    .map(|i| RankTrace {
                        label: i.label.clone(),
                        profile: i.parts.rank.clone(),
                        error: i.error.clone(),
                    })
                    .collect(),
            );
            raw(report.json())
        });
        let mut inputs = inputs.into_iter();
        let mut first = inputs.next().expect("a report has one trace or more");
        // The first rank's other traces (a scheduled profiler's cycles, a restart) hold
        // more of its steps: the step view shows them all, as `ranks` lists them.
        let mut steps = first.parts.steps;
        if let Some(rank) = first.parts.rank.rank {
            for other in inputs.filter(|i| i.parts.rank.rank == Some(rank)) {
                steps.absorb(other.parts.steps);
            }
        }
        left_out.kernels = table_rows::cap(&mut first.parts.kernels);
        left_out.metrics = table_rows::metrics(&mut first.parts.metrics);
        left_out.counters = table_rows::cap(&mut first.parts.counters);
        left_out.counter_charts =
            table_rows::heaviest(&mut first.parts.counter_lines, MAX_COUNTER_CHARTS, |line| {
                line.samples
            });
        Self {
            traces,
            steps,
            top_ops,
            top_kernels,
            operators,
            kernels: first.parts.kernels,
            kernel_metrics: raw(first.parts.metrics.json()),
            counters: first.parts.counters,
            counter_lines: first.parts.counter_lines,
            memory: first.parts.memory,
            top_memory,
            ranks,
            diff,
            left_out,
        }
    }

    /// The model as one JSON object.
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }

    /// The page: one HTML file holding the model, its style and script, and uPlot, which
    /// opens from disk with no network (its Content-Security-Policy refuses every request).
    pub fn html(&self) -> String {
        page(&self.json())
    }

    /// The model of one trace held whole (the Python package's), as [`Self::new`] makes
    /// it of streamed ones.
    pub fn of_trace(trace: &Trace, label: &str, summary: KeyAverages) -> Self {
        let mut builder = TraceReportBuilder::default();
        builder.add_trace(trace);
        let input = ReportInput {
            label: label.to_owned(),
            summary,
            parts: builder.finish(),
            error: None,
        };
        Self::new(vec![input], None)
    }
}

/// The page's skeleton; each `/*@NAME@*/` is replaced by the part of that name.
const PAGE: &str = include_str!("assets/page.html");
const STYLE: &str = include_str!("assets/style.css");
const ERRORS_JS: &str = include_str!("assets/errors.js");
const APP_JS: &str = include_str!("assets/app.js");
/// uPlot 1.6.32's minified build and stylesheet, as the npm package `uplot` ships them
/// (`report/vendor/uplot/README.md`; the CLI's tests check their sha256).
const UPLOT_JS: &str = include_str!("assets/vendor/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("assets/vendor/uplot/uPlot.min.css");

/// The HTML page of a model's JSON: the skeleton with every part inlined.
fn page(model_json: &str) -> String {
    // In a script element only `</script` or `<!--` could end or change it; JSON has `<`
    // only inside strings, where `\u003c` reads back as the same character.
    let model = model_json.replace('<', "\\u003c");
    let parts = [
        ("/*@UPLOT_CSS@*/", UPLOT_CSS),
        ("/*@STYLE@*/", STYLE),
        ("/*@MODEL@*/", model.as_str()),
        ("/*@ERRORS_JS@*/", ERRORS_JS),
        ("/*@UPLOT_JS@*/", UPLOT_JS),
        ("/*@APP_JS@*/", APP_JS),
    ];
    let mut out =
        String::with_capacity(PAGE.len() + parts.iter().map(|p| p.1.len()).sum::<usize>());
    let mut rest = PAGE;
    for (marker, part) in parts {
        let (before, after) = rest
            .split_once(marker)
            .expect("the page names each part once, in this order");
        out.push_str(before);
        out.push_str(part);
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_closes_the_script_element_stays_inside_the_model() {
        let html = page(r#"{"name":"</script><script>alert(1)</script>"}"#);
        assert_eq!(html.matches("</script>").count(), 4);
        assert!(html.contains(r#"{"name":"\u003c/script>\u003cscript>alert(1)\u003c/script>"}"#));
    }
}
