//! Where each step's time went, as TensorBoard's profiler plugin split it in its overview:
//! per `ProfilerStep#N` (or, without steps, the whole span of the trace's work) the time in
//! kernels, memory copies, memory fills, communication, runtime calls, host-only work and
//! idle. Each instant of a step counts once, for the first of those kinds running then, in
//! that order (a copy under a kernel counts as kernel time; a host op while a kernel runs is
//! not host-only), so that the parts add up to the step.
//!
//! Device work is classified as in [`ranks`](super::ranks) (HTA's kernel types): NCCL-style
//! kernels are communication, the other kernels, copies and fills by their activity type.
//! On the host, runtime and driver calls are runtime, collective ops communication, other
//! `cpu_op`s host-only work (user ranges and Python functions are left out: they repeat
//! the ops inside them). The builder keeps one interval (16 bytes) per counted activity,
//! as [`RankProfileBuilder`](super::ranks::RankProfileBuilder) does.
//!
//! ```
//! use omniprof_analysis::StepTimeBuilder;
//! use omniprof_trace::{Activity, ActivityType};
//!
//! let mut b = StepTimeBuilder::default();
//! b.add_activity(&Activity::new(ActivityType::UserAnnotation, "ProfilerStep#3", 1, 1, 0, 100));
//! b.add_activity(&Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, 40));
//! b.add_activity(&Activity::new(ActivityType::CudaRuntime, "cudaLaunchKernel", 1, 1, 30, 40));
//! b.add_activity(&Activity::new(ActivityType::ConcurrentKernel, "gemm", 0, 7, 35, 80));
//! let steps = b.finish();
//! let s = &steps.steps[0];
//! assert_eq!((s.number, s.kernel_ns, s.runtime_ns, s.cpu_only_ns, s.idle_ns), (Some(3), 45, 5, 30, 20));
//! assert_eq!(s.device_busy_ns, 45);
//! ```

use serde::Serialize;

use crate::render::grid::render;

use crate::ranks::{clip, length, subtract, union, WorkKind};
use omniprof_trace::keys::name as event_name;
use omniprof_trace::FastMap;
use omniprof_trace::TraceItem;
use omniprof_trace::{Activity, ActivityClass, ActivityType};

/// The kinds of time, in the order an instant is given to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Kernel,
    Memcpy,
    Memset,
    Communication,
    Runtime,
    CpuOnly,
}

const PARTS: [Part; 6] = [
    Part::Kernel,
    Part::Memcpy,
    Part::Memset,
    Part::Communication,
    Part::Runtime,
    Part::CpuOnly,
];

/// One step's time, split.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StepTime {
    /// `ProfilerStep#N`'s `N`; `None` for the whole trace of a trace without steps.
    pub number: Option<u64>,
    /// Absolute nanoseconds, the start.
    pub start_ns: i64,
    /// Absolute nanoseconds, the end.
    pub end_ns: i64,
    /// Kernels (not communication kernels).
    pub kernel_ns: i64,
    /// Memory copies while no kernel runs.
    pub memcpy_ns: i64,
    /// Memory fills while no kernel or copy runs.
    pub memset_ns: i64,
    /// Communication (kernels or host collectives) while no kernel, copy or fill runs.
    pub communication_ns: i64,
    /// Runtime and driver calls while no device work or communication runs.
    pub runtime_ns: i64,
    /// Host ops while no device work, communication or runtime call runs.
    pub cpu_only_ns: i64,
    /// The step less every part.
    pub idle_ns: i64,
    /// The part of the step in which a kernel, copy or fill (not a communication kernel)
    /// runs: the device's utilization is this over the step.
    pub device_busy_ns: i64,
    /// `device_busy_ns` as a percentage of the step, two decimals.
    pub device_utilization: f64,
}

impl StepTime {
    /// Its length (saturating: hostile times must not wrap into a negative one).
    pub fn duration_ns(&self) -> i64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// The steps of a trace, split.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StepTimes {
    /// By number; one row for the whole trace when it has no `ProfilerStep#N`.
    pub steps: Vec<StepTime>,
    /// The trace has device work (kernels, copies, fills): its utilization means something.
    pub has_device: bool,
}

