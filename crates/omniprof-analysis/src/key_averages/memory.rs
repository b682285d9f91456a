//! Memory profiling as PyTorch's `profile(profile_memory=True)` reports it: the
//! [`[memory]`](name::MEMORY) records of a trace attributed to the host events around them,
//! and the records no host event holds, which become events of their own.
//!
//! PyTorch's rules (`_parse_kineto_results` and `FunctionEvent` in `torch/autograd`), which
//! the summary follows exactly:
//!
//! - A host event's CPU memory usage is the sum of the `Bytes` of the memory records whose
//!   `Device Type` is the CPU's (CPU 0, MKLDNN 2, IDEEP 5) and whose timestamp `t` satisfies
//!   `start <= t <= end`: **inclusive at both ends, and on any thread** (PyTorch looks the
//!   records up by time alone, so an allocation on another thread during an op counts for
//!   it). Its device memory usage is the same sum over device memory (CUDA 1, HIP 6,
//!   XPU 12, PrivateUse1 20). Records of other device types count for neither.
//! - Self memory usage is the usage less the usage of the event's direct children in its
//!   thread's op tree (the tree self CPU time uses, after a parent absorbs an only child of
//!   its name: the parent keeps its own usage and subtracts its grandchildren's). An async
//!   op (see [`KeyAverages`](crate::KeyAverages)) has a usage but a self usage of 0, as
//!   PyTorch's async events do.
//! - A memory record inside no host event becomes an event named `[memory]`: one call, zero
//!   time, its own bytes as usage and self usage. Every `[OutOfMemory]` record becomes an
//!   event named `[OutOfMemory]` the same way, wherever it lies; being a zero-length host
//!   event of its thread, it may have a parent in the op tree (whose self usage then
//!   subtracts it, as in PyTorch).
//!
//! The records are kept as 24 bytes each (time, bytes, whether CPU or device memory) and
//! sorted once at the end; each host op then finds its records by two binary searches
//! (PyTorch's `MemRecordsAcc.in_interval`), and its sums from prefix sums.

use omniprof_trace::keys::{arg, name};
use omniprof_trace::Activity;
use omniprof_trace::Value;

/// Which usage a memory record counts for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MemoryKind {
    /// CPU memory (`Device Type` CPU, MKLDNN or IDEEP).
    Cpu,
    /// Device memory (CUDA, HIP, XPU or PrivateUse1).
    Device,
    /// Any other device type: counts for neither.
    Other,
}

impl MemoryKind {
    /// The kind of a `c10::DeviceType` integer, as PyTorch's `_cpu_memory_usage` and
    /// `_device_memory_usage` sort them.
    pub(super) fn of_device_type(device_type: i64) -> Self {
        match device_type {
            0 | 2 | 5 => Self::Cpu,
            1 | 6 | 12 | 20 => Self::Device,
            _ => Self::Other,
        }
    }

    /// `(cpu, device)` usage of `bytes` of this kind.
    pub(super) fn split(self, bytes: i64) -> (i64, i64) {
        match self {
            Self::Cpu => (bytes, 0),
            Self::Device => (0, bytes),
            Self::Other => (0, 0),
        }
    }
}

/// What an activity is to the memory profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MemoryEvent {
    /// A `[memory]` record.
    Record { bytes: i64, kind: MemoryKind },
    /// An `[OutOfMemory]` record.
    OutOfMemory { bytes: i64, kind: MemoryKind },
}

/// The memory record an activity is, if any (PyTorch recognizes them by name alone).
pub(super) fn memory_event(a: &Activity) -> Option<MemoryEvent> {
    let oom = match &*a.name {
        name::MEMORY => false,
        name::OUT_OF_MEMORY => true,
        _ => return None,
    };
    let bytes = a.arg(arg::BYTES).and_then(Value::as_i64).unwrap_or(0);
    let kind = a
        .arg(arg::DEVICE_TYPE)
        .and_then(Value::as_i64)
        .map_or(MemoryKind::Other, MemoryKind::of_device_type);
    Some(if oom {
        MemoryEvent::OutOfMemory { bytes, kind }
    } else {
        MemoryEvent::Record { bytes, kind }
    })
}

