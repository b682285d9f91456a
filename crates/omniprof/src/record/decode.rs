//! The decoder: turns the records a session's threads wrote into activities (ranges paired
//! with their ends, wherever those were written; args, autograd links and Python call
//! stacks attached), once the session has stopped.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use super::autograd;
use super::buffer;
use super::name::{self, Role};
use super::state::HostSession;
use super::word::{self, KIND_END, KIND_INSTANT, KIND_OP, KIND_USER};
use crate::clock::TickConverter;
use crate::keys::arg;
use crate::FastMap;
use crate::Value;
use crate::{Activity, ActivityType};
use crate::{ThreadRow, Window};

/// The keys of the args a drain adds, made once a drain: a key made for each arg was an
/// allocation to make and one to free for most activities (every op with autograd's
/// numbers, every range with a call stack, every Python frame).
struct ArgKeys {
    call_stack: Arc<str>,
    python_id: Arc<str>,
    python_parent_id: Arc<str>,
    python_module_id: Arc<str>,
    finished: Arc<str>,
    sequence_number: Arc<str>,
    fwd_thread_id: Arc<str>,
}

impl ArgKeys {
    fn new() -> Self {
        Self {
            call_stack: arg::CALL_STACK.into(),
            python_id: arg::PYTHON_ID.into(),
            python_parent_id: arg::PYTHON_PARENT_ID.into(),
            python_module_id: arg::PYTHON_MODULE_ID.into(),
            finished: arg::FINISHED.into(),
            sequence_number: arg::SEQUENCE_NUMBER.into(),
            fwd_thread_id: arg::FWD_THREAD_ID.into(),
        }
    }
}

fn correlation_id(thread_index: u32, seq: u32) -> u64 {
    ((thread_index as u64) << 32) | seq as u64
}

/// What the recorder hands a session at stop.
pub(crate) struct HostRecording {
    pub(crate) activities: Vec<Activity>,
    pub(crate) threads: Vec<ThreadRow>,
    pub(crate) dropped_events: u64,
    pub(crate) unfinished_ranges: u64,
    /// Ranges whose name did not fit in the name table (named `<name table full>`).
    pub(crate) dropped_names: u64,
}

