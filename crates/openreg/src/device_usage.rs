//! What each device really did, counted the way a device's performance monitor counts it: how
//! long at least one of its streams was running work, how many bytes its streams copied host
//! to device and device to host, and how much of its memory is in use (the one count of it:
//! allocations are checked against the device's size here). Always on (a lock per work item
//! and per allocation); the PM sampler (`pm_sampler.rs`) reads it.
//!
//! While a sampler [`watch_usage`]es a device, every change of these numbers is also logged with
//! its time, as a hardware monitor writes samples into a buffer that its host thread reads
//! now and then: the sampler replays the log onto a grid of sampling intervals, so the
//! intervals are exact however seldom it wakes.

use std::sync::Mutex;

use crate::error::{OrError, Result};
use crate::hardware::MemcpyKind;
use crate::lock::lock;
use crate::options::MAX_DEVICES;

/// A device's totals at one moment, all since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// When the totals were read (`CLOCK_REALTIME`, ns).
    pub at_ns: i64,
    /// Time during which at least one stream of the device was running work.
    pub busy_ns: i64,
    /// Bytes copied host to device by the device's streams.
    pub host_to_device_bytes: u64,
    /// Bytes copied device to host by the device's streams.
    pub device_to_host_bytes: u64,
    /// Device memory in use.
    pub memory_used_bytes: u64,
}

/// One change of a device's numbers, as [`drain_usage`] hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UsageChange {
    /// A stream started work while none was running.
    BusyFrom,
    /// The last running stream finished its work.
    BusyUntil,
    /// A finished copy.
    Copied(MemcpyKind, u64),
    /// Memory was reserved (positive) or released (negative).
    Memory(i64),
}

/// The numbers of a device at one moment, and the changes that follow: what [`watch_usage`]
/// starts from and [`drain_usage`]ed changes are [`apply`](UsageMonitor::apply)ed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UsageMonitor {
    /// Whether a stream is running work.
    busy: bool,
    /// When the device last became busy.
    since_ns: i64,
    /// Busy time of the intervals that ended.
    busy_ns: i64,
    host_to_device_bytes: u64,
    device_to_host_bytes: u64,
    memory_used_bytes: u64,
}

impl UsageMonitor {
    const IDLE: Self = Self {
        busy: false,
        since_ns: 0,
        busy_ns: 0,
        host_to_device_bytes: 0,
        device_to_host_bytes: 0,
        memory_used_bytes: 0,
    };

    /// The totals as of `now_ns`, a time at or after every change applied.
    pub(crate) fn at(&self, now_ns: i64) -> Usage {
        let running = if self.busy {
            (now_ns - self.since_ns).max(0)
        } else {
            0
        };
        Usage {
            at_ns: now_ns,
            busy_ns: self.busy_ns + running,
            host_to_device_bytes: self.host_to_device_bytes,
            device_to_host_bytes: self.device_to_host_bytes,
            memory_used_bytes: self.memory_used_bytes,
        }
    }

    /// Applies a change made at `at_ns`.
    pub(crate) fn apply(&mut self, at_ns: i64, change: UsageChange) {
        match change {
            UsageChange::BusyFrom => {
                self.busy = true;
                self.since_ns = at_ns;
            }
            UsageChange::BusyUntil => {
                if self.busy {
                    self.busy_ns += (at_ns - self.since_ns).max(0);
                }
                self.busy = false;
            }
            UsageChange::Copied(MemcpyKind::HostToDevice, bytes) => {
                self.host_to_device_bytes += bytes
            }
            UsageChange::Copied(MemcpyKind::DeviceToHost, bytes) => {
                self.device_to_host_bytes += bytes
            }
            UsageChange::Copied(..) => {}
            UsageChange::Memory(delta) => {
                self.memory_used_bytes = self.memory_used_bytes.saturating_add_signed(delta);
            }
        }
    }
}

