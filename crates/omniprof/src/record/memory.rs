//! Allocator reports, written as Kineto writes them: an instant named `[memory]` (or
//! `[OutOfMemory]` for an allocation that failed) on the reporting thread, whose args say how
//! many bytes were allocated (positive) or freed (negative), where, on which device, and what
//! the allocator held afterwards. The analyses attribute each report to the ops whose
//! interval holds it (PyTorch's `cpu_memory_usage`); the Python package's PyTorch observer is
//! the caller, forwarding what `c10::reportMemoryUsageToProfiler` reports.
//!
//! ```
//! use omniprof::recording::{record_memory, MemoryUsage};
//! use omniprof::Profiler;
//!
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! let report = MemoryUsage { addr: 0x1000, bytes: 256, total_allocated: 256, ..Default::default() };
//! record_memory(&report);
//! let trace = profiler.stop().unwrap();
//! let event = trace.activities.iter().find(|a| &*a.name == "[memory]").unwrap();
//! assert_eq!(event.arg("Bytes").and_then(|v| v.as_i64()), Some(256));
//! ```

use std::sync::atomic::Ordering;

use super::buffer::with_local;
use super::memory_usage::MemoryUsage;
use super::name::StaticName;
use super::state::STATE;
use super::word::{word, KIND_INSTANT};
use crate::keys::name;

static MEMORY: StaticName = StaticName::new(name::MEMORY);
static OUT_OF_MEMORY: StaticName = StaticName::new(name::OUT_OF_MEMORY);

/// Records an allocation or a free as a `[memory]` instant on this thread.
#[inline]
pub fn record_memory(report: &MemoryUsage) {
    record(&MEMORY, report);
}

/// Records an allocation that failed as an `[OutOfMemory]` instant on this thread.
pub fn record_out_of_memory(report: &MemoryUsage) {
    record(&OUT_OF_MEMORY, report);
}

/// Records `report` as an instant named `event` on this thread: one 16-byte record and the
/// report beside it as packed args (staged without a lock), made into args only when the
/// session drains.
fn record(event: &StaticName, report: &MemoryUsage) {
    let state = STATE.load(Ordering::Relaxed);
    if state & 1 == 0 {
        return;
    }
    let w = word(KIND_INSTANT, event.get());
    with_local(|l| {
        if let Some(seq) = l.push(state, w, true) {
            l.add_memory(state, seq, &report.words());
        }
    });
}
