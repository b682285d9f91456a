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
//! Host ops are those the summary nests ([`key_averages`](super::key_averages)): ops, user
//! ranges, runtime and driver calls, `python_function` events, `ProfilerStep#<n>` named
//! `ProfilerStep*` so that steps merge. So in a trace recorded with stacks (PyTorch's
//! `with_stack=True`, omniprof's own) the Python frames (`train.py(12): step`,
//! `nn.Module: Linear_0`) are frames around the ops they called, with their own self time:
//! the graph shows which Python line spent the time, host or device. An outermost event
//! (inside no other on its thread) with a Python stack but no `python_function` event
//! around it (a trace with `Call stack` args only; a backward op on the autograd engine's
//! own thread, whose stack is its forward op's) hangs under the frames of that stack
//! ([`stacks`](super::stacks)), outermost first. An op that partly overlaps an enclosing
//! one starts a stack of its own. Threads merge: equal stacks on different threads add up. `;` in a name is written as `:`, and
//! line breaks as spaces, so that every frame stays one frame.
//!
//! ```
//! use omniprof_trace::analysis::flamegraph::{folded_stacks, FlameTime};
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

use super::attribution::{self, Launcher};
use super::events::{self, Role};
use super::frame_tree::FrameTree;
use super::stacks::python_stacks;
use crate::activity::{Activity, ActivityType};
use crate::hash::FastMap;
use crate::trace::Trace;

/// The root frame of device work whose launching op is not in the trace.
pub const UNLINKED: &str = "[unlinked]";

/// The most frames a stack holds. An op nested deeper is cut: its time (and that of the
/// ops and device work below it) goes to its ancestor at this depth, and it is counted in
/// [`FoldedStacks::cut_frames`].
pub use super::frame_tree::MAX_DEPTH;

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
    pub stacks: Vec<(String, u64)>,
    /// How many frames (host ops, or device work under the deepest ones) were deeper than
    /// [`MAX_DEPTH`] and were cut, their time added to their ancestor at that depth.
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

    /// The sum of every stack.
    pub fn total_ns(&self) -> u64 {
        self.stacks.iter().map(|(_, ns)| ns).sum()
    }
}

