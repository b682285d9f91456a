//! Python stacks: for every event of a trace, the Python frames it ran under; documented on
//! [`PythonStacks`].

use std::cmp::Reverse;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::activity::{self, Role};
use crate::frame_tree::FrameTree;
use omniprof_trace::keys::{arg, name};
use omniprof_trace::FastMap;
use omniprof_trace::Trace;
use omniprof_trace::Value;
use omniprof_trace::{Activity, ActivityType};

/// A stack: frames innermost first.
pub type Stack = Arc<[Arc<str>]>;

/// The frames PyTorch's `_filter_stack_entry` leaves out of stacks: an entry holding both
/// texts of a pair.
const FILTERED_ENTRIES: [(&str, &str); 6] = [
    ("autograd/__init__", "_make_grads"),
    ("autograd/__init__", "backward"),
    ("torch/tensor", "backward"),
    ("_internal/common_utils", "prof_callable"),
    ("_internal/common_utils", "prof_func_call"),
    ("_internal/common_utils", "prof_meth_call"),
];

/// Whether PyTorch keeps `entry` in stacks.
fn kept(entry: &str) -> bool {
    !FILTERED_ENTRIES
        .iter()
        .any(|(a, b)| entry.contains(a) && entry.contains(b))
}

/// The stack of every activity of a trace.
///
/// Python stacks: for every event of a trace, the Python frames it ran under, innermost
/// first, as PyTorch's `FunctionEvent.stack` lists them; and PyTorch's `export_stacks`, the
/// folded text of those stacks with a time each.
///
/// Every reader of stacks takes them from [`python_stacks`]: the rows of
/// [`key_averages`](crate::key_averages()) with
/// [`group_by_stack_n`](crate::KeyAveragesOptions::group_by_stack_n), the table's
/// `Source Location` column, [`FunctionEvent::stack`](crate::FunctionEvent::stack),
/// [`FunctionEvents::export_stacks`](crate::FunctionEvents::export_stacks) and the flame
/// graph's frames for ops outside every `python_function` event. So an op has one stack,
/// whichever report shows it.
///
/// An event's stack comes from, in order:
///
/// - its `Call stack` arg ([`arg::CALL_STACK`]): the frames innermost first, each followed
///   by `;`. PyTorch writes it with `with_stack=True` and
///   `_ExperimentalConfig(verbose=True)`; omniprof writes it on every op when it records
///   stacks;
/// - else the `python_function` events that enclose it on its thread (pid, tid), innermost
///   first, each named as PyTorch names it (`train.py(12): step`, `nn.Module: Linear_0`,
///   `<built-in method sum of Tensor object at 0x7f...>`). PyTorch's traces without
///   `verbose` carry only these (PyTorch itself then reports empty stacks; here the same
///   frames come from the events).
///
/// Then, as PyTorch's `_parse_kineto_results` (`torch/autograd/profiler.py`) and
/// `EventList._set_backward_stacktraces` (`torch/autograd/profiler_util.py`) do:
///
/// - the frames PyTorch filters out are dropped (`_filter_stack_entry`: those holding both
///   `autograd/__init__` and `backward` or `_make_grads`, `torch/tensor` and `backward`,
///   `_internal/common_utils` and `prof_callable`, `prof_func_call` or `prof_meth_call`);
/// - an event inside a backward function, or the function itself, takes the stack of the
///   forward op it differentiates: a backward function is an op `X` directly inside the op
///   `autograd::engine::evaluate_function: X` ([`name::EVALUATE_FUNCTION_PREFIX`]), and its
///   forward op the first (by start, longer first) op outside every backward function with
///   the same `Sequence number` ([`arg::SEQUENCE_NUMBER`]), on the backward function's
///   thread when one is there, else on any thread. (PyTorch matches the forward op's thread
///   by the profiler's own thread numbers, which a trace does not hold.) A backward function
///   without a sequence number (`torch::autograd::AccumulateGrad`), or whose forward op is
///   not in the trace, has an empty stack, as in PyTorch. In a trace where no op has a
///   sequence number at all (one written before omniprof recorded them, or by a tool that
///   drops them), backward functions keep their own frames (`run_backward`, `backward`,
///   ...): there is no forward op to find.
///
/// Events nest as the summary nests them (an event starting exactly at another's end is not
/// inside it); device work has no stack.
///
/// Bad input gives a stated result, never a panic: a `Call stack` that is not a string is
/// ignored (the enclosing `python_function` events give the stack) and counted
/// ([`PythonStacks::invalid_call_stacks`]); an event that starts inside another and ends
/// after it (unbalanced events) takes the frames of the innermost event that does enclose
/// it, and encloses nothing itself ([`PythonStacks::unnested_events`]); a stack deeper than
/// [`MAX_STACK_DEPTH`](crate::MAX_STACK_DEPTH) keeps its outermost frames ([`PythonStacks::cut_frames`]).
///
/// ```
/// use omniprof_analysis::python_stacks;
/// use omniprof_trace::{Activity, ActivityType, Trace, Value};
///
/// let mut trace = Trace::new(0, 1_000);
/// let py = |name: &str, start, end| Activity::new(ActivityType::PythonFunction, name, 1, 1, start, end);
/// trace.activities.push(py("train.py(9): <module>", 0, 1_000));
/// trace.activities.push(py("train.py(4): step", 100, 900));
/// trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 200, 300));
/// let mut verbose = Activity::new(ActivityType::CpuOp, "aten::add", 1, 1, 400, 500);
/// verbose.args.push(("Call stack".into(), Value::from("train.py(5): step;train.py(9): <module>;")));
/// trace.activities.push(verbose);
/// let stacks = python_stacks(&trace);
/// assert_eq!(stacks.frames(2), ["train.py(4): step", "train.py(9): <module>"]);
/// assert_eq!(stacks.frames(3), ["train.py(5): step", "train.py(9): <module>"]);
/// assert_eq!(stacks.frames(1), ["train.py(9): <module>"]);
/// assert!(stacks.frames(0).is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct PythonStacks {
    /// Per activity, an index into `stacks`.
    of_activity: Vec<u32>,
    /// The distinct stacks; the first is the empty one.
    stacks: Vec<Stack>,
    /// `Call stack` args that were not strings (and were ignored).
    pub invalid_call_stacks: u64,
    /// Events that started inside another event of their thread and ended after it.
    pub unnested_events: u64,
    /// Frames left out of stacks deeper than [`MAX_STACK_DEPTH`](crate::MAX_STACK_DEPTH).
    pub cut_frames: u64,
}

