//! [`SummedEvent`]: one event exactly as the summary counts it (its row's name and flags, its
//! self and total host and device time, its parent), for consumers that sum the rows
//! themselves, such as the Parquet tables that SQL engines query. Listing them
//! ([`KeyAveragesBuilder::list_events`](super::KeyAveragesBuilder::list_events)) reuses the
//! summary's op trees and device attribution, so that a `GROUP BY name` over them gives the
//! summary's rows.

use std::sync::Arc;

use super::builder::{Emitted, GroupFlags};

/// One event the summary added to a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummedEvent {
    /// The event's id: the activity's place among the activities the summary took, from 0,
    /// in input order ([`KeyAveragesBuilder::next_event_id`](super::KeyAveragesBuilder::next_event_id)
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
    /// Partially overlaps an op of its thread, so outside the op tree.
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
            is_async: event.is_async,
            start_ns,
            end_ns: end.0,
            self_host_ns: event.times.self_cpu_ns,
            host_total_ns: event.times.cpu_total_ns,
            self_device_ns: event.times.self_device_ns,
            device_total_ns: event.times.device_total_ns,
        }
    }
}
