//! Flame graph stacks: where a trace's time goes, as folded stacks (`a;b;c 1200`, the text
//! flame graph tools read), values in nanoseconds.
//!
//! - [`FlameTime::HostSelf`]: each host op's self time (its length less its nested ops'),
//!   on the stack of the ops that enclose it on its thread.
//! - [`FlameTime::Device`]: each device activity's time (kernels, copies, ...) on the stack
//!   of the host op that launched it, the one the summary gives its time to
//!   (`attribution`: the op its `External id` names, else the op around the runtime call
//!   its correlation names), with the activity's own name as the leaf; device work linked
//!   to no host op of the trace sits under `[unlinked]`.
//!
//! Host ops are those the summary nests ([`key_averages`](crate::key_averages())): ops, user
//! ranges, runtime and driver calls, `python_function` events, `ProfilerStep#<n>` named
//! `ProfilerStep*` so that steps merge. So in a trace recorded with stacks (PyTorch's
//! `with_stack=True`, omniprof's own) the Python frames (`train.py(12): step`,
//! `nn.Module: Linear_0`) are frames around the ops they called, with their own self time:
//! the graph shows which Python line spent the time, host or device. An outermost event
//! (inside no other on its thread) with a Python stack but no `python_function` event
//! around it (a trace with `Call stack` args only; a backward op on the autograd engine's
//! own thread, whose stack is its forward op's) hangs under the frames of that stack
//! ([`PythonStacks`](crate::PythonStacks)), outermost first. An op that partly overlaps an enclosing
//! one starts a stack of its own. Threads merge: equal stacks on different threads add up. `;` in a name is written as `:`, and
//! line breaks and tabs as spaces, so that every frame stays one frame; other control
//! characters as `\u{1b}`, so that the SVG stays XML; an empty name as `[unnamed]`, so
//! that its time stays in the graph; and the space before a name's last word, when that is
//! a number (`op 123`), as a no-break space, so that no tool reads the number as a count.
//!
//! ```
//! use omniprof_analysis::{folded_stacks, FlameTime};
//! use omniprof_trace::{Activity, ActivityType, Trace};
//!
//! let mut trace = Trace::new(0, 1_000);
//! trace.activities.push(Activity::new(ActivityType::UserAnnotation, "step", 1, 1, 0, 1_000));
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 100, 700));
//! let folded = folded_stacks(&trace, FlameTime::HostSelf);
//! assert_eq!(folded.to_text(), "step 400\nstep;aten::mm 600\n");
//! ```

use std::cmp::Reverse;
use std::fmt::Write;
use std::sync::Arc;

use crate::activity::{self, Role};
use crate::attribution::{self, Launcher, Receivers};
use crate::frame_tree::FrameTree;
use crate::render::visible;
use crate::stacks::python_stacks;
use omniprof_trace::keys::arg;
use omniprof_trace::FastMap;
use omniprof_trace::Trace;
use omniprof_trace::{Activity, ActivityType};

/// The root frame of device work whose launching op is not in the trace.
pub(crate) const UNLINKED: &str = "[unlinked]";

/// Which time the stacks hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlameTime {
    /// Host ops' self time.
    HostSelf,
    /// Device time, on the stack of the host op that launched it.
    Device,
}

/// Folded stacks: each distinct stack (frames root first, joined by `;`) with its total in
/// nanoseconds, sorted by stack; stacks with no time are left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FoldedStacks {
    /// Each stack and its nanoseconds.
    pub stacks: Vec<(String, u64)>,
    /// How many frames (host ops, or device work under the deepest ones) were deeper than
    /// [`MAX_STACK_DEPTH`](crate::MAX_STACK_DEPTH) and were cut, their time added to their ancestor at that depth.
    pub cut_frames: u64,
}

impl FoldedStacks {
    /// One `stack value` line per stack, as flame graph tools read them.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (stack, ns) in &self.stacks {
            // Writing into a `String` cannot fail.
            let _ = writeln!(out, "{stack} {ns}");
        }
        out
    }

    /// The sum of every stack (at most `u64::MAX`).
    pub fn total_ns(&self) -> u64 {
        self.stacks
            .iter()
            .fold(0u64, |sum, (_, ns)| sum.saturating_add(*ns))
    }
}

