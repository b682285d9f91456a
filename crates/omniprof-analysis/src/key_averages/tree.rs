//! One thread's op tree: nesting by interval containment, PyTorch's collapse of a parent and
//! its only same-named child, and the self and total times of every op.
//!
//! Nothing is built as a tree: ops sorted by (start, −end) list every parent before its
//! descendants, so a parent index per op is enough, and one backward pass sums children into
//! parents.

use std::cmp::Reverse;

use super::types::{DeviceTime, OpTimes, PyTorchTimes};
use crate::attribution::Receivers;
use crate::frame_tree::MAX_STACK_DEPTH;
use omniprof_trace::FastMap;

/// No parent.
const ROOT: u32 = u32::MAX;

/// A host op as the summary keeps it: 80 bytes, whatever the event carried.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct HostOp {
    pub start_ns: i64,
    pub end_ns: i64,
    /// The op's device time: stub records plus device work linked to it.
    pub device_ns: i64,
    /// The same device time summed as PyTorch sums it (see [`PyTorchTimes`]).
    pub device_us: f64,
    /// The id device work launched from the op is linked by (0 = none); for a
    /// [`call`](Self::call), its runtime correlation id.
    pub correlation: u64,
    /// The position in the input, to keep ties in input order.
    pub seq: u64,
    /// The row key (name, shapes, flags), resolved by the caller.
    pub key: u32,
    pub name: u32,
    /// Device time came from the stubs path: totals do not include the children's.
    pub legacy: bool,
    /// Still running when the trace was taken (`"finished": false`).
    pub unfinished: bool,
    /// A runtime or driver call: it receives no device work; work that names its runtime
    /// correlation but no host op goes to the op enclosing it ([`attribute_launches`]).
    pub call: bool,
    /// An `[OutOfMemory]` record: its memory usage is its own, not the records around it.
    pub out_of_memory: bool,
    /// The CPU and device memory allocated during the op (see [`super::memory`]).
    pub cpu_memory: i64,
    pub device_memory: i64,
}

/// Nanoseconds as PyTorch's microseconds: relative to `origin_ns`, then divided.
pub(super) fn relative_us(ns: i64, origin_ns: i64) -> f64 {
    ns.saturating_sub(origin_ns) as f64 / 1000.0
}

/// The order PyTorch lists events in: by start, longer first, then input order.
pub(super) fn order_key(start_ns: i64, end_ns: i64, seq: u64) -> (i64, Reverse<i64>, u64) {
    (start_ns, Reverse(end_ns), seq)
}

/// Adds device work that has no `External id` to the host ops that launched it, as HTA
/// does: `launched` holds its time by runtime correlation id, and the innermost op of this
/// thread that encloses the call with that id (a call itself never) receives it
/// ([`Receivers`]); `received` is told each (receiver's `seq`, call's correlation).
pub(super) fn attribute_launches(
    ops: &mut [HostOp],
    launched: &FastMap<u64, DeviceTime>,
    mut received: impl FnMut(u64, u64),
) {
    ops.sort_unstable_by_key(|op| order_key(op.start_ns, op.end_ns, op.seq));
    let mut receivers = Receivers::default();
    for i in 0..ops.len() {
        let op = ops[i];
        let receiver = receivers.take(i, op.start_ns, op.end_ns, op.call);
        let Some(&time) = launched.get(&op.correlation).filter(|_| op.call) else {
            continue;
        };
        if let Some(o) = receiver {
            received(ops[o].seq, op.correlation);
            ops[o].device_ns = ops[o].device_ns.saturating_add(time.ns);
            ops[o].device_us += time.us;
        }
    }
}

/// Leaves out the ops of one thread that the folder leaves out for nesting too deep (see
/// [`super::fold`]): in PyTorch's order, an op that starts while [`MAX_STACK_DEPTH`] ops are
/// open around it or start with it before it. Returns how many. Unfinished ops count as
/// running to `window_end`, as the folder takes them.
pub(super) fn leave_out_too_deep(ops: &mut Vec<HostOp>, window_end: i64) -> u64 {
    let end = |op: &HostOp| {
        if op.unfinished {
            op.end_ns.max(window_end)
        } else {
            op.end_ns
        }
    };
    ops.sort_unstable_by_key(|op| order_key(op.start_ns, end(op), op.seq));
    // The ends of the open ops, as the folder's stack holds them.
    let mut open: Vec<i64> = Vec::new();
    let mut keep = vec![true; ops.len()];
    let mut i = 0;
    while i < ops.len() {
        let start = ops[i].start_ns;
        let together = ops[i..]
            .iter()
            .take_while(|op| op.start_ns == start)
            .count();
        while open.last().is_some_and(|&e| e <= start) {
            open.pop();
        }
        let room = MAX_STACK_DEPTH.saturating_sub(open.len());
        for (k, op) in ops[i..i + together].iter().enumerate() {
            if k >= room {
                keep[i + k] = false;
                continue;
            }
            while open.last().is_some_and(|&e| e <= start) {
                open.pop();
            }
            // (An async op is not pushed.)
            if open.last().is_none_or(|&e| end(op) <= e) {
                open.push(end(op));
            }
        }
        i += together;
    }
    let left_out = keep.iter().filter(|&&k| !k).count();
    if left_out > 0 {
        let mut keep = keep.into_iter();
        ops.retain(|_| keep.next().unwrap_or(true));
    }
    left_out as u64
}