impl Default for PythonStacks {
    /// No activity, and so no stack.
    fn default() -> Self {
        Self {
            of_activity: Vec::new(),
            stacks: vec![Arc::from(Vec::new())],
            invalid_call_stacks: 0,
            unnested_events: 0,
            cut_frames: 0,
        }
    }
}

impl PythonStacks {
    /// The stack of the activity at `index` in the trace's `activities` (empty for one out of
    /// range).
    pub fn get(&self, index: usize) -> &Stack {
        let at = self.of_activity.get(index).copied().unwrap_or(0);
        &self.stacks[at as usize]
    }

    /// The frames of the activity at `index`, innermost first, as `&str`s.
    pub fn frames(&self, index: usize) -> Vec<&str> {
        self.get(index).iter().map(|f| &**f).collect()
    }

    /// Whether some activity has a stack.
    pub fn any(&self) -> bool {
        self.stacks.len() > 1
    }
}

/// The node no frame is: the parent of every outermost frame, and the empty stack.
const ROOT: u32 = FrameTree::ROOT;
/// No backward function.
const NONE: u32 = u32::MAX;

/// The frame tree, with PyTorch's filter and `Call stack` texts.
#[derive(Default)]
struct Stacks {
    tree: FrameTree,
}

impl Stacks {
    /// The stack of `frame` inside `parent`: `parent` itself for a frame PyTorch filters out,
    /// or (counted as cut) when `parent` is [`MAX_STACK_DEPTH`](crate::MAX_STACK_DEPTH) deep.
    fn child(&mut self, parent: u32, frame: &str) -> u32 {
        if !kept(frame) {
            return parent;
        }
        self.tree.child(parent, frame)
    }

