//! The events of a trace one by one, as PyTorch's `prof.events()` lists its `FunctionEvent`s:
//! every host op, device activity, `[memory]` event (a memory record outside every host
//! event) and `[OutOfMemory]` event, in PyTorch's order (by start, longer first, then
//! input order, memory events last), each with its times, memory, FLOPs and place in its
//! thread's op tree. The numbers are the ones [`key_averages`](crate::key_averages()) sums:
//! both come from the same op trees ([`KeyAveragesBuilder`]).
//!
//! ```
//! use omniprof_analysis::{function_events, KeyAveragesOptions, TableOptions};
//! use omniprof_trace::{Activity, ActivityType, Trace};
//!
//! let mut trace = Trace::new(0, 1_000_000);
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 100_000, 700_000));
//! trace.activities.push(Activity::new(ActivityType::UserAnnotation, "ProfilerStep#3", 1, 1, 0, 900_000));
//! let events = function_events(&trace, &KeyAveragesOptions::default());
//! let names: Vec<&str> = events.events.iter().map(|e| &*e.name).collect();
//! assert_eq!(names, ["ProfilerStep*", "aten::mm"]);
//! assert_eq!(&*events.events[0].trace_name, "ProfilerStep#3");
//! assert_eq!(events.events[0].children, [1]);
//! assert_eq!(events.events[1].parent, Some(0));
//! assert!(events.table(&TableOptions::default()).contains("aten::mm"));
//! ```

use std::fmt::Write;
use std::sync::Arc;

use super::builder::KeyAveragesBuilder;
use super::options::{KeyAveragesOptions, TableOptions};
use super::summary::{us, KeyAverages, Row};
use super::types::{Emitted, MEMORY_SEQ, OUT_OF_MEMORY_SEQ};
use crate::activity::{self, write_input_shapes};
use crate::stacks::{python_stacks, Stack, StackMetric};
use omniprof_trace::keys::arg;
use omniprof_trace::keys::name as event_name;
use omniprof_trace::FastMap;
use omniprof_trace::Trace;
use omniprof_trace::Value;
use omniprof_trace::{Activity, ActivityType};

