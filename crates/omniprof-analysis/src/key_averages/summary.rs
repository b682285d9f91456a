//! The summary of a trace, PyTorch's `key_averages()`: [`KeyAverages`], its rows ([`Row`]),
//! and the sums and selections the renderers and merges read off them. How a trace becomes
//! rows is documented on [`KeyAverages`]; the engine that makes them is the
//! [builder](crate::KeyAveragesBuilder).

use std::sync::Arc;

use super::options::{SortKey, TableOptions};
use crate::stacks::Stack;

/// One row: the events of one key, summed. Times are nanoseconds, and again as PyTorch's
/// float sums, which its table prints, divides and sorts by.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    /// The key: the op's name.
    pub name: Arc<str>,
    /// The events' input shapes as Python prints them (`[[256, 256], []]`); set when
    /// grouping by input shapes.
    pub input_shapes: Option<Arc<str>>,
    /// The events' overload name (`""` for the default overload); set when grouping by
    /// overload name
    /// ([`KeyAveragesOptions::group_by_overload_name`](crate::KeyAveragesOptions::group_by_overload_name)).
    pub overload_name: Option<Arc<str>>,
    /// The first N frames of the events' Python stack, innermost first (PyTorch's
    /// `FunctionEventAvg.stack`); set when grouping by stack
    /// ([`KeyAveragesOptions::group_by_stack_n`](crate::KeyAveragesOptions::group_by_stack_n)), empty for events without one. An event's
    /// [row](crate::FunctionEvent::row) holds its whole stack.
    pub stack: Option<Stack>,
    /// Number of calls.
    pub count: u64,
    /// Self CPU time, ns.
    pub self_cpu_time_total_ns: i64,
    /// Total CPU time, ns.
    pub cpu_time_total_ns: i64,
    /// Self device time, ns.
    pub self_device_time_total_ns: i64,
    /// Total device time, ns.
    pub device_time_total_ns: i64,
    /// CPU and device totals summed as PyTorch sums them: float microseconds per event,
    /// added in event order. The averages divide these, so that their last printed digit is
    /// PyTorch's (a sum of exact nanoseconds can round the other way).
    pub cpu_time_total_us: f64,
    /// The device total, as `cpu_time_total_us`.
    pub device_time_total_us: f64,
    /// Self CPU time as PyTorch sums it: per event, its float total less its children's
    /// (summed in their order), added in event order. Rows sort by these: two rows whose
    /// nanoseconds tie rarely tie here, and PyTorch orders them by these.
    pub self_cpu_time_total_us: f64,
    /// Self device time, as `self_cpu_time_total_us`.
    pub self_device_time_total_us: f64,
    /// Device work (a kernel, a copy, ...) rather than a host op.
    pub on_device: bool,
    /// The device time came from the stubs path.
    pub is_legacy: bool,
    /// A user range (`user_annotation`, or `gpu_user_annotation` on the device).
    pub is_user_annotation: bool,
    /// PyTorch's `is_async` of the row's first event (see
    /// [`FunctionEvent::is_async`](super::FunctionEvent)): false.
    pub is_async: bool,
    /// The row's first event has a parent in its op tree (PyTorch's `cpu_parent` of a
    /// `FunctionEventAvg`, which takes its first event's): `top_level_events_only` leaves
    /// the row out.
    pub has_cpu_parent: bool,
    /// Memory allocated during the row's events, in bytes (see [`KeyAverages`](KeyAverages#memory)).
    pub cpu_memory_usage: i64,
    /// The same less what their children allocated.
    pub self_cpu_memory_usage: i64,
    /// Device memory allocated during the row's events, bytes.
    pub device_memory_usage: i64,
    /// The same less what their children allocated.
    pub self_device_memory_usage: i64,
    /// The sum of the events' `flops` args (0 for an event without one).
    pub flops: u64,
    /// Where the row's first event is among the events [`average_events`](crate::average_events)
    /// averaged (PyTorch's `FunctionEventAvg` takes its `cpu_parent`, `cpu_children` and
    /// `scope` from that event); `None` for a row made otherwise.
    pub first_event: Option<usize>,
}

