//! The ranks of a distributed job side by side; documented on [`RankComparison`].

use std::fmt::Write;

use serde::Serialize;

use omniprof_trace::keys::{metadata, name as event_name};
use omniprof_trace::ActivityType;
use omniprof_trace::FastMap;
use omniprof_trace::TraceItem;
use omniprof_trace::Value;

use crate::render::visible;

/// HTA's kernel types (`hta.utils.utils.KernelType`), by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkKind {
    /// Collectives: NCCL / RCCL kernels (`^nccl.*Kernel`), or on the host the collective
    /// ops of c10d, gloo and NCCL and what runs inside them.
    Communication,
    /// Copies and fills: names starting with `Memcpy`, `Memset` or `dma`.
    Memory,
    /// Everything else but [`Other`](Self::Other).
    Computation,
    /// What HTA classifies as none of the three: a name holding `Memcpy` or `Sync`
    /// elsewhere than at its start.
    Other,
}

impl WorkKind {
    /// HTA's `get_kernel_type` of a device activity's name: its regular expressions, applied
    /// as Python's `re.match` does (anchored at the start).
    pub fn of_kernel(name: &str) -> Self {
        let comm = name
            .strip_prefix("nccl")
            .is_some_and(|rest| rest.contains("Kernel"));
        if comm {
            Self::Communication
        } else if ["Memcpy", "Memset", "dma"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            Self::Memory
        } else if name.contains("Memcpy") || name.contains("Sync") {
            // HTA's `(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)`: not computation.
            Self::Other
        } else {
            Self::Computation
        }
    }

    /// The class of a host op in a trace without device work: a collective (c10d's
    /// `c10d::allreduce_`, gloo's `gloo:all_reduce`, `nccl:all_reduce`, PyTorch's
    /// `record_param_comms`, or a `collective_comm` activity) is communication, any other
    /// `cpu_op` computation; `None` for what is not counted (user ranges, Python functions,
    /// runtime calls, instants).
    pub fn of_host_op(kind: ActivityType, name: &str) -> Option<Self> {
        let collective = kind == ActivityType::CollectiveComm
            || HOST_COLLECTIVE_PREFIXES.iter().any(|p| name.starts_with(p));
        if collective {
            Some(Self::Communication)
        } else if kind == ActivityType::CpuOp {
            Some(Self::Computation)
        } else {
            None
        }
    }
}

/// The starts of the names of host ops that are collectives.
pub(crate) const HOST_COLLECTIVE_PREFIXES: [&str; 4] =
    ["c10d::", "gloo:", "nccl:", event_name::RECORD_PARAM_COMMS];

/// The device activities HTA's breakdowns count (those on a stream): kernels, copies and
/// fills. GPU user annotations are left out (they repeat the work inside them).
fn is_device_work(kind: ActivityType) -> bool {
    matches!(
        kind,
        ActivityType::ConcurrentKernel | ActivityType::GpuMemcpy | ActivityType::GpuMemset
    )
}

/// One `ProfilerStep#N` range of a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The `N` of its name.
    pub number: u64,
    /// Absolute nanoseconds, on this rank's clock.
    pub start_ns: i64,
    /// Where it ends, on the same clock.
    pub end_ns: i64,
    /// The part of the step in which communication runs (the union of the rank's
    /// communication, clipped to the step): in a collective, a rank also waits for the others.
    pub communication_ns: i64,
}

impl Step {
    /// Its length (at most `i64::MAX`: a step of hostile times saturates, never wraps).
    pub fn duration_ns(&self) -> i64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// The step less its communication: the time the rank spends on its own work (and
    /// stalls), which the others wait for in their collectives.
    pub fn outside_communication_ns(&self) -> i64 {
        self.duration_ns().saturating_sub(self.communication_ns)
    }
}

/// Where a rank's time went, HTA's temporal breakdown and communication overlap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Breakdown {
    /// From the start of the first counted activity to the end of the last (HTA's
    /// `kernel_time`).
    pub span_ns: i64,
    /// The span less the union of every counted activity (HTA's `idle_time`).
    pub idle_ns: i64,
    /// The union of computation (HTA's `compute_time`).
    pub computation_ns: i64,
    /// The span less computation and idle time (HTA's `non_compute_time`).
    pub non_computation_ns: i64,
    /// The union of communication.
    pub communication_ns: i64,
    /// The union of memory copies and fills.
    pub memory_ns: i64,
    /// The union of what is none of these ([`WorkKind::Other`]).
    pub other_ns: i64,
    /// The time communication and computation both run.
    pub overlap_ns: i64,
}

impl Breakdown {
    /// `part` as a percentage of the span, rounded to two decimals as HTA's `*_pctg`
    /// columns (0 for an empty span).
    pub fn percent(&self, part_ns: i64) -> f64 {
        percent(part_ns, self.span_ns)
    }

    /// HTA's `comp_comm_overlap_pctg`: the overlap as a percentage of the communication
    /// time; `None` without communication (HTA divides by zero there).
    pub fn overlap_percent(&self) -> Option<f64> {
        (self.communication_ns > 0).then(|| percent(self.overlap_ns, self.communication_ns))
    }
}

