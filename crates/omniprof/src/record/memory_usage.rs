//! What an allocator reports ([`MemoryUsage`]) and the args a report is written as, the
//! ones Kineto writes. Apart from [`memory`](super::memory), which records reports, so that
//! the thread buffers that keep reports until the drain need nothing of the recording.

use std::sync::{Arc, OnceLock};

use crate::keys::arg;
use crate::Value;

/// One report of an allocator, in PyTorch's terms (`c10::MemoryReportingInfoBase`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUsage {
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

/// The args Kineto writes on a memory record, in its order. The keys are made once: each
/// record then clones them instead of allocating.
pub(super) fn args(report: &MemoryUsage) -> [(Arc<str>, Value); 6] {
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
