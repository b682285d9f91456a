//! `omniprof report`'s HTML page and its model: per view, the numbers the other analyses compute,
//! gathered in one pass over each trace and serialized to the JSON the page draws. Nothing
//! here computes a figure of its own but the per-kernel time extremes: the key averages are
//! [`KeyAverages`](omniprof_analysis::KeyAverages)'s rows (as `summary --format json` writes them), the step split is
//! [`StepTimes`](omniprof_analysis::StepTimes), kernel metrics
//! [`KernelMetrics`](omniprof_analysis::KernelMetrics), counters
//! [`CounterStats`](omniprof_analysis::CounterStats), memory
//! [`MemoryCurve`](omniprof_analysis::MemoryCurve), the ranks
//! [`RankComparison`](omniprof_analysis::RankComparison), the diff
//! [`TraceDiff`](omniprof_analysis::TraceDiff). The page only lays them out.
//!
//! A [`TraceReportBuilder`] takes one trace item by item, beside the key averages' builder
//! (the caller streams the file once into both); [`ReportModel::new`] sets the traces of a
//! job together.
//!
//! ```
//! use omniprof_analysis::{key_averages, KeyAveragesOptions};
//! use omniprof_report::{ReportInput, ReportModel, TraceReportBuilder};
//! use omniprof_trace::{Activity, ActivityType, Trace, TraceItem};
//!
//! let mut trace = Trace::new(0, 100);
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, 60));
//! let mut b = TraceReportBuilder::default();
//! for a in &trace.activities {
//!     b.add_item(&TraceItem::Activity(a.clone()));
//! }
//! let input = ReportInput {
//!     label: "t.json".into(),
//!     summary: key_averages(&trace, &KeyAveragesOptions::default()),
//!     parts: b.finish(),
//!     error: None,
//! };
//! let model = ReportModel::new(vec![input], None);
//! let json = model.json();
//! assert!(json.contains(r#""name":"aten::mm""#));
//! assert!(json.contains(r#""cpu_only_ns":60"#));
//! ```

mod model;
mod table_rows;

pub use model::{
    CounterLine, KernelTimes, ReportInput, ReportModel, TraceEntry, TraceParts, TraceReportBuilder,
    MAX_COUNTER_CHARTS,
};
pub use table_rows::{LeftOut, MAX_TABLE_ROWS};
