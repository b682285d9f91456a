//! The events the summary adds to its rows, listed one by one as it adds them
//! ([`KeyAveragesBuilder::list_events`](crate::KeyAveragesBuilder::list_events)): each a
//! [`SummedEvent`] (its row's name and flags, its self and total host and device time, its
//! parent), for consumers that sum the rows themselves, such as the Parquet tables that SQL
//! engines query. The listing reuses the summary's op trees and device attribution, so that
//! a `GROUP BY name` over the events gives the summary's rows.
//!
//! [`Listing`] gives each event a parent that is itself listed. When folding, an op that is
//! its parent's first child and has its name may be absorbed into that parent (PyTorch's
//! collapse), which is decided only when the parent ends; its own children are final, and
//! may be listed, before that. So the events whose parent's fate is open wait here, and go out with the parent that stays: the op itself when it
//! gets a sibling, else the op that absorbed it. What waits is the children of ops whose
//! fate is open (the folder holds those ops, and a sum per such child, too).
//!
//! Device work is listed with its host op ([`SummedEvent::host_op`]), which is known once
//! that op is final ([`Fate::Receives`]; the summary holds a sum per correlation id until
//! then, and its events wait here as long), and moves with it when it is absorbed.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use super::types::{Emitted, Fate, GroupFlags};
use crate::attribution::Launcher;
use omniprof_trace::FastMap;

/// One event the summary added to a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummedEvent {
    /// The event's id: the activity's place among the activities the summary took, from 0,
    /// in input order ([`KeyAveragesBuilder::next_event_id`](crate::KeyAveragesBuilder::next_event_id)
    /// before adding it); a `[memory]` event made of a record outside every op, or an
    /// `[OutOfMemory]` event, has an id of 2^62 or more.
    pub id: u64,
    /// The id of the listed host op it nests in (host ops only; `None` at the top and for
    /// async ops). Below a same-named only child that its parent absorbed (PyTorch's
    /// collapse), the op that absorbed it.
    pub parent: Option<u64>,
    /// Its depth in its thread's op tree (0 at the top; `None` for device work, async ops
    /// and memory records outside every op), as the ops nest: a same-named only child
    /// absorbed into its parent still counts, so below one the depth is one more than
    /// following [`Self::parent`] counts.
    pub depth: Option<u32>,
    /// Device work: the id of the host op the summary adds its time to (attributed as
    /// `omniprof summary` attributes it: its `External id`, else its launch's correlation),
    /// `None` when none takes it. When several ops share the correlation id, each counts it,
    /// and this is one of them.
    pub host_op: Option<u64>,
    /// Its row's name (`ProfilerStep#3` as `ProfilerStep*`).
    pub name: Arc<str>,
    /// Device work (a row of device time only).
    pub on_device: bool,
    /// Timed through the profiler stubs (`device_time_us`): its device total is that record.
    pub legacy: bool,
    /// A `user_annotation` range.
    pub user_annotation: bool,
    /// A `python_function` event (a row only with `include_python_functions`).
    pub python: bool,
    /// PyTorch's `is_async` (see [`FunctionEvent::is_async`](super::FunctionEvent)): false.
    pub is_async: bool,
    /// Its start, in ns since the Unix epoch.
    pub start_ns: i64,
    /// Its end as the summary took it (an unfinished op ends at the window's end).
    pub end_ns: i64,
    /// Host time less its children's (PyTorch's self CPU time), in ns.
    pub self_host_ns: i64,
    /// Host time (PyTorch's CPU total), in ns.
    pub host_total_ns: i64,
    /// Device time attributed to it, in ns (device work: its duration).
    pub self_device_ns: i64,
    /// Its device time and its children's, in ns.
    pub device_total_ns: i64,
}

impl SummedEvent {
    pub(super) fn new(event: &Emitted, name: Arc<str>, flags: GroupFlags) -> Self {
        let (start_ns, end, id) = event.first;
        Self {
            id,
            parent: event.parent(),
            depth: event.depth,
            host_op: None,
            name,
            on_device: flags.on_device,
            legacy: flags.legacy,
            user_annotation: flags.user_annotation,
            python: flags.python,
            is_async: false,
            start_ns,
            end_ns: end.0,
            self_host_ns: event.times.self_cpu_ns,
            host_total_ns: event.times.cpu_total_ns,
            self_device_ns: event.times.self_device_ns,
            device_total_ns: event.times.device_total_ns,
        }
    }
}

/// The events listed and not yet taken, and those waiting for their parent's fate.
#[derive(Default)]
pub(super) struct Listing {
    ready: Vec<SummedEvent>,
    /// By the `seq` of an op that may yet be absorbed: the events whose parent it is.
    open: FastMap<u64, Vec<SummedEvent>>,
    /// Absorbed op → the op that absorbed it, for children still to come (a final event
    /// may wait in the folder for an earlier one of its row).
    absorbed: FastMap<u64, u64>,
    /// `absorbed`'s keys, so that forgetting a few does not clear the whole table's room.
    absorbed_ops: Vec<u64>,
    /// Device work whose host op is not final yet (its slots in `device_events`), by what
    /// leads to it.
    device: FastMap<Launcher, Slots>,
    /// The device events in `device`, in reused slots (`None`: free): a step's device work
    /// may wait, and the table then grows by moving slots, not 120-byte events.
    device_events: Vec<Option<SummedEvent>>,
    free: Vec<u32>,
}

