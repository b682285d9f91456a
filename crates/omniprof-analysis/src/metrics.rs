//! Per-kernel hardware metrics, summarized per kernel name: calls, total device time, and
//! for each metric its sum, mean, min and max (`omniprof summary --metrics`).
//!
//! Two sources, whoever wrote the trace:
//! - omniprof's scope profiler: kernels carry their metric values in `args`, and the
//!   metrics are the value names of the trace's `xpu_scope_profiler` counter series;
//! - the CUPTI range profiler PyTorch used: `cuda_profiler_range` events carry every metric
//!   as a numeric arg.
//!
//! The text table cuts a kernel name as the summary's does (55 characters, ending in `...`);
//! the CSV and JSON keep it whole.
//!
//! ```
//! use omniprof_analysis::kernel_metrics;
//! use omniprof_trace::{Activity, ActivityType, Trace, Value};
//!
//! let mut trace = Trace::new(0, 100);
//! for (flops, end) in [(10i64, 20), (30, 60)] {
//!     let mut r = Activity::new(ActivityType::CudaProfilerRange, "gemm", 0, 0, 0, end);
//!     r.args.push(("flops".into(), Value::from(flops)));
//!     trace.activities.push(r);
//! }
//! let summary = kernel_metrics(&trace);
//! let gemm = &summary.rows[0];
//! assert_eq!((gemm.calls, gemm.device_time_ns), (2, 80));
//! let flops = &gemm.metrics[0].1;
//! assert_eq!((flops.sum, flops.mean(), flops.min, flops.max), (40.0, 20.0, 10.0, 30.0));
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::Serialize;

use crate::key_averages::{us, MAX_NAME_WIDTH};
use crate::render::csv::field;
use crate::render::grid::{number, render};
use crate::render::table::fit_name;
use omniprof_trace::FastMap;
use omniprof_trace::Trace;
use omniprof_trace::TraceItem;
use omniprof_trace::{Activity, ActivityClass, ActivityType};
use omniprof_trace::{CounterSample, CounterTrack};

/// Sum, count and extremes of one metric over the calls that reported it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricStats {
    /// Calls that reported it.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl MetricStats {
    fn new(v: f64) -> Self {
        Self {
            count: 1,
            sum: v,
            min: v,
            max: v,
        }
    }

    fn add(&mut self, v: f64) {
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    fn merge(&mut self, other: &Self) {
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The sum over the count.
    pub fn mean(&self) -> f64 {
        self.sum / self.count as f64
    }
}

/// One kernel name's calls and metrics (in the order the metrics first appear).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelMetricsRow {
    /// The kernel's name.
    pub name: String,
    /// Its calls.
    pub calls: u64,
    /// Their total device time, ns.
    pub device_time_ns: i64,
    /// Each metric's statistics.
    pub metrics: Vec<(String, MetricStats)>,
}

/// The rows, in the order of each name's first call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelMetrics {
    /// One row per kernel name.
    pub rows: Vec<KernelMetricsRow>,
}

/// The metrics of every kernel (and `cuda_profiler_range`) that has some.
pub fn kernel_metrics(trace: &Trace) -> KernelMetrics {
    let mut builder = KernelMetricsBuilder::default();
    for series in trace.counters.series() {
        for sample in &series.samples {
            builder.add_counter(&series.track, sample);
        }
    }
    for a in &trace.activities {
        builder.add_activity(a);
    }
    builder.finish()
}

/// [`kernel_metrics`] of a trace taken item by item (a streamed read): it keeps one entry
/// per (kernel name, numeric arg), never the kernels, and decides at the end which args
/// are metrics (a kernel's are the value names of the scope profiler's counter series,
/// which may come after the kernels in the file).
#[derive(Debug, Default)]
pub struct KernelMetricsBuilder {
    /// The value names of the `xpu_scope_profiler` series.
    scope_metrics: BTreeSet<String>,
    /// By name, in the order of first appearance.
    entries: Vec<Entry>,
    index: FastMap<Arc<str>, usize>,
    seen: u64,
}

/// One name's calls, split by source: `cuda_profiler_range` events count whatever
/// happens; kernels only when the trace turns out to have scope-profiler metrics.
#[derive(Debug)]
struct Entry {
    name: Arc<str>,
    range: Part,
    kernel: Part,
}

#[derive(Debug, Default)]
struct Part {
    /// The place of the first call among all calls (for the row order).
    first: Option<u64>,
    calls: u64,
    device_time_ns: i64,
    metrics: Vec<(String, MetricStats)>,
}

