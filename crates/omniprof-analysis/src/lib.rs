//! Analyses of a trace:
//!
//! - [`key_averages`](key_averages()): PyTorch's `key_averages()`, per-key statistics of host ops and device
//!   work (how a trace becomes rows is documented on [`KeyAverages`]), printed exactly as
//!   PyTorch's `table()` prints them, or as CSV or JSON ([`Render`]); streamed item by item
//!   with [`KeyAveragesBuilder`], summed over a job's ranks with [`KeyAverages::merge`].
//! - [`function_events`]: every event with the numbers the summary sums, as PyTorch's
//!   `prof.events()` lists them.
//! - [`diff`](diff()): the rows of two traces side by side ([`diff_top`]: the largest
//!   regressions only).
//! - [`folded_stacks`]: host and device time as flame graph stacks.
//! - [`python_stacks`]: every event's Python stack (PyTorch's `FunctionEvent.stack`), which
//!   rows can group by and [`FunctionEvents::export_stacks`] writes.
//! - [`estimated_flops`]: PyTorch's FLOP count of an op from its recorded inputs, for traces
//!   that carry none (torch.profiler's).
//! - [`kernel_metrics`]: per-kernel hardware metrics; [`counter_stats`]: the counter tracks.
//! - [`MemoryCurve`]: memory over time per device; [`memory_timeline()`]: one device's
//!   allocations and frees as torch.profiler's memory timeline has them; [`StepTimes`]:
//!   where each step's time went.
//! - [`RankComparison`]: a job's ranks side by side (steps, slowest rank, HTA's breakdown).

mod activity;
mod attribution;
mod counters;
mod diff;
mod flamegraph;
mod flops;
mod frame_tree;
mod key_averages;
mod memory_curve;
mod memory_timeline;
mod merge;
mod metrics;
mod ranks;
mod render;
mod stacks;
mod step_time;

pub use counters::{counter_stats, CounterStats, CounterSummary};
pub use diff::{diff, diff_top, Change, DiffRow, Pair, TraceDiff};
pub use flamegraph::{folded_stacks, FlameBuilder, FlameTime, FoldedStacks};
pub use flops::estimated_flops;
pub use frame_tree::MAX_STACK_DEPTH;
pub use key_averages::{
    average_events, event_rows, event_stacks, function_events, key_averages, FunctionEvent,
    FunctionEvents, Kernel, KeyAverages, KeyAveragesBuilder, KeyAveragesOptions, OutOfOrder,
    ReadAgain, Row, SortKey, SummedEvent, TableOptions, TimeUnit, UnknownSortKey, UnknownTimeUnit,
};
pub use memory_curve::{MemoryCurve, MemoryCurveBuilder, MemoryPoint};
pub use memory_timeline::{
    memory_timeline, MemoryAction, MemoryEvent, MemoryTimeline, StorageRead,
};
pub use metrics::{
    kernel_metrics, KernelMetrics, KernelMetricsBuilder, KernelMetricsRow, MetricStats,
};
pub use ranks::{
    claimed_rank, Breakdown, RankComparison, RankProfile, RankProfileBuilder, RankTrace, Source,
    Step, StepRow, Straggler, WorkKind,
};
pub use render::{format_time, visible, Render, RenderFormat};
pub use stacks::{python_stacks, PythonStacks, Stack, StackMetric, UnknownStackMetric};
pub use step_time::{StepTime, StepTimeBuilder, StepTimes};

#[cfg(test)]
mod tests;