/// One event, as PyTorch's `FunctionEvent` describes it. Times are nanoseconds, except the
/// microseconds PyTorch computes with.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionEvent {
    /// The activity's correlation id (PyTorch's `id`); for a `[memory]` or `[OutOfMemory]`
    /// event, one more than the largest id before it, as PyTorch numbers them.
    pub id: u64,
    /// The name rows group by (`ProfilerStep#3` as `ProfilerStep*`; PyTorch's `name` and
    /// `key`).
    pub name: Arc<str>,
    /// The name as recorded (PyTorch's `trace_name`).
    pub trace_name: Arc<str>,
    /// The activity's thread (`tid`; for device work, its stream).
    pub thread: i64,
    /// The activity's process (`pid`; for device work, the device): PyTorch's
    /// `device_index`.
    pub process: i64,
    /// The activity's type (`cpu_op`, `kernel`, ...: PyTorch's `activity_type`); `None`
    /// for a `[memory]` or `[OutOfMemory]` event.
    pub activity_type: Option<ActivityType>,
    /// Its `External id` arg (0 without one): a host op's own id, device work's op's.
    pub external_id: u64,
    /// For device work and runtime calls, the correlation id of the op they are linked to
    /// (0: none).
    pub linked_correlation_id: u64,
    /// The device work linked to this host event, in order (PyTorch's `kernels`): of each
    /// kernel, copy or set on the device whose linked correlation id is this event's id,
    /// where this event is a host op with an `External id` and no link of its own.
    pub kernels: Vec<Kernel>,
    /// Start and end in microseconds from where host times count from (the profiler's span,
    /// else the earliest activity: PyTorch's `time_range`, which counts from the profiler's
    /// start).
    pub start_us: f64,
    /// End, as `start_us`.
    pub end_us: f64,
    /// Total CPU time, ns.
    pub cpu_time_total_ns: i64,
    /// Self CPU time, ns.
    pub self_cpu_time_total_ns: i64,
    /// Total device time, ns.
    pub device_time_total_ns: i64,
    /// Self device time, ns.
    pub self_device_time_total_ns: i64,
    /// The totals as PyTorch's float microseconds (see [`Row::cpu_time_total_us`]).
    pub cpu_time_total_us: f64,
    /// The device total as PyTorch's float microseconds.
    pub device_time_total_us: f64,
    /// Self CPU time as PyTorch's float microseconds: the float total less the children's
    /// (summed in their order); 0 for an async event.
    pub self_cpu_time_total_us: f64,
    /// Self device time, as `self_cpu_time_total_us`.
    pub self_device_time_total_us: f64,
    /// `Input Dims` as Python prints the list (`[[64, 64], []]`; `[]` for none).
    pub input_shapes: Arc<str>,
    /// Autograd's sequence number of the op (its `Sequence number` arg, shared by a forward
    /// op and its backward node), -1 without one, as PyTorch's `sequence_nr`.
    pub sequence_nr: i64,
    /// Each input's type (its `Input type` arg: a dtype's name, `Scalar`, `ScalarList`,
    /// `TensorList` or `""`), empty without inputs, as PyTorch's `input_dtypes`.
    pub input_dtypes: Vec<Arc<str>>,
    /// The op's overload name (`Tensor` of `aten::add.Tensor`, the `Overload Name` arg that
    /// `_ExperimentalConfig(capture_overload_names=True)` records); `""` for the default
    /// overload, an event without one, or a trace that did not capture them, as PyTorch's
    /// `overload_name`.
    pub overload_name: Arc<str>,
    /// CPU memory allocated during the event, bytes.
    pub cpu_memory_usage: i64,
    /// The same less what its children allocated.
    pub self_cpu_memory_usage: i64,
    /// Device memory allocated during the event, bytes.
    pub device_memory_usage: i64,
    /// The same less what its children allocated.
    pub self_device_memory_usage: i64,
    /// The `flops` arg, 0 without one.
    pub flops: u64,
    /// The enclosing event in the op tree (PyTorch's `cpu_parent`), an index into
    /// [`FunctionEvents::events`].
    pub parent: Option<usize>,
    /// The events directly inside it (PyTorch's `cpu_children`), in order.
    pub children: Vec<usize>,
    /// PyTorch's `is_async`: ends on another thread than it began on. False for every
    /// event of a trace, whose host events begin and end on one thread (one that ends after
    /// an open op closes that op instead, as in PyTorch).
    pub is_async: bool,
    /// A user range (`user_annotation`).
    pub is_user_annotation: bool,
    /// Device work rather than a host event (PyTorch's `device_type` is not CPU).
    pub on_device: bool,
    /// Its device time came from the stubs path.
    pub is_legacy: bool,
    /// A `python_function` event (PyTorch's `is_python_function`).
    pub is_python_function: bool,
    /// The Python frames it ran under, innermost first (PyTorch's `stack`; see
    /// [`PythonStacks`](crate::PythonStacks)); empty for none.
    pub stack: Stack,
    /// The trace activity whose args describe the event, an index into the trace's
    /// `activities` (`None` for a memory event): for what the event reads from them only
    /// when asked (its concrete inputs, its inputs' dims and strides).
    pub activity: Option<usize>,
}