/// Nests the ops of one thread, collapses same-named single children and reports each
/// remaining op with its times, its parent's `seq` and its depth as nested (before the
/// collapse; `None` when async) to `emit` (in no particular order). Returns each removed
/// op's `seq` with the `seq` of the op that absorbed it and of the op it nested in (whose
/// own device time its own replaced: in a chain of three, the middle one's is lost).
///
/// - An op is the child of the innermost op that contains it (`[start, end]` inside the
///   parent's; an op starting exactly at the parent's end is not inside).
/// - An op that starts inside an open op but ends after it closes that op (which takes no
///   later children) and nests in the innermost open op that contains it, as PyTorch builds
///   its tree (`EventList._build_tree`): a range begun in a Python call that returns before
///   it ends (`record_function`'s `__enter__`) is that way its caller's child. Children
///   that overlap each other can then leave their parent a negative self time, as in
///   PyTorch's table.
/// - A child that is its parent's only child and has the parent's name is removed: the
///   parent adopts its children and takes its device records (replacing its own, as PyTorch
///   does: a stub record of the parent already spans the child's).
/// - CPU total = end − start; self CPU = total − children's totals. Device total = own
///   device time + children's device totals (own only for legacy ops); self device = device
///   total − children's device totals. Self memory = memory − children's memory.
pub(super) fn summarize_thread(
    ops: &mut [HostOp],
    origin_ns: i64,
    mut emit: impl FnMut(&HostOp, OpTimes, PyTorchTimes, Option<u64>, u32),
) -> Vec<(u64, u64, u64)> {
    ops.sort_unstable_by_key(|op| order_key(op.start_ns, op.end_ns, op.seq));
    let n = ops.len();
    let mut parent = vec![ROOT; n];
    // As nested, before the collapse below (which the folder decides only after it has
    // reported the children: see `fold`).
    let mut depth = vec![0u32; n];
    let mut stack: Vec<u32> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        // What ended by its start closes; so does an open op it ends after, which contains
        // it no more than what follows (PyTorch drops it from the stack).
        while stack.last().is_some_and(|&top| {
            let top_end = ops[top as usize].end_ns;
            top_end <= op.start_ns || op.end_ns > top_end
        }) {
            stack.pop();
        }
        if let Some(&top) = stack.last() {
            parent[i] = top;
            depth[i] = depth[top as usize] + 1;
        }
        // Indices fit: a thread with 2^32 ops would not fit in memory as `HostOp`s either.
        stack.push(i as u32);
    }

    let mut children = vec![0u32; n];
    for &p in parent.iter().filter(|&&p| p != ROOT) {
        children[p as usize] += 1;
    }
    // Parents come first, so by the time an op is examined its parent's children are
    // final, and a removed parent already points at the op that adopted it.
    let mut removed = vec![false; n];
    let mut absorbed = Vec::new();
    for i in 0..n {
        let mut p = parent[i];
        if p == ROOT {
            continue;
        }
        let nested_in = p;
        if removed[p as usize] {
            p = parent[p as usize];
            parent[i] = p;
        }
        let pu = p as usize;
        if ops[pu].name == ops[i].name && children[pu] == 1 {
            removed[i] = true;
            absorbed.push((ops[i].seq, ops[pu].seq, ops[nested_in as usize].seq));
            children[pu] = children[i];
            ops[pu].device_ns = ops[i].device_ns;
            ops[pu].device_us = ops[i].device_us;
        }
    }

    // PyTorch sums an op's children's float totals in their order (by start), so each
    // op's children are listed, after the collapse, in that order.
    let children_of = ChildLists::new(&parent, &removed);
    let mut cpu_us = vec![0f64; n];
    let mut device_us = vec![0f64; n];
    let mut child_cpu = vec![0i64; n];
    let mut child_device = vec![0i64; n];
    let mut child_cpu_memory = vec![0i64; n];
    let mut child_device_memory = vec![0i64; n];
    for i in (0..n).rev() {
        if removed[i] {
            continue;
        }
        let op = &ops[i];
        let cpu_total_ns = op.end_ns.saturating_sub(op.start_ns);
        let cpu_total_us = relative_us(op.end_ns, origin_ns) - relative_us(op.start_ns, origin_ns);
        let children_device = child_device[i];
        let (children_cpu_us, children_device_us) = children_of
            .of(i)
            .iter()
            .fold((0.0, 0.0), |(cpu, device), &c| {
                (cpu + cpu_us[c as usize], device + device_us[c as usize])
            });
        let (device_total_ns, device_total_us) = if op.legacy {
            (op.device_ns, op.device_us)
        } else {
            (
                op.device_ns.saturating_add(children_device),
                op.device_us + children_device_us,
            )
        };
        (cpu_us[i], device_us[i]) = (cpu_total_us, device_total_us);
        let p = parent[i];
        if p != ROOT {
            // Saturating: a hostile trace may hold durations near `i64::MAX`.
            let p = p as usize;
            child_cpu[p] = child_cpu[p].saturating_add(cpu_total_ns);
            child_device[p] = child_device[p].saturating_add(device_total_ns);
            child_cpu_memory[p] = child_cpu_memory[p].saturating_add(op.cpu_memory);
            child_device_memory[p] = child_device_memory[p].saturating_add(op.device_memory);
        }
        emit(
            op,
            OpTimes {
                self_cpu_ns: cpu_total_ns - child_cpu[i],
                cpu_total_ns,
                self_device_ns: device_total_ns - children_device,
                device_total_ns,
                cpu_memory: op.cpu_memory,
                self_cpu_memory: op.cpu_memory.saturating_sub(child_cpu_memory[i]),
                device_memory: op.device_memory,
                self_device_memory: op.device_memory.saturating_sub(child_device_memory[i]),
            },
            PyTorchTimes {
                cpu_total_us,
                device_total_us,
                self_cpu_us: cpu_total_us - children_cpu_us,
                self_device_us: device_total_us - children_device_us,
            },
            (p != ROOT).then(|| ops[p as usize].seq),
            depth[i],
        );
    }
    absorbed
}

