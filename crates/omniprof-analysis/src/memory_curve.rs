//! Memory over time, per device, from a trace's `[memory]` records (PyTorch's
//! `profile_memory=True`): each record's `Total Allocated` and `Total Reserved` after it,
//! as the memory view of TensorBoard's profiler plugin drew them, and each device's peaks.
//!
//! A curve keeps at most [`MAX_POINTS`] points however many records the trace has: when it
//! has twice as many, neighbours are merged two by two into the one with more allocated, so
//! that a peak is never smoothed away; the peaks themselves are exact.
//!
//! ```
//! use omniprof_analysis::MemoryCurveBuilder;
//! use omniprof_trace::{Activity, ActivityType, Value};
//!
//! let mut b = MemoryCurveBuilder::default();
//! for (t, allocated) in [(10, 512i64), (20, 2048), (30, 0)] {
//!     let mut r = Activity::new(ActivityType::CpuInstantEvent, "[memory]", 1, 1, t, t);
//!     r.args.push(("Device Type".into(), Value::from(1i64)));
//!     r.args.push(("Device Id".into(), Value::from(0i64)));
//!     r.args.push(("Total Allocated".into(), Value::from(allocated)));
//!     r.args.push(("Total Reserved".into(), Value::from(4096i64)));
//!     b.add_activity(&r);
//! }
//! let curves = b.finish();
//! assert_eq!(curves[0].device, "device 0 (type 1)");
//! assert_eq!((curves[0].peak_allocated, curves[0].peak_reserved), (2048, 4096));
//! assert_eq!(curves[0].points.len(), 3);
//! ```

use serde::Serialize;

use omniprof_trace::keys::{arg, name as event_name};
use omniprof_trace::Activity;
use omniprof_trace::TraceItem;
use omniprof_trace::Value;

/// The most points a curve keeps.
pub(crate) const MAX_POINTS: usize = 2000;

/// One point of a curve: after the record at `time_ns`, this much allocated and reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryPoint {
    /// Absolute nanoseconds.
    pub time_ns: i64,
    /// Bytes allocated.
    pub allocated: i64,
    /// Bytes reserved by the allocator.
    pub reserved: i64,
}

/// One device's memory over time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryCurve {
    /// `CPU`, or `device N (type T)` (T: the `c10::DeviceType` integer).
    pub device: String,
    /// By time.
    pub points: Vec<MemoryPoint>,
    /// The records this device had.
    pub records: u64,
    /// The most allocated at any record, in bytes.
    pub peak_allocated: i64,
    /// The most reserved at any record, in bytes.
    pub peak_reserved: i64,
}

/// Accumulates a trace's `[memory]` records into per-device curves.
#[derive(Debug, Default)]
pub struct MemoryCurveBuilder {
    /// By (device type, device id), in the order first seen.
    curves: Vec<((i64, i64), MemoryCurve)>,
}

impl MemoryCurveBuilder {
    /// Takes one item of a streamed trace.
    pub fn add_item(&mut self, item: &TraceItem) {
        if let TraceItem::Activity(a) = item {
            self.add_activity(a);
        }
    }

    /// Takes one activity; only `[memory]` records count.
    pub fn add_activity(&mut self, a: &Activity) {
        if &*a.name != event_name::MEMORY {
            return;
        }
        let int = |key: &str| a.arg(key).and_then(Value::as_i64);
        let key = (
            int(arg::DEVICE_TYPE).unwrap_or(-1),
            int(arg::DEVICE_ID).unwrap_or(-1),
        );
        let point = MemoryPoint {
            time_ns: a.start_ns,
            allocated: int(arg::TOTAL_ALLOCATED).unwrap_or(0),
            reserved: int(arg::TOTAL_RESERVED).unwrap_or(0),
        };
        let i = match self.curves.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.curves.push((
                    key,
                    MemoryCurve {
                        device: device_label(key),
                        points: Vec::new(),
                        records: 0,
                        peak_allocated: 0,
                        peak_reserved: 0,
                    },
                ));
                self.curves.len() - 1
            }
        };
        let curve = &mut self.curves[i].1;
        curve.records += 1;
        curve.peak_allocated = curve.peak_allocated.max(point.allocated);
        curve.peak_reserved = curve.peak_reserved.max(point.reserved);
        curve.points.push(point);
        if curve.points.len() >= 2 * MAX_POINTS {
            halve(&mut curve.points);
        }
    }

    /// The curves, CPU first, then by device type and id; points by time.
    pub fn finish(self) -> Vec<MemoryCurve> {
        let mut curves = self.curves;
        curves.sort_by_key(|(key, _)| *key);
        curves
            .into_iter()
            .map(|(_, mut c)| {
                // Records come in file order; PyTorch writes them by time, others may not.
                c.points.sort_by_key(|p| p.time_ns);
                while c.points.len() > MAX_POINTS {
                    halve(&mut c.points);
                }
                c
            })
            .collect()
    }
}

/// `CPU` for the CPU's device types (as [`memory`](super#memory) sorts them), else the
/// device's id and type.
fn device_label((kind, id): (i64, i64)) -> String {
    match kind {
        0 | 2 | 5 => "CPU".to_owned(),
        _ => format!("device {id} (type {kind})"),
    }
}

/// Merges neighbours two by two, keeping the one with more allocated.
fn halve(points: &mut Vec<MemoryPoint>) {
    let merged: Vec<MemoryPoint> = points
        .chunks(2)
        .map(|pair| {
            *pair
                .iter()
                .max_by_key(|p| p.allocated)
                .expect("chunks are never empty")
        })
        .collect();
    *points = merged;
}

#[cfg(test)]
mod tests {
    use super::*;
    use omniprof_trace::ActivityType;

    fn record(t: i64, allocated: i64) -> Activity {
        let mut r = Activity::new(ActivityType::CpuInstantEvent, "[memory]", 1, 1, t, t);
        r.args.push((arg::DEVICE_TYPE.into(), Value::from(0i64)));
        r.args
            .push((arg::TOTAL_ALLOCATED.into(), Value::from(allocated)));
        r
    }

    #[test]
    fn a_long_curve_is_thinned_to_its_limit_keeping_its_peak() {
        let mut b = MemoryCurveBuilder::default();
        let n = 5 * MAX_POINTS as i64 + 3;
        for t in 0..n {
            let allocated = if t == 7777 { 1 << 40 } else { t % 100 };
            b.add_activity(&record(t, allocated));
        }
        let curves = b.finish();
        let cpu = &curves[0];
        assert_eq!(cpu.device, "CPU");
        assert_eq!(cpu.records, n as u64);
        assert!(cpu.points.len() <= MAX_POINTS && cpu.points.len() > MAX_POINTS / 4);
        assert_eq!(cpu.peak_allocated, 1 << 40);
        assert!(cpu.points.iter().any(|p| p.allocated == 1 << 40));
    }
}