impl Part {
    fn add(&mut self, seq: u64, a: &Activity) {
        self.first.get_or_insert(seq);
        self.calls += 1;
        self.device_time_ns = self.device_time_ns.saturating_add(a.duration_ns());
        for (name, v) in numeric_args(a) {
            match self.metrics.iter_mut().find(|(m, _)| m == name) {
                Some((_, stats)) => stats.add(v),
                None => self.metrics.push((name.to_owned(), MetricStats::new(v))),
            }
        }
    }
}

impl KernelMetricsBuilder {
    /// Takes one item of a streamed trace.
    pub fn add_item(&mut self, item: &TraceItem) {
        match item {
            TraceItem::Activity(a) => self.add_activity(a),
            TraceItem::Counter(track, sample) => self.add_counter(track, sample),
            _ => {}
        }
    }

    /// Takes one counter sample: a scope-profiler sample names metrics.
    pub fn add_counter(&mut self, track: &CounterTrack, sample: &CounterSample) {
        if track.kind == ActivityType::XpuScopeProfiler {
            for (name, _) in sample.values.iter() {
                if !self.scope_metrics.contains(&**name) {
                    self.scope_metrics.insert(name.to_string());
                }
            }
        }
    }

    /// Takes one activity: a `cuda_profiler_range` event or a kernel.
    pub fn add_activity(&mut self, a: &Activity) {
        let range = match a.kind {
            ActivityType::CudaProfilerRange => true,
            kind if kind.class() == Some(ActivityClass::Kernel) => false,
            _ => return,
        };
        let i = match self.index.get(&a.name) {
            Some(&i) => i,
            None => {
                self.entries.push(Entry {
                    name: a.name.clone(),
                    range: Part::default(),
                    kernel: Part::default(),
                });
                self.index.insert(a.name.clone(), self.entries.len() - 1);
                self.entries.len() - 1
            }
        };
        let seq = self.seen;
        self.seen += 1;
        let entry = &mut self.entries[i];
        if range {
            entry.range.add(seq, a);
        } else {
            entry.kernel.add(seq, a);
        }
    }

    /// Whether the trace has metrics to read: a scope-profiler counter series or a
    /// `cuda_profiler_range` event. Their values are args that only this builder reads, so
    /// a caller that read the trace without them ([`omniprof_read::ArgFilter::Only`])
    /// reads it again for them.
    pub fn has_metrics(&self) -> bool {
        !self.scope_metrics.is_empty() || self.entries.iter().any(|e| e.range.calls > 0)
    }

    /// The rows: those with some metric, in the order of each name's first counted call.
    pub fn finish(self) -> KernelMetrics {
        let scope = self.scope_metrics;
        let mut rows: Vec<(u64, KernelMetricsRow)> = Vec::new();
        for entry in self.entries {
            let mut parts = vec![entry.range];
            if !scope.is_empty() {
                let mut kernel = entry.kernel;
                kernel.metrics.retain(|(name, _)| scope.contains(name));
                parts.push(kernel);
            }
            let Some(first) = parts.iter().filter_map(|p| p.first).min() else {
                continue;
            };
            let mut row = KernelMetricsRow {
                name: entry.name.to_string(),
                calls: 0,
                device_time_ns: 0,
                metrics: Vec::new(),
            };
            for part in parts {
                row.calls += part.calls;
                row.device_time_ns = row.device_time_ns.saturating_add(part.device_time_ns);
                for (name, s) in part.metrics {
                    match row.metrics.iter_mut().find(|(m, _)| *m == name) {
                        Some((_, stats)) => stats.merge(&s),
                        None => row.metrics.push((name, s)),
                    }
                }
            }
            if !row.metrics.is_empty() {
                rows.push((first, row));
            }
        }
        rows.sort_by_key(|(first, _)| *first);
        KernelMetrics {
            rows: rows.into_iter().map(|(_, row)| row).collect(),
        }
    }
}

/// An activity's finite numeric args.
fn numeric_args(a: &Activity) -> impl Iterator<Item = (&str, f64)> {
    a.args
        .iter()
        .filter_map(|(key, value)| Some((&**key, value.as_f64().filter(|v| v.is_finite())?)))
}

