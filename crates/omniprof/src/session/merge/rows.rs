//! The default rows: a process row for each device and a thread row for each stream that
//! produced events (or counter samples) but that no backend described, so that every event
//! a viewer shows sits on a named row.

use crate::FastMap;
use crate::{ProcessRow, ThreadRow, Trace};

/// Default device rows sort after the host (Kineto's offset).
const DEVICE_SORT_OFFSET: i64 = 5_000_000;

/// Rows for devices and streams that produced events but were described by no session.
pub(super) fn add_default_rows(trace: &mut Trace, host_pid: i64) {
    let mut devices: FastMap<i64, ()> = trace.processes.iter().map(|p| (p.pid, ())).collect();
    let mut streams: FastMap<(i64, i64), ()> =
        trace.threads.iter().map(|t| ((t.pid, t.tid), ())).collect();
    let mut rows = (Vec::new(), Vec::new());
    for a in trace.activities.iter().filter(|a| a.device != host_pid) {
        if devices.insert(a.device, ()).is_none() {
            rows.0.push(device_row(a.device));
        }
        if streams.insert((a.device, a.resource), ()).is_none() {
            rows.1.push(ThreadRow {
                pid: a.device,
                tid: a.resource,
                name: format!("stream {} ", a.resource),
                sort_index: a.resource,
            });
        }
    }
    let counter_devices = trace.counters.series().iter().map(|s| s.track.device);
    for device in counter_devices.filter(|&d| d != host_pid) {
        if devices.insert(device, ()).is_none() {
            rows.0.push(device_row(device));
        }
    }
    trace.processes.extend(rows.0);
    trace.threads.extend(rows.1);
}

/// The row of a device no session described.
fn device_row(device: i64) -> ProcessRow {
    ProcessRow {
        pid: device,
        name: format!("Device {device}"),
        label: format!("GPU {device}"),
        sort_index: device + DEVICE_SORT_OFFSET,
    }
}