/// Each op's children (indices of ops that were not removed), in index order: a list per
/// op laid end to end.
struct ChildLists {
    /// Where each op's list begins in `children`; one more entry, where the last ends.
    starts: Vec<u32>,
    children: Vec<u32>,
}

impl ChildLists {
    fn new(parent: &[u32], removed: &[bool]) -> Self {
        let n = parent.len();
        let has_parent = |i: usize| !removed[i] && parent[i] != ROOT;
        let mut starts = vec![0u32; n + 1];
        for i in (0..n).filter(|&i| has_parent(i)) {
            starts[parent[i] as usize + 1] += 1;
        }
        for i in 0..n {
            starts[i + 1] += starts[i];
        }
        let mut next = starts.clone();
        let mut children = vec![0u32; starts[n] as usize];
        for i in (0..n).filter(|&i| has_parent(i)) {
            let slot = &mut next[parent[i] as usize];
            children[*slot as usize] = i as u32;
            *slot += 1;
        }
        ChildLists { starts, children }
    }

    fn of(&self, i: usize) -> &[u32] {
        &self.children[self.starts[i] as usize..self.starts[i + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: u32, start_ns: i64, end_ns: i64, device_ns: i64) -> HostOp {
        HostOp {
            start_ns,
            end_ns,
            device_ns,
            device_us: device_ns as f64 / 1000.0,
            correlation: 0,
            seq: 0,
            key: name,
            name,
            legacy: false,
            unfinished: false,
            call: false,
            out_of_memory: false,
            cpu_memory: 0,
            device_memory: 0,
        }
    }

    /// (name, start) → times, sorted.
    fn run(ops: &mut [HostOp]) -> Vec<((u32, i64), OpTimes)> {
        for (i, op) in ops.iter_mut().enumerate() {
            op.seq = i as u64;
        }
        let mut out = Vec::new();
        summarize_thread(ops, 0, |op, t, _, _, _| {
            out.push(((op.name, op.start_ns), t))
        });
        out.sort_by_key(|(k, _)| *k);
        out
    }

    fn times(self_cpu: i64, total: i64, self_dev: i64, dev: i64) -> OpTimes {
        OpTimes {
            self_cpu_ns: self_cpu,
            cpu_total_ns: total,
            self_device_ns: self_dev,
            device_total_ns: dev,
            ..OpTimes::default()
        }
    }

    #[test]
    fn nesting_sums_children_into_parents() {
        // 0 [0, 100] ⊃ 1 [10, 40] ⊃ 2 [20, 30]; 3 [40, 90] starts at 1's end.
        let mut ops = [
            op(0, 0, 100, 0),
            op(2, 20, 30, 7),
            op(1, 10, 40, 5),
            op(3, 40, 90, 0),
        ];
        assert_eq!(
            run(&mut ops),
            [
                ((0, 0), times(20, 100, 0, 12)),
                ((1, 10), times(20, 30, 5, 12)),
                ((2, 20), times(10, 10, 7, 7)),
                ((3, 40), times(50, 50, 0, 0)),
            ]
        );
    }

    #[test]
    fn an_op_that_ends_after_an_open_op_closes_it_as_pytorch_does() {
        // 1 [10, 150] starts inside 0 [0, 100] and ends after it: 0 closes, and 2 [50, 60]
        // is 1's child, as in PyTorch's tree.
        let mut ops = [op(0, 0, 100, 0), op(1, 10, 150, 3), op(2, 50, 60, 4)];
        let out = run(&mut ops);
        assert_eq!(out[0].1, times(100, 100, 0, 0));
        assert_eq!(out[1].1, times(130, 140, 3, 7));
        assert_eq!(out[2].1, times(10, 10, 4, 4));
        let mut placed = Vec::new();
        summarize_thread(&mut ops, 0, |op, _, _, parent, depth| {
            placed.push((op.name, parent, depth));
        });
        placed.sort_unstable();
        assert_eq!(placed, [(0, None, 0), (1, None, 0), (2, Some(1), 1)]);
    }

    #[test]
    fn overlapping_children_can_leave_their_parent_a_negative_self_time_as_in_pytorch() {
        // 1 [0, 60] and 2 [50, 100] are both children of 0 [0, 100]: 2 closes 1.
        let mut ops = [op(0, 0, 100, 0), op(1, 0, 60, 0), op(2, 50, 100, 0)];
        let out = run(&mut ops);
        assert_eq!(out[0].1, times(-10, 100, 0, 0));
        assert_eq!(out[1].1, times(60, 60, 0, 0));
        assert_eq!(out[2].1, times(50, 50, 0, 0));
    }

    #[test]
    fn an_only_same_named_child_collapses_into_its_parent() {
        // sum [0, 100] ⊃ sum [5, 95] ⊃ {a [10, 20], b [30, 40]}; the inner sum's device
        // record moves up.
        let mut ops = [
            op(0, 0, 100, 0),
            op(0, 5, 95, 9),
            op(1, 10, 20, 1),
            op(2, 30, 40, 0),
        ];
        assert_eq!(
            run(&mut ops),
            [
                ((0, 0), times(80, 100, 9, 10)),
                ((1, 10), times(10, 10, 1, 1)),
                ((2, 30), times(10, 10, 0, 0)),
            ]
        );
    }

    #[test]
    fn chains_collapse_in_one_pass_but_siblings_do_not() {
        // x ⊃ x ⊃ x (a chain) collapses to one; y ⊃ {y, y} keeps all three.
        let mut ops = [
            op(0, 0, 100, 0),
            op(0, 10, 90, 0),
            op(0, 20, 80, 0),
            op(1, 200, 300, 0),
            op(1, 210, 220, 0),
            op(1, 230, 240, 0),
        ];
        let out = run(&mut ops);
        let names: Vec<(u32, i64)> = out.iter().map(|(k, _)| *k).collect();
        assert_eq!(names, [(0, 0), (1, 200), (1, 210), (1, 230)]);
        assert_eq!(out[0].1, times(100, 100, 0, 0));
        assert_eq!(out[1].1, times(80, 100, 0, 0));
    }

    #[test]
    fn legacy_totals_keep_their_own_record() {
        // Stub records: the parent's 50 already spans the child's 30.
        let mut ops = [op(0, 0, 100, 50), op(1, 10, 60, 30)];
        for o in &mut ops {
            o.legacy = true;
        }
        let out = run(&mut ops);
        assert_eq!(out[0].1, times(50, 100, 20, 50));
        assert_eq!(out[1].1, times(50, 50, 30, 30));
    }

    #[test]
    fn identical_intervals_nest_in_input_order() {
        let mut ops = [op(0, 0, 10, 0), op(1, 0, 10, 0)];
        let out = run(&mut ops);
        assert_eq!(out[0].1, times(0, 10, 0, 0));
        assert_eq!(out[1].1, times(10, 10, 0, 0));
    }
}