fn percent(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        return 0.0;
    }
    (10_000.0 * part as f64 / whole as f64).round() / 100.0
}

/// What a rank's breakdown counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Device work (kernels, copies, fills), as HTA does.
    Device,
    /// The trace has no device work: host ops, classified by [`WorkKind::of_host_op`].
    Host,
}

/// One rank's trace, analysed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankProfile {
    /// `distributedInfo.rank`; `None` when the trace does not say.
    pub rank: Option<u64>,
    /// `distributedInfo.world_size`.
    pub world_size: Option<u64>,
    /// `distributedInfo.backend` (`gloo`, `nccl`), when not empty.
    pub backend: Option<String>,
    /// `baseTimeNanoseconds`: the trace's times count from it, on its own clock.
    pub base_time_ns: i64,
    /// Its `ProfilerStep#N` ranges, by number (the first of each number).
    pub steps: Vec<Step>,
    /// What the breakdown counts.
    pub source: Source,
    /// Where its time went.
    pub breakdown: Breakdown,
}

/// Intervals of one thread or stream, by kind.
#[derive(Default)]
struct Lane {
    by_kind: FastMap<WorkKindKey, Vec<(i64, i64)>>,
}

/// [`WorkKind`] as a map key (it has no `Ord`, and four values).
type WorkKindKey = u8;

fn key(kind: WorkKind) -> WorkKindKey {
    kind as u8
}

const KINDS: [WorkKind; 4] = [
    WorkKind::Communication,
    WorkKind::Memory,
    WorkKind::Computation,
    WorkKind::Other,
];

/// Accumulates one trace into a [`RankProfile`].
#[derive(Default)]
pub struct RankProfileBuilder {
    rank: Option<u64>,
    world_size: Option<u64>,
    backend: Option<String>,
    base_time_ns: i64,
    steps: FastMap<u64, Step>,
    device: Lane,
    /// Host ops per (pid, tid), used only when the trace has no device work.
    host: FastMap<(i64, i64), Lane>,
}

impl RankProfileBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one item of the trace.
    pub fn add_item(&mut self, item: &TraceItem) {
        match item {
            TraceItem::BaseTime(base) => self.base_time_ns = *base,
            TraceItem::Metadata(key, value) if key == metadata::DISTRIBUTED_INFO => {
                self.distributed_info(value)
            }
            TraceItem::Activity(a) => {
                let interval = (a.start_ns, a.end_ns.max(a.start_ns));
                if is_device_work(a.kind) {
                    let kind = WorkKind::of_kernel(&a.name);
                    push(&mut self.device, kind, interval);
                    // The breakdown counts device work now: the host ops are not needed.
                    if !self.host.is_empty() {
                        self.host = FastMap::default();
                    }
                    return;
                }
                if a.kind.is_device() {
                    return;
                }
                if let Some(n) = a
                    .name
                    .strip_prefix(event_name::PROFILER_STEP_PREFIX)
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    self.steps.entry(n).or_insert(Step {
                        number: n,
                        start_ns: interval.0,
                        end_ns: interval.1,
                        communication_ns: 0,
                    });
                }
                // Host ops are kept only while the trace has shown no device work.
                if self.device.by_kind.is_empty() {
                    if let Some(kind) = WorkKind::of_host_op(a.kind, &a.name) {
                        let lane = self.host.entry((a.device, a.resource)).or_default();
                        push(lane, kind, interval);
                    }
                }
            }
            _ => {}
        }
    }

    fn distributed_info(&mut self, value: &Value) {
        use metadata::distributed;
        self.rank = claimed_rank(value);
        self.world_size = count(value, distributed::WORLD_SIZE);
        self.backend = value
            .get(distributed::BACKEND)
            .and_then(Value::as_str)
            .filter(|b| !b.is_empty())
            .map(str::to_owned);
    }

    /// The rank the trace claims so far (`distributedInfo`, usually before the events).
    pub fn rank(&self) -> Option<u64> {
        self.rank
    }

    /// The profile of what was added.
    pub fn finish(self) -> RankProfile {
        let mut steps: Vec<Step> = self.steps.into_values().collect();
        steps.sort_by_key(|s| s.number);
        let (source, breakdown) = if self.device.by_kind.is_empty() {
            // On the host, what runs inside a collective on its thread (the copies and
            // waits gloo does) is part of the communication, not computation beside it.
            let mut merged = Lane::default();
            for (_, mut lane) in self.host {
                let comm = union(lane.by_kind.remove(&key(WorkKind::Communication)));
                let comp = union(lane.by_kind.remove(&key(WorkKind::Computation)));
                let comp = subtract(&comp, &comm);
                for (kind, list) in [
                    (WorkKind::Communication, comm),
                    (WorkKind::Computation, comp),
                ] {
                    merged.by_kind.entry(key(kind)).or_default().extend(list);
                }
            }
            (Source::Host, breakdown(merged))
        } else {
            (Source::Device, breakdown(self.device))
        };
        let (breakdown, communication) = breakdown;
        for step in &mut steps {
            step.communication_ns = length(&clip(&communication, step.start_ns, step.end_ns));
        }
        RankProfile {
            rank: self.rank,
            world_size: self.world_size,
            backend: self.backend,
            base_time_ns: self.base_time_ns,
            steps,
            source,
            breakdown,
        }
    }
}

