//! What each device's streams really did, counted the way a device's performance monitor
//! counts it: how long at least one of its streams was running work, and how many bytes its
//! streams copied host to device and device to host. Always on (a lock and an atomic add per
//! work item); the PM sampler ([`crate::pm`]) reads it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::lock::lock;
use crate::options::MAX_DEVICES;
use crate::spec::MemcpyKind;

/// A device's totals at one moment, all since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// When the totals were read (`CLOCK_REALTIME`, ns).
    pub at_ns: i64,
    /// Time during which at least one stream of the device was running work.
    pub busy_ns: i64,
    /// Bytes copied host to device by the device's streams.
    pub host_to_device_bytes: u64,
    /// Bytes copied device to host by the device's streams.
    pub device_to_host_bytes: u64,
}

struct Busy {
    /// Streams running work now.
    active: u32,
    /// When `active` last went from 0 to 1.
    since_ns: i64,
    /// Busy time of the intervals that ended.
    total_ns: i64,
}

struct DeviceUsage {
    busy: Mutex<Busy>,
    host_to_device: AtomicU64,
    device_to_host: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)] // the array initializer, one per device
const IDLE: DeviceUsage = DeviceUsage {
    busy: Mutex::new(Busy {
        active: 0,
        since_ns: 0,
        total_ns: 0,
    }),
    host_to_device: AtomicU64::new(0),
    device_to_host: AtomicU64::new(0),
};

static DEVICES: [DeviceUsage; MAX_DEVICES] = [IDLE; MAX_DEVICES];

/// A stream of `device` started a work item at `now_ns`.
pub(crate) fn work_started(device: usize, now_ns: i64) {
    let mut busy = lock(&DEVICES[device].busy);
    if busy.active == 0 {
        busy.since_ns = now_ns;
    }
    busy.active += 1;
}

/// A stream of `device` finished a work item at `now_ns`, which copied `copied` if it was a
/// copy.
pub(crate) fn work_finished(device: usize, now_ns: i64, copied: Option<(MemcpyKind, u64)>) {
    let usage = &DEVICES[device];
    match copied {
        Some((MemcpyKind::HostToDevice, bytes)) => {
            usage.host_to_device.fetch_add(bytes, Ordering::Relaxed);
        }
        Some((MemcpyKind::DeviceToHost, bytes)) => {
            usage.device_to_host.fetch_add(bytes, Ordering::Relaxed);
        }
        _ => {}
    }
    let mut busy = lock(&usage.busy);
    busy.active -= 1;
    if busy.active == 0 {
        busy.total_ns += now_ns - busy.since_ns;
    }
}

/// `device`'s totals as of `now_ns` (a time after every start and finish it reported);
/// `None` past [`MAX_DEVICES`].
pub fn usage(device: usize, now_ns: i64) -> Option<Usage> {
    let usage = DEVICES.get(device)?;
    // The copies are counted before a work item stops being busy, so totals read under the
    // busy lock include every copy that ended by `now_ns`.
    let busy = lock(&usage.busy);
    let running = if busy.active > 0 {
        (now_ns - busy.since_ns).max(0)
    } else {
        0
    };
    Some(Usage {
        at_ns: now_ns,
        busy_ns: busy.total_ns + running,
        host_to_device_bytes: usage.host_to_device.load(Ordering::Relaxed),
        device_to_host_bytes: usage.device_to_host.load(Ordering::Relaxed),
    })
}