impl FunctionEvent {
    /// The event as a row of one call, as PyTorch prints an event in `events().table()`.
    pub fn row(&self) -> Row {
        Row {
            name: Arc::clone(&self.name),
            input_shapes: Some(Arc::clone(&self.input_shapes)),
            overload_name: (!self.overload_name.is_empty())
                .then(|| Arc::clone(&self.overload_name)),
            stack: Some(Arc::clone(&self.stack)),
            count: 1,
            self_cpu_time_total_ns: self.self_cpu_time_total_ns,
            cpu_time_total_ns: self.cpu_time_total_ns,
            self_device_time_total_ns: self.self_device_time_total_ns,
            device_time_total_ns: self.device_time_total_ns,
            cpu_time_total_us: self.cpu_time_total_us,
            device_time_total_us: self.device_time_total_us,
            self_cpu_time_total_us: self.self_cpu_time_total_us,
            self_device_time_total_us: self.self_device_time_total_us,
            on_device: self.on_device,
            is_legacy: self.is_legacy,
            is_user_annotation: self.is_user_annotation,
            is_async: self.is_async,
            has_cpu_parent: self.parent.is_some(),
            cpu_memory_usage: self.cpu_memory_usage,
            self_cpu_memory_usage: self.self_cpu_memory_usage,
            device_memory_usage: self.device_memory_usage,
            self_device_memory_usage: self.self_device_memory_usage,
            flops: self.flops,
            first_event: None,
        }
    }
}

/// Device work linked to a host event (PyTorch's `Kernel`).
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// The device activity's name.
    pub name: Arc<str>,
    /// Its device (its `pid`).
    pub device: i64,
    /// Its duration in microseconds, as PyTorch's float `end - start`.
    pub duration_us: f64,
}

/// PyTorch's `prof.events()`: every event, in PyTorch's order.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionEvents {
    /// The events, in PyTorch's order.
    pub events: Vec<FunctionEvent>,
    /// As [`KeyAverages::device_name`].
    pub device_name: String,
    /// PyTorch's `use_device` of every event: the device's name where some event is device
    /// work or has device time from the stubs path, else `None`.
    pub use_device: Option<String>,
    /// As [`KeyAverages::profile_memory`].
    pub profile_memory: bool,
    /// As [`KeyAverages::with_flops`].
    pub with_flops: bool,
}

impl FunctionEvents {
    /// The events as rows of one call each: a [`KeyAverages`] whose table is PyTorch's
    /// `events().table()` (see [`event_rows`]).
    pub fn as_rows(&self) -> KeyAverages {
        KeyAverages {
            rows: event_rows(&self.events.iter().collect::<Vec<_>>()),
            device_name: self.device_name.clone(),
            profile_memory: self.profile_memory,
            with_flops: self.with_flops,
            too_deep: 0,
        }
    }

    /// PyTorch's `EventList.key_averages()`: the events averaged over their keys (see
    /// [`average_events`]), the same rows as [`key_averages`](crate::key_averages()) of
    /// their trace with the same `options`.
    pub fn key_averages(&self, options: &KeyAveragesOptions) -> KeyAverages {
        KeyAverages {
            rows: average_events(&self.events.iter().collect::<Vec<_>>(), options),
            device_name: self.device_name.clone(),
            profile_memory: self.profile_memory,
            with_flops: self.with_flops,
            too_deep: 0,
        }
    }

    /// PyTorch's `events().table()`: one line per event. (PyTorch itself fails on a trace
    /// with `[memory]` events and FLOPs, whose `flops` is `None`; here they print `--`.)
    pub fn table(&self, options: &TableOptions) -> String {
        self.as_rows().table(options)
    }

    /// PyTorch's `export_stacks(path, metric)` text: one line per event with a stack and a
    /// `metric` of at least 1 µs, its frames outermost first joined by `;` (spaces, tabs,
    /// line breaks and `;` in a frame written as `_`), a space and the whole microseconds
    /// (see [`PythonStacks`](crate::PythonStacks)). Flame graph tools read it.
    ///
    /// ```
    /// use omniprof_analysis::{function_events, StackMetric, KeyAveragesOptions};
    /// use omniprof_trace::{Activity, ActivityType, Trace};
    ///
    /// let mut trace = Trace::new(0, 10_000);
    /// trace.activities.push(Activity::new(ActivityType::PythonFunction, "t.py(3): step", 1, 1, 0, 10_000));
    /// trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 1_000, 4_000));
    /// let events = function_events(&trace, &KeyAveragesOptions::default());
    /// assert_eq!(events.export_stacks(StackMetric::SelfCpuTimeTotal), "t.py(3):_step 3\n");
    /// ```
    pub fn export_stacks(&self, metric: StackMetric) -> String {
        event_stacks(&self.events.iter().collect::<Vec<_>>(), metric)
    }
}