/// The rank a trace's `distributedInfo` value claims (its `rank`, a non-negative integer).
pub fn claimed_rank(info: &Value) -> Option<u64> {
    count(info, metadata::distributed::RANK)
}

fn count(info: &Value, key: &str) -> Option<u64> {
    info.get(key)
        .and_then(Value::as_i64)
        .and_then(|v| u64::try_from(v).ok())
}

fn push(lane: &mut Lane, kind: WorkKind, interval: (i64, i64)) {
    lane.by_kind.entry(key(kind)).or_default().push(interval);
}

/// HTA's figures of the intervals of each kind, and the union of communication.
fn breakdown(mut lane: Lane) -> (Breakdown, Vec<(i64, i64)>) {
    let mut unions: FastMap<WorkKindKey, Vec<(i64, i64)>> = FastMap::default();
    let mut all = Vec::new();
    for kind in KINDS {
        let list = union(lane.by_kind.remove(&key(kind)));
        all.extend_from_slice(&list);
        unions.insert(key(kind), list);
    }
    let all = union(Some(all));
    let (Some(first), Some(last)) = (all.first(), all.last()) else {
        return (Breakdown::default(), Vec::new());
    };
    // Saturating: times near the ends of i64 must not wrap into a negative span.
    let span_ns = last.1.saturating_sub(first.0);
    let idle_ns = span_ns.saturating_sub(length(&all));
    let of = |kind| length(&unions[&key(kind)]);
    let computation_ns = of(WorkKind::Computation);
    let breakdown = Breakdown {
        span_ns,
        idle_ns,
        computation_ns,
        non_computation_ns: span_ns
            .saturating_sub(computation_ns)
            .saturating_sub(idle_ns),
        communication_ns: of(WorkKind::Communication),
        memory_ns: of(WorkKind::Memory),
        other_ns: of(WorkKind::Other),
        overlap_ns: length(&intersect(
            &unions[&key(WorkKind::Communication)],
            &unions[&key(WorkKind::Computation)],
        )),
    };
    let communication = unions
        .remove(&key(WorkKind::Communication))
        .unwrap_or_default();
    (breakdown, communication)
}

/// The parts of sorted disjoint intervals within `start..end`.
pub(super) fn clip(list: &[(i64, i64)], start: i64, end: i64) -> Vec<(i64, i64)> {
    let first = list.partition_point(|&(_, e)| e <= start);
    list[first..]
        .iter()
        .take_while(|&&(s, _)| s < end)
        .map(|&(s, e)| (s.max(start), e.min(end)))
        .collect()
}