struct DeviceUsage {
    /// Streams running work now.
    active: u32,
    /// The numbers now.
    now: UsageMonitor,
    /// Changes since the last [`drain_usage`]; `Some` while a sampler watches.
    log: Option<Vec<(i64, UsageChange)>>,
}

impl DeviceUsage {
    fn change(&mut self, at_ns: i64, change: UsageChange) {
        self.now.apply(at_ns, change);
        if let Some(log) = &mut self.log {
            log.push((at_ns, change));
        }
    }
}

#[allow(clippy::declare_interior_mutable_const)] // the array initializer, one per device
const IDLE: Mutex<DeviceUsage> = Mutex::new(DeviceUsage {
    active: 0,
    now: UsageMonitor::IDLE,
    log: None,
});

static DEVICES: [Mutex<DeviceUsage>; MAX_DEVICES] = [IDLE; MAX_DEVICES];

/// A stream of `device` started a work item at `now_ns`.
pub(crate) fn work_started(device: usize, now_ns: i64) {
    let mut usage = lock(&DEVICES[device]);
    usage.active += 1;
    if usage.active == 1 {
        usage.change(now_ns, UsageChange::BusyFrom);
    }
}

/// A stream of `device` finished a work item at `now_ns`, which copied `copied` if it was a
/// copy.
pub(crate) fn work_finished(device: usize, now_ns: i64, copied: Option<(MemcpyKind, u64)>) {
    let mut usage = lock(&DEVICES[device]);
    if let Some((kind, bytes)) = copied {
        usage.change(now_ns, UsageChange::Copied(kind, bytes));
    }
    usage.active = usage.active.saturating_sub(1);
    if usage.active == 0 {
        usage.change(now_ns, UsageChange::BusyUntil);
    }
}

/// Reserves `bytes` of `device`'s memory at `now_ns` if its use stays within `total`; else
/// `Err` with the bytes in use.
pub(crate) fn reserve_memory(
    device: usize,
    now_ns: i64,
    bytes: u64,
    total: u64,
) -> Result<(), u64> {
    let mut usage = lock(&DEVICES[device]);
    let used = usage.now.memory_used_bytes;
    match used.checked_add(bytes) {
        Some(after) if after <= total => {
            usage.change(now_ns, UsageChange::Memory(bytes as i64));
            Ok(())
        }
        _ => Err(used),
    }
}

/// Releases `bytes` of `device`'s memory at `now_ns`.
pub(crate) fn release_memory(device: usize, now_ns: i64, bytes: u64) {
    lock(&DEVICES[device]).change(now_ns, UsageChange::Memory(-(bytes as i64)));
}

/// `device`'s memory in use, in bytes.
#[cfg(test)]
pub(crate) fn memory_used(device: usize) -> u64 {
    lock(&DEVICES[device]).now.memory_used_bytes
}

/// Starts logging `device`'s changes for [`drain_usage`] and returns its numbers now, which they
/// follow; one watcher per device at a time, until [`unwatch_usage`].
pub(crate) fn watch_usage(device: usize) -> Result<UsageMonitor> {
    let count = MAX_DEVICES;
    let mut usage = lock(
        DEVICES
            .get(device)
            .ok_or(OrError::InvalidDevice { device, count })?,
    );
    if usage.log.is_some() {
        return Err(OrError::AlreadySampled { device });
    }
    usage.log = Some(Vec::new());
    Ok(usage.now)
}

/// Ends a [`watch_usage`] and drops what is left of the log.
pub(crate) fn unwatch_usage(device: usize) {
    if let Some(usage) = DEVICES.get(device) {
        lock(usage).log = None;
    }
}

/// Moves `device`'s logged changes into `changes` (emptied first), oldest first.
pub(crate) fn drain_usage(device: usize, changes: &mut Vec<(i64, UsageChange)>) {
    changes.clear();
    if let Some(usage) = DEVICES.get(device) {
        // Swapped, so the two buffers' capacity is reused drain after drain.
        if let Some(log) = &mut lock(usage).log {
            std::mem::swap(log, changes);
        }
    }
}