    /// The node of a `Call stack` text (frames innermost first, each ending in `;`).
    fn call_stack(&mut self, text: &str) -> u32 {
        let text = text.strip_suffix(';').unwrap_or(text);
        if text.is_empty() {
            return ROOT;
        }
        text.rsplit(';')
            .fold(ROOT, |node, frame| self.child(node, frame))
    }

    /// The frames of `node`, innermost first.
    fn spell(&self, node: u32) -> Stack {
        let mut frames = Vec::with_capacity(self.tree.depth(node));
        frames.extend(self.tree.frames(node).cloned());
        frames.into()
    }
}

/// An event that may enclose others, while the walk is inside it.
struct Open {
    end: i64,
    /// The stack of the events inside it: its own, and itself when it is a Python frame.
    inner: u32,
    /// The backward function it is or is inside ([`NONE`]: none).
    backward: u32,
    index: usize,
}

/// Whether an activity takes part in the nesting: the host events the summary nests, Python
/// functions included.
fn nests(a: &Activity) -> bool {
    activity::role(a.kind) == Role::Host && activity::row_name(&a.name).is_some()
}

/// An op's `Sequence number`, when it has a non-negative one.
fn sequence_number(a: &Activity) -> Option<i64> {
    a.arg(arg::SEQUENCE_NUMBER)
        .and_then(Value::as_i64)
        .filter(|&n| n >= 0)
}

/// The stack of every activity of `trace` (see [`PythonStacks`]).
pub fn python_stacks(trace: &Trace) -> PythonStacks {
    let activities = &trace.activities;
    let mut out = PythonStacks::default();
    let has_stacks = activities
        .iter()
        .any(|a| a.kind == ActivityType::PythonFunction || a.arg(arg::CALL_STACK).is_some());
    if !has_stacks {
        return out;
    }
    let mut tree = Stacks::default();
    let mut own = vec![ROOT; activities.len()];
    let mut backward = vec![NONE; activities.len()];
    let mut threads: FastMap<(i64, i64), Vec<usize>> = FastMap::default();
    for (i, a) in activities.iter().enumerate() {
        if nests(a) {
            threads.entry((a.device, a.resource)).or_default().push(i);
        }
    }
    let mut call_stacks: FastMap<&str, u32> = FastMap::default();
    let mut open: Vec<Open> = Vec::new();
    for thread in threads.values_mut() {
        // Parents first; on equal intervals a Python frame encloses the op it called.
        thread.sort_unstable_by_key(|&i| {
            let a = &activities[i];
            let python = a.kind == ActivityType::PythonFunction;
            (a.start_ns, Reverse(a.end_ns.max(a.start_ns)), !python, i)
        });
        open.clear();
        for &i in thread.iter() {
            let a = &activities[i];
            let end = a.end_ns.max(a.start_ns);
            while open.last().is_some_and(|o| o.end <= a.start_ns) {
                open.pop();
            }
            // Ends never grow up the open stack: the enclosing events are a prefix of it.
            let enclosing = open.partition_point(|o| end <= o.end);
            let nested = enclosing == open.len();
            if !nested {
                out.unnested_events += 1;
            }
            let parent = enclosing.checked_sub(1).map(|p| &open[p]);
            let inherited = parent.map_or(ROOT, |p| p.inner);
            let stack = match a.arg(arg::CALL_STACK) {
                Some(Value::Str(text)) => match call_stacks.get(&**text) {
                    Some(&node) => node,
                    None => {
                        let node = tree.call_stack(text);
                        call_stacks.insert(text, node);
                        node
                    }
                },
                Some(_) => {
                    out.invalid_call_stacks += 1;
                    inherited
                }
                None => inherited,
            };
            let python = a.kind == ActivityType::PythonFunction;
            let is_backward_function = !python
                && parent.is_some_and(|p| {
                    let wrapper = &activities[p.index];
                    wrapper.kind != ActivityType::PythonFunction
                        && name::evaluates(&wrapper.name, &a.name)
                });
            own[i] = stack;
            backward[i] = if is_backward_function {
                i as u32
            } else {
                parent.map_or(NONE, |p| p.backward)
            };
            if nested {
                let inner = if python {
                    tree.child(stack, &a.name)
                } else {
                    stack
                };
                open.push(Open {
                    end,
                    inner,
                    backward: backward[i],
                    index: i,
                });
            }
        }
    }

    if !activities
        .iter()
        .any(|a| nests(a) && sequence_number(a).is_some())
    {
        backward.fill(NONE);
    }
    // The forward stacks, by sequence number: per thread, and on any thread.
    let mut order: Vec<usize> = (0..activities.len())
        .filter(|&i| backward[i] == NONE && nests(&activities[i]))
        .collect();
    order.sort_unstable_by_key(|&i| {
        let a = &activities[i];
        (a.start_ns, Reverse(a.end_ns), i)
    });
    let mut forward_on_thread: FastMap<(i64, i64, i64), u32> = FastMap::default();
    let mut forward_anywhere: FastMap<i64, u32> = FastMap::default();
    for &i in &order {
        let a = &activities[i];
        if let Some(seq) = sequence_number(a) {
            forward_on_thread
                .entry((seq, a.device, a.resource))
                .or_insert(own[i]);
            forward_anywhere.entry(seq).or_insert(own[i]);
        }
    }

    let mut spelled: FastMap<u32, u32> = FastMap::default();
    spelled.insert(ROOT, 0);
    out.of_activity = (0..activities.len())
        .map(|i| {
            let node = match backward[i] {
                NONE => own[i],
                f => {
                    let f = &activities[f as usize];
                    sequence_number(f)
                        .and_then(|seq| {
                            forward_on_thread
                                .get(&(seq, f.device, f.resource))
                                .or_else(|| forward_anywhere.get(&seq))
                        })
                        .copied()
                        .unwrap_or(ROOT)
                }
            };
            *spelled.entry(node).or_insert_with(|| {
                out.stacks.push(tree.spell(node));
                (out.stacks.len() - 1) as u32
            })
        })
        .collect();
    out.cut_frames = tree.tree.cut;
    out
}

