//! torch.profiler's memory timeline (`export_memory_timeline`) of one device, from a
//! trace's `[memory]` records (the allocator's reports) and the host ops around them.
//!
//! torch.profiler builds its timeline from every tensor its ops saw; a trace has the
//! allocator's reports and the ops, which tell this much for certain, and that is what the
//! timeline holds:
//!
//! - every allocation ([`Create`](MemoryAction::Create)) and free
//!   ([`Destroy`](MemoryAction::Destroy)) on the device, at its time, with its size; a free
//!   of a block allocated before the window is also a
//!   [`Preexisting`](MemoryAction::Preexisting) event at the window's start, as torch has it;
//! - `temporary` for a block allocated and freed inside one top-level operator: the
//!   outermost op on its thread with an operator schema, or an autograd node, as torch marks
//!   a tensor allocated and freed inside one node of its data flow graph;
//! - a storage the ops read ([`StorageRead`]: the op observer sees them with `record_shapes`
//!   and `profile_memory`; a trace file does not have them) that was there before the
//!   window and not freed in it: [`Preexisting`](MemoryAction::Preexisting), once, with the
//!   most bytes a read saw, as torch counts the tensors its ops read.
//!
//! Whether a name has an operator schema is the caller's to say (PyTorch's registry knows;
//! a trace does not), asked once per name.
//!
//! ```
//! use omniprof_analysis::{memory_timeline, MemoryAction};
//! use omniprof_trace::{keys::arg, Activity, ActivityType, Trace, Value};
//!
//! let mut trace = Trace::new(0, 100);
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mul", 1, 1, 10, 40));
//! for (t, bytes) in [(20, 512i64), (30, -512), (50, 64)] {
//!     let mut r = Activity::new(ActivityType::CpuInstantEvent, "[memory]", 1, 1, t, t);
//!     r.args.push((arg::DEVICE_TYPE.into(), Value::from(0i64)));
//!     r.args.push((arg::DEVICE_ID.into(), Value::from(-1i64)));
//!     r.args.push((arg::ADDR.into(), Value::from(t.min(20))));
//!     r.args.push((arg::BYTES.into(), Value::from(bytes)));
//!     r.args.push((arg::TOTAL_RESERVED.into(), Value::from(4096i64)));
//!     trace.activities.push(r);
//! }
//! let timeline = memory_timeline(&trace, 0, -1, &[], |name| name.starts_with("aten::"));
//! let events: Vec<_> = timeline.events.iter().map(|e| (e.time_ns, e.action, e.bytes, e.temporary)).collect();
//! assert_eq!(events, [
//!     (Some(20), MemoryAction::Create, 512, true),
//!     (Some(30), MemoryAction::Destroy, -512, true),
//!     (Some(50), MemoryAction::Create, 64, false),
//! ]);
//! assert_eq!(timeline.peak_reserved, 4096);
//! ```

use std::collections::HashMap;

use omniprof_trace::keys::{arg, name as event_name};
use omniprof_trace::{Activity, ActivityType, Trace, Value};

/// What an event does to the bytes on the device; the discriminants are torch.profiler's
/// `_memory_profiler.Action` values (which its raw timeline writes), and events at one time
/// sort by them, as torch sorts its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MemoryAction {
    /// A block there when the window opened (its free is in the window).
    Preexisting = 1,
    /// An allocation.
    Create = 2,
    /// A free: its bytes are negative.
    Destroy = 4,
}

/// One event of a [`MemoryTimeline`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryEvent {
    /// Absolute nanoseconds; `None` for a block there from the window's start.
    pub time_ns: Option<i64>,
    /// What it does.
    pub action: MemoryAction,
    /// Bytes allocated (positive) or freed (negative).
    pub bytes: i64,
    /// Allocated and freed inside one top-level operator (torch's `TEMPORARY`); else of a
    /// category the trace cannot tell.
    pub temporary: bool,
}

/// One device's memory timeline: [`memory_timeline`]'s result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryTimeline {
    /// By time (a block there from the start first), then by action.
    pub events: Vec<MemoryEvent>,
    /// The most the allocator held reserved on the device at any of its records.
    pub peak_reserved: i64,
}

/// A storage an op read: what torch.profiler's `TensorMetadata` says of an input's storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageRead {
    /// The op's start, absolute nanoseconds.
    pub time_ns: i64,
    /// The storage's device: a `c10::DeviceType` number.
    pub device_type: i64,
    /// The storage's device index (-1 for the CPU).
    pub device_index: i64,
    /// Its data pointer: the address the allocator reported.
    pub address: i64,
    /// Its size in bytes.
    pub bytes: i64,
}

/// A host thread: the (process, thread) row of the trace.
type Thread = (i64, i64);