/// `events` as rows of one call each ([`FunctionEvent::row`]), as PyTorch's
/// `EventList.table()` prints a list of events: without input shapes where no event has
/// any, and without stacks where no event has one (so that the table has no column for
/// them).
pub fn event_rows(events: &[&FunctionEvent]) -> Vec<Row> {
    let any_shapes = events.iter().any(|e| &*e.input_shapes != "[]");
    let any_stack = events.iter().any(|e| !e.stack.is_empty());
    events
        .iter()
        .map(|e| {
            let mut row = e.row();
            if !any_shapes {
                row.input_shapes = None;
            }
            if !any_stack {
                row.stack = None;
            }
            row
        })
        .collect()
}

/// PyTorch's `EventList.key_averages()` over any events: one row per key, in the order of
/// each key's first event, that event's fields (name, flags, `has_cpu_parent`) and every
/// event's calls, times, memory and FLOPs summed in order. The key is the name, whether the
/// event is device work, legacy or a user range, and, as `options` ask, the overload name,
/// the input shapes and the first `group_by_stack_n` frames; `python_function` events are
/// left out unless `include_python_functions`. A row holds the shapes, overload name and
/// stack only when grouped by them.
///
/// ```
/// use omniprof_analysis::{average_events, function_events, KeyAveragesOptions};
/// use omniprof_trace::{Activity, ActivityType, Trace};
///
/// let mut trace = Trace::new(0, 1_000_000);
/// for start in [0, 300_000] {
///     trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, start, start + 200_000));
/// }
/// let events = function_events(&trace, &KeyAveragesOptions::default());
/// let rows = average_events(&events.events.iter().collect::<Vec<_>>(), &KeyAveragesOptions::default());
/// assert_eq!((&*rows[0].name, rows[0].count, rows[0].cpu_time_total_ns), ("aten::mm", 2, 400_000));
/// ```
pub fn average_events(events: &[&FunctionEvent], options: &KeyAveragesOptions) -> Vec<Row> {
    let n = options.group_by_stack_n;
    let mut rows: Vec<Row> = Vec::new();
    let mut groups: FastMap<EventKey, usize> = FastMap::default();
    for (position, e) in events.iter().enumerate() {
        if e.is_python_function && !options.include_python_functions {
            continue;
        }
        let key = EventKey {
            name: Arc::clone(&e.name),
            on_device: e.on_device,
            is_legacy: e.is_legacy,
            is_user_annotation: e.is_user_annotation,
            overload_name: options
                .group_by_overload_name
                .then(|| Arc::clone(&e.overload_name)),
            input_shapes: options
                .group_by_input_shapes
                .then(|| Arc::clone(&e.input_shapes)),
            stack: (n > 0).then(|| e.stack.iter().take(n).cloned().collect()),
        };
        match groups.get(&key) {
            Some(&at) => rows[at].add(&e.row()),
            None => {
                let mut row = e.row();
                row.input_shapes = key.input_shapes.clone();
                row.overload_name = key.overload_name.clone();
                row.stack = key.stack.clone();
                row.first_event = Some(position);
                groups.insert(key, rows.len());
                rows.push(row);
            }
        }
    }
    rows
}

/// What [`average_events`] groups events by.
#[derive(Hash, PartialEq, Eq)]
struct EventKey {
    name: Arc<str>,
    on_device: bool,
    is_legacy: bool,
    is_user_annotation: bool,
    overload_name: Option<Arc<str>>,
    input_shapes: Option<Arc<str>>,
    stack: Option<Stack>,
}