/// The time [`FunctionEvents::export_stacks`](crate::FunctionEvents::export_stacks) writes per stack: PyTorch's
/// `export_stacks(path, metric)`.
///
/// ```
/// use omniprof_analysis::StackMetric;
///
/// assert_eq!("self_cpu_time_total".parse(), Ok(StackMetric::SelfCpuTimeTotal));
/// assert_eq!("self_cuda_time_total".parse(), Ok(StackMetric::SelfDeviceTimeTotal));
/// assert_eq!("self_device_time_total".parse(), Ok(StackMetric::SelfDeviceTimeTotal));
/// let error = "cpu_time_total".parse::<StackMetric>().unwrap_err().to_string();
/// assert!(error.starts_with("metric should be one of: ['self_cpu_time_total', "), "{error}");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StackMetric {
    /// Each event's self CPU time.
    SelfCpuTimeTotal,
    /// Each event's self device time.
    SelfDeviceTimeTotal,
}

impl StackMetric {
    /// The names accepted: PyTorch's (`cuda`, `xpu` and `privateuse1` standing for the
    /// device), and `self_device_time_total`.
    pub const NAMES: [&'static str; 5] = [
        "self_cpu_time_total",
        "self_cuda_time_total",
        "self_xpu_time_total",
        "self_privateuse1_time_total",
        "self_device_time_total",
    ];
}

impl fmt::Display for StackMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::SelfCpuTimeTotal => "self_cpu_time_total",
            Self::SelfDeviceTimeTotal => "self_device_time_total",
        })
    }
}

/// A metric name that is not a [`StackMetric`]; the message is PyTorch's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("metric should be one of: ['self_cpu_time_total', 'self_cuda_time_total', 'self_xpu_time_total', 'self_privateuse1_time_total', 'self_device_time_total'] (got {0:?})")]
pub struct UnknownStackMetric(pub String);