impl Row {
    /// Adds `row`'s calls, times, memory and FLOPs to this row's (exact sums, saturating):
    /// what `total_average`, the merge of several traces' rows and PyTorch's
    /// `FunctionEventAvg.add` do.
    pub fn add(&mut self, row: &Row) {
        self.count += row.count;
        self.self_cpu_time_total_ns = self
            .self_cpu_time_total_ns
            .saturating_add(row.self_cpu_time_total_ns);
        self.cpu_time_total_ns = self.cpu_time_total_ns.saturating_add(row.cpu_time_total_ns);
        self.self_device_time_total_ns = self
            .self_device_time_total_ns
            .saturating_add(row.self_device_time_total_ns);
        self.device_time_total_ns = self
            .device_time_total_ns
            .saturating_add(row.device_time_total_ns);
        self.cpu_time_total_us += row.cpu_time_total_us;
        self.device_time_total_us += row.device_time_total_us;
        self.self_cpu_time_total_us += row.self_cpu_time_total_us;
        self.self_device_time_total_us += row.self_device_time_total_us;
        self.cpu_memory_usage = self.cpu_memory_usage.saturating_add(row.cpu_memory_usage);
        self.self_cpu_memory_usage = self
            .self_cpu_memory_usage
            .saturating_add(row.self_cpu_memory_usage);
        self.device_memory_usage = self
            .device_memory_usage
            .saturating_add(row.device_memory_usage);
        self.self_device_memory_usage = self
            .self_device_memory_usage
            .saturating_add(row.self_device_memory_usage);
        self.flops = self.flops.saturating_add(row.flops);
    }

    /// CPU time per call, as PyTorch computes it.
    pub fn cpu_time_avg_us(&self) -> f64 {
        self.cpu_time_total_us / self.count.max(1) as f64
    }

    /// Device time per call, as PyTorch computes it.
    pub fn device_time_avg_us(&self) -> f64 {
        self.device_time_total_us / self.count.max(1) as f64
    }

    /// Its self device time counts in the device percentages' base: device work, and legacy
    /// host rows. (Host rows' device time otherwise repeats their device work's; GPU user
    /// annotations repeat the work inside them.)
    fn counts_in_device_total(&self) -> bool {
        if self.on_device {
            !self.is_user_annotation
        } else {
            self.is_legacy
        }
    }

    /// The row's value for a sort key.
    pub(crate) fn sort_value(&self, key: SortKey) -> f64 {
        match key {
            SortKey::CpuTime => self.cpu_time_avg_us(),
            SortKey::CpuTimeTotal => self.cpu_time_total_us,
            SortKey::SelfCpuTimeTotal => self.self_cpu_time_total_us,
            SortKey::DeviceTime => self.device_time_avg_us(),
            SortKey::DeviceTimeTotal => self.device_time_total_us,
            SortKey::SelfDeviceTimeTotal => self.self_device_time_total_us,
            SortKey::Count => self.count as f64,
            SortKey::CpuMemoryUsage => self.cpu_memory_usage as f64,
            SortKey::SelfCpuMemoryUsage => self.self_cpu_memory_usage as f64,
            SortKey::DeviceMemoryUsage => self.device_memory_usage as f64,
            SortKey::SelfDeviceMemoryUsage => self.self_device_memory_usage as f64,
            SortKey::Flops => self.flops as f64,
        }
    }
}

/// Nanoseconds as the microseconds PyTorch computes with.
pub(crate) fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