/// Sorted disjoint intervals covering the given ones; touching intervals merge, as in
/// HTA's `merge_kernel_intervals`.
pub(super) fn union(list: Option<Vec<(i64, i64)>>) -> Vec<(i64, i64)> {
    let mut list = list.unwrap_or_default();
    list.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(list.len());
    for (start, end) in list {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// The total length of sorted disjoint intervals, saturating at `i64::MAX`.
pub(super) fn length(list: &[(i64, i64)]) -> i64 {
    list.iter()
        .fold(0i64, |sum, (s, e)| sum.saturating_add(e.saturating_sub(*s)))
}

/// The parts of two sorted disjoint lists that both cover.
fn intersect(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let start = a[i].0.max(b[j].0);
        let end = a[i].1.min(b[j].1);
        if start < end {
            out.push((start, end));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// The parts of sorted disjoint `a` that sorted disjoint `b` does not cover.
pub(super) fn subtract(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut j = 0;
    for &(mut start, end) in a {
        while j < b.len() && b[j].1 <= start {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < end {
            if b[k].0 > start {
                out.push((start, b[k].0));
            }
            start = start.max(b[k].1);
            k += 1;
        }
        if start < end {
            out.push((start, end));
        }
    }
    out
}

/// One trace of the job, as the report lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankTrace {
    /// How the report names it (its path).
    pub label: String,
    /// What it holds (of what was read, for a trace read in part).
    pub profile: RankProfile,
    /// Why the trace was read only in part (a truncated file read with `--partial`): its
    /// figures are shown, flagged, and left out of the cross-rank statistics.
    pub error: Option<String>,
}

impl RankTrace {
    /// Takes in another trace of the same rank: its steps join this one's (a step number
    /// both have keeps this trace's step), its breakdown adds to this one's, the labels are
    /// joined with ` + `, and a trace read in part makes the whole rank partial.
    pub fn absorb(&mut self, other: RankTrace) {
        self.label = format!("{} + {}", self.label, other.label);
        if self.error.is_none() {
            self.error = other.error;
        }
        let (mine, theirs) = (&mut self.profile, other.profile);
        mine.world_size = mine.world_size.or(theirs.world_size);
        mine.backend = mine.backend.take().or(theirs.backend);
        mine.base_time_ns = mine.base_time_ns.min(theirs.base_time_ns);
        for step in theirs.steps {
            if !mine.steps.iter().any(|s| s.number == step.number) {
                mine.steps.push(step);
            }
        }
        mine.steps.sort_by_key(|s| s.number);
        if theirs.source == Source::Device {
            mine.source = Source::Device;
        }
        let (b, t) = (&mut mine.breakdown, theirs.breakdown);
        for (field, add) in [
            (&mut b.span_ns, t.span_ns),
            (&mut b.idle_ns, t.idle_ns),
            (&mut b.computation_ns, t.computation_ns),
            (&mut b.non_computation_ns, t.non_computation_ns),
            (&mut b.communication_ns, t.communication_ns),
            (&mut b.memory_ns, t.memory_ns),
            (&mut b.other_ns, t.other_ns),
            (&mut b.overlap_ns, t.overlap_ns),
        ] {
            *field = field.saturating_add(add);
        }
    }
}

/// One step across the ranks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepRow {
    /// The `N` of `ProfilerStep#N`.
    pub number: u64,
    /// Its duration on each rank, in the report's order; `None` where a rank lacks it.
    pub durations_ns: Vec<Option<i64>>,
    /// Its time outside communication on each rank ([`Step::outside_communication_ns`]).
    pub outside_communication_ns: Vec<Option<i64>>,
    /// The index (in the report's order) of the slowest complete rank: the one with the
    /// most time outside communication (see [`RankComparison`]).
    pub slowest: Option<usize>,
    /// The median time outside communication over the complete ranks that have the step
    /// (of an even number, the mean of the two middle ones, rounded down).
    pub median_ns: i64,
    /// The slowest rank's time outside communication less the median.
    pub lag_ns: i64,
}

/// The rank that is slowest most often.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Straggler {
    /// Its `distributedInfo.rank` (`None` for a trace without one).
    pub rank: Option<u64>,
    /// The index of its trace in the report.
    pub index: usize,
    /// The steps in which it was the slowest, of `steps`.
    pub slowest_in: usize,
    /// The steps compared: those on two or more complete ranks.
    pub steps: usize,
    /// Its mean lag behind the median over the steps it was slowest in.
    pub mean_lag_ns: i64,
}

/// The ranks of a job side by side.
///
/// The ranks of a distributed job side by side: per rank, its steps (`ProfilerStep#N`) and
/// where its time went (computation, communication, memory copies, idle, and the overlap
/// of communication with computation), with the definitions of Holistic Trace Analysis
/// (HTA) so that the figures compare with HTA's on the same traces; across ranks, the
/// slowest rank of each step and its lag behind the median. `docs/ranks.md` states the
/// definitions and what is assumed about clocks.
///
/// The slowest rank of a step is the one with the most time outside communication: in a
/// synchronous job the collectives end together, so every rank's step lasts about as long,
/// and the rank the others wait for shows as the one that spent the least of its step in
/// them.
///
/// A [`RankProfileBuilder`] takes one trace item by item ([`TraceReader::stream`] delivers
/// them) and keeps, per activity it counts, one interval (16 bytes); a [`RankComparison`] sets
/// the [`RankProfile`]s of a job side by side.
///
/// ```
/// use omniprof_analysis::{RankProfileBuilder, RankComparison, RankTrace};
/// use omniprof_trace::TraceItem;
/// use omniprof_trace::{Activity, ActivityType, Value};
///
/// let profile = |rank: u64, step_ns: i64| {
///     let mut b = RankProfileBuilder::new();
///     let info: Value = [("rank", Value::UInt(rank))].into_iter().collect();
///     b.add_item(&TraceItem::Metadata("distributedInfo".into(), info));
///     let step = Activity::new(ActivityType::UserAnnotation, "ProfilerStep#0", 1, 1, 0, step_ns);
///     b.add_item(&TraceItem::Activity(step));
///     RankTrace { label: format!("rank{rank}.json"), profile: b.finish(), error: None }
/// };
/// let report = RankComparison::new(vec![profile(0, 100), profile(1, 300), profile(2, 110)]);
/// assert_eq!(report.steps[0].slowest, Some(1));
/// assert_eq!(report.steps[0].lag_ns, 190); // 300 less the median, 110
/// assert_eq!(report.straggler().and_then(|s| s.rank), Some(1));
/// ```
///
/// [`TraceReader::stream`]: omniprof_read::TraceReader::stream
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankComparison {
    /// By rank (traces without one last, by label).
    pub ranks: Vec<RankTrace>,
    /// Every step number some rank has, in order.
    pub steps: Vec<StepRow>,
}

impl RankComparison {
    /// Sets the traces side by side: sorted by rank, steps compared by duration. Traces
    /// that claim the same rank are that rank's steps, read as one (see
    /// [`RankTrace::absorb`]): the cycles a scheduled profiler wrote into one directory, or
    /// the traces of a restarted job.
    pub fn new(traces: Vec<RankTrace>) -> Self {
        let mut ranks: Vec<RankTrace> = Vec::with_capacity(traces.len());
        for trace in traces {
            let same = trace
                .profile
                .rank
                .and_then(|rank| ranks.iter_mut().find(|r| r.profile.rank == Some(rank)));
            match same {
                Some(first) => first.absorb(trace),
                None => ranks.push(trace),
            }
        }
        ranks.sort_by(|a, b| {
            (a.profile.rank.is_none(), a.profile.rank, &a.label).cmp(&(
                b.profile.rank.is_none(),
                b.profile.rank,
                &b.label,
            ))
        });
        let mut numbers: Vec<u64> = ranks
            .iter()
            .flat_map(|r| r.profile.steps.iter().map(|s| s.number))
            .collect();
        numbers.sort_unstable();
        numbers.dedup();
        let steps = numbers
            .into_iter()
            .map(|number| {
                let step =
                    |r: &RankTrace| r.profile.steps.iter().find(|s| s.number == number).copied();
                let durations_ns: Vec<Option<i64>> = ranks
                    .iter()
                    .map(|r| step(r).as_ref().map(Step::duration_ns))
                    .collect();
                let outside_communication_ns: Vec<Option<i64>> = ranks
                    .iter()
                    .map(|r| step(r).as_ref().map(Step::outside_communication_ns))
                    .collect();
                let complete: Vec<(usize, i64)> = outside_communication_ns
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| ranks[*i].error.is_none())
                    .filter_map(|(i, d)| d.map(|d| (i, d)))
                    .collect();
                let mut sorted: Vec<i64> = complete.iter().map(|(_, d)| *d).collect();
                sorted.sort_unstable();
                let median_ns = match sorted.len() {
                    0 => 0,
                    n if n % 2 == 1 => sorted[n / 2],
                    // Durations are not negative: this cannot overflow, as their sum may.
                    n => sorted[n / 2 - 1] + (sorted[n / 2] - sorted[n / 2 - 1]) / 2,
                };
                // The first of equal durations: the lowest rank.
                let slowest =
                    complete
                        .iter()
                        .fold(None::<(usize, i64)>, |best, &(i, d)| match best {
                            Some((_, bd)) if bd >= d => best,
                            _ => Some((i, d)),
                        });
                StepRow {
                    number,
                    durations_ns,
                    outside_communication_ns,
                    slowest: slowest.map(|(i, _)| i),
                    median_ns,
                    lag_ns: slowest.map_or(0, |(_, d)| d - median_ns),
                }
            })
            .collect();
        Self { ranks, steps }
    }

    /// How the report names the trace at `index`: `rank N`, or for a trace without a rank
    /// `trace #I` (its place in the report, from 0).
    pub fn name_of(&self, index: usize) -> String {
        match self.ranks[index].profile.rank {
            Some(rank) => format!("rank {rank}"),
            None => format!("trace #{index}"),
        }
    }

    /// The rank slowest in the most steps (ties: the larger total lag, then the lower
    /// rank); `None` without steps compared across two or more complete ranks.
    pub fn straggler(&self) -> Option<Straggler> {
        let compared: Vec<&StepRow> = self
            .steps
            .iter()
            .filter(|s| {
                s.durations_ns
                    .iter()
                    .enumerate()
                    .filter(|(i, d)| d.is_some() && self.ranks[*i].error.is_none())
                    .count()
                    >= 2
            })
            .collect();
        let mut tally: Vec<(usize, i64)> = vec![(0, 0); self.ranks.len()];
        for s in &compared {
            if let Some(i) = s.slowest {
                tally[i].0 += 1;
                tally[i].1 = tally[i].1.saturating_add(s.lag_ns);
            }
        }
        let (index, &(slowest_in, lag)) = tally
            .iter()
            .enumerate()
            .filter(|(_, t)| t.0 > 0)
            .max_by(|(ia, a), (ib, b)| a.cmp(b).then(ib.cmp(ia)))?;
        Some(Straggler {
            rank: self.ranks[index].profile.rank,
            index,
            slowest_in,
            steps: compared.len(),
            mean_lag_ns: lag / slowest_in as i64,
        })
    }

    /// The report as text: the clock note, the step table, the straggler, the breakdown.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let ms = |ns: i64| format!("{:.3}", ns as f64 / 1e6);
        let _ = writeln!(
            out,
            "{} traces; each trace's times count from its own baseTimeNanoseconds (no clock \
             alignment is assumed: steps are compared by duration)",
            self.ranks.len()
        );
        for (i, r) in self.ranks.iter().enumerate() {
            let p = &r.profile;
            // A file name may hold control characters.
            let _ = write!(out, "{}: {}", self.name_of(i), visible(&r.label));
            if p.rank.is_none() {
                out.push_str(" (no distributedInfo rank)");
            }
            if let Some(e) = &r.error {
                let _ = write!(
                    out,
                    " PARTIAL, read up to: {}; left out of the step statistics",
                    visible(e)
                );
            }
            out.push('\n');
        }
        if !self.steps.is_empty() {
            out.push_str(
                "\nStep times, ms (in parentheses: outside communication, by which the \
                 slowest rank is found and its lag behind the median measured)\n",
            );
            let mut header = vec!["step".to_owned()];
            header.extend((0..self.ranks.len()).map(|i| self.name_of(i)));
            header.extend(["slowest", "median", "lag"].map(str::to_owned));
            let mut rows = vec![header];
            for s in &self.steps {
                let mut row = vec![s.number.to_string()];
                row.extend(
                    s.durations_ns
                        .iter()
                        .zip(&s.outside_communication_ns)
                        .map(|(d, o)| match (d, o) {
                            (Some(d), Some(o)) => format!("{} ({})", ms(*d), ms(*o)),
                            _ => "-".to_owned(),
                        }),
                );
                row.push(s.slowest.map_or("-".to_owned(), |i| self.name_of(i)));
                row.push(ms(s.median_ns));
                row.push(ms(s.lag_ns));
                rows.push(row);
            }
            out.push_str(&grid(&rows));
            match self.straggler() {
                Some(s) => {
                    let _ = writeln!(
                        out,
                        "Slowest rank: {} (slowest in {} of {} steps, {} ms behind the \
                         median on average there)",
                        self.name_of(s.index),
                        s.slowest_in,
                        s.steps,
                        ms(s.mean_lag_ns)
                    );
                }
                None => out.push_str("Slowest rank: none (no step is on two complete ranks)\n"),
            }
        }
        out.push_str(
            "\nTime per rank (ms, % of the span; HTA's temporal breakdown and \
             communication overlap)\n",
        );
        let mut rows = vec![[
            "rank",
            "counts",
            "span",
            "computation",
            "communication",
            "memory",
            "other",
            "idle",
            "comm/comp overlap",
        ]
        .map(str::to_owned)
        .to_vec()];
        for (i, r) in self.ranks.iter().enumerate() {
            let b = &r.profile.breakdown;
            let part = |ns: i64| format!("{} ({:.2}%)", ms(ns), b.percent(ns));
            let mut label = self.name_of(i);
            if r.error.is_some() {
                label.push_str(" (partial)");
            }
            rows.push(vec![
                label,
                match r.profile.source {
                    Source::Device => "device work",
                    Source::Host => "host ops",
                }
                .to_owned(),
                ms(b.span_ns),
                part(b.computation_ns),
                part(b.communication_ns),
                part(b.memory_ns),
                part(b.other_ns),
                part(b.idle_ns),
                b.overlap_percent()
                    .map_or("-".to_owned(), |p| format!("{p:.2}%")),
            ]);
        }
        out.push_str(&grid(&rows));
        out
    }

    /// The report as one JSON object: `ranks` (label, profile, error), `steps`, and
    /// `straggler`.
    pub fn json(&self) -> String {
        #[derive(Serialize)]
        struct Document<'a> {
            ranks: &'a [RankTrace],
            steps: &'a [StepRow],
            straggler: Option<Straggler>,
        }
        serde_json::to_string(&Document {
            ranks: &self.ranks,
            steps: &self.steps,
            straggler: self.straggler(),
        })
        .expect("strings, numbers and booleans always serialize")
    }
}