impl FromStr for StackMetric {
    type Err = UnknownStackMetric;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "self_cpu_time_total" => Ok(Self::SelfCpuTimeTotal),
            _ if StackMetric::NAMES.contains(&s) => Ok(Self::SelfDeviceTimeTotal),
            _ => Err(UnknownStackMetric(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame_tree::MAX_STACK_DEPTH;
    use crate::{function_events, KeyAveragesOptions};

    fn py(name: &str, start: i64, end: i64) -> Activity {
        Activity::new(ActivityType::PythonFunction, name, 1, 1, start, end)
    }

    fn op(name: &str, start: i64, end: i64) -> Activity {
        Activity::new(ActivityType::CpuOp, name, 1, 1, start, end)
    }

    fn with_arg(mut a: Activity, key: &str, value: Value) -> Activity {
        a.args.push((key.into(), value));
        a
    }

    /// A forward op under two user frames, and the backward pass of it: the engine's
    /// wrapper, the backward function and an op inside it, under `run_backward`.
    fn forward_and_backward() -> Trace {
        let mut t = Trace::new(0, 10_000);
        t.activities = vec![
            py("t.py(9): <module>", 0, 10_000),
            py("t.py(3): step", 100, 9_000),
            py("nn.Module: Linear_0", 200, 1_000),
            with_arg(
                op("aten::linear", 300, 900),
                arg::SEQUENCE_NUMBER,
                Value::Int(4),
            ),
            op("aten::addmm", 400, 800),
            py("torch/_tensor.py(570): backward", 2_000, 8_000),
            py("torch/autograd/__init__.py(255): backward", 2_100, 7_900),
            py("<built-in method run_backward>", 2_200, 7_800),
            op(
                "autograd::engine::evaluate_function: AddmmBackward0",
                3_000,
                6_000,
            ),
            with_arg(
                op("AddmmBackward0", 3_100, 5_000),
                arg::SEQUENCE_NUMBER,
                Value::Int(4),
            ),
            op("aten::mm", 3_200, 4_000),
            op("aten::add", 5_100, 5_900),
        ];
        t
    }

    #[test]
    fn an_op_stack_is_its_enclosing_python_frames_innermost_first() {
        let stacks = python_stacks(&forward_and_backward());
        let frames = ["nn.Module: Linear_0", "t.py(3): step", "t.py(9): <module>"];
        assert_eq!(stacks.frames(3), frames);
        assert_eq!(stacks.frames(4), frames);
        // A Python frame's stack is the frames around it.
        assert_eq!(stacks.frames(2), ["t.py(3): step", "t.py(9): <module>"]);
        assert!(stacks.frames(0).is_empty());
        assert_eq!((stacks.invalid_call_stacks, stacks.unnested_events), (0, 0));
    }

    #[test]
    fn backward_functions_and_the_ops_inside_take_the_forward_ops_stack() {
        let stacks = python_stacks(&forward_and_backward());
        let forward = ["nn.Module: Linear_0", "t.py(3): step", "t.py(9): <module>"];
        assert_eq!(stacks.frames(9), forward);
        assert_eq!(stacks.frames(10), forward);
        // The engine's wrapper and what runs in it outside the backward function keep
        // their own frames, less the one PyTorch filters (`autograd/__init__ ... backward`).
        let own = [
            "<built-in method run_backward>",
            "torch/_tensor.py(570): backward",
            "t.py(3): step",
            "t.py(9): <module>",
        ];
        assert_eq!(stacks.frames(8), own);
        assert_eq!(stacks.frames(11), own);
    }

    #[test]
    fn a_backward_function_without_a_forward_op_has_an_empty_stack() {
        let mut t = forward_and_backward();
        t.activities[9].args.clear();
        let stacks = python_stacks(&t);
        assert!(stacks.frames(9).is_empty());
        assert!(stacks.frames(10).is_empty());
    }

    #[test]
    fn without_any_sequence_number_backward_functions_keep_their_own_frames() {
        let mut t = forward_and_backward();
        t.activities[3].args.clear();
        t.activities[9].args.clear();
        let stacks = python_stacks(&t);
        let own = [
            "<built-in method run_backward>",
            "torch/_tensor.py(570): backward",
            "t.py(3): step",
            "t.py(9): <module>",
        ];
        assert_eq!(stacks.frames(9), own);
        assert_eq!(stacks.frames(10), own);
    }

    /// The same trace with every event's stack written as its `Call stack` arg, the Python
    /// events gone.
    fn as_call_stacks(t: &Trace) -> Trace {
        let mut out = t.clone();
        let mut stacks_of = Vec::new();
        // The raw stacks (before PyTorch's filter and the backward rule): a trace has them.
        for (i, a) in t.activities.iter().enumerate() {
            let mut frames: Vec<&str> = t
                .activities
                .iter()
                .filter(|p| {
                    p.kind == ActivityType::PythonFunction
                        && p.start_ns <= a.start_ns
                        && a.end_ns <= p.end_ns
                        && !std::ptr::eq(*p, a)
                })
                .map(|p| &*p.name)
                .collect();
            frames.reverse();
            stacks_of.push((i, frames.join(";") + ";"));
        }
        for (i, text) in stacks_of {
            out.activities[i]
                .args
                .push((arg::CALL_STACK.into(), Value::from(text.as_str())));
        }
        out.activities
            .retain(|a| a.kind != ActivityType::PythonFunction);
        out
    }

    #[test]
    fn call_stack_args_give_the_same_stacks_as_python_events() {
        let t = forward_and_backward();
        let from_events = python_stacks(&t);
        let verbose = as_call_stacks(&t);
        let from_args = python_stacks(&verbose);
        let ops: Vec<usize> = (0..t.activities.len())
            .filter(|&i| t.activities[i].kind == ActivityType::CpuOp)
            .collect();
        assert_eq!(ops.len(), verbose.activities.len());
        for (j, &i) in ops.iter().enumerate() {
            assert_eq!(
                from_args.frames(j),
                from_events.frames(i),
                "{}",
                t.activities[i].name
            );
        }
    }

    #[test]
    fn a_call_stack_arg_wins_over_the_enclosing_events() {
        let mut t = Trace::new(0, 100);
        t.activities = vec![
            py("a.py(1): f", 0, 100),
            with_arg(
                op("aten::mm", 10, 20),
                arg::CALL_STACK,
                Value::from("b.py(2): g;"),
            ),
            with_arg(op("aten::add", 30, 40), arg::CALL_STACK, Value::from("")),
        ];
        let stacks = python_stacks(&t);
        assert_eq!(stacks.frames(1), ["b.py(2): g"]);
        assert!(stacks.frames(2).is_empty());
    }

    #[test]
    fn a_call_stack_that_is_not_a_string_is_ignored_and_counted() {
        let mut t = Trace::new(0, 100);
        t.activities = vec![
            py("a.py(1): f", 0, 100),
            with_arg(op("aten::mm", 10, 20), arg::CALL_STACK, Value::Int(7)),
            with_arg(
                op("aten::add", 30, 40),
                arg::CALL_STACK,
                Value::from(vec![Value::from("b.py(2): g")]),
            ),
        ];
        let stacks = python_stacks(&t);
        assert_eq!(stacks.frames(1), ["a.py(1): f"]);
        assert_eq!(stacks.frames(2), ["a.py(1): f"]);
        assert_eq!(stacks.invalid_call_stacks, 2);
    }

    #[test]
    fn unbalanced_python_events_enclose_nothing_and_take_the_frames_around_them() {
        // `g` starts inside `f` and ends after it; the op inside both sees only `f`'s
        // frames and `<module>`, the op after `f` only `<module>`.
        let mut t = Trace::new(0, 1_000);
        t.activities = vec![
            py("m.py(1): <module>", 0, 1_000),
            py("m.py(2): f", 100, 500),
            py("m.py(3): g", 200, 700),
            op("aten::mm", 300, 400),
            op("aten::add", 600, 650),
        ];
        let stacks = python_stacks(&t);
        assert_eq!(stacks.frames(2), ["m.py(1): <module>"]);
        assert_eq!(stacks.frames(3), ["m.py(2): f", "m.py(1): <module>"]);
        assert_eq!(stacks.frames(4), ["m.py(1): <module>"]);
        assert_eq!(stacks.unnested_events, 1);
    }

    #[test]
    fn stacks_deeper_than_the_limit_keep_their_outermost_frames() {
        let depth = MAX_STACK_DEPTH as i64 + 5;
        let mut t = Trace::new(0, 10_000);
        for i in 0..depth {
            t.activities
                .push(py(&format!("r.py({i}): f"), i, 2 * depth - i));
        }
        t.activities.push(op("aten::mm", depth, depth));
        let deep = "x;".repeat(MAX_STACK_DEPTH + 3);
        t.activities.push(with_arg(
            op("aten::add", depth, depth),
            arg::CALL_STACK,
            Value::from(deep.as_str()),
        ));
        let stacks = python_stacks(&t);
        let mm = stacks.frames(depth as usize);
        assert_eq!(mm.len(), MAX_STACK_DEPTH);
        assert_eq!(mm.last(), Some(&"r.py(0): f"));
        assert_eq!(mm[0], format!("r.py({}): f", MAX_STACK_DEPTH - 1));
        assert_eq!(stacks.frames(depth as usize + 1).len(), MAX_STACK_DEPTH);
        // 5 + 4 Python frames too deep for the ops (each cut once), 3 of the arg.
        assert_eq!(stacks.cut_frames, 5 + 3);
    }

    #[test]
    fn pytorchs_filtered_frames_are_left_out() {
        assert!(!kept("torch/autograd/__init__.py(255): backward"));
        assert!(!kept("torch/autograd/__init__.py(90): _make_grads"));
        assert!(!kept(
            "torch/testing/_internal/common_utils.py(1): prof_callable"
        ));
        assert!(kept("torch/_tensor.py(570): backward"));
        assert!(kept("torch/autograd/__init__.py(300): grad"));
    }

    #[test]
    fn export_writes_each_events_stack_outermost_first_with_its_self_time() {
        // The same events, their times in µs.
        let mut t = forward_and_backward();
        for a in &mut t.activities {
            a.start_ns *= 1_000;
            a.end_ns *= 1_000;
        }
        let events = function_events(&t, &KeyAveragesOptions::default());
        let text = events.export_stacks(StackMetric::SelfCpuTimeTotal);
        let step = "t.py(9):_<module>;t.py(3):_step";
        let linear = format!("{step};nn.Module:_Linear_0");
        let tensor_backward = format!("{step};torch/_tensor.py(570):_backward");
        let engine = format!("{tensor_backward};<built-in_method_run_backward>");
        let expected = [
            // `<module>` has no stack: no line.
            "t.py(9):_<module> 2100".to_string(),
            format!("{step} 200"),
            format!("{linear} 200"),
            format!("{linear} 400"),
            format!("{step} 200"),
            // `autograd/__init__ ... backward` is in no stack, but has its own line.
            format!("{tensor_backward} 200"),
            format!("{tensor_backward} 2600"),
            format!("{engine} 300"),
            // The backward function and the op inside it, on the forward op's stack.
            format!("{linear} 1100"),
            format!("{linear} 800"),
            format!("{engine} 800"),
        ];
        assert_eq!(text, expected.join("\n") + "\n");
        // No device time: no line.
        assert_eq!(events.export_stacks(StackMetric::SelfDeviceTimeTotal), "");
    }

    #[test]
    fn export_leaves_out_times_below_one_microsecond_and_translates_separators() {
        let mut t = Trace::new(0, 10_000);
        t.activities = vec![
            py("a b;c\td", 0, 10_000),
            op("aten::mm", 1_000, 2_000),
            op("aten::add", 3_000, 3_999),
        ];
        let events = function_events(&t, &KeyAveragesOptions::default());
        assert_eq!(
            events.export_stacks(StackMetric::SelfCpuTimeTotal),
            "a_b_c_d 1\n"
        );
    }
}
