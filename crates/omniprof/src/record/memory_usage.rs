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

/// The words a report is kept as ([`MemoryUsage::words`]).
pub(super) const REPORT_WORDS: usize = 6;

impl MemoryUsage {
    /// The report as the words [`unpack`] reads, kept beside its record until the drain.
    pub(super) fn words(&self) -> [u64; REPORT_WORDS] {
        [
            self.addr,
            self.bytes as u64,
            self.total_allocated,
            self.total_reserved,
            u64::from(self.device_type as u32),
            u64::from(self.device_index as u32),
        ]
    }
}

/// The args Kineto writes on a memory record, in its order, from a report's
/// [`words`](MemoryUsage::words). The keys are made once: each record then clones them
/// instead of allocating.
pub(super) fn unpack(words: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
    static KEYS: OnceLock<[Arc<str>; 6]> = OnceLock::new();
    let &[addr, bytes, total_allocated, total_reserved, device_type, device_index] = words else {
        return;
    };
    let [reserved, allocated, bytes_key, device_id, device_type_key, addr_key] = KEYS
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
    args.extend([
        (reserved, Value::UInt(total_reserved)),
        (allocated, Value::UInt(total_allocated)),
        (bytes_key, Value::Int(bytes as i64)),
        (device_id, Value::Int(i64::from(device_index as u32 as i32))),
        (
            device_type_key,
            Value::Int(i64::from(device_type as u32 as i32)),
        ),
        (addr_key, Value::UInt(addr)),
    ]);
}
