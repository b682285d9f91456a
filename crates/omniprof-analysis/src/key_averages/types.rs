//! The engine's shared vocabulary: what the op trees, the fold, the builder and the event
//! listing hand each other (an event's place in PyTorch's order, its times, the event
//! itself, the device time summed for an op, what became of an op). Kept apart so that
//! each of them depends on these and not on one another.

use std::cmp::Reverse;

/// An event's place in PyTorch's order.
pub(super) type Key = (i64, Reverse<i64>, u64);

/// The flags of an event's row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct GroupFlags {
    pub on_device: bool,
    pub legacy: bool,
    pub user_annotation: bool,
    pub python: bool,
}

/// What one op adds to its row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct OpTimes {
    pub self_cpu_ns: i64,
    pub cpu_total_ns: i64,
    pub self_device_ns: i64,
    pub device_total_ns: i64,
    /// Memory usage (see [`super::memory`]), in bytes.
    pub cpu_memory: i64,
    pub self_cpu_memory: i64,
    pub device_memory: i64,
    pub self_device_memory: i64,
}

/// An op's times as PyTorch computes them, in float microseconds: CPU total = end − start
/// with both relative to the trace's origin and divided by 1000 first; device total = the
/// float sum of its device records and then its children's, in their order; self = total −
/// the children's totals summed in their order. Rows' averages divide their sums, so that
/// the last printed digit is PyTorch's, and rows sort by them, so that rows whose times
/// print alike come in PyTorch's order.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct PyTorchTimes {
    pub cpu_total_us: f64,
    pub device_total_us: f64,
    pub self_cpu_us: f64,
    pub self_device_us: f64,
}

/// One event as the op trees and device rows report it: its place in PyTorch's order, its
/// row, what it adds to the row, and its parent's `seq`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Emitted {
    pub first: Key,
    pub key: u32,
    pub times: OpTimes,
    pub float: PyTorchTimes,
    /// Its parent's `seq`, [`NO_PARENT`] for none (see [`Self::parent`]).
    pub parent_seq: u64,
    /// Its depth in its thread's op tree, as nested (`None` outside the tree).
    pub depth: Option<u32>,
    /// Its parent may yet be absorbed into its own parent (folding only): the listing
    /// follows it.
    pub parent_open: bool,
}

impl Emitted {
    /// Its parent's `seq`.
    pub(super) fn parent(&self) -> Option<u64> {
        (self.parent_seq != NO_PARENT).then_some(self.parent_seq)
    }
}

/// [`Emitted::parent_seq`] of an event without a parent: no event's `seq` (the largest,
/// the `[OutOfMemory]` events', count up from [`OUT_OF_MEMORY_SEQ`]). A sentinel rather than an
/// `Option` keeps the event at 144 bytes.
pub(super) const NO_PARENT: u64 = u64::MAX;

/// `seq` of the `[memory]` events made of memory records outside every host event (plus
/// the record's ordinal), and of `[OutOfMemory]` events: after every other event, as
/// PyTorch appends them after the others before its stable sort.
pub(super) const MEMORY_SEQ: u64 = 1 << 62;
pub(super) const OUT_OF_MEMORY_SEQ: u64 = 1 << 63;

/// Device time summed in ns, and as PyTorch sums it (float microseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct DeviceTime {
    /// Saturating sum of durations, ns.
    pub ns: i64,
    /// Float sum of the same durations in microseconds, in arrival order.
    pub us: f64,
}

impl DeviceTime {
    /// One more piece of device work.
    pub(super) fn add(&mut self, ns: i64, us: f64) {
        self.ns = self.ns.saturating_add(ns);
        self.us += us;
    }
}

/// What became of an op that was its parent's same-named first child, and which device work
/// each op received, for the listing of the events whose parent or host op it is (they may
/// be final before their parent's fate is known).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    /// The op (its `seq`) may be absorbed into its parent.
    Held(u64),
    /// It got a sibling: it stays.
    Kept(u64),
    /// It was absorbed: its children and device work are `into`'s.
    Absorbed { op: u64, into: u64 },
    /// The op is final, with the device work linked to its correlation (`linked`) and
    /// launched by the calls it encloses (`launches`, their correlations); `counted` is false
    /// when it absorbed a child, whose device time replaced its own.
    Receives {
        op: u64,
        linked: Option<u64>,
        launches: Vec<u64>,
        counted: bool,
    },
}