/// The summary of a trace: rows in the order of their first event.
///
/// ```
/// use omniprof_analysis::{key_averages, KeyAveragesOptions, TableOptions, SortKey};
/// use omniprof_trace::{Activity, ActivityType, Trace};
///
/// let mut trace = Trace::new(0, 1_000_000);
/// trace.activities.push(Activity::new(ActivityType::UserAnnotation, "step", 1, 1, 0, 900_000));
/// trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 100_000, 700_000));
/// let summary = key_averages(&trace, &KeyAveragesOptions::default());
/// let options = TableOptions { sort_by: Some(SortKey::SelfCpuTimeTotal), ..Default::default() };
/// let table = summary.table(&options);
/// assert!(table.contains("    aten::mm        66.67%     600.000us"));
/// assert!(table.ends_with("Self CPU time total: 900.000us\n"));
/// ```
///
/// # How a trace becomes rows
///
/// - **Host ops** are `cpu_op`, `user_annotation`, runtime / driver calls and
///   `python_function` events. Per (pid, tid) they nest by interval containment (an op starting exactly where another ends is not
///   inside it); a parent whose only child has its name absorbs it (`aten::sum` calling the
///   `aten::sum` overload counts once). Self CPU time is an op's length less its children's.
/// - **Ops that do not nest**: an op that starts inside another and ends after it closes
///   that op (which takes no later children) and nests in the innermost open op that
///   contains it, as PyTorch's tree does: a `record_function` range begun inside its
///   `__enter__` call is a child of the code around it. Children that overlap each other can
///   leave their parent a negative self time, as in PyTorch's table.
/// - **Device work** (`kernel`, `gpu_memcpy`, `gpu_memset`, `gpu_user_annotation`, syncs,
///   ...) makes rows of its own (device time only), and its duration is the self device time
///   of the host op whose `correlation` equals its `linked_correlation` (its `External id`).
///   Work without an `External id` (MTIA's, older CUDA traces) goes through its
///   `correlation`: to the innermost host op enclosing the runtime or driver call with the
///   same `correlation` on that call's thread, as HTA attributes it (PyTorch's table gives
///   such work to no op). Where an `External id` names another op than the one around the
///   launch, the `External id` decides, as in PyTorch's table (HTA gives it to the op around
///   the launch). A runtime or driver call never receives device work itself. Device totals
///   roll up the tree. A GPU user annotation is not counted for its range (it repeats the
///   work inside it).
/// - **Stub device time**: an op with `args.device_time_us` > 0 (the stubs path, which has
///   no device timeline) gets that device time as its own, and is *legacy*: its device total
///   is that record alone, without its children's (the record already spans them). A device
///   event that carries `device_time_us` itself is such a record drawn on the device's row
///   (the Python package's PyTorch stubs bridge draws them): it makes no row and adds nothing.
/// - **Unfinished ops** (`"finished": false`) end at the capture window's end, as Kineto
///   writes them (an earlier recorded end is extended to it).
/// - Rows group events by name (`ProfilerStep#n` as `ProfilerStep*`), host or device,
///   legacy or not, user range or not, with [`group_by_input_shapes`] by `Input Dims`, and
///   with [`group_by_stack_n`] by the first N frames of their Python stack ([`python_stacks`](crate::python_stacks));
///   PyTorch's bookkeeping names (`[memory]`, `aten::is_leaf`, ...) are dropped. Rows come in
///   the order of their first event (by start, longer first).
/// - **Memory** (`profile_memory`): `[memory]` records count for the host events whose
///   interval holds them (inclusive at both ends, on any thread, as in PyTorch), records
///   outside every host event and `[OutOfMemory]` records become rows of their own; see
///   [memory](KeyAverages#memory) below.
/// - **FLOPs** (`with_flops`): a row's FLOPs are the sum of its events' `flops` args; with
///   [`KeyAveragesOptions::with_flops`](crate::KeyAveragesOptions::with_flops), an op that
///   carries none (a trace torch.profiler wrote keeps none) counts PyTorch's FLOPs of its
///   recorded inputs ([`estimated_flops`](crate::estimated_flops)).
/// - **Python functions** (`python_function`, PyTorch's `with_stack=True`) nest in the op
///   trees like any host event (an op's self time excludes the Python functions inside it,
///   as in PyTorch), are listed by [`function_events`](crate::function_events), and make rows only with
///   [`KeyAveragesOptions::include_python_functions`](crate::KeyAveragesOptions::include_python_functions), as PyTorch leaves them out of
///   `key_averages()` by default. A Python function receives no device work.
/// - Instants, counters and the other kinds are not summarized.
///
/// # Memory
///
/// A trace's `[memory]` instants (args `Bytes`, `Total Allocated`, `Total Reserved`,
/// `Addr`, `Device Type`, `Device Id`, as PyTorch writes them with `profile_memory=True`)
/// give each host event its CPU and device memory usage, exactly as PyTorch computes them:
///
/// - usage: the `Bytes` of the records whose time `t` satisfies `start <= t <= end`
///   (**both ends inclusive, and records of any thread**: PyTorch looks records up by time
///   alone), CPU memory for `Device Type` CPU / MKLDNN / IDEEP (0, 2, 5), device memory for
///   CUDA / HIP / XPU / PrivateUse1 (1, 6, 12, 20);
/// - self usage: the usage less its children's in the op tree (after the collapse of
///   same-named only children);
/// - a record inside no host event becomes a `[memory]` event (one call, zero time, its
///   bytes as usage and self usage), and every `[OutOfMemory]` record an `[OutOfMemory]`
///   event, rows like any other.
///
/// [`KeyAverages::profile_memory`] (any such record, or
/// [`KeyAveragesOptions::profile_memory`](crate::KeyAveragesOptions::profile_memory)) adds the `CPU Mem` and `Self CPU Mem` columns,
/// and the device ones when some row has self device memory.
///
/// # What the summary holds
///
/// [`KeyAveragesBuilder`](crate::KeyAveragesBuilder) takes a trace item by item ([`TraceReader::stream`] delivers
/// them), and holds per device activity nothing but a sum: its duration goes to its row,
/// and to a sum per correlation id for its host op. It holds the first `FOLD_AFTER`
/// (65,536) host ops and memory records as they come (80 and 24 bytes each); then it folds host ops
/// into their rows as soon as they are final: once the thread has moved past their end,
/// every thread has moved past their end (memory records of any thread count for them), the
/// device work an `ac2g` flow announces for them has come, and their children are final. It
/// then holds each thread's open ops, the ops and memory records after the slowest thread's
/// latest item, launches whose device work has not come, the events that wait for an
/// earlier event of their row (rows add events in PyTorch's order, on which their float
/// sums depend), and the rows. The rows are exactly those of a builder that holds every op.
/// Nesting is bounded: an op that starts while [`MAX_STACK_DEPTH`](crate::MAX_STACK_DEPTH)
/// ops of its thread are open around it or start with it before it is left out and counted
/// ([`KeyAverages::too_deep`]), by either builder, so that a file of millions of identical
/// events, each nesting in the one before, holds no more than twice that many ops.
///
/// Folding needs, per thread, host ops and memory records in time order (an op may come
/// after others that start at the same time, or between the last op placed and those), as
/// PyTorch and omniprof write them; and the profiler's span, where host times count from,
/// before the first op is folded. When an item comes too late for what was folded (an
/// earlier op, a span that moves the origin, device work for an op already summed),
/// [`KeyAveragesBuilder::finish`](crate::KeyAveragesBuilder::finish) returns [`ReadAgain`](crate::ReadAgain): the trace is read again, knowing
/// the span's start and the capture window when only these came late, else holding every
/// op. So a trace whose
/// span comes last (PyTorch's and omniprof's) is read twice once it has more host ops than
/// `FOLD_AFTER`. What is held grows with the trace in these cases only:
///
/// - every op (80 bytes each) when the trace is read again holding every op; when its
///   header says that its device work or memory records come after its host ops, as PyTorch
///   writes them (`deviceProperties` with no device work or runtime call among the first
///   items, or `profile_memory` with no memory record), which folding would meet too late;
///   and with [`KeyAveragesBuilder::keeping_every_op`](crate::KeyAveragesBuilder::keeping_every_op);
/// - once items came out of time order across threads, the ops of the other threads after
///   the last item of a thread that stopped, until the end;
/// - while an op stays open (a top-level op spanning the trace, an unfinished op, an op
///   waiting for device work that never comes, and the ops around it), the later events of
///   its row, and the float device total of each of its children that has one;
/// - device work linked to no host op (a sum per correlation id), and the ranges of
///   correlation ids seen (one for ids that come one after the other).
///
/// [`TraceReader::stream`]: omniprof_read::TraceReader::stream
///
/// # The device name
///
/// The device columns are named after the device, upper-cased as PyTorch does with
/// `use_device` (`Self CUDA`, `Self OPENREG`). The name comes from, in order:
/// [`KeyAveragesOptions::device_name`](crate::KeyAveragesOptions::device_name); the trace's `device_type` metadata (a string, e.g.
/// `"device_type": "OpenReg"`, which omniprof writes in stubs mode and OpenReg's backend
/// returns from its session's metadata); the runtime calls in the trace (`cuda_runtime` →
/// `cuda`, `xpu_runtime` → `xpu`, `privateuse1_runtime` → `privateuseone`, PyTorch's
/// default name for that slot, ...); else `cuda`.
///
/// [`group_by_input_shapes`]: crate::KeyAveragesOptions::group_by_input_shapes
/// [`group_by_stack_n`]: crate::KeyAveragesOptions::group_by_stack_n
#[derive(Clone, Debug, PartialEq)]
pub struct KeyAverages {
    /// The rows, in the order of their first event.
    pub rows: Vec<Row>,
    /// The device, as named by the trace (`cuda`, `OpenReg`); see [`KeyAverages`](KeyAverages#the-device-name).
    pub device_name: String,
    /// Memory was profiled: the trace held `[memory]` or `[OutOfMemory]` records, or
    /// [`KeyAveragesOptions::profile_memory`](crate::KeyAveragesOptions::profile_memory) said so. The table adds the memory columns.
    pub profile_memory: bool,
    /// FLOPs were counted: some event carried a `flops` arg, or
    /// [`KeyAveragesOptions::with_flops`](crate::KeyAveragesOptions::with_flops) said so. The table adds the FLOPs column when
    /// some row has FLOPs.
    pub with_flops: bool,
    /// Host ops left out of the rows because they started while
    /// [`MAX_STACK_DEPTH`](crate::MAX_STACK_DEPTH) ops of their thread were open around them
    /// or started with them (a file of millions of identical events nests them all): their
    /// time stays in their parent's self time. Bounding the nesting bounds what the summary
    /// holds while it folds ops.
    pub too_deep: u64,
}