/// The memory timeline of device `device_index` of type `device_type` (a
/// `c10::DeviceType` number, as `[memory]` records carry it; the CPU's records have index
/// -1). `reads` are the storages the ops read, in any order; `has_schema` says whether an
/// op name is an operator with a schema.
pub fn memory_timeline(
    trace: &Trace,
    device_type: i64,
    device_index: i64,
    reads: &[StorageRead],
    mut has_schema: impl FnMut(&str) -> bool,
) -> MemoryTimeline {
    let mut known: HashMap<&str, bool> = HashMap::new();
    let mut ops: HashMap<Thread, Vec<(i64, i64)>> = HashMap::new();
    // (time, thread, address, bytes), in the trace's order until sorted by time.
    let mut records: Vec<(i64, Thread, i64, i64)> = Vec::new();
    let mut peak_reserved = 0;
    for a in &trace.activities {
        let thread = (a.device, a.resource);
        if &*a.name == event_name::MEMORY {
            let int =
                |key: &str, default: i64| a.arg(key).and_then(Value::as_i64).unwrap_or(default);
            if (int(arg::DEVICE_TYPE, 0), int(arg::DEVICE_ID, -1)) == (device_type, device_index) {
                records.push((a.start_ns, thread, int(arg::ADDR, 0), int(arg::BYTES, 0)));
                peak_reserved = peak_reserved.max(int(arg::TOTAL_RESERVED, 0));
            }
        } else if a.kind == ActivityType::CpuOp && is_node(a, &mut known, &mut has_schema) {
            ops.entry(thread).or_default().push((a.start_ns, a.end_ns));
        }
    }
    let leaves: HashMap<Thread, Vec<(i64, i64)>> = ops
        .into_iter()
        .map(|(thread, spans)| (thread, outermost(spans)))
        .collect();
    let leaf_of = |thread: Thread, t: i64| -> Option<(Thread, usize)> {
        let spans = leaves.get(&thread)?;
        let i = spans
            .partition_point(|&(start, _)| start <= t)
            .checked_sub(1)?;
        (t <= spans[i].1).then_some((thread, i))
    };

    records.sort_by_key(|r| r.0);
    // Per address, the first allocation or free the allocator reported there.
    let mut records_at: HashMap<i64, (i64, i64)> = HashMap::new();
    for &(t, _, addr, bytes) in &records {
        records_at.entry(addr).or_insert((t, bytes));
    }
    // Per live block: its create's index in `events`, and the operator it was allocated in.
    let mut live: HashMap<i64, (usize, Option<(Thread, usize)>)> = HashMap::new();
    let mut events: Vec<MemoryEvent> = Vec::with_capacity(records.len());
    for (t, thread, addr, bytes) in records {
        let event = |action, bytes, temporary| MemoryEvent {
            time_ns: Some(t),
            action,
            bytes,
            temporary,
        };
        if bytes > 0 {
            live.insert(addr, (events.len(), leaf_of(thread, t)));
            events.push(event(MemoryAction::Create, bytes, false));
        } else if bytes < 0 {
            let mut temporary = false;
            match live.remove(&addr) {
                // Allocated before the window: there from the start, as torch has it.
                None => events.push(MemoryEvent {
                    time_ns: None,
                    action: MemoryAction::Preexisting,
                    bytes: -bytes,
                    temporary: false,
                }),
                Some((create, Some(op))) if leaf_of(thread, t) == Some(op) => {
                    temporary = true;
                    events[create].temporary = true;
                }
                Some(_) => {}
            }
            events.push(event(MemoryAction::Destroy, bytes, temporary));
        }
    }
    events.extend(read_before_the_window(
        &records_at,
        reads,
        (device_type, device_index),
    ));
    events.sort_by_key(|e| (e.time_ns, e.action));
    MemoryTimeline {
        events,
        peak_reserved,
    }
}

/// The storages read on `device` that were there before the window and are not freed in
/// it, once each with the most bytes a read saw, by address: read before the allocator
/// reported anything at their address, and the first report there is not their free (a
/// free of a block from before the window is already
/// [`Preexisting`](MemoryAction::Preexisting)).
fn read_before_the_window(
    first_record_at: &HashMap<i64, (i64, i64)>,
    reads: &[StorageRead],
    device: (i64, i64),
) -> Vec<MemoryEvent> {
    let mut sizes: HashMap<i64, i64> = HashMap::new();
    for r in reads {
        if (r.device_type, r.device_index) != device || r.bytes <= 0 {
            continue;
        }
        let before = match first_record_at.get(&r.address) {
            None => true,
            Some(&(t, bytes)) => r.time_ns < t && bytes > 0,
        };
        if before {
            let size = sizes.entry(r.address).or_default();
            *size = (*size).max(r.bytes);
        }
    }
    let mut by_address: Vec<(i64, i64)> = sizes.into_iter().collect();
    by_address.sort_unstable();
    by_address
        .into_iter()
        .map(|(_, bytes)| MemoryEvent {
            time_ns: None,
            action: MemoryAction::Preexisting,
            bytes,
            temporary: false,
        })
        .collect()
}

/// Whether an op is a node of torch's data flow graph: an operator with a schema, or an
/// autograd node.
fn is_node<'t>(
    a: &'t Activity,
    known: &mut HashMap<&'t str, bool>,
    has_schema: &mut impl FnMut(&str) -> bool,
) -> bool {
    let name: &str = &a.name;
    *known
        .entry(name)
        .or_insert_with(|| is_autograd_node(name) || (name.contains("::") && has_schema(name)))
}