/// PyTorch's `export_stacks`: per event with a stack whose metric, in whole microseconds
/// (truncated, as Python's `int()`), is above 0, one line: its frames outermost first, each
/// with spaces, tabs, line breaks and `;` written as `_`, joined by `;`, then a space and
/// the value. The event's own name is not a frame (as in PyTorch). Self times are
/// PyTorch's floats ([`FunctionEvent::self_cpu_time_total_us`]).
pub fn event_stacks(events: &[&FunctionEvent], metric: StackMetric) -> String {
    let mut out = String::new();
    for e in events {
        if e.stack.is_empty() || e.is_async {
            continue;
        }
        let value = match metric {
            StackMetric::SelfCpuTimeTotal => e.self_cpu_time_total_us,
            StackMetric::SelfDeviceTimeTotal => e.self_device_time_total_us,
        };
        // `as` truncates toward zero (and saturates), as Python's `int()` of a time does.
        let value = value as i64;
        if value <= 0 {
            continue;
        }
        for (i, frame) in e.stack.iter().rev().enumerate() {
            if i > 0 {
                out.push(';');
            }
            out.extend(frame.chars().map(|c| match c {
                ' ' | ';' | '\t' | '\n' => '_',
                c => c,
            }));
        }
        // Writing into a `String` cannot fail.
        let _ = writeln!(out, " {value}");
    }
    out
}