impl KeyAverages {
    /// The device name as the column headers print it (`CUDA`, `OPENREG`).
    pub fn device_label(&self) -> String {
        self.device_name.to_uppercase()
    }

    /// Self CPU time of all rows: the base of the CPU percentages.
    pub fn self_cpu_time_total_ns(&self) -> i64 {
        self.rows
            .iter()
            .fold(0, |sum, r| sum.saturating_add(r.self_cpu_time_total_ns))
    }

    /// Self device time of device work and of legacy host rows: the base of the device
    /// percentages.
    pub fn self_device_time_total_ns(&self) -> i64 {
        self.rows
            .iter()
            .filter(|r| r.counts_in_device_total())
            .fold(0, |sum, r| sum.saturating_add(r.self_device_time_total_ns))
    }

    /// The bases of the table's percentages as PyTorch sums them: the self CPU time of
    /// every row and the self device time of the rows
    /// [`self_device_time_total_ns`](Self::self_device_time_total_ns) counts, PyTorch's
    /// floats added in the table's order (`sorted`: every row, as [`Self::sorted`] gives them).
    pub(crate) fn self_time_totals_us(sorted: &[&Row]) -> (f64, f64) {
        sorted.iter().fold((0.0, 0.0), |(cpu, device), r| {
            let d = if r.counts_in_device_total() {
                r.self_device_time_total_us
            } else {
                0.0
            };
            (cpu + r.self_cpu_time_total_us, device + d)
        })
    }