/// The folded stacks of `trace` for `time`.
///
/// Stacks are held as a tree of frames (each a parent and a name), so memory grows with the
/// ops, not with the ops times their depth; the text of a stack is spelled only for the
/// stacks that hold time, at the end.
pub fn folded_stacks(trace: &Trace, time: FlameTime) -> FoldedStacks {
    let mut tree = FrameTree::default();
    let mut totals: FastMap<u32, u64> = FastMap::default();
    let mut add = |node: u32, ns: i64| {
        if ns > 0 {
            *totals.entry(node).or_default() += ns as u64;
        }
    };
    let ops = host_stacks(trace, &mut tree);
    match time {
        FlameTime::HostSelf => {
            for op in &ops {
                add(op.node, op.self_ns);
            }
        }
        FlameTime::Device => {
            let mut launched_by: FastMap<u64, u32> = FastMap::default();
            let mut called_in: FastMap<u64, u32> = FastMap::default();
            for op in &ops {
                match op.launches {
                    Some((Launcher::External(id), node)) => launched_by.insert(id, node),
                    Some((Launcher::Runtime(id), node)) => called_in.insert(id, node),
                    None => None,
                };
            }
            let unlinked = tree.child(ROOT, UNLINKED);
            for a in &trace.activities {
                if events::role(a.kind) != Role::Device {
                    continue;
                }
                // A GPU user annotation repeats the work inside it: it has no launcher.
                let parent = match attribution::launcher(a) {
                    Some(Launcher::External(id)) => launched_by.get(&id),
                    Some(Launcher::Runtime(id)) => called_in.get(&id),
                    None if a.kind == ActivityType::GpuUserAnnotation => continue,
                    None => None,
                };
                let parent = parent.copied().unwrap_or(unlinked);
                let node = tree.child(parent, &frame(&a.name));
                add(node, a.duration_ns());
            }
        }
    }
    let mut stacks: Vec<(String, u64)> = totals
        .into_iter()
        .map(|(node, ns)| (spell(&tree, node), ns))
        .collect();
    stacks.sort_unstable();
    FoldedStacks {
        stacks,
        cut_frames: tree.cut,
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

/// A host op placed on its stack.
struct StackedOp {
    /// Its stack's node in the [`FrameTree`].
    node: u32,
    self_ns: i64,
    /// What device work launched from this op names (the op's own correlation as its
    /// `External id`, or a call's runtime correlation), and the node that work goes under:
    /// the op's own, or that of the op around the call (`attribution`).
    launches: Option<(Launcher, u32)>,
}

/// Every host op with its stack and self time, thread by thread.
fn host_stacks(trace: &Trace, tree: &mut FrameTree) -> Vec<StackedOp> {
    let python = python_stacks(trace);
    let mut threads: FastMap<(i64, i64), Vec<(usize, &Activity)>> = FastMap::default();
    for (i, a) in trace.activities.iter().enumerate() {
        if events::role(a.kind) == Role::Host && events::row_name(&a.name).is_some() {
            threads
                .entry((a.device, a.resource))
                .or_default()
                .push((i, a));
        }
    }
    let mut ops: Vec<StackedOp> = Vec::new();
    for (_, mut thread) in threads {
        // On equal intervals a Python frame encloses the op it called.
        thread.sort_by_key(|(_, a)| {
            let op = a.kind != ActivityType::PythonFunction;
            (a.start_ns, Reverse(a.end_ns), op)
        });
        // Open ops: index into `ops` and end.
        let mut open: Vec<(usize, i64)> = Vec::new();
        // The ops that are not calls and enclose this one, innermost last: index into `ops`
        // and end. The innermost around a call receives the work launched by it (a partly
        // overlapping op, which starts no stack of its own here, included, as in the
        // summary).
        let mut receivers: Vec<(usize, i64)> = Vec::new();
        for (i, a) in thread {
            let end = a.end_ns.max(a.start_ns);
            while open.last().is_some_and(|&(_, e)| e <= a.start_ns) {
                open.pop();
            }
            while receivers.last().is_some_and(|&(_, e)| e <= a.start_ns) {
                receivers.pop();
            }
            let parent = open.last().copied().filter(|&(_, e)| end <= e);
            let name = frame(events::row_name(&a.name).unwrap_or(&a.name));
            let node = match parent {
                Some((p, _)) => {
                    ops[p].self_ns -= end - a.start_ns;
                    tree.child(ops[p].node, &name)
                }
                None => {
                    let outer = python
                        .get(i)
                        .iter()
                        .rev()
                        .fold(ROOT, |node, f| tree.child(node, &frame(f)));
                    tree.child(outer, &name)
                }
            };
            let call = attribution::is_call(a);
            let launches = if a.correlation == 0 {
                None
            } else if call {
                // The work of this call goes to the innermost op around it.
                receivers
                    .iter()
                    .rev()
                    .find(|&&(_, e)| end <= e)
                    .map(|&(r, _)| (Launcher::Runtime(a.correlation), ops[r].node))
            } else if attribution::receives_device_work(a) {
                Some((Launcher::External(a.correlation), node))
            } else {
                None
            };
            if !call {
                receivers.push((ops.len(), end));
            }
            ops.push(StackedOp {
                node,
                self_ns: end - a.start_ns,
                launches,
            });
            if parent.is_some() || open.is_empty() {
                open.push((ops.len() - 1, end));
            }
        }
    }
    ops
}

/// A name as one frame of a folded stack.
fn frame(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let depth = MAX_DEPTH as i64 + 10;
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
        assert_eq!(host.stacks.len(), MAX_DEPTH);
        assert_eq!(host.total_ns(), 2 * depth as u64);
        let (deepest, ns) = host.stacks.iter().max_by_key(|(s, _)| s.len()).unwrap();
        assert_eq!(deepest.split(';').count(), MAX_DEPTH);
        assert!(
            deepest.ends_with(&format!(";f{}", MAX_DEPTH - 1)),
            "{deepest}"
        );
        // The deepest kept op's whole length: its self time and the ten cut below it.
        assert_eq!(*ns, 2 * (depth as u64 - (MAX_DEPTH as u64 - 1)));
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
            crate::keys::arg::CALL_STACK.into(),
            crate::Value::from("nn.Module: Linear_0;t.py(9): step;"),
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
        let summary = crate::analysis::key_averages(&t, &Default::default());
        let device_ns = |name: &str| {
            let row = summary.rows.iter().find(|r| &*r.name == name).unwrap();
            row.self_device_time_total_ns
        };
        assert_eq!(device_ns("aten::conv2d"), 1_000);
        assert_eq!(device_ns("cudaMemcpyAsync"), 0);
    }
}