/// The folded stacks of `trace` for `time`.
///
/// Stacks are held as a tree of frames (each a parent and a name), so memory grows with the
/// ops, not with the ops times their depth; the text of a stack is spelled only for the
/// stacks that hold time, at the end.
pub fn folded_stacks(trace: &Trace, time: FlameTime) -> FoldedStacks {
    let python = python_stacks(trace);
    let mut threads: FastMap<(i64, i64), Vec<(usize, &Activity)>> = FastMap::default();
    for (i, a) in trace.activities.iter().enumerate() {
        if is_host_op(a) {
            threads
                .entry((a.device, a.resource))
                .or_default()
                .push((i, a));
        }
    }
    let mut builder = FlameBuilder::new(time);
    for (_, mut thread) in threads {
        thread.sort_by_key(|(_, a)| thread_order(a));
        for (i, a) in thread {
            builder.host_op(a, python.get(i));
        }
    }
    for a in &trace.activities {
        if activity::role(a.kind) == Role::Device {
            builder.device_work(a);
        }
    }
    builder.finish()
}

/// Builds the folded stacks of a trace delivered one activity at a time, holding only each
/// thread's open ops, the stacks, the launching ops' correlations and device work whose
/// launching op has not come yet: memory does not grow with the events.
///
/// Each thread's host ops must come in order (by start, the longer first); and the stacks of
/// Python frames around ops ([`PythonStacks`](crate::PythonStacks)) need the whole trace. So an op out of
/// order on its thread, a `python_function` event or a `Call stack` arg makes the builder
/// [`needs_whole_trace`](Self::needs_whole_trace): the caller then reads the trace whole
/// into [`folded_stacks`].
///
/// ```
/// use omniprof_analysis::{FlameBuilder, FlameTime};
/// use omniprof_trace::{Activity, ActivityType};
///
/// let mut builder = FlameBuilder::new(FlameTime::HostSelf);
/// builder.add(&Activity::new(ActivityType::UserAnnotation, "step", 1, 1, 0, 1_000));
/// builder.add(&Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 100, 700));
/// assert!(!builder.needs_whole_trace());
/// assert_eq!(builder.finish().to_text(), "step 400\nstep;aten::mm 600\n");
/// ```
pub struct FlameBuilder {
    time: FlameTime,
    tree: FrameTree,
    totals: FastMap<u32, u64>,
    threads: FastMap<(i64, i64), ThreadStack>,
    /// The node device work goes under, by the correlation it names (`attribution`): the
    /// launching op's own (its `External id`), or a runtime call's.
    launched_by: FastMap<u64, u32>,
    called_in: FastMap<u64, u32>,
    /// Device work whose launching op has not come (yet): its frame and time.
    waiting: Vec<(Launcher, String, i64)>,
    whole: bool,
}

/// A thread's host ops while they are delivered.
#[derive(Default)]
struct ThreadStack {
    /// Open ops that nest: node, end and self time so far.
    open: Vec<(u32, i64, i64)>,
    /// The ops that receive the work of the calls inside them, by node (a partly
    /// overlapping op, which starts no stack of its own here, included, as in the summary).
    receivers: Receivers<u32>,
    last: Option<(i64, Reverse<i64>, bool)>,
}

/// The order a thread's host ops are taken in: by start, the longer first, and on equal
/// intervals a Python frame before the op it called.
fn thread_order(a: &Activity) -> (i64, Reverse<i64>, bool) {
    let op = a.kind != ActivityType::PythonFunction;
    (a.start_ns, Reverse(a.end_ns.max(a.start_ns)), op)
}

/// Host ops are those the summary nests.
fn is_host_op(a: &Activity) -> bool {
    activity::role(a.kind) == Role::Host && activity::row_name(&a.name).is_some()
}

impl FlameBuilder {
    /// A builder of the stacks of `time`.
    pub fn new(time: FlameTime) -> Self {
        Self {
            time,
            tree: FrameTree::default(),
            totals: FastMap::default(),
            threads: FastMap::default(),
            launched_by: FastMap::default(),
            called_in: FastMap::default(),
            waiting: Vec::new(),
            whole: false,
        }
    }

    /// Whether what was added needs the whole trace (see the [type's docs](Self)); the
    /// stacks built so far are then not the trace's.
    pub fn needs_whole_trace(&self) -> bool {
        self.whole
    }

