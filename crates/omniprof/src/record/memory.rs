//! Allocator reports, written as Kineto writes them: an instant named `[memory]` (or
//! `[OutOfMemory]` for an allocation that failed) on the reporting thread, whose args say how
//! many bytes were allocated (positive) or freed (negative), where, on which device, and what
//! the allocator held afterwards. The analyses attribute each report to the ops whose
//! interval holds it (PyTorch's `cpu_memory_usage`); the Python package's PyTorch observer is
//! the caller, forwarding what `c10::reportMemoryUsageToProfiler` reports.
//!
//! ```
//! use omniprof::recording::{record_memory, MemoryReport};
//! use omniprof::Profiler;
//!
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! let report = MemoryReport { addr: 0x1000, bytes: 256, total_allocated: 256, ..Default::default() };
//! record_memory(&report);
//! let trace = profiler.stop().unwrap();
//! let event = trace.activities.iter().find(|a| &*a.name == "[memory]").unwrap();
//! assert_eq!(event.arg("Bytes").and_then(|v| v.as_i64()), Some(256));
//! ```

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use super::buffer::with_local;
use super::name::StaticName;
use super::state::STATE;
use super::word::{word, KIND_INSTANT};
use crate::keys::{arg, name};
use crate::Value;

/// One report of an allocator, in PyTorch's terms (`c10::MemoryReportingInfoBase`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryReport {
    /// The block's address (0 for an out-of-memory report).
    pub addr: u64,
    /// Bytes allocated (positive) or freed (negative).
    pub bytes: i64,
    /// What the allocator holds allocated after this.
    pub total_allocated: u64,
    /// What the allocator holds reserved after this (its pools, used or not).
    pub total_reserved: u64,
    /// The device, a `c10::DeviceType` integer (0 for the CPU).
    pub device_type: i32,
    /// The device's index (-1 for the CPU).
    pub device_index: i32,
}

static MEMORY: StaticName = StaticName::new(name::MEMORY);
static OUT_OF_MEMORY: StaticName = StaticName::new(name::OUT_OF_MEMORY);

/// Records an allocation or a free as a `[memory]` instant on this thread.
#[inline]
pub fn record_memory(report: &MemoryReport) {
    record(&MEMORY, report);
}

/// Records an allocation that failed as an `[OutOfMemory]` instant on this thread.
pub fn record_out_of_memory(report: &MemoryReport) {
    record(&OUT_OF_MEMORY, report);
}

/// The args Kineto writes on a memory record, in its order. The keys are made once: each
/// record then clones them instead of allocating.
pub(super) fn args(report: &MemoryReport) -> [(Arc<str>, Value); 6] {
    static KEYS: OnceLock<[Arc<str>; 6]> = OnceLock::new();
    let [reserved, allocated, bytes, device_id, device_type, addr] = KEYS
        .get_or_init(|| {
            [
                arg::TOTAL_RESERVED,
                arg::TOTAL_ALLOCATED,
                arg::BYTES,
                arg::DEVICE_ID,
                arg::DEVICE_TYPE,
                arg::ADDR,
            ]
            .map(Arc::from)
        })
        .clone();
    [
        (reserved, Value::UInt(report.total_reserved)),
        (allocated, Value::UInt(report.total_allocated)),
        (bytes, Value::Int(report.bytes)),
        (device_id, Value::Int(report.device_index.into())),
        (device_type, Value::Int(report.device_type.into())),
        (addr, Value::UInt(report.addr)),
    ]
}

/// Records `report` as an instant named `event` on this thread: one 16-byte record and the
/// report beside it, its args made only when the session drains.
fn record(event: &StaticName, report: &MemoryReport) {
    let state = STATE.load(Ordering::Relaxed);
    if state & 1 == 0 {
        return;
    }
    let w = word(KIND_INSTANT, event.get());
    with_local(|l| {
        if let Some(seq) = l.push(state, w, true) {
            l.add_memory(state, seq, *report);
        }
    });
}
