//! [`KeyAveragesBuilder`]: accumulates a trace, item by item, into what the op trees need,
//! and turns it into [`KeyAverages`] at the end.

use std::cmp::Reverse;
use std::sync::Arc;

use super::events::{self, Role};
use super::tree::{self, relative_us, HostOp, OpTimes, PyTorchTimes};
use super::{KeyAverages, Row};
use crate::activity::{Activity, ActivityClass, ActivityType};
use crate::hash::FastMap;
use crate::import::{ArgFilter, TraceItem, TraceReader};
use crate::keys::{arg, metadata};
use crate::trace::{Trace, Window};
use crate::value::Value;

/// How events are grouped into rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyAveragesOptions {
    /// Also group by the ops' input shapes (`Input Dims`), as PyTorch's
    /// `key_averages(group_by_input_shape=True)`.
    pub group_by_input_shapes: bool,
    /// The device name for the device columns, overriding what the trace says.
    pub device_name: Option<String>,
}

/// What makes two events the same row (PyTorch's key, less the node id, which traces do not
/// carry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct GroupKey {
    name: u32,
    /// 0 unless grouping by shapes.
    shapes: u32,
    on_device: bool,
    legacy: bool,
    user_annotation: bool,
}

/// A row in the making.
#[derive(Clone, Debug)]
struct Group {
    key: GroupKey,
    count: u64,
    self_cpu_ns: i64,
    cpu_total_ns: i64,
    self_device_ns: i64,
    device_total_ns: i64,
    /// PyTorch's float sums of the events' totals, which its averages divide.
    cpu_total_us: f64,
    device_total_us: f64,
    /// The earliest event, which places the row and says whether it is async.
    first: (i64, Reverse<i64>, u64),
    first_async: bool,
}

/// Distinct strings, numbered in order of first use.
#[derive(Default)]
struct Interner {
    ids: FastMap<Arc<str>, u32>,
    strings: Vec<Arc<str>>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        let s: Arc<str> = Arc::from(s);
        self.strings.push(Arc::clone(&s));
        self.ids.insert(s, id);
        id
    }
}

/// Builds [`KeyAverages`] from a trace delivered piece by piece, holding per host op only
/// its interval, device time and row (56 bytes), and per device activity nothing but a sum:
/// its duration goes to its row and to the host op it is linked to, by correlation id.
///
/// ```
/// use omniprof_trace::analysis::{KeyAveragesBuilder, KeyAveragesOptions};
/// use omniprof_trace::{Activity, ActivityType};
///
/// let mut builder = KeyAveragesBuilder::new(KeyAveragesOptions::default());
/// let mut op = Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, 10_000);
/// op.correlation = 7;
/// let mut kernel = Activity::new(ActivityType::ConcurrentKernel, "gemm", 0, 7, 2_000, 6_000);
/// kernel.linked_correlation = Some(7);
/// builder.add_activity(&op);
/// builder.add_activity(&kernel);
/// let summary = builder.finish();
/// let mm = summary.rows.iter().find(|r| &*r.name == "aten::mm").unwrap();
/// assert_eq!((mm.cpu_time_total_ns, mm.self_device_time_total_ns), (10_000, 4_000));
/// ```
pub struct KeyAveragesBuilder {
    options: KeyAveragesOptions,
    names: Interner,
    shapes: Interner,
    scratch: String,
    groups: Vec<Group>,
    group_index: FastMap<GroupKey, u32>,
    /// Host ops per (pid, tid).
    threads: FastMap<(i64, i64), Vec<HostOp>>,
    /// Device time per correlation id of the host op it was launched from.
    linked_device_ns: FastMap<u64, i64>,
    /// Device time of work without an `External id`, per runtime correlation id of the
    /// call that launched it.
    launched_device_ns: FastMap<u64, i64>,
    /// The same two sums, summed as PyTorch sums them.
    linked_device_us: FastMap<u64, f64>,
    launched_device_us: FastMap<u64, f64>,
    /// Where PyTorch's relative times count from: the first activity's start (PyTorch's
    /// count from the profiler's start, which a trace file does not record).
    origin_ns: Option<i64>,
    seq: u64,
    base_ns: i64,
    window: Option<Window>,
    metadata_device: Option<String>,
    runtime_device: Option<&'static str>,
}

impl KeyAveragesBuilder {
    pub fn new(options: KeyAveragesOptions) -> Self {
        Self {
            options,
            names: Interner::default(),
            shapes: Interner::default(),
            scratch: String::new(),
            groups: Vec::new(),
            group_index: FastMap::default(),
            threads: FastMap::default(),
            linked_device_ns: FastMap::default(),
            launched_device_ns: FastMap::default(),
            linked_device_us: FastMap::default(),
            launched_device_us: FastMap::default(),
            origin_ns: None,
            seq: 0,
            base_ns: 0,
            window: None,
            metadata_device: None,
            runtime_device: None,
        }
    }

