//! Host ops numbered by their `RecordFunction` handle, so an execution trace joins the trace.
//!
//! While PyTorch's `ExecutionTraceObserver` records, PyTorch gives every op and user range a
//! `RecordFunction` handle: its node's `rf_id` in the execution trace, which the op observer
//! writes as the op's `Record function id` (Chakra's `chakra_trace_link` joins on that).
//! HTA's `correlate_execution_trace` joins on the op's `External id` instead, which in
//! torch.profiler's traces equals the handle only when both count from the process's first
//! op alike (its first session). Here each host op that has a handle takes it as its
//! `External id`, and every event linked to the op follows, so both tools join every op in
//! any session. A host event without a handle whose id a handle took is given a fresh id
//! above them all, so no two host events share one.

use std::collections::{HashMap, HashSet};

use omniprof_trace::keys::arg;
use omniprof_trace::{Activity, Trace, Value};

/// The `Record function id` PyTorch gave host event `a`, if any.
fn record_function_id(a: &Activity) -> Option<u64> {
    if !a.kind.has_own_external_id() {
        return None;
    }
    match a.arg(arg::RECORD_FUNCTION_ID)? {
        Value::UInt(id) if *id != 0 => Some(*id),
        Value::Int(id) if *id > 0 => u64::try_from(*id).ok(),
        _ => None,
    }
}

/// Gives each host op and user range of `trace` with a `Record function id` that id as its
/// `External id`, moving the links of the events linked to it along; returns how many host
/// events were renumbered. A trace without handles is left as it is.
pub(crate) fn number_host_ops_by_record_function(trace: &mut Trace) -> usize {
    let handles: HashSet<u64> = trace
        .activities
        .iter()
        .filter_map(record_function_id)
        .collect();
    if handles.is_empty() {
        return 0;
    }
    let host_ids = trace
        .activities
        .iter()
        .filter(|a| a.kind.has_own_external_id())
        .map(|a| a.correlation);
    let mut fresh = host_ids.chain(handles.iter().copied()).max().unwrap_or(0) + 1;
    let mut renumbered: HashMap<u64, u64> = HashMap::new();
    for a in &mut trace.activities {
        if !a.kind.has_own_external_id() || a.correlation == 0 {
            continue;
        }
        let id = match record_function_id(a) {
            Some(handle) => handle,
            None if handles.contains(&a.correlation) => {
                fresh += 1;
                fresh - 1
            }
            None => continue,
        };
        if id != a.correlation {
            renumbered.insert(a.correlation, id);
            a.correlation = id;
        }
    }
    for a in &mut trace.activities {
        if a.kind.has_own_external_id() {
            continue;
        }
        if let Some(id) = a.linked_correlation.and_then(|id| renumbered.get(&id)) {
            a.linked_correlation = Some(*id);
        }
    }
    renumbered.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use omniprof_trace::ActivityType;

    fn host(kind: ActivityType, name: &str, id: u64, handle: Option<u64>) -> Activity {
        let mut a = Activity::new(kind, name, 1, 1, 0, 10);
        a.correlation = id;
        if let Some(handle) = handle {
            a.args
                .push((arg::RECORD_FUNCTION_ID.into(), Value::UInt(handle)));
        }
        a
    }

    #[test]
    fn ops_take_their_handles_and_their_device_events_follow() {
        let mut trace = Trace::new(0, 10);
        trace
            .activities
            .push(host(ActivityType::CpuOp, "aten::mm", 1, Some(40)));
        trace.activities.push(host(
            ActivityType::UserAnnotation,
            "ProfilerStep#0",
            2,
            None,
        ));
        trace
            .activities
            .push(host(ActivityType::UserAnnotation, "block", 40, Some(41)));
        let mut kernel = Activity::new(ActivityType::ConcurrentKernel, "gemm", 0, 7, 2, 8);
        kernel.correlation = 900;
        kernel.linked_correlation = Some(1);
        trace.activities.push(kernel);
        assert_eq!(number_host_ops_by_record_function(&mut trace), 2);
        let ids: Vec<(u64, Option<u64>)> = trace
            .activities
            .iter()
            .map(|a| (a.correlation, a.linked_correlation))
            .collect();
        // The range without a handle keeps its id, which no handle took; the kernel's own
        // id (its runtime correlation) stays, its link follows its op.
        assert_eq!(ids, [(40, None), (2, None), (41, None), (900, Some(40))]);
    }

    #[test]
    fn a_host_id_a_handle_took_moves_above_every_id() {
        let mut trace = Trace::new(0, 10);
        trace
            .activities
            .push(host(ActivityType::CpuOp, "aten::add", 3, Some(7)));
        trace.activities.push(host(
            ActivityType::UserAnnotation,
            "ProfilerStep#1",
            7,
            None,
        ));
        assert_eq!(number_host_ops_by_record_function(&mut trace), 2);
        let ids: Vec<u64> = trace.activities.iter().map(|a| a.correlation).collect();
        assert_eq!(ids, [7, 8]);
    }

    #[test]
    fn a_trace_without_handles_is_unchanged() {
        let mut trace = Trace::new(0, 10);
        trace
            .activities
            .push(host(ActivityType::CpuOp, "aten::add", 3, None));
        let before = trace.activities.clone();
        assert_eq!(number_host_ops_by_record_function(&mut trace), 0);
        assert_eq!(trace.activities, before);
    }
}