/// The slots of the device work one id leads to: nearly always one kernel or copy, kept
/// without a vector of its own.
enum Slots {
    One(u32),
    Many(Vec<u32>),
}

impl Slots {
    fn as_slice(&self) -> &[u32] {
        match self {
            Slots::One(slot) => std::slice::from_ref(slot),
            Slots::Many(slots) => slots,
        }
    }
}

impl Listing {
    /// What became of a same-named first child (given before the events final with it).
    pub(super) fn fate(&mut self, fate: Fate) {
        match fate {
            Fate::Held(op) => {
                self.open.insert(op, Vec::new());
            }
            Fate::Kept(op) => {
                if let Some(children) = self.open.remove(&op) {
                    self.ready.extend(children);
                }
            }
            Fate::Absorbed { op, into } => {
                self.absorbed.insert(op, into);
                self.absorbed_ops.push(op);
                // Its children and its device work (`place` follows `absorbed`).
                for e in self.open.remove(&op).unwrap_or_default() {
                    self.place(e);
                }
            }
            Fate::Receives {
                op,
                linked,
                launches,
                counted,
            } => {
                for key in linked.map(Launcher::External).into_iter() {
                    self.receive(op, key, counted);
                }
                for c in launches {
                    self.receive(op, Launcher::Runtime(c), counted);
                }
            }
        }
    }

    /// Op `op` is final and received the device work that `key` leads to (counted in its
    /// device time, unless it absorbed a child whose time replaced its own).
    pub(super) fn receive(&mut self, op: u64, key: Launcher, counted: bool) {
        let host_op = counted.then_some(op);
        let Some(slots) = self.device.remove(&key) else {
            return;
        };
        for &slot in slots.as_slice() {
            if let Some(mut e) = self.take_device(slot) {
                e.host_op = host_op;
                self.place(e);
            }
        }
    }

    /// The device event in `slot`, which is freed.
    fn take_device(&mut self, slot: u32) -> Option<SummedEvent> {
        let e = self.device_events.get_mut(slot as usize)?.take();
        self.free.push(slot);
        e
    }

    /// Device work: listed once its host op is final (at once when nothing leads to one).
    pub(super) fn push_device(&mut self, e: SummedEvent, launcher: Option<Launcher>) {
        match launcher {
            Some(key) => {
                let slot = match self.free.pop() {
                    Some(slot) => {
                        self.device_events[slot as usize] = Some(e);
                        slot
                    }
                    None => {
                        self.device_events.push(Some(e));
                        (self.device_events.len() - 1) as u32
                    }
                };
                match self.device.entry(key) {
                    Entry::Vacant(v) => {
                        v.insert(Slots::One(slot));
                    }
                    Entry::Occupied(mut o) => match o.get_mut() {
                        Slots::One(first) => {
                            let first = *first;
                            o.insert(Slots::Many(vec![first, slot]));
                        }
                        Slots::Many(slots) => slots.push(slot),
                    },
                }
            }
            None => self.ready.push(e),
        }
    }

    /// `op`, or the op that absorbed it.
    fn follow(&self, mut op: u64) -> u64 {
        if self.absorbed.is_empty() {
            return op;
        }
        while let Some(&into) = self.absorbed.get(&op) {
            op = into;
        }
        op
    }

    /// One more event: listed now, or when its parent's fate is known (`parent_open`: the
    /// parent was an only child with its own parent's name when the event was final).
    pub(super) fn push(&mut self, e: SummedEvent, parent_open: bool) {
        if parent_open {
            self.place(e);
        } else {
            self.ready.push(e);
        }
    }

    /// An event whose parent or host op may have been absorbed, or be: it goes to the op
    /// that stays, and waits while that op's fate is open.
    fn place(&mut self, mut e: SummedEvent) {
        e.parent = e.parent.map(|p| self.follow(p));
        e.host_op = e.host_op.map(|p| self.follow(p));
        if let Some(waiting) = e.parent.or(e.host_op).and_then(|p| self.open.get_mut(&p)) {
            waiting.push(e);
            return;
        }
        self.ready.push(e);
    }

    /// Every final event has been pushed: no child of an absorbed op is still to come.
    /// (Inline: the builder tells it after nearly every item, when mostly no op was
    /// absorbed since.)
    #[inline]
    pub(super) fn forget_absorbed(&mut self) {
        if !self.absorbed_ops.is_empty() {
            self.forget_absorbed_ops();
        }
    }

    fn forget_absorbed_ops(&mut self) {
        for op in self.absorbed_ops.drain(..) {
            self.absorbed.remove(&op);
        }
    }

    /// The events listed since the last call.
    pub(super) fn drain(&mut self) -> std::vec::Drain<'_, SummedEvent> {
        self.ready.drain(..)
    }

    /// Every event not yet taken (at the end, no fate is open, and device work still
    /// waiting has no host op).
    pub(super) fn finish(mut self) -> Vec<SummedEvent> {
        for (_, slots) in self.device.drain() {
            for &slot in slots.as_slice() {
                self.ready.extend(
                    self.device_events
                        .get_mut(slot as usize)
                        .and_then(Option::take),
                );
            }
        }
        for (_, children) in self.open.drain() {
            self.ready.extend(children);
        }
        self.ready
    }
}