    /// A reader that delivers only the args the summary reads, which makes reading several
    /// times faster.
    pub fn reader(&self) -> TraceReader {
        let mut keys = vec![arg::FINISHED, arg::DEVICE_TIME_US];
        if self.options.group_by_input_shapes {
            keys.push(arg::INPUT_DIMS);
        }
        TraceReader::new().args(ArgFilter::Only(
            keys.into_iter().map(String::from).collect(),
        ))
    }

    /// Adds everything a [`Trace`] holds.
    pub fn add_trace(&mut self, trace: &Trace) {
        for (key, value) in &trace.metadata {
            self.add_metadata(key, value);
        }
        for a in &trace.activities {
            self.add_activity(a);
        }
        self.window = Some(trace.window);
    }

    /// Adds one item from a streamed read ([`TraceReader::stream`]).
    pub fn add_item(&mut self, item: &TraceItem) {
        match item {
            TraceItem::Activity(a) => self.add_activity(a),
            TraceItem::Metadata(key, value) => self.add_metadata(key, value),
            TraceItem::BaseTime(base) => self.rebase(*base),
            TraceItem::Window(window) => self.window = Some(*window),
            TraceItem::DeviceProperties(_)
            | TraceItem::Counter(..)
            | TraceItem::TraceName(_)
            | TraceItem::Span(_)
            | TraceItem::Process(_)
            | TraceItem::Thread(_) => {}
        }
    }

    /// Metadata `device_type` names the device (see [`KeyAverages::device_name`]).
    pub fn add_metadata(&mut self, key: &str, value: &Value) {
        if key == metadata::DEVICE_TYPE {
            self.metadata_device = events::metadata_string(value);
        }
    }

    /// Adds one activity: a host op to its thread, device work to its row and linked op;
    /// anything else is ignored.
    pub fn add_activity(&mut self, a: &Activity) {
        let role = events::role(a.kind);
        if role == Role::Ignored {
            return;
        }
        if self.runtime_device.is_none() {
            self.runtime_device = events::runtime_device(a.kind);
        }
        let Some(name) = events::row_name(&a.name) else {
            return;
        };
        let origin = *self.origin_ns.get_or_insert(a.start_ns);
        let name = self.names.id(name);
        let seq = self.seq;
        self.seq += 1;
        let shapes = if self.options.group_by_input_shapes {
            events::write_input_shapes(a, &mut self.scratch);
            self.shapes.id(&self.scratch)
        } else {
            0
        };
        if role == Role::Device {
            self.add_device(a, name, shapes, seq, origin);
            return;
        }
        let stub_ns = events::stub_device_ns(a);
        let key = self.group(GroupKey {
            name,
            shapes,
            on_device: false,
            legacy: stub_ns > 0,
            user_annotation: a.kind == ActivityType::UserAnnotation,
        });
        // Only an op that is not itself linked to another (as runtime calls are) receives
        // the device work launched from it, as in PyTorch.
        let receives_device_work = a.linked_correlation.unwrap_or(0) == 0;
        let call = matches!(
            a.kind.class(),
            Some(ActivityClass::Runtime | ActivityClass::Driver)
        );
        self.threads
            .entry((a.device, a.resource))
            .or_default()
            .push(HostOp {
                start_ns: a.start_ns,
                end_ns: a.end_ns.max(a.start_ns),
                device_ns: stub_ns,
                // Whole microseconds: exact as a float.
                device_us: stub_ns as f64 / 1000.0,
                correlation: if receives_device_work || call {
                    a.correlation
                } else {
                    0
                },
                seq,
                key,
                name,
                legacy: stub_ns > 0,
                unfinished: events::is_unfinished(a),
                call,
            });
    }

    fn add_device(&mut self, a: &Activity, name: u32, shapes: u32, seq: u64, origin: i64) {
        let duration = a.duration_ns();
        let end_ns = a.start_ns.saturating_add(duration);
        let duration_us = relative_us(end_ns, origin) - relative_us(a.start_ns, origin);
        let user_annotation = a.kind == ActivityType::GpuUserAnnotation;
        // A GPU user annotation is the projection of a host range, not work of its own:
        // counting it for the range would count the range's kernels twice.
        if !user_annotation {
            // Without an `External id`, the runtime correlation leads to the launch.
            let sums = match (a.linked_correlation.filter(|&c| c != 0), a.correlation) {
                (Some(linked), _) => Some((
                    self.linked_device_ns.entry(linked).or_default(),
                    self.linked_device_us.entry(linked).or_default(),
                )),
                (None, 0) => None,
                (None, launch) => Some((
                    self.launched_device_ns.entry(launch).or_default(),
                    self.launched_device_us.entry(launch).or_default(),
                )),
            };
            if let Some((ns, us)) = sums {
                *ns = ns.saturating_add(duration);
                *us += duration_us;
            }
        }
        let key = self.group(GroupKey {
            name,
            shapes,
            on_device: true,
            legacy: false,
            user_annotation,
        });
        self.record(
            key,
            tree::order_key(a.start_ns, a.end_ns, seq),
            OpTimes {
                self_cpu_ns: 0,
                cpu_total_ns: 0,
                self_device_ns: duration,
                device_total_ns: duration,
                is_async: false,
            },
            PyTorchTimes {
                cpu_total_us: 0.0,
                device_total_us: duration_us,
            },
        );
    }