impl KernelMetrics {
    /// One line per (kernel, metric); a kernel's calls and device time on its first line.
    pub fn table(&self) -> String {
        let headers = [
            "Kernel",
            "Calls",
            "Device time",
            "Metric",
            "Sum",
            "Mean",
            "Min",
            "Max",
        ];
        let numeric = [false, true, true, false, true, true, true, true];
        let mut rows = Vec::new();
        for r in &self.rows {
            for (i, (metric, s)) in r.metrics.iter().enumerate() {
                let first = i == 0;
                rows.push(vec![
                    if first {
                        fit_name(&r.name, Some(MAX_NAME_WIDTH))
                    } else {
                        String::new()
                    },
                    if first {
                        r.calls.to_string()
                    } else {
                        String::new()
                    },
                    if first {
                        format!("{:.3}us", us(r.device_time_ns))
                    } else {
                        String::new()
                    },
                    metric.clone(),
                    number(s.sum),
                    number(s.mean()),
                    number(s.min),
                    number(s.max),
                ]);
            }
        }
        render(&headers, &numeric, &rows)
    }

    /// `kernel,calls,device_time_us,metric,sum,mean,min,max`, one line per (kernel, metric).
    pub fn csv(&self) -> String {
        let mut out = String::from("kernel,calls,device_time_us,metric,sum,mean,min,max\n");
        for r in &self.rows {
            for (metric, s) in &r.metrics {
                out.push_str(&format!(
                    "{},{},{:.3},{},{},{},{},{}\n",
                    field(&r.name),
                    r.calls,
                    us(r.device_time_ns),
                    field(metric),
                    number(s.sum),
                    number(s.mean()),
                    number(s.min),
                    number(s.max)
                ));
            }
        }
        out
    }

    /// `{"kernels": [{"name", "calls", "device_time_us", "metrics": [{"name", "sum",
    /// "mean", "min", "max"}]}]}`.
    pub fn json(&self) -> String {
        #[derive(Serialize)]
        struct Metric<'a> {
            name: &'a str,
            sum: f64,
            mean: f64,
            min: f64,
            max: f64,
        }
        #[derive(Serialize)]
        struct Kernel<'a> {
            name: &'a str,
            calls: u64,
            device_time_us: f64,
            metrics: Vec<Metric<'a>>,
        }
        #[derive(Serialize)]
        struct Document<'a> {
            kernels: Vec<Kernel<'a>>,
        }
        let kernels = self
            .rows
            .iter()
            .map(|r| Kernel {
                name: &r.name,
                calls: r.calls,
                device_time_us: us(r.device_time_ns),
                metrics: r
                    .metrics
                    .iter()
                    .map(|(name, s)| Metric {
                        name,
                        sum: s.sum,
                        mean: s.mean(),
                        min: s.min,
                        max: s.max,
                    })
                    .collect(),
            })
            .collect();
        serde_json::to_string_pretty(&Document { kernels }).expect("plain data serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use omniprof_trace::Value;

    #[test]
    fn the_table_cuts_a_long_kernel_name_as_the_summary_does() {
        let long = format!("void gemm<{}>", "T".repeat(5000));
        let mut trace = Trace::new(0, 100);
        let mut r = Activity::new(ActivityType::CudaProfilerRange, &*long, 0, 0, 0, 10);
        r.args.push(("flops".into(), Value::from(3i64)));
        trace.activities.push(r);
        let summary = kernel_metrics(&trace);
        let table = summary.table();
        let cut = format!("void gemm<{}...", "T".repeat(42));
        assert!(table.lines().any(|l| l.starts_with(&cut)), "{table}");
        assert!(table.lines().all(|l| l.chars().count() < 150), "{table}");
        assert!(summary.csv().contains(&long));
    }

    #[test]
    fn scope_metrics_named_after_the_kernels_in_the_stream_still_count() {
        let mut b = KernelMetricsBuilder::default();
        for (flops, end) in [(10i64, 20), (30, 60)] {
            let mut k = Activity::new(ActivityType::ConcurrentKernel, "gemm", 0, 7, 0, end);
            k.args.push(("flops".into(), Value::from(flops)));
            k.args.push(("stream".into(), Value::from(7i64)));
            b.add_activity(&k);
        }
        assert!(!b.has_metrics(), "no series has named a metric yet");
        let track = CounterTrack::new(ActivityType::XpuScopeProfiler, "work", 0, 7);
        let sample = CounterSample {
            ts_ns: 0,
            values: vec![("flops".into(), 10.0)],
        };
        b.add_counter(&track, &sample);
        assert!(b.has_metrics());
        let rows = b.finish().rows;
        assert_eq!(rows.len(), 1);
        let gemm = &rows[0];
        assert_eq!((gemm.calls, gemm.device_time_ns), (2, 80));
        // `stream` is numeric but no series names it: not a metric.
        assert_eq!(gemm.metrics.len(), 1);
        let (name, flops) = &gemm.metrics[0];
        assert_eq!(
            (name.as_str(), flops.sum, flops.min, flops.max),
            ("flops", 40.0, 10.0, 30.0)
        );
    }
}