/// The columns of [`StepTimes::table`] and [`StepTimes::csv`], one place for both.
const COLUMNS: [(&str, &str); 10] = [
    ("Step", "step"),
    ("Duration (us)", "duration_us"),
    ("Kernel (us)", "kernel_us"),
    ("Memcpy (us)", "memcpy_us"),
    ("Memset (us)", "memset_us"),
    ("Communication (us)", "communication_us"),
    ("Runtime (us)", "runtime_us"),
    ("CPU only (us)", "cpu_only_us"),
    ("Idle (us)", "idle_us"),
    ("Device utilization (%)", "device_utilization_pct"),
];

impl StepTimes {
    /// Each step's cells, as the table and the CSV print them: its name, then microseconds
    /// with three decimals (exact nanoseconds), then the utilization.
    fn cells(&self) -> Vec<Vec<String>> {
        let us = |ns: i64| format!("{}.{:03}", ns / 1000, (ns % 1000).abs());
        self.steps
            .iter()
            .map(|s| {
                let name = match s.number {
                    Some(n) => format!("ProfilerStep#{n}"),
                    None => "(whole trace)".to_owned(),
                };
                let mut row = vec![name];
                row.extend(
                    [
                        s.duration_ns(),
                        s.kernel_ns,
                        s.memcpy_ns,
                        s.memset_ns,
                        s.communication_ns,
                        s.runtime_ns,
                        s.cpu_only_ns,
                        s.idle_ns,
                    ]
                    .map(us),
                );
                row.push(format!("{:.2}", s.device_utilization));
                row
            })
            .collect()
    }

    /// The steps as a text table (`omniprof summary --steps`).
    pub fn table(&self) -> String {
        let headers: Vec<&str> = COLUMNS.iter().map(|(h, _)| *h).collect();
        let numeric: Vec<bool> = (0..COLUMNS.len()).map(|i| i > 0).collect();
        render(&headers, &numeric, &self.cells())
    }

    /// `step,duration_us,kernel_us,memcpy_us,memset_us,communication_us,runtime_us,
    /// cpu_only_us,idle_us,device_utilization_pct`.
    pub fn csv(&self) -> String {
        let header: Vec<&str> = COLUMNS.iter().map(|(_, c)| *c).collect();
        let mut out = header.join(",") + "\n";
        for row in self.cells() {
            out.push_str(&row.join(","));
            out.push('\n');
        }
        out
    }

    /// Takes in the steps of another trace of the same process (a scheduled profiler's next
    /// cycle, a restarted job's trace), as [`RankTrace::absorb`](crate::RankTrace::absorb)
    /// joins a rank's steps: a step number both have keeps this one's; the steps stay by
    /// number. A trace without steps adds its whole span only where this one has no
    /// steps either (its rows then stay in time order).
    ///
    /// ```
    /// use omniprof_analysis::StepTimeBuilder;
    /// use omniprof_trace::{Activity, ActivityType};
    ///
    /// let steps = |numbers: &[u64]| {
    ///     let mut b = StepTimeBuilder::default();
    ///     for &n in numbers {
    ///         let t = n as i64 * 100;
    ///         b.add_activity(&Activity::new(ActivityType::UserAnnotation, format!("ProfilerStep#{n}").as_str(), 1, 1, t, t + 50));
    ///     }
    ///     b.finish()
    /// };
    /// let mut first = steps(&[2, 3]);
    /// first.absorb(steps(&[6, 7]));
    /// let numbers: Vec<Option<u64>> = first.steps.iter().map(|s| s.number).collect();
    /// assert_eq!(numbers, [Some(2), Some(3), Some(6), Some(7)]);
    /// ```
    pub fn absorb(&mut self, other: StepTimes) {
        self.has_device |= other.has_device;
        let numbered = |s: &StepTimes| s.steps.iter().any(|s| s.number.is_some());
        if numbered(&other) && !numbered(self) {
            // Steps replace a whole-trace row: the rows are steps or one span, never both.
            self.steps.clear();
        } else if !numbered(&other) && numbered(self) {
            return;
        }
        for step in other.steps {
            let known = step.number.is_some() && self.steps.iter().any(|s| s.number == step.number);
            if !known {
                self.steps.push(step);
            }
        }
        self.steps.sort_by_key(|s| (s.number, s.start_ns));
    }

    /// `{"steps": [{"number", "start_ns", "end_ns", "kernel_ns", ...}], "has_device"}`: what
    /// the report embeds.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serializes")
    }
}

/// Accumulates a trace, item by item, into its [`StepTimes`].
#[derive(Debug, Default)]
pub struct StepTimeBuilder {
    steps: FastMap<u64, (i64, i64)>,
    parts: [Vec<(i64, i64)>; 6],
}