    /// Whether any row has device time, which adds the device columns.
    pub fn has_device_time(&self) -> bool {
        self.rows.iter().any(|r| r.self_device_time_total_ns > 0)
    }

    /// The rows to print: sorted (stable, descending), without the rows that have a parent
    /// when [`top_level_events_only`](TableOptions::top_level_events_only), and limited.
    pub fn select(&self, options: &TableOptions) -> Vec<&Row> {
        Self::narrow(self.sorted(options.sort_by), options)
    }

    /// [`Self::select`] of rows already sorted by [`Self::sorted`].
    pub(crate) fn narrow<'a>(mut rows: Vec<&'a Row>, options: &TableOptions) -> Vec<&'a Row> {
        if options.top_level_events_only {
            rows.retain(|r| !r.has_cpu_parent);
        }
        if let Some(limit) = options.row_limit {
            rows.truncate(limit);
        }
        rows
    }

    /// Every row, sorted by `sort_by` (stable, descending, as Python's `sorted`).
    pub(crate) fn sorted(&self, sort_by: Option<SortKey>) -> Vec<&Row> {
        let mut rows: Vec<&Row> = self.rows.iter().collect();
        if let Some(key) = sort_by {
            rows.sort_by(|a, b| b.sort_value(key).total_cmp(&a.sort_value(key)));
        }
        rows
    }

    /// PyTorch's `total_average()`: one row named `Total` summing every row (counts,
    /// times, memory, FLOPs). As in PyTorch, whose sum starts afresh from each row it adds,
    /// the flags (`on_device`, `is_legacy`, `is_user_annotation`, `is_async`,
    /// `has_cpu_parent`) and the input shapes are those of the last row. `None` when there
    /// are no rows.
    pub fn total_average(&self) -> Option<Row> {
        let last = self.rows.last()?;
        let mut total = Row {
            name: Arc::from("Total"),
            input_shapes: last.input_shapes.clone(),
            overload_name: last.overload_name.clone(),
            stack: last.stack.clone(),
            on_device: last.on_device,
            is_legacy: last.is_legacy,
            is_user_annotation: last.is_user_annotation,
            is_async: last.is_async,
            has_cpu_parent: last.has_cpu_parent,
            ..Row::default()
        };
        for r in &self.rows {
            total.add(r);
        }
        Some(total)
    }
}