    /// Adds one activity: a host op to its thread's stacks, device work to the stack of the
    /// op that launched it; other activities are not drawn.
    pub fn add(&mut self, a: &Activity) {
        if is_host_op(a) {
            if a.kind == ActivityType::PythonFunction || a.arg(arg::CALL_STACK).is_some() {
                self.whole = true;
            }
            self.host_op(a, &[]);
        } else if activity::role(a.kind) == Role::Device {
            self.device_work(a);
        }
    }

    fn credit(&mut self, node: u32, ns: i64) {
        if ns > 0 && self.time == FlameTime::HostSelf {
            let total = self.totals.entry(node).or_default();
            *total = total.saturating_add(ns as u64);
        }
    }

    /// A host op, in its thread's order; `python` is the Python stack an outermost op hangs
    /// under, innermost first.
    fn host_op(&mut self, a: &Activity, python: &[Arc<str>]) {
        let order = thread_order(a);
        let thread = self.threads.entry((a.device, a.resource)).or_default();
        if thread.last.is_some_and(|last| order < last) {
            self.whole = true;
        }
        thread.last = Some(order);
        let end = a.end_ns.max(a.start_ns);
        let mut done = Vec::new();
        while thread.open.last().is_some_and(|&(_, e, _)| e <= a.start_ns) {
            done.extend(thread.open.pop());
        }
        let parent = thread.open.last().copied().filter(|&(_, e, _)| end <= e);
        let name = frame(activity::row_name(&a.name).unwrap_or(&a.name));
        let node = match parent {
            Some((p, _, _)) => {
                let top = thread.open.last_mut().expect("the parent is open");
                top.2 -= end - a.start_ns;
                self.tree.child(p, &name)
            }
            None => {
                let outer = python
                    .iter()
                    .rev()
                    .fold(ROOT, |node, f| self.tree.child(node, &frame(f)));
                self.tree.child(outer, &name)
            }
        };
        let call = attribution::is_call(a);
        let receiver = thread.receivers.take(node, a.start_ns, end, call);
        if a.correlation != 0 {
            if let Some(receiver) = receiver {
                self.called_in.insert(a.correlation, receiver);
            } else if !call && attribution::receives_device_work(a) {
                self.launched_by.insert(a.correlation, node);
            }
        }
        let self_ns = end - a.start_ns;
        if parent.is_some() || thread.open.is_empty() {
            thread.open.push((node, end, self_ns));
        } else {
            // An op that partly overlaps the open one: a stack of its own, with no children.
            done.push((node, end, self_ns));
        }
        for (node, _, self_ns) in done {
            self.credit(node, self_ns);
        }
    }

    /// Device work, under the op that launched it (a GPU user annotation repeats the work
    /// inside it: not drawn).
    fn device_work(&mut self, a: &Activity) {
        if self.time != FlameTime::Device {
            return;
        }
        let launcher = attribution::launcher(a);
        if launcher.is_none() && a.kind == ActivityType::GpuUserAnnotation {
            return;
        }
        let name = frame(&a.name);
        match launcher {
            Some(launcher) => match self.launching_node(launcher) {
                Some(parent) => self.device_frame(parent, &name, a.duration_ns()),
                None => self.waiting.push((launcher, name, a.duration_ns())),
            },
            None => {
                let unlinked = self.tree.child(ROOT, UNLINKED);
                self.device_frame(unlinked, &name, a.duration_ns());
            }
        }
    }

    fn launching_node(&self, launcher: Launcher) -> Option<u32> {
        match launcher {
            Launcher::External(id) => self.launched_by.get(&id).copied(),
            Launcher::Runtime(id) => self.called_in.get(&id).copied(),
        }
    }

    fn device_frame(&mut self, parent: u32, name: &str, ns: i64) {
        let node = self.tree.child(parent, name);
        if ns > 0 {
            let total = self.totals.entry(node).or_default();
            *total = total.saturating_add(ns as u64);
        }
    }

    /// The folded stacks of everything added.
    pub fn finish(mut self) -> FoldedStacks {
        let open: Vec<(u32, i64)> = self
            .threads
            .drain()
            .flat_map(|(_, t)| t.open.into_iter().map(|(node, _, ns)| (node, ns)))
            .collect();
        for (node, ns) in open {
            self.credit(node, ns);
        }
        for (launcher, name, ns) in std::mem::take(&mut self.waiting) {
            let parent = match self.launching_node(launcher) {
                Some(parent) => parent,
                None => self.tree.child(ROOT, UNLINKED),
            };
            self.device_frame(parent, &name, ns);
        }
        let tree = &self.tree;
        let mut stacks: Vec<(String, u64)> = self
            .totals
            .into_iter()
            .map(|(node, ns)| (spell(tree, node), ns))
            .collect();
        stacks.sort_unstable();
        FoldedStacks {
            stacks,
            cut_frames: self.tree.cut,
        }
    }
}