    /// The index of the row for `key`, created empty on first use.
    fn group(&mut self, key: GroupKey) -> u32 {
        let groups = &mut self.groups;
        *self.group_index.entry(key).or_insert_with(|| {
            groups.push(Group {
                key,
                count: 0,
                self_cpu_ns: 0,
                cpu_total_ns: 0,
                self_device_ns: 0,
                device_total_ns: 0,
                cpu_total_us: 0.0,
                device_total_us: 0.0,
                first: (i64::MAX, Reverse(i64::MIN), u64::MAX),
                first_async: false,
            });
            (groups.len() - 1) as u32
        })
    }

    fn record(
        &mut self,
        group: u32,
        first: (i64, Reverse<i64>, u64),
        times: OpTimes,
        float: PyTorchTimes,
    ) {
        let g = &mut self.groups[group as usize];
        g.cpu_total_us += float.cpu_total_us;
        g.device_total_us += float.device_total_us;
        g.count += 1;
        g.self_cpu_ns = g.self_cpu_ns.saturating_add(times.self_cpu_ns);
        g.cpu_total_ns = g.cpu_total_ns.saturating_add(times.cpu_total_ns);
        g.self_device_ns = g.self_device_ns.saturating_add(times.self_device_ns);
        g.device_total_ns = g.device_total_ns.saturating_add(times.device_total_ns);
        if first < g.first {
            g.first = first;
            g.first_async = times.is_async;
        }
    }

    /// `baseTimeNanoseconds` came after some events (which the reader then timed from 0).
    fn rebase(&mut self, base: i64) {
        let shift = base - self.base_ns;
        self.base_ns = base;
        if let Some(origin) = &mut self.origin_ns {
            *origin = origin.saturating_add(shift);
        }
        for op in self.threads.values_mut().flatten() {
            op.start_ns = op.start_ns.saturating_add(shift);
            op.end_ns = op.end_ns.saturating_add(shift);
        }
        for g in self.groups.iter_mut().filter(|g| g.count > 0) {
            g.first.0 = g.first.0.saturating_add(shift);
            g.first.1 .0 = g.first.1 .0.saturating_add(shift);
        }
    }

    /// Builds the op trees and the rows, in the order of each row's first event.
    pub fn finish(mut self) -> KeyAverages {
        let window_end = self.window.map_or(i64::MIN, |w| w.end_ns);
        let origin = self.origin_ns.unwrap_or(0);
        // PyTorch adds events to their rows in the order it lists them (by start, longer
        // first); float sums depend on the order, so the ops are recorded in it.
        let mut emitted = Vec::new();
        for (_, mut ops) in std::mem::take(&mut self.threads) {
            if !self.launched_device_ns.is_empty() {
                tree::attribute_launches(
                    &mut ops,
                    &self.launched_device_ns,
                    &self.launched_device_us,
                );
            }
            for op in &mut ops {
                if op.correlation != 0 && !op.call {
                    let linked = self.linked_device_ns.get(&op.correlation);
                    op.device_ns = op.device_ns.saturating_add(linked.copied().unwrap_or(0));
                    op.device_us += self.linked_device_us.get(&op.correlation).unwrap_or(&0.0);
                }
                if op.unfinished {
                    op.end_ns = op.end_ns.max(window_end);
                }
            }
            tree::summarize_thread(&mut ops, origin, |op, times, float| {
                let first = tree::order_key(op.start_ns, op.end_ns, op.seq);
                emitted.push((first, op.key, times, float));
            });
        }
        emitted.sort_unstable_by_key(|e| e.0);
        for (first, key, times, float) in emitted {
            self.record(key, first, times, float);
        }
        self.into_rows()
    }

    fn into_rows(self) -> KeyAverages {
        let mut groups: Vec<Group> = self.groups.into_iter().filter(|g| g.count > 0).collect();
        groups.sort_by_key(|g| g.first);
        let by_shapes = self.options.group_by_input_shapes;
        let rows = groups
            .into_iter()
            .map(|g| Row {
                name: Arc::clone(&self.names.strings[g.key.name as usize]),
                input_shapes: by_shapes
                    .then(|| Arc::clone(&self.shapes.strings[g.key.shapes as usize])),
                count: g.count,
                self_cpu_time_total_ns: g.self_cpu_ns,
                cpu_time_total_ns: g.cpu_total_ns,
                self_device_time_total_ns: g.self_device_ns,
                device_time_total_ns: g.device_total_ns,
                cpu_time_total_us: g.cpu_total_us,
                device_time_total_us: g.device_total_us,
                on_device: g.key.on_device,
                is_legacy: g.key.legacy,
                is_user_annotation: g.key.user_annotation,
                is_async: g.first_async,
            })
            .collect();
        let device_name = self
            .options
            .device_name
            .or(self.metadata_device)
            .unwrap_or_else(|| self.runtime_device.unwrap_or("cuda").to_string());
        KeyAverages { rows, device_name }
    }
}