/// Drains `session` into activities on process `pid`, within `window`. Ranges still open at
/// the stop are closed at the window's end and marked `"finished": false`; a range whose end
/// was dropped past the per-thread cap is left out (its end counted in `dropped_events`), as
/// its duration is unknown.
pub(crate) fn collect(
    session: HostSession,
    pid: i64,
    conv: &TickConverter,
    window: Window,
) -> HostRecording {
    let resolve = name::resolver();
    // The clamp only absorbs the calibration's rounding: every record lies between the
    // session's start and its stop tick.
    let time = |tick| conv.to_unix_ns(tick).clamp(window.start_ns, window.end_ns);
    let drained = buffer::drain(session.state, session.floor_tick, session.stop_tick);
    // One activity per begin or instant record: reserved up front, so building the trace
    // never copies it to grow.
    let events = drained
        .iter()
        .flat_map(|t| &t.records)
        .filter(|&&(w, _)| word::kind(w) != KIND_END)
        .count();
    // Ends recorded by other threads than the range's own, by (owning thread, sequence).
    let mut foreign_ends: FastMap<(u32, u32), u64> = FastMap::default();
    for thread in &drained {
        for &(w, tick) in &thread.records {
            if word::kind(w) == KIND_END {
                if let Some(owner) = word::foreign_owner(w) {
                    foreign_ends.insert((owner, word::seq(w)), tick);
                }
            }
        }
    }
    // Ranges whose end was dropped past the cap, by (owning thread, sequence): their
    // duration is unknown, so they are left out (each already counted as one dropped event,
    // its end) rather than closed at the window's end.
    let mut lost_ends: FastMap<(u32, u32), ()> = FastMap::default();
    for thread in &drained {
        for &w in &thread.dropped_ends {
            let owner = word::foreign_owner(w).unwrap_or(thread.index);
            lost_ends.insert((owner, word::seq(w)), ());
        }
    }
    let mut out = HostRecording {
        activities: Vec::with_capacity(events),
        threads: Vec::new(),
        dropped_events: 0,
        unfinished_ranges: 0,
        dropped_names: name::dropped_names() - session.dropped_names,
    };
    let mut left_out = Vec::new();
    let mut stacks = CallStacks::default();
    let mut links = autograd::Links::default();
    // PyTorch numbers Python frames from 1 across the trace.
    let mut python_ids = 0;
    let keys = ArgKeys::new();
    for mut thread in drained {
        // A frame begun at the window's start after the thread recorded other things
        // (`PythonFrame::begin_at_window_start`) goes back to its place, ahead of them; a
        // stable sort keeps the order of records of the same tick.
        if !thread.records.is_sorted_by_key(|&(_, tick)| tick) {
            thread.records.sort_by_key(|&(_, tick)| tick);
        }
        out.dropped_events += thread.dropped;
        if thread.records.is_empty() {
            continue;
        }
        out.threads.push(ThreadRow {
            pid,
            tid: thread.tid,
            name: format!("thread {} ({})", thread.tid, thread.name),
            sort_index: thread.tid,
        });
        let mut args: FastMap<u32, Vec<(Arc<str>, Value)>> = FastMap::default();
        for (seq, key, value) in thread.args {
            args.entry(seq).or_default().push((key, value));
        }
        // An op's unpacked args become its list as they are, unless it has args of
        // another kind too (a copy and an allocation less for each op).
        thread.packed.unpack(|seq, unpacked| match args.entry(seq) {
            Entry::Occupied(mut held) => held.get_mut().extend(unpacked),
            Entry::Vacant(free) => {
                free.insert(unpacked);
            }
        });
        let mut autograd = buffer::autograd_by_seq(thread.autograd);
        // Ranges begun and not yet ended. Guards end in reverse order of their beginnings
        // almost always, so the one an end record closes is found at or near the top.
        let mut open: Vec<Open> = Vec::new();
        // The Python frames among them, by sequence number: what begins has the innermost as
        // its caller. Kept apart because a range may outlive the frame it began in (a step's
        // range opened inside `step()` lasts the whole step), and what begins after that
        // frame returned is not called from it.
        let mut frames: Vec<(u32, Frames)> = Vec::new();
        for &(w, tick) in &thread.records {
            let seq = word::seq(w);
            let kind = word::kind(w);
            if kind == KIND_END {
                if word::foreign_owner(w).is_some() {
                    // A foreign end: it closes a range of another thread, below.
                    continue;
                }
                if let Some(at) = open.iter().rposition(|o| o.seq == seq) {
                    let a = &mut out.activities[open.remove(at).index];
                    a.end_ns = time(tick).max(a.start_ns);
                    if a.kind == ActivityType::PythonFunction {
                        if let Some(at) = frames.iter().rposition(|&(s, _)| s == seq) {
                            frames.remove(at);
                        }
                    }
                }
                continue;
            }
            let t = time(tick);
            let (name, role) = resolve(word::name_id(w));
            let kind_type = match (kind, role) {
                (_, Role::PythonFunction | Role::PythonModule(_)) => ActivityType::PythonFunction,
                (KIND_OP, _) => ActivityType::CpuOp,
                (KIND_USER, _) => ActivityType::UserAnnotation,
                _ => ActivityType::CpuInstantEvent,
            };
            let mut a = Activity::new(kind_type, name, pid, thread.tid, t, t);
            a.correlation = correlation_id(thread.index, seq);
            if !args.is_empty() {
                a.args = args.remove(&seq).unwrap_or_default();
            }
            // As for args: most threads have none, and a lookup per record would hash anyway.
            let numbers = if autograd.is_empty() {
                None
            } else {
                autograd.remove(&seq)
            };
            let outer = frames.last().map_or(Frames::OUTSIDE, |&(_, f)| f);
            let stack = match role {
                Role::Range => stacks.call_stack(outer.node),
                _ => None,
            };
            // A list that holds unpacked args already grows once for what follows, to its
            // size, not by doubling. An empty one is left to grow: starting it at the exact
            // size measured slower (`record/drain_ops_autograd`, docs/benchmarks.md).
            if !a.args.is_empty() {
                let room = 2 * usize::from(numbers.is_some()) + usize::from(stack.is_some());
                a.args.reserve_exact(room);
            }
            if let Some(numbers) = numbers {
                a.args
                    .extend(numbers.args(&keys.sequence_number, &keys.fwd_thread_id));
                links.add(out.activities.len(), numbers);
            }
            match role {
                Role::Range => {
                    if let Some(stack) = stack {
                        a.args.push((keys.call_stack.clone(), Value::Str(stack)));
                    }
                }
                Role::PythonFunction | Role::PythonModule(_) => {
                    // A frame is known by its Python id; no device work links to it.
                    a.correlation = 0;
                    python_ids += 1;
                    a.args
                        .push((keys.python_id.clone(), Value::UInt(python_ids)));
                    if outer.python_id != 0 {
                        a.args
                            .push((keys.python_parent_id.clone(), Value::UInt(outer.python_id)));
                    }
                    if let Role::PythonModule(id) = role {
                        a.args
                            .push((keys.python_module_id.clone(), Value::UInt(u64::from(id))));
                    }
                    if kind != KIND_INSTANT {
                        let node = stacks.enter(outer.node, &a.name);
                        let python_id = python_ids;
                        frames.push((seq, Frames { node, python_id }));
                    }
                }
            }
            if kind != KIND_INSTANT {
                open.push(Open {
                    seq,
                    index: out.activities.len(),
                });
            }
            out.activities.push(a);
        }
        for Open { seq, index } in open {
            let a = &mut out.activities[index];
            if let Some(tick) = foreign_ends.remove(&(thread.index, seq)) {
                a.end_ns = time(tick).max(a.start_ns);
                continue;
            }
            if lost_ends.contains_key(&(thread.index, seq)) {
                left_out.push(index);
                continue;
            }
            a.end_ns = window.end_ns;
            // A Python frame open at the stop (the one that stopped the profiler, and its
            // callers) ends with the window, as PyTorch ends it.
            if a.kind != ActivityType::PythonFunction {
                out.unfinished_ranges += 1;
                a.args.push((keys.finished.clone(), Value::Bool(false)));
            }
        }
    }
    links.draw(&mut out.activities);
    if !left_out.is_empty() {
        left_out.sort_unstable();
        let mut index = 0;
        out.activities.retain(|_| {
            index += 1;
            left_out.binary_search(&(index - 1)).is_err()
        });
    }
    out
}