/// The node no frame is: the parent of every root frame.
const ROOT: u32 = FrameTree::ROOT;

/// The stack of `node`, its frames root first, joined by `;`.
fn spell(tree: &FrameTree, node: u32) -> String {
    let mut frames: Vec<&str> = tree.frames(node).map(|f| &**f).collect();
    frames.reverse();
    frames.join(";")
}

/// The frame of an op whose name is empty or blank: flame graph tools drop a line whose
/// stack is empty, and the op's time with it.
pub(crate) const UNNAMED: &str = "[unnamed]";

/// A name as one frame of a folded stack: `;` written as `:`, and line breaks and tabs as
/// spaces, so that every frame stays one frame; other control characters as `\u{1b}`
/// ([`visible`]), since XML (the SVG) forbids most of them even escaped; the whitespace
/// around it dropped, since tools trim each line (which would put lines out of order, or
/// leave a frame empty); an empty name as [`UNNAMED`]; and a name whose last word is a
/// number (`op 123`) with a no-break space before that word ([`NUMBER_SPACE`]).
fn frame(name: &str) -> String {
    let name = name.replace(';', ":").replace(['\n', '\r', '\t'], " ");
    match visible(name.trim()) {
        shown if shown.is_empty() => UNNAMED.to_owned(),
        shown => match shown.rsplit_once(' ') {
            Some((head, word)) if word.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
                format!("{head}{NUMBER_SPACE}{word}")
            }
            _ => shown.into_owned(),
        },
    }
}