impl StepTimeBuilder {
    /// Takes one item of a streamed trace (activities only count).
    pub fn add_item(&mut self, item: &TraceItem) {
        if let TraceItem::Activity(a) = item {
            self.add_activity(a);
        }
    }

    /// Takes one activity.
    pub fn add_activity(&mut self, a: &Activity) {
        let interval = (a.start_ns, a.end_ns.max(a.start_ns));
        let part = match a.kind {
            ActivityType::GpuMemcpy => Part::Memcpy,
            ActivityType::GpuMemset => Part::Memset,
            kind if kind.class() == Some(ActivityClass::Kernel) => {
                match WorkKind::of_kernel(&a.name) {
                    WorkKind::Communication => Part::Communication,
                    _ => Part::Kernel,
                }
            }
            kind if matches!(
                kind.class(),
                Some(ActivityClass::Runtime | ActivityClass::Driver)
            ) =>
            {
                Part::Runtime
            }
            kind if kind.is_device() => return,
            kind => {
                if let Some(n) = a
                    .name
                    .strip_prefix(event_name::PROFILER_STEP_PREFIX)
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    self.steps.entry(n).or_insert(interval);
                    return;
                }
                match WorkKind::of_host_op(kind, &a.name) {
                    Some(WorkKind::Communication) => Part::Communication,
                    Some(_) => Part::CpuOnly,
                    None => return,
                }
            }
        };
        self.parts[part as usize].push(interval);
    }

    /// Splits each step.
    pub fn finish(self) -> StepTimes {
        // Each part less every part before it: disjoint lists, one per part.
        let mut covered: Vec<(i64, i64)> = Vec::new();
        let mut exclusive: Vec<Vec<(i64, i64)>> = Vec::with_capacity(PARTS.len());
        for list in self.parts {
            let all = union(Some(list));
            exclusive.push(subtract(&all, &covered));
            covered.extend_from_slice(&all);
            covered = union(Some(covered));
        }
        let device: Vec<(i64, i64)> = union(Some(
            [Part::Kernel, Part::Memcpy, Part::Memset]
                .iter()
                .flat_map(|&p| exclusive[p as usize].iter().copied())
                .collect(),
        ));
        let has_device = !device.is_empty();
        let mut ranges: Vec<(Option<u64>, i64, i64)> = self
            .steps
            .into_iter()
            .map(|(n, (s, e))| (Some(n), s, e))
            .collect();
        ranges.sort_by_key(|&(n, _, _)| n);
        if ranges.is_empty() {
            if let (Some(first), Some(last)) = (covered.first(), covered.last()) {
                ranges.push((None, first.0, last.1));
            }
        }
        let steps = ranges
            .into_iter()
            .map(|(number, start_ns, end_ns)| {
                let of = |p: Part| length(&clip(&exclusive[p as usize], start_ns, end_ns));
                let mut step = StepTime {
                    number,
                    start_ns,
                    end_ns,
                    kernel_ns: of(Part::Kernel),
                    memcpy_ns: of(Part::Memcpy),
                    memset_ns: of(Part::Memset),
                    communication_ns: of(Part::Communication),
                    runtime_ns: of(Part::Runtime),
                    cpu_only_ns: of(Part::CpuOnly),
                    idle_ns: 0,
                    device_busy_ns: length(&clip(&device, start_ns, end_ns)),
                    device_utilization: 0.0,
                };
                step.device_utilization = if step.duration_ns() > 0 {
                    (10_000.0 * step.device_busy_ns as f64 / step.duration_ns() as f64).round()
                        / 100.0
                } else {
                    0.0
                };
                step.idle_ns = step
                    .duration_ns()
                    .saturating_sub(length(&clip(&covered, start_ns, end_ns)));
                step
            })
            .collect();
        StepTimes { steps, has_device }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activity(kind: ActivityType, name: &str, start: i64, end: i64) -> Activity {
        Activity::new(kind, name, 1, 1, start, end)
    }

    #[test]
    fn the_csv_gives_each_step_its_exact_microseconds() {
        let mut b = StepTimeBuilder::default();
        for a in [
            activity(ActivityType::UserAnnotation, "ProfilerStep#3", 0, 100_500),
            activity(ActivityType::CpuOp, "aten::mm", 0, 40_000),
            activity(ActivityType::ConcurrentKernel, "gemm", 35_000, 80_250),
        ] {
            b.add_activity(&a);
        }
        assert_eq!(
            b.finish().csv(),
            "step,duration_us,kernel_us,memcpy_us,memset_us,communication_us,runtime_us,\
             cpu_only_us,idle_us,device_utilization_pct\n\
             ProfilerStep#3,100.500,45.250,0.000,0.000,0.000,0.000,35.000,20.250,45.02\n"
        );
    }

    #[test]
    fn each_instant_of_a_step_counts_once_for_the_first_kind_running() {
        let mut b = StepTimeBuilder::default();
        for a in [
            activity(ActivityType::UserAnnotation, "ProfilerStep#0", 0, 1000),
            activity(ActivityType::UserAnnotation, "ProfilerStep#1", 1000, 1500),
            activity(ActivityType::CpuOp, "aten::add", 0, 600),
            activity(ActivityType::CudaRuntime, "cudaMemcpyAsync", 100, 200),
            activity(ActivityType::GpuMemcpy, "Memcpy HtoD", 150, 300),
            activity(ActivityType::ConcurrentKernel, "add_kernel", 250, 400),
            activity(ActivityType::GpuMemset, "Memset", 390, 450),
            activity(
                ActivityType::ConcurrentKernel,
                "ncclDevKernel_AllReduce",
                700,
                1200,
            ),
        ] {
            b.add_activity(&a);
        }
        let steps = b.finish();
        assert!(steps.has_device);
        let s0 = &steps.steps[0];
        assert_eq!(
            (
                s0.kernel_ns,
                s0.memcpy_ns,
                s0.memset_ns,
                s0.communication_ns,
                s0.runtime_ns,
                s0.cpu_only_ns,
                s0.idle_ns
            ),
            (150, 100, 50, 300, 50, 250, 100)
        );
        assert_eq!((s0.device_busy_ns, s0.device_utilization), (300, 30.0));
        let s1 = &steps.steps[1];
        assert_eq!(
            (s1.number, s1.communication_ns, s1.idle_ns),
            (Some(1), 200, 300)
        );
    }

    #[test]
    fn a_trace_without_steps_is_one_row_over_its_work() {
        let mut b = StepTimeBuilder::default();
        b.add_activity(&activity(ActivityType::CpuOp, "aten::mm", 10, 20));
        b.add_activity(&activity(ActivityType::CpuOp, "aten::mm", 30, 50));
        b.add_activity(&activity(ActivityType::UserAnnotation, "block", 0, 100));
        let steps = b.finish();
        assert!(!steps.has_device);
        assert_eq!(
            steps.steps,
            vec![StepTime {
                number: None,
                start_ns: 10,
                end_ns: 50,
                cpu_only_ns: 30,
                idle_ns: 10,
                ..StepTime::default()
            }]
        );
    }

    fn steps_of(activities: &[(&str, i64, i64)]) -> StepTimes {
        let mut b = StepTimeBuilder::default();
        for &(name, start, end) in activities {
            let kind = if name.starts_with("ProfilerStep#") {
                ActivityType::UserAnnotation
            } else {
                ActivityType::CpuOp
            };
            b.add_activity(&activity(kind, name, start, end));
        }
        b.finish()
    }

    #[test]
    fn absorbed_cycles_join_by_step_number_keeping_the_first_traces_step() {
        let mut first = steps_of(&[("ProfilerStep#2", 0, 10), ("ProfilerStep#3", 10, 20)]);
        let second = steps_of(&[("ProfilerStep#3", 50, 90), ("ProfilerStep#6", 100, 130)]);
        first.absorb(second);
        let rows: Vec<(Option<u64>, i64)> = first
            .steps
            .iter()
            .map(|s| (s.number, s.duration_ns()))
            .collect();
        assert_eq!(rows, [(Some(2), 10), (Some(3), 10), (Some(6), 30)]);
    }

    #[test]
    fn steps_replace_a_whole_trace_row_and_two_spans_stay_two_rows() {
        let mut spans = steps_of(&[("aten::mm", 0, 10)]);
        spans.absorb(steps_of(&[("aten::mm", 20, 50)]));
        let rows: Vec<(Option<u64>, i64)> =
            spans.steps.iter().map(|s| (s.number, s.start_ns)).collect();
        assert_eq!(rows, [(None, 0), (None, 20)]);
        spans.absorb(steps_of(&[("ProfilerStep#4", 60, 70)]));
        spans.absorb(steps_of(&[("aten::mm", 80, 90)]));
        let rows: Vec<Option<u64>> = spans.steps.iter().map(|s| s.number).collect();
        assert_eq!(rows, [Some(4)]);
    }
}