/// One `[memory]` record as the summary keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MemoryRecord {
    pub time_ns: i64,
    pub bytes: i64,
    /// The record's place among the trace's memory records.
    pub ordinal: u32,
    pub kind: MemoryKind,
}

/// The records sorted by time, with prefix sums of their usages and a count of the host
/// events holding each (PyTorch's `MemRecordsAcc` and the records' "seen" flags).
pub(super) struct MemoryIndex {
    records: Vec<MemoryRecord>,
    /// `cpu[i]`, `device[i]`: the usage of the first `i` records (i128: sums cannot wrap).
    cpu: Vec<i128>,
    device: Vec<i128>,
    /// +1 where an event's records begin, −1 where they end.
    coverage: Vec<i32>,
}

impl MemoryIndex {
    pub(super) fn new(mut records: Vec<MemoryRecord>) -> Self {
        // Stable: records at the same time keep their order, as in PyTorch's sort by
        // (time, index).
        records.sort_by_key(|r| r.time_ns);
        let mut cpu = Vec::with_capacity(records.len() + 1);
        let mut device = Vec::with_capacity(records.len() + 1);
        let (mut c, mut d) = (0i128, 0i128);
        cpu.push(0);
        device.push(0);
        for r in &records {
            let (rc, rd) = r.kind.split(r.bytes);
            c += i128::from(rc);
            d += i128::from(rd);
            cpu.push(c);
            device.push(d);
        }
        let coverage = vec![0; records.len() + 1];
        Self {
            records,
            cpu,
            device,
            coverage,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The `(cpu, device)` usage of a host event over `[start_ns, end_ns]` (both inclusive),
    /// marking its records as held by a host event.
    pub(super) fn attribute(&mut self, start_ns: i64, end_ns: i64) -> (i64, i64) {
        let lo = self.records.partition_point(|r| r.time_ns < start_ns);
        let hi = self.records.partition_point(|r| r.time_ns <= end_ns);
        if lo >= hi {
            return (0, 0);
        }
        self.coverage[lo] += 1;
        self.coverage[hi] -= 1;
        let clamp = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        (
            clamp(self.cpu[hi] - self.cpu[lo]),
            clamp(self.device[hi] - self.device[lo]),
        )
    }

    /// The records no host event holds, in time order.
    pub(super) fn uncovered(&self) -> Vec<MemoryRecord> {
        let mut depth = 0i64;
        let mut out = Vec::new();
        for (r, delta) in self.records.iter().zip(&self.coverage) {
            depth += i64::from(*delta);
            if depth == 0 {
                out.push(*r);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(time_ns: i64, bytes: i64, kind: MemoryKind) -> MemoryRecord {
        MemoryRecord {
            time_ns,
            bytes,
            ordinal: 0,
            kind,
        }
    }

    #[test]
    fn an_interval_holds_the_records_at_both_of_its_ends() {
        let mut index = MemoryIndex::new(vec![
            record(30, 4, MemoryKind::Cpu),
            record(10, 1, MemoryKind::Cpu),
            record(20, 2, MemoryKind::Device),
            record(40, 8, MemoryKind::Other),
            record(50, 16, MemoryKind::Cpu),
        ]);
        assert_eq!(index.attribute(10, 30), (5, 2));
        assert_eq!(index.attribute(11, 29), (0, 2));
        assert_eq!(index.attribute(31, 39), (0, 0));
        let left: Vec<i64> = index.uncovered().iter().map(|r| r.time_ns).collect();
        assert_eq!(left, [40, 50]);
    }

    #[test]
    fn device_types_sort_as_in_pytorch() {
        for t in [0, 2, 5] {
            assert_eq!(MemoryKind::of_device_type(t), MemoryKind::Cpu);
        }
        for t in [1, 6, 12, 20] {
            assert_eq!(MemoryKind::of_device_type(t), MemoryKind::Device);
        }
        for t in [3, 7, 9, 13, -1] {
            assert_eq!(MemoryKind::of_device_type(t), MemoryKind::Other);
        }
    }
}
