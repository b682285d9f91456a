//! What each device really did, counted the way a device's performance monitor counts it: how
//! long at least one of its streams was running work, how many bytes its streams copied host
//! to device and device to host, and how much of its memory is in use. Always on (a lock per
//! work item and per allocation); the PM sampler ([`crate::pm`]) reads it.
//!
//! While a sampler [`watch`]es a device, every change of these numbers is also logged with
//! its time, as a hardware monitor writes samples into a buffer that its host thread reads
//! now and then: the sampler replays the log onto a grid of sampling intervals, so the
//! intervals are exact however seldom it wakes.

use std::sync::Mutex;

use crate::error::{OrError, Result};
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
    /// Device memory in use.
    pub memory_used_bytes: u64,
}

/// One change of a device's numbers, as [`drain`] hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A stream started work while none was running.
    BusyFrom,
    /// The last running stream finished its work.
    BusyUntil,
    /// A finished copy.
    Copied(MemcpyKind, u64),
    /// Memory was reserved (positive) or released (negative).
    Memory(i64),
}

/// The numbers of a device at one moment, and the changes that follow: what [`watch`]
/// starts from and [`drain`]ed changes are [`apply`](Monitor::apply)ed to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Monitor {
    /// Streams running work.
    active: u32,
    /// When `active` last went from 0 to 1.
    since_ns: i64,
    /// Busy time of the intervals that ended.
    busy_ns: i64,
    host_to_device_bytes: u64,
    device_to_host_bytes: u64,
    memory_used_bytes: u64,
    /// Whether a sampler watches: changes are logged while one does.
    watched: bool,
}

impl Monitor {
    /// The totals as of `now_ns`, a time at or after every change applied.
    pub fn at(&self, now_ns: i64) -> Usage {
        let running = if self.active > 0 {
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
    pub fn apply(&mut self, at_ns: i64, change: Change) {
        match change {
            Change::BusyFrom => {
                self.active = 1;
                self.since_ns = at_ns;
            }
            Change::BusyUntil => {
                if self.active > 0 {
                    self.busy_ns += (at_ns - self.since_ns).max(0);
                }
                self.active = 0;
            }
            Change::Copied(MemcpyKind::HostToDevice, bytes) => self.host_to_device_bytes += bytes,
            Change::Copied(MemcpyKind::DeviceToHost, bytes) => self.device_to_host_bytes += bytes,
            Change::Copied(..) => {}
            Change::Memory(delta) => {
                self.memory_used_bytes = self.memory_used_bytes.saturating_add_signed(delta);
            }
        }
    }
}

struct DeviceUsage {
    /// The numbers now; counts its watchers.
    now: Monitor,
    /// Changes since the last [`drain`], while watched.
    log: Vec<(i64, Change)>,
}

impl DeviceUsage {
    fn change(&mut self, at_ns: i64, change: Change) {
        self.now.apply(at_ns, change);
        if self.now.watched {
            self.log.push((at_ns, change));
        }
    }
}

#[allow(clippy::declare_interior_mutable_const)] // the array initializer, one per device
const IDLE: Mutex<DeviceUsage> = Mutex::new(DeviceUsage {
    now: Monitor {
        active: 0,
        since_ns: 0,
        busy_ns: 0,
        host_to_device_bytes: 0,
        device_to_host_bytes: 0,
        memory_used_bytes: 0,
        watched: false,
    },
    log: Vec::new(),
});

static DEVICES: [Mutex<DeviceUsage>; MAX_DEVICES] = [IDLE; MAX_DEVICES];

/// A stream of `device` started a work item at `now_ns`.
pub(crate) fn work_started(device: usize, now_ns: i64) {
    let mut usage = lock(&DEVICES[device]);
    if usage.now.active == 0 {
        usage.change(now_ns, Change::BusyFrom);
    } else {
        usage.now.active += 1;
    }
}

/// A stream of `device` finished a work item at `now_ns`, which copied `copied` if it was a
/// copy.
pub(crate) fn work_finished(device: usize, now_ns: i64, copied: Option<(MemcpyKind, u64)>) {
    let mut usage = lock(&DEVICES[device]);
    if let Some((kind, bytes)) = copied {
        usage.change(now_ns, Change::Copied(kind, bytes));
    }
    if usage.now.active == 1 {
        usage.change(now_ns, Change::BusyUntil);
    } else {
        usage.now.active = usage.now.active.saturating_sub(1);
    }
}

/// `device` reserved (`delta` > 0) or released memory at `now_ns`.
pub(crate) fn memory_changed(device: usize, now_ns: i64, delta: i64) {
    lock(&DEVICES[device]).change(now_ns, Change::Memory(delta));
}

/// Starts logging `device`'s changes for [`drain`] and returns its numbers now, which they
/// follow; one watcher per device at a time, until [`unwatch`].
pub fn watch(device: usize) -> Result<Monitor> {
    let count = MAX_DEVICES;
    let mut usage = lock(
        DEVICES
            .get(device)
            .ok_or(OrError::InvalidDevice { device, count })?,
    );
    if usage.now.watched {
        return Err(OrError::AlreadySampled { device });
    }
    usage.now.watched = true;
    Ok(usage.now)
}

/// Ends a [`watch`] and drops what is left of the log.
pub fn unwatch(device: usize) {
    if let Some(usage) = DEVICES.get(device) {
        let mut usage = lock(usage);
        usage.now.watched = false;
        usage.log = Vec::new();
    }
}

/// Moves `device`'s logged changes into `changes` (emptied first), oldest first.
pub fn drain(device: usize, changes: &mut Vec<(i64, Change)>) {
    changes.clear();
    if let Some(usage) = DEVICES.get(device) {
        std::mem::swap(&mut lock(usage).log, changes);
    }
}