/// What a frame's last space becomes when a number follows it: tools read the words after
/// a line's last two spaces as counts (the second is a differential graph's), so `a;op 123
/// 600` would be stack `a;op` counted 123 then 600. A no-break space draws the same, and
/// no tool splits at it.
const NUMBER_SPACE: char = '\u{a0}';

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame_tree::MAX_STACK_DEPTH;

    fn op(kind: ActivityType, name: &str, tid: i64, start: i64, end: i64) -> Activity {
        Activity::new(kind, name, 1, tid, start, end)
    }

    /// Two threads of nested ops with known self times, a launch and its kernels.
    fn trace() -> Trace {
        use ActivityType::*;
        let mut t = Trace::new(0, 10_000);
        let mut mm = op(CpuOp, "aten::mm", 1, 100, 700);
        mm.correlation = 42;
        let mut launch = op(CudaRuntime, "cudaLaunchKernel", 1, 200, 300);
        launch.correlation = 7;
        launch.linked_correlation = Some(42);
        let mut kernel = Activity::new(ConcurrentKernel, "gemm;v2", 0, 3, 400, 1_400);
        kernel.linked_correlation = Some(42);
        kernel.correlation = 7;
        let mut copy = Activity::new(GpuMemcpy, "Memcpy HtoD", 0, 3, 1_500, 1_750);
        copy.linked_correlation = Some(42);
        let mut stray = Activity::new(ConcurrentKernel, "stray", 0, 3, 2_000, 2_010);
        stray.linked_correlation = Some(999);
        let annotation = Activity::new(GpuUserAnnotation, "step", 0, 3, 400, 1_750);
        t.activities = vec![
            op(UserAnnotation, "ProfilerStep#0", 1, 0, 1_000),
            mm,
            launch,
            op(CpuOp, "aten::relu", 1, 800, 950),
            op(UserAnnotation, "ProfilerStep#1", 2, 0, 500),
            op(CpuOp, "aten::relu", 2, 100, 200),
            op(CpuOp, "async", 2, 450, 800),
            kernel,
            copy,
            stray,
            annotation,
        ];
        t
    }

    #[test]
    fn host_stacks_hold_exactly_the_self_times() {
        let folded = folded_stacks(&trace(), FlameTime::HostSelf);
        assert_eq!(
            folded.to_text(),
            "ProfilerStep* 650\n\
             ProfilerStep*;aten::mm 500\n\
             ProfilerStep*;aten::mm;cudaLaunchKernel 100\n\
             ProfilerStep*;aten::relu 250\n\
             async 350\n"
        );
        // Every nanosecond of every root op is in exactly one stack.
        assert_eq!(folded.total_ns(), 1_000 + 500 + 350);
    }

    #[test]
    fn ops_deeper_than_the_limit_are_cut_and_counted_and_their_time_kept() {
        // Ten more nested ops than the limit, each 1 ns inside the one above at each end,
        // the deepest launching a kernel.
        let depth = MAX_STACK_DEPTH as i64 + 10;
        let mut t = Trace::new(0, 10_000);
        for i in 0..depth {
            let mut a = op(ActivityType::CpuOp, &format!("f{i}"), 1, i, 2 * depth - i);
            a.correlation = i as u64 + 1;
            t.activities.push(a);
        }
        let mut kernel = Activity::new(ActivityType::ConcurrentKernel, "k", 0, 7, 0, 5);
        kernel.linked_correlation = Some(depth as u64);
        t.activities.push(kernel);
        let host = folded_stacks(&t, FlameTime::HostSelf);
        assert_eq!(host.cut_frames, 10);
        assert_eq!(host.stacks.len(), MAX_STACK_DEPTH);
        assert_eq!(host.total_ns(), 2 * depth as u64);
        let (deepest, ns) = host.stacks.iter().max_by_key(|(s, _)| s.len()).unwrap();
        assert_eq!(deepest.split(';').count(), MAX_STACK_DEPTH);
        assert!(
            deepest.ends_with(&format!(";f{}", MAX_STACK_DEPTH - 1)),
            "{deepest}"
        );
        // The deepest kept op's whole length: its self time and the ten cut below it.
        assert_eq!(*ns, 2 * (depth as u64 - (MAX_STACK_DEPTH as u64 - 1)));
        // The kernel's launching op was cut, and so is the kernel's own frame.
        let device = folded_stacks(&t, FlameTime::Device);
        assert_eq!(device.cut_frames, 11);
        assert_eq!(device.stacks.len(), 1);
        assert_eq!(device.stacks[0].0, *deepest);
        assert_eq!(device.stacks[0].1, 5);
    }

    /// `step` calls `forward` (a module) which runs `aten::mm`, whose kernel runs on the
    /// device; `step` spends time of its own before and after.
    fn python_trace() -> Trace {
        use ActivityType::*;
        let mut t = Trace::new(0, 10_000);
        let mut mm = op(CpuOp, "aten::mm", 1, 300, 700);
        mm.correlation = 5;
        let mut kernel = Activity::new(ConcurrentKernel, "gemm", 0, 7, 800, 1_800);
        kernel.linked_correlation = Some(5);
        t.activities = vec![
            op(PythonFunction, "t.py(9): step", 1, 0, 1_000),
            op(PythonFunction, "nn.Module: Linear_0", 1, 200, 800),
            mm,
            kernel,
        ];
        t
    }

    #[test]
    fn python_frames_enclose_the_ops_they_called_with_their_own_self_time() {
        let host = folded_stacks(&python_trace(), FlameTime::HostSelf);
        assert_eq!(
            host.to_text(),
            "t.py(9): step 400\n\
             t.py(9): step;nn.Module: Linear_0 200\n\
             t.py(9): step;nn.Module: Linear_0;aten::mm 400\n"
        );
        let device = folded_stacks(&python_trace(), FlameTime::Device);
        assert_eq!(
            device.to_text(),
            "t.py(9): step;nn.Module: Linear_0;aten::mm;gemm 1000\n"
        );
    }

    #[test]
    fn without_python_events_an_outermost_op_hangs_under_its_call_stack() {
        let mut t = python_trace();
        t.activities
            .retain(|a| a.kind != ActivityType::PythonFunction);
        t.activities[0].args.push((
            omniprof_trace::keys::arg::CALL_STACK.into(),
            omniprof_trace::Value::from("nn.Module: Linear_0;t.py(9): step;"),
        ));
        let host = folded_stacks(&t, FlameTime::HostSelf);
        assert_eq!(
            host.to_text(),
            "t.py(9): step;nn.Module: Linear_0;aten::mm 400\n"
        );
        // The same stack as with the Python events, for the op and its kernel.
        let device = folded_stacks(&t, FlameTime::Device);
        assert_eq!(
            device.to_text(),
            "t.py(9): step;nn.Module: Linear_0;aten::mm;gemm 1000\n"
        );
    }

    #[test]
    fn device_time_goes_to_the_launching_stack() {
        let folded = folded_stacks(&trace(), FlameTime::Device);
        assert_eq!(
            folded.to_text(),
            "ProfilerStep*;aten::mm;Memcpy HtoD 250\n\
             ProfilerStep*;aten::mm;gemm:v2 1000\n\
             [unlinked];stray 10\n"
        );
    }

    /// An AlexNet-like trace whose kernels carry no `External id`: each names its launch by
    /// the runtime correlation only, and the launch sits inside the op (inside a Python
    /// frame), or alone on its thread.
    fn runtime_linked_trace() -> Trace {
        use ActivityType::*;
        let mut t = Trace::new(0, 10_000);
        let mut conv = op(CpuOp, "aten::conv2d", 1, 100, 900);
        conv.correlation = 3;
        let mut launch = op(CudaRuntime, "cudaLaunchKernel", 1, 200, 300);
        launch.correlation = 11;
        let mut lonely = op(CudaRuntime, "cudaMemcpyAsync", 2, 200, 300);
        lonely.correlation = 12;
        let mut kernel = Activity::new(ConcurrentKernel, "implicit_gemm", 0, 7, 400, 1_400);
        kernel.correlation = 11;
        let mut copy = Activity::new(GpuMemcpy, "Memcpy DtoH", 0, 7, 1_500, 1_600);
        copy.correlation = 12;
        t.activities = vec![
            op(PythonFunction, "t.py(3): forward", 1, 0, 1_000),
            conv,
            launch,
            lonely,
            kernel,
            copy,
        ];
        t
    }

    #[test]
    fn device_work_without_an_external_id_goes_to_the_op_around_its_launch_as_in_the_summary() {
        let t = runtime_linked_trace();
        let folded = folded_stacks(&t, FlameTime::Device);
        assert_eq!(
            folded.to_text(),
            "[unlinked];Memcpy DtoH 100\n\
             t.py(3): forward;aten::conv2d;implicit_gemm 1000\n"
        );
        let summary = crate::key_averages(&t, &Default::default());
        let device_ns = |name: &str| {
            let row = summary.rows.iter().find(|r| &*r.name == name).unwrap();
            row.self_device_time_total_ns
        };
        assert_eq!(device_ns("aten::conv2d"), 1_000);
        assert_eq!(device_ns("cudaMemcpyAsync"), 0);
    }

    /// The stacks built from `trace`'s activities in `order`, one at a time.
    fn streamed(trace: &Trace, order: &[usize], time: FlameTime) -> (FoldedStacks, bool) {
        let mut builder = FlameBuilder::new(time);
        for &i in order {
            builder.add(&trace.activities[i]);
        }
        let whole = builder.needs_whole_trace();
        (builder.finish(), whole)
    }

    #[test]
    fn streamed_activities_give_the_stacks_of_the_whole_trace_whatever_the_order_across_threads() {
        let mut without_python = runtime_linked_trace();
        without_python
            .activities
            .retain(|a| a.kind != ActivityType::PythonFunction);
        for t in [trace(), without_python] {
            let n = t.activities.len();
            // Device work first, then the threads one after the other: each thread in order.
            let mut order: Vec<usize> = (0..n).rev().collect();
            order.sort_by_key(|&i| {
                let a = &t.activities[i];
                (activity::role(a.kind) == Role::Host, a.resource, a.start_ns)
            });
            for time in [FlameTime::HostSelf, FlameTime::Device] {
                let whole = folded_stacks(&t, time);
                assert_eq!(streamed(&t, &order, time), (whole.clone(), false));
                let in_file_order: Vec<usize> = (0..n).collect();
                assert_eq!(streamed(&t, &in_file_order, time).0, whole);
            }
        }
    }

    #[test]
    fn an_op_out_of_order_on_its_thread_or_a_python_frame_needs_the_whole_trace() {
        let t = trace();
        // aten::relu (800 ns) before aten::mm (100 ns) on thread 1.
        let (_, whole) = streamed(&t, &[0, 3, 1, 2], FlameTime::HostSelf);
        assert!(whole);
        let (_, whole) = streamed(&python_trace(), &[0, 1, 2, 3], FlameTime::Device);
        assert!(whole);
    }
}