/// An autograd node's range (torch's `BACKWARD_FUNCTION` scope): `XBackward0`,
/// `torch::autograd::AccumulateGrad` and the like, not the engine's range around it.
fn is_autograd_node(name: &str) -> bool {
    if name.starts_with("autograd::engine::") {
        return false;
    }
    let base = name.rsplit("::").next().unwrap_or(name);
    base == "AccumulateGrad"
        || base
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .ends_with("Backward")
}

/// The outermost of a thread's spans, by start: a span inside another is part of it.
fn outermost(mut spans: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    spans.sort_by_key(|&(start, end)| (start, std::cmp::Reverse(end)));
    let mut outer: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
    for s in spans {
        if outer.last().is_none_or(|last| s.0 >= last.1) {
            outer.push(s);
        }
    }
    outer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autograd_nodes_are_named_as_torch_names_them() {
        for name in [
            "MulBackward0",
            "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
            "torch::autograd::AccumulateGrad",
            "AddmmBackward0",
        ] {
            let expected = !name.starts_with("autograd::engine::");
            assert_eq!(is_autograd_node(name), expected, "{name}");
        }
        assert!(!is_autograd_node("aten::mul"));
    }

    fn record(thread: i64, t: i64, device: (i64, i64), addr: i64, bytes: i64) -> Activity {
        let mut r = Activity::new(ActivityType::CpuInstantEvent, "[memory]", 1, thread, t, t);
        r.args
            .push((arg::DEVICE_TYPE.into(), Value::from(device.0)));
        r.args.push((arg::DEVICE_ID.into(), Value::from(device.1)));
        r.args.push((arg::ADDR.into(), Value::from(addr)));
        r.args.push((arg::BYTES.into(), Value::from(bytes)));
        r.args
            .push((arg::TOTAL_RESERVED.into(), Value::from(t * 100)));
        r
    }

    #[test]
    fn a_block_from_before_the_window_is_there_from_the_start_and_other_threads_ops_do_not_hold_it()
    {
        let cuda0 = (1, 0);
        let mut trace = Trace::new(0, 100);
        trace.activities.extend([
            Activity::new(ActivityType::CpuOp, "aten::add", 1, 7, 0, 50),
            // On another thread than the allocation: not its operator.
            record(8, 10, cuda0, 0xa0, 256),
            record(8, 20, cuda0, 0xa0, -256),
            // Inside the op but on another device.
            record(7, 30, (1, 1), 0xb0, 512),
            // Freed, never allocated in the window.
            record(7, 40, cuda0, 0xc0, -1024),
        ]);
        let timeline = memory_timeline(&trace, 1, 0, &[], |_| true);
        let events: Vec<_> = timeline
            .events
            .iter()
            .map(|e| (e.time_ns, e.action, e.bytes, e.temporary))
            .collect();
        assert_eq!(
            events,
            [
                (None, MemoryAction::Preexisting, 1024, false),
                (Some(10), MemoryAction::Create, 256, false),
                (Some(20), MemoryAction::Destroy, -256, false),
                (Some(40), MemoryAction::Destroy, -1024, false),
            ]
        );
        assert_eq!(timeline.peak_reserved, 4000);
    }

    #[test]
    fn a_storage_read_before_any_report_at_its_address_is_there_from_the_start_once() {
        let cpu = (0, -1);
        let mut trace = Trace::new(0, 100);
        trace.activities.extend([
            record(7, 50, cpu, 0xa0, 64),
            record(7, 60, cpu, 0xb0, -32),
            record(7, 70, cpu, 0xd0, 16),
        ]);
        let read = |time_ns, address, bytes, device: (i64, i64)| StorageRead {
            time_ns,
            device_type: device.0,
            device_index: device.1,
            address,
            bytes,
        };
        let reads = [
            // Read twice before its address was reused: once, with the larger size.
            read(10, 0xa0, 48, cpu),
            read(20, 0xa0, 56, cpu),
            // Freed in the window: already there from the start by its free.
            read(10, 0xb0, 32, cpu),
            // Never reported; and one on another device.
            read(30, 0xc0, 8, cpu),
            read(30, 0xe0, 8, (1, 0)),
            // Allocated in the window before the read.
            read(80, 0xd0, 16, cpu),
        ];
        let timeline = memory_timeline(&trace, 0, -1, &reads, |_| true);
        let preexisting: Vec<_> = timeline
            .events
            .iter()
            .filter(|e| e.action == MemoryAction::Preexisting)
            .map(|e| (e.time_ns, e.bytes))
            .collect();
        // The frees' first, then the reads' by address.
        assert_eq!(preexisting, [(None, 32), (None, 56), (None, 8)]);
    }

    #[test]
    fn spans_inside_others_are_part_of_them() {
        let spans = vec![(10, 20), (0, 30), (5, 8), (30, 40), (35, 36)];
        assert_eq!(outermost(spans), [(0, 30), (30, 40)]);
    }
}