/// The events of a trace as PyTorch's `_parse_kineto_results` makes them: every host op,
/// device activity, `[memory]` event (a memory record outside every host event) and
/// `[OutOfMemory]` event, in PyTorch's order (by start, longer first, then input order,
/// memory events last), with the numbers [`key_averages`](crate::key_averages()) sums
/// (both come from the same op trees); `options` as for
/// [`key_averages`](crate::key_averages())
/// (`group_by_input_shapes` has no effect: every event has its shapes).
pub fn function_events(trace: &Trace, options: &KeyAveragesOptions) -> FunctionEvents {
    let mut builder = KeyAveragesBuilder::keeping_every_op(options.clone());
    builder.device_events = Some(Vec::new());
    let stacks = python_stacks(trace);
    for (key, value) in &trace.metadata {
        builder.add_metadata(key, value);
    }
    for span in &trace.spans {
        builder.add_span_start(span.start_ns);
    }
    // The activity of each `seq`, and of each memory and out-of-memory record.
    let mut sources: FastMap<u64, usize> = FastMap::default();
    let mut memory_sources = Vec::new();
    let mut oom_sources = Vec::new();
    for (i, a) in trace.activities.iter().enumerate() {
        let seq = builder.next_seq();
        let (memory, oom) = builder.memory_counts();
        builder.add_activity_with_stack(a, stacks.get(i));
        if builder.next_seq() != seq {
            sources.insert(seq, i);
        }
        let (memory_after, oom_after) = builder.memory_counts();
        if memory_after != memory {
            memory_sources.push(i);
        }
        if oom_after != oom {
            oom_sources.push(i);
        }
    }
    builder.set_window(trace.window);
    let mut emitted = builder.emit_host_events();
    emitted.extend(builder.device_events.take().unwrap_or_default());
    emitted.sort_unstable_by_key(|e| e.first);
    let (device_name, profile_memory, with_flops) = builder.labels();
    let origin = builder.host_origin_ns();

    let index: FastMap<u64, usize> = emitted
        .iter()
        .enumerate()
        .map(|(i, e)| (e.first.2, i))
        .collect();
    let source_index = |seq: u64| -> Option<usize> {
        let i = if seq >= OUT_OF_MEMORY_SEQ {
            oom_sources.get((seq - OUT_OF_MEMORY_SEQ) as usize)
        } else if seq >= MEMORY_SEQ {
            memory_sources.get((seq - MEMORY_SEQ) as usize)
        } else {
            sources.get(&seq)
        };
        i.copied()
    };
    let source =
        |seq: u64| -> Option<&Activity> { source_index(seq).map(|i| &trace.activities[i]) };
    let mut max_id = sources
        .values()
        .map(|&i| trace.activities[i].correlation)
        .max()
        .unwrap_or(0);
    // Memory events are numbered after every other, in PyTorch's order: the records
    // outside host events, then the out-of-memory records.
    let mut memory_ids: Vec<(u64, u64)> = emitted
        .iter()
        .map(|e| e.first.2)
        .filter(|&s| s >= MEMORY_SEQ)
        .map(|s| (s, 0))
        .collect();
    memory_ids.sort_unstable();
    for (_, id) in &mut memory_ids {
        max_id += 1;
        *id = max_id;
    }
    let memory_ids: FastMap<u64, u64> = memory_ids.into_iter().collect();

    let mut shapes = String::new();
    // The empty text, made once: the default overload's name, an input type that is none.
    let empty_text: Arc<str> = Arc::from("");
    let mut out: Vec<FunctionEvent> = emitted
        .iter()
        .map(|e| {
            let seq = e.first.2;
            let (name, flags) = builder.key_strings(e.key);
            let (start_ns, end_ns) = (e.first.0, e.first.1 .0);
            let source_activity = source(seq);
            let memory_event = seq >= MEMORY_SEQ;
            // The op or range whose args describe the event (a memory event has none).
            let described = source_activity.filter(|_| !memory_event);
            if let Some(a) = described {
                write_input_shapes(a, &mut shapes);
            } else {
                shapes.clear();
                shapes.push_str("[]");
            }
            event(
                e,
                EventParts {
                    id: if memory_event {
                        memory_ids[&seq]
                    } else {
                        source_activity.map_or(0, |a| a.correlation)
                    },
                    name,
                    trace_name: match described {
                        Some(a) => Arc::from(&*a.name),
                        _ if seq >= OUT_OF_MEMORY_SEQ => Arc::from(event_name::OUT_OF_MEMORY),
                        _ => Arc::from(event_name::MEMORY),
                    },
                    thread: source_activity.map_or(0, |a| a.resource),
                    process: source_activity.map_or(0, |a| a.device),
                    activity_type: described.map(|a| a.kind),
                    external_id: described.and_then(Activity::external_id).unwrap_or(0),
                    linked_correlation_id: described
                        .and_then(|a| a.linked_correlation)
                        .unwrap_or(0),
                    start_us: us(start_ns.saturating_sub(origin)),
                    end_us: us(end_ns.saturating_sub(origin)),
                    input_shapes: Arc::from(shapes.as_str()),
                    sequence_nr: described
                        .and_then(|a| a.arg(arg::SEQUENCE_NUMBER))
                        .and_then(Value::as_i64)
                        .unwrap_or(-1),
                    input_dtypes: match described.and_then(|a| a.arg(arg::INPUT_TYPE)) {
                        // The trace's texts, shared rather than copied for each event.
                        Some(Value::List(types)) => types
                            .iter()
                            .map(|t| match t {
                                Value::Str(text) => Arc::clone(text),
                                _ => Arc::clone(&empty_text),
                            })
                            .collect(),
                        _ => Vec::new(),
                    },
                    overload_name: match described
                        .and_then(|a| a.arg(arg::OVERLOAD_NAME))
                        .and_then(Value::as_str)
                    {
                        Some(name) => Arc::from(name),
                        None => Arc::clone(&empty_text),
                    },
                    flops: source_activity
                        .and_then(|a| activity::flops_or_estimate(a, options.with_flops))
                        .unwrap_or(0),
                    on_device: flags.on_device,
                    is_legacy: flags.legacy,
                    is_user_annotation: flags.user_annotation,
                    is_python_function: flags.python,
                    stack: match source_index(seq) {
                        Some(i) if !memory_event => Arc::clone(stacks.get(i)),
                        _ => Arc::clone(stacks.get(usize::MAX)),
                    },
                    activity: source_index(seq).filter(|_| !memory_event),
                },
            )
        })
        .collect();
    for i in 0..out.len() {
        if let Some(parent) = emitted[i].parent().and_then(|p| index.get(&p).copied()) {
            out[i].parent = Some(parent);
            out[parent].children.push(i);
        }
    }
    link_kernels(&mut out);
    let use_device = out
        .iter()
        .any(|e| e.on_device || e.is_legacy)
        .then(|| device_name.clone());
    FunctionEvents {
        events: out,
        use_device,
        device_name,
        profile_memory,
        with_flops,
    }
}