/// Left-aligned columns, two spaces apart.
fn grid(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use omniprof_trace::Activity;

    fn add(b: &mut RankProfileBuilder, kind: ActivityType, name: &str, tid: i64, s: i64, e: i64) {
        b.add_item(&TraceItem::Activity(Activity::new(
            kind, name, 0, tid, s, e,
        )));
    }

    /// A trace of `rank` holding `ProfilerStep#N` for each `(N, start, end)`, and a host
    /// op over the steps.
    fn trace_of(rank: u64, label: &str, steps: &[(u64, i64, i64)]) -> RankTrace {
        let mut b = RankProfileBuilder::new();
        let info: Value = [("rank", Value::UInt(rank))].into_iter().collect();
        b.add_item(&TraceItem::Metadata("distributedInfo".into(), info));
        for &(n, s, e) in steps {
            let name = format!("ProfilerStep#{n}");
            add(&mut b, ActivityType::UserAnnotation, &name, 1, s, e);
            add(&mut b, ActivityType::CpuOp, "aten::mm", 1, s, e);
        }
        RankTrace {
            label: label.into(),
            profile: b.finish(),
            error: None,
        }
    }

    #[test]
    fn traces_of_one_rank_are_its_steps_read_as_one() {
        // Two cycles of rank 0 (a trace handler's directory) beside one trace of rank 1.
        let report = RankComparison::new(vec![
            trace_of(0, "cycle1.json", &[(3, 0, 100), (4, 100, 200)]),
            trace_of(1, "rank1.json", &[(3, 0, 100), (4, 100, 250), (8, 0, 90)]),
            trace_of(0, "cycle2.json", &[(8, 1_000, 1_200), (3, 5_000, 9_000)]),
        ]);
        let labels: Vec<&str> = report.ranks.iter().map(|r| &*r.label).collect();
        assert_eq!(labels, ["cycle1.json + cycle2.json", "rank1.json"]);
        let numbers: Vec<u64> = report.ranks[0]
            .profile
            .steps
            .iter()
            .map(|s| s.number)
            .collect();
        // Step 3 is the first trace's: a number seen twice keeps its first step.
        assert_eq!(numbers, [3, 4, 8]);
        assert_eq!(report.ranks[0].profile.steps[0].end_ns, 100);
        let step8: Vec<Option<i64>> = report.steps[2].durations_ns.clone();
        assert_eq!(step8, [Some(200), Some(90)]);
        assert_eq!(report.ranks[0].profile.breakdown.span_ns, 200 + 8_000);
    }

    #[test]
    fn kernels_are_typed_by_hta_s_patterns() {
        use WorkKind::*;
        assert_eq!(
            WorkKind::of_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            Communication
        );
        assert_eq!(WorkKind::of_kernel("ncclKernel_AllGather"), Communication);
        assert_eq!(WorkKind::of_kernel("nccl_something"), Computation);
        assert_eq!(
            WorkKind::of_kernel("Memcpy HtoD (Pageable -> Device)"),
            Memory
        );
        assert_eq!(WorkKind::of_kernel("Memset (Device)"), Memory);
        assert_eq!(WorkKind::of_kernel("dma_copy"), Memory);
        assert_eq!(WorkKind::of_kernel("cudaDeviceSync"), Other);
        assert_eq!(WorkKind::of_kernel("my_Memcpy_kernel"), Other);
        assert_eq!(WorkKind::of_kernel("gemm_kernel"), Computation);
    }

    #[test]
    fn the_device_breakdown_is_hta_s_temporal_breakdown_and_overlap() {
        let mut b = RankProfileBuilder::new();
        let k = ActivityType::ConcurrentKernel;
        add(&mut b, k, "gemm", 7, 0, 100);
        add(&mut b, k, "gemm", 7, 50, 150); // overlaps: union 0..150
        add(&mut b, k, "ncclDevKernel_AllReduce", 13, 120, 220); // 30 ns with compute
        add(&mut b, ActivityType::GpuMemcpy, "Memcpy DtoH", 7, 300, 340);
        add(&mut b, k, "gemm", 7, 400, 500);
        add(&mut b, ActivityType::CpuOp, "aten::mm", 1, 0, 1000); // a host op: not counted
        let p = b.finish();
        assert_eq!(p.source, Source::Device);
        assert_eq!(
            p.breakdown,
            Breakdown {
                span_ns: 500,
                idle_ns: 500 - 220 - 40 - 100,
                computation_ns: 250,
                non_computation_ns: 500 - 250 - 140,
                communication_ns: 100,
                memory_ns: 40,
                other_ns: 0,
                overlap_ns: 30,
            }
        );
        assert_eq!(p.breakdown.overlap_percent(), Some(30.0));
        assert_eq!(p.breakdown.percent(p.breakdown.idle_ns), 28.0);
    }

    #[test]
    fn without_device_work_host_collectives_are_communication_with_what_runs_inside_them() {
        let mut b = RankProfileBuilder::new();
        let op = ActivityType::CpuOp;
        add(
            &mut b,
            ActivityType::UserAnnotation,
            "ProfilerStep#3",
            1,
            0,
            1000,
        );
        add(&mut b, op, "aten::mm", 1, 0, 300);
        add(&mut b, op, "c10d::allreduce_", 1, 400, 700);
        add(&mut b, op, "aten::copy_", 1, 450, 500); // inside the collective
        add(
            &mut b,
            ActivityType::UserAnnotation,
            "gloo:all_reduce",
            2,
            420,
            690,
        );
        add(&mut b, op, "aten::add", 3, 600, 800); // beside them, on another thread
        let p = b.finish();
        assert_eq!(p.source, Source::Host);
        assert_eq!(
            p.steps,
            [Step {
                number: 3,
                start_ns: 0,
                end_ns: 1000,
                communication_ns: 300,
            }]
        );
        assert_eq!(p.steps[0].outside_communication_ns(), 700);
        let d = p.breakdown;
        assert_eq!(d.span_ns, 800);
        assert_eq!(d.communication_ns, 300);
        assert_eq!(d.computation_ns, 300 + 200);
        assert_eq!(d.overlap_ns, 100);
        assert_eq!(d.idle_ns, 100);
    }

    #[test]
    fn subtracting_intervals_keeps_what_is_left_of_each() {
        assert_eq!(
            subtract(&[(0, 10), (20, 30)], &[(2, 4), (6, 8), (25, 40)]),
            [(0, 2), (4, 6), (8, 10), (20, 25)]
        );
        assert_eq!(subtract(&[(0, 10)], &[]), [(0, 10)]);
        assert_eq!(subtract(&[(0, 10)], &[(0, 10)]), []);
    }

    fn traced(label: &str, rank: Option<u64>, steps: &[(u64, i64)], error: bool) -> RankTrace {
        let mut b = RankProfileBuilder::new();
        if let Some(rank) = rank {
            let info: Value = [("rank", Value::UInt(rank))].into_iter().collect();
            b.add_item(&TraceItem::Metadata(
                metadata::DISTRIBUTED_INFO.into(),
                info,
            ));
        }
        for &(n, d) in steps {
            let name = format!("ProfilerStep#{n}");
            add(
                &mut b,
                ActivityType::UserAnnotation,
                &name,
                1,
                n as i64 * 1000,
                n as i64 * 1000 + d,
            );
        }
        RankTrace {
            label: label.to_owned(),
            profile: b.finish(),
            error: error.then(|| "truncated".to_owned()),
        }
    }

    #[test]
    fn durations_near_i64_max_saturate_to_a_non_negative_span() {
        let rank = |r: u64| {
            let mut b = RankProfileBuilder::new();
            let info: Value = [("rank", Value::UInt(r))].into_iter().collect();
            b.add_item(&TraceItem::Metadata(
                metadata::DISTRIBUTED_INFO.into(),
                info,
            ));
            let step = ActivityType::UserAnnotation;
            add(&mut b, step, "ProfilerStep#1", 1, i64::MIN + 2, i64::MAX);
            let k = ActivityType::ConcurrentKernel;
            add(&mut b, k, "gemm", 7, i64::MIN + 2, -1); // i64::MAX - 2 long
            add(&mut b, k, "gemm", 7, 1, i64::MAX); // i64::MAX - 1 long
            RankTrace {
                label: format!("rank{r}.json"),
                profile: b.finish(),
                error: None,
            }
        };
        let report = RankComparison::new(vec![rank(0), rank(1)]);
        let b = report.ranks[0].profile.breakdown;
        assert_eq!(
            (b.span_ns, b.computation_ns, b.idle_ns, b.non_computation_ns),
            (i64::MAX, i64::MAX, 0, 0)
        );
        assert_eq!(report.steps[0].durations_ns, [Some(i64::MAX); 2]);
        assert_eq!(
            (report.steps[0].median_ns, report.steps[0].lag_ns),
            (i64::MAX, 0)
        );
        let text = report.text();
        assert!(
            text.contains("rank 0  device work  9223372036854.775  9223372036854.775 (100.00%)"),
            "{text}"
        );
    }

    #[test]
    fn the_slowest_rank_of_each_step_and_its_lag_behind_the_median_are_named() {
        let report = RankComparison::new(vec![
            traced("c", Some(2), &[(1, 100), (2, 400), (3, 100)], false),
            traced("a", Some(0), &[(1, 100), (2, 100), (3, 100)], false),
            traced("b", Some(1), &[(1, 120), (2, 110), (3, 500)], false),
            traced("d", Some(3), &[(1, 90), (2, 100), (3, 100)], false),
        ]);
        let labels: Vec<&str> = report.ranks.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["a", "b", "c", "d"]);
        let slowest: Vec<Option<usize>> = report.steps.iter().map(|s| s.slowest).collect();
        assert_eq!(slowest, [Some(1), Some(2), Some(1)]);
        assert_eq!(report.steps[0].median_ns, 100);
        assert_eq!(report.steps[1].median_ns, 105);
        assert_eq!(report.steps[1].lag_ns, 295);
        let s = report.straggler().unwrap();
        assert_eq!((s.rank, s.slowest_in, s.steps), (Some(1), 2, 3));
        assert_eq!(s.mean_lag_ns, (20 + 400) / 2);
        let text = report.text();
        assert!(
            text.contains("Slowest rank: rank 1 (slowest in 2 of 3 steps"),
            "{text}"
        );
    }

    #[test]
    fn the_rank_the_others_wait_for_in_their_collectives_is_the_slowest() {
        let rank = |r: u64, comm: (i64, i64)| {
            let mut b = RankProfileBuilder::new();
            let info: Value = [("rank", Value::UInt(r))].into_iter().collect();
            b.add_item(&TraceItem::Metadata(
                metadata::DISTRIBUTED_INFO.into(),
                info,
            ));
            add(
                &mut b,
                ActivityType::UserAnnotation,
                "ProfilerStep#0",
                1,
                0,
                1000,
            );
            add(&mut b, ActivityType::CpuOp, "aten::mm", 1, 0, comm.0);
            add(
                &mut b,
                ActivityType::CpuOp,
                "c10d::allreduce_",
                1,
                comm.0,
                comm.1,
            );
            RankTrace {
                label: r.to_string(),
                profile: b.finish(),
                error: None,
            }
        };
        // Equal step times; rank 1 starts its all-reduce last, the others wait in theirs.
        let report = RankComparison::new(vec![
            rank(0, (200, 1000)),
            rank(1, (900, 1000)),
            rank(2, (250, 1000)),
        ]);
        let step = &report.steps[0];
        assert_eq!(step.durations_ns, [Some(1000); 3]);
        assert_eq!(
            step.outside_communication_ns,
            [Some(200), Some(900), Some(250)]
        );
        assert_eq!(
            (step.slowest, step.median_ns, step.lag_ns),
            (Some(1), 250, 650)
        );
    }

    #[test]
    fn a_partial_rank_is_flagged_and_left_out_of_the_step_statistics() {
        let report = RankComparison::new(vec![
            traced("a", Some(0), &[(1, 100)], false),
            traced("b", Some(1), &[(1, 900)], true),
            traced("c", Some(2), &[(1, 200)], false),
        ]);
        assert_eq!(report.steps[0].slowest, Some(2));
        assert_eq!(report.steps[0].median_ns, 150);
        assert_eq!(report.steps[0].durations_ns[1], Some(900));
        let text = report.text();
        assert!(
            text.contains("rank 1: b PARTIAL, read up to: truncated"),
            "{text}"
        );
        assert!(text.contains("rank 1 (partial)"), "{text}");
    }
}