/// A range begun and not yet ended, at the drain.
struct Open {
    seq: u32,
    /// Its index in the activities.
    index: usize,
}

/// A Python frame, as what begins inside it sees it.
#[derive(Clone, Copy)]
struct Frames {
    /// Its node in [`CallStacks`] (0: outside every frame).
    node: u32,
    /// Its `Python id` (0: none).
    python_id: u64,
}

impl Frames {
    const OUTSIDE: Frames = Frames {
        node: 0,
        python_id: 0,
    };
}

/// The Python call stacks seen at the drain, as a tree of frame names (node 0 is the root),
/// so that every range under the same stack shares one `Call stack` string, made once.
#[derive(Default)]
struct CallStacks {
    /// Per node above the root: its parent, its name and its `Call stack`, once made.
    nodes: Vec<(u32, Arc<str>, Option<Arc<str>>)>,
    children: FastMap<(u32, Arc<str>), u32>,
}

impl CallStacks {
    /// The node for frame `name` called inside `parent`.
    fn enter(&mut self, parent: u32, name: &Arc<str>) -> u32 {
        if let Some(&node) = self.children.get(&(parent, name.clone())) {
            return node;
        }
        self.nodes.push((parent, name.clone(), None));
        let node = self.nodes.len() as u32;
        self.children.insert((parent, name.clone()), node);
        node
    }

    /// The `Call stack` of a range begun inside `node`: the frames' names innermost first,
    /// each followed by `;`. `None` outside every frame.
    fn call_stack(&mut self, node: u32) -> Option<Arc<str>> {
        let (_, _, made) = self.nodes.get(node.checked_sub(1)? as usize)?;
        if let Some(stack) = made {
            return Some(stack.clone());
        }
        let mut text = String::new();
        let mut at = node;
        while let Some((parent, name, _)) =
            at.checked_sub(1).and_then(|i| self.nodes.get(i as usize))
        {
            text.push_str(name);
            text.push(';');
            at = *parent;
        }
        let stack: Arc<str> = text.into();
        self.nodes[node as usize - 1].2 = Some(stack.clone());
        Some(stack)
    }
}