/// Gives each host op the device work linked to it, as PyTorch's `_parse_kineto_results`
/// does: an op whose `External id` is set and that is linked to nothing itself takes the
/// kernels, copies and sets whose linked correlation id is its id; an op whose device time
/// came from the stubs path (legacy) has one kernel of its own name and that time.
fn link_kernels(events: &mut [FunctionEvent]) {
    for e in events.iter_mut() {
        if e.is_legacy && !e.on_device && e.device_time_total_ns > 0 {
            e.kernels.push(Kernel {
                name: Arc::clone(&e.name),
                device: e.process,
                duration_us: e.device_time_total_us,
            });
        }
    }
    let ops: FastMap<u64, usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            !e.on_device && !e.is_async && e.external_id != 0 && e.linked_correlation_id == 0
        })
        .map(|(i, e)| (e.id, i))
        .collect();
    for i in 0..events.len() {
        let e = &events[i];
        if !e.on_device || e.linked_correlation_id == 0 {
            continue;
        }
        if let Some(&op) = ops.get(&e.linked_correlation_id) {
            let kernel = Kernel {
                name: Arc::clone(&e.name),
                device: e.process,
                duration_us: e.end_us - e.start_us,
            };
            events[op].kernels.push(kernel);
        }
    }
}

/// What an event takes from its activity rather than from the op tree.
struct EventParts {
    id: u64,
    name: Arc<str>,
    trace_name: Arc<str>,
    thread: i64,
    process: i64,
    activity_type: Option<ActivityType>,
    external_id: u64,
    linked_correlation_id: u64,
    start_us: f64,
    end_us: f64,
    input_shapes: Arc<str>,
    sequence_nr: i64,
    input_dtypes: Vec<Arc<str>>,
    overload_name: Arc<str>,
    flops: u64,
    on_device: bool,
    is_legacy: bool,
    is_user_annotation: bool,
    is_python_function: bool,
    stack: Stack,
    activity: Option<usize>,
}

fn event(e: &Emitted, p: EventParts) -> FunctionEvent {
    let t = e.times;
    FunctionEvent {
        id: p.id,
        name: p.name,
        trace_name: p.trace_name,
        thread: p.thread,
        process: p.process,
        activity_type: p.activity_type,
        external_id: p.external_id,
        linked_correlation_id: p.linked_correlation_id,
        kernels: Vec::new(),
        start_us: p.start_us,
        end_us: p.end_us,
        cpu_time_total_ns: t.cpu_total_ns,
        self_cpu_time_total_ns: t.self_cpu_ns,
        device_time_total_ns: t.device_total_ns,
        self_device_time_total_ns: t.self_device_ns,
        cpu_time_total_us: e.float.cpu_total_us,
        device_time_total_us: e.float.device_total_us,
        self_cpu_time_total_us: e.float.self_cpu_us,
        self_device_time_total_us: e.float.self_device_us,
        input_shapes: p.input_shapes,
        sequence_nr: p.sequence_nr,
        input_dtypes: p.input_dtypes,
        overload_name: p.overload_name,
        cpu_memory_usage: t.cpu_memory,
        self_cpu_memory_usage: t.self_cpu_memory,
        device_memory_usage: t.device_memory,
        self_device_memory_usage: t.self_device_memory,
        flops: p.flops,
        parent: None,
        children: Vec::new(),
        is_async: false,
        is_user_annotation: p.is_user_annotation,
        on_device: p.on_device,
        is_legacy: p.is_legacy,
        is_python_function: p.is_python_function,
        stack: p.stack,
        activity: p.activity,
    }
}
