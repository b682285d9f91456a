//! Devices: the registry of devices, runtime initialization, the per-thread current device,
//! device-wide synchronization, memory accounting and the properties a trace header reports.
//!
//! The registry owns each device's stream queues, so it sits above the queues and below the
//! [`Stream`](crate::Stream) handle and the operations that look devices up.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::activity_api::traced;
use crate::activity_records::{RuntimeApi, SyncKind};
use crate::device_usage;
use crate::error::{OrError, Result};
use crate::hardware::{
    CLOCK_MHZ, COMPUTE_MAJOR, COMPUTE_MINOR, COMPUTE_UNITS, MAX_THREADS_PER_BLOCK,
    MAX_THREADS_PER_COMPUTE_UNIT, REGISTERS_PER_BLOCK, REGISTERS_PER_COMPUTE_UNIT,
    SHARED_MEMORY_PER_BLOCK, SHARED_MEMORY_PER_COMPUTE_UNIT, WARP_SIZE,
};
use crate::lock::lock;
use crate::options::Options;
use crate::queue::{Queue, Worker};
use crate::sys::now_ns;

/// The device name every OpenReg device reports.
pub(crate) const DEVICE_NAME: &str = "OpenReg Simulated Accelerator";

pub(crate) struct Runtime {
    options: Options,
    devices: Box<[Device]>,
}

/// One device's state: its stream pool, every live stream (for device-wide sync) and its
/// memory size (what is in use is counted by [`device_usage`]).
pub(crate) struct Device {
    index: usize,
    pool: Mutex<Vec<Option<Arc<Worker>>>>,
    live_streams: Mutex<Vec<Weak<Queue>>>,
    next_stream_id: AtomicU32,
    memory_total: u64,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// Starts the runtime with `options`. Idempotent: calling it again with the same options is
/// fine, with different ones is an error. Without it the runtime starts lazily on first use
/// with [`Options::from_env`].
pub fn init(options: Options) -> Result<()> {
    options.validate().map_err(OrError::InvalidOptions)?;
    let runtime = RUNTIME.get_or_init(|| Runtime::new(options.clone()));
    if runtime.options == options {
        Ok(())
    } else {
        Err(OrError::AlreadyInitialized {
            active: runtime.options.clone(),
        })
    }
}

pub(crate) fn runtime() -> &'static Runtime {
    RUNTIME.get_or_init(|| Runtime::new(Options::from_env()))
}

impl Runtime {
    fn new(options: Options) -> Self {
        let devices = (0..options.devices)
            .map(|index| Device {
                index,
                pool: Mutex::new(vec![None; options.streams_per_device]),
                live_streams: Mutex::new(Vec::new()),
                // Pooled streams own the low ids, so ids stay stable whatever the order of use.
                next_stream_id: AtomicU32::new(options.streams_per_device as u32),
                memory_total: options.memory_per_device,
            })
            .collect();
        Self { options, devices }
    }

    pub(crate) fn device(&self, index: usize) -> Result<&Device> {
        self.devices.get(index).ok_or(OrError::InvalidDevice {
            device: index,
            count: self.devices.len(),
        })
    }
}

impl Device {
    /// The queue of pooled stream `index`, its worker started on first use.
    pub(crate) fn pooled_stream(&self, index: usize) -> Result<Arc<Worker>> {
        let mut pool = lock(&self.pool);
        let count = pool.len();
        let slot = pool.get_mut(index).ok_or(OrError::InvalidStream {
            device: self.index,
            index,
            count,
        })?;
        if let Some(worker) = slot {
            return Ok(Arc::clone(worker));
        }
        let worker = self.spawn_stream(index as u32)?;
        *slot = Some(Arc::clone(&worker));
        Ok(worker)
    }

    /// The queue of a new stream, with an id no other stream of this device has.
    pub(crate) fn new_stream(&self) -> Result<Arc<Worker>> {
        let id = self.next_stream_id.fetch_add(1, Ordering::Relaxed);
        self.spawn_stream(id)
    }

    fn spawn_stream(&self, id: u32) -> Result<Arc<Worker>> {
        let worker = Worker::spawn(self.index, id)?;
        let mut live = lock(&self.live_streams);
        live.retain(|q| q.strong_count() > 0);
        live.push(Arc::downgrade(worker.queue()));
        Ok(Arc::new(worker))
    }

    /// Waits for all work submitted so far to every stream of this device.
    fn synchronize(&self) {
        let queues: Vec<_> = lock(&self.live_streams)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for queue in queues {
            queue.wait_idle();
        }
    }

    /// Reserves `bytes` of simulated memory; released by [`Device::release`].
    pub(crate) fn reserve(&self, bytes: u64) -> Result<()> {
        device_usage::reserve_memory(self.index, now_ns(), bytes, self.memory_total).map_err(
            |used| OrError::OutOfMemory {
                device: self.index,
                requested: bytes,
                available: self.memory_total - used,
            },
        )
    }

    pub(crate) fn release(&self, bytes: u64) {
        device_usage::release_memory(self.index, now_ns(), bytes);
    }
}

/// Number of devices.
pub fn device_count() -> usize {
    runtime().devices.len()
}

thread_local! {
    static CURRENT_DEVICE: Cell<usize> = const { Cell::new(0) };
}

/// Makes `device` the calling thread's current device.
pub fn set_device(device: usize) -> Result<()> {
    runtime().device(device)?;
    CURRENT_DEVICE.with(|d| d.set(device));
    Ok(())
}

/// The calling thread's current device (0 until [`set_device`]).
pub fn current_device() -> usize {
    CURRENT_DEVICE.with(Cell::get)
}

/// Blocks until every stream of the current device has finished the work submitted so far
/// (`orDeviceSynchronize`).
pub fn device_synchronize() -> Result<()> {
    let device = runtime().device(current_device())?;
    traced(RuntimeApi::DeviceSynchronize, |tag| {
        let start = now_ns();
        device.synchronize();
        if let Some(tag) = tag {
            let kind = SyncKind::DeviceSynchronize;
            tag.record_sync(kind, None, device.index, None, start, now_ns());
        }
    });
    Ok(())
}

/// Simulated memory in use on `device`, in bytes (the tests check allocations with it).
#[cfg(test)]
pub(crate) fn device_memory_used(device: usize) -> Result<u64> {
    Ok(device_usage::memory_used(runtime().device(device)?.index))
}

/// What a device is, as `cudaGetDeviceProperties` would tell it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    /// Device index.
    pub id: usize,
    /// Marketing name, always "OpenReg Simulated Accelerator".
    pub name: &'static str,
    /// Simulated memory, in bytes (`Options::memory_per_device`).
    pub total_memory: u64,
    /// Compute capability, major part.
    pub compute_major: u32,
    /// Compute capability, minor part.
    pub compute_minor: u32,
    /// Compute units (CUDA: streaming multiprocessors).
    pub compute_units: u32,
    /// Largest block a kernel may launch, in threads.
    pub max_threads_per_block: u32,
    /// Threads one compute unit keeps resident; the denominator of occupancy.
    pub max_threads_per_compute_unit: u32,
    /// Threads per warp.
    pub warp_size: u32,
    /// Registers available to one block.
    pub registers_per_block: u32,
    /// Registers of one compute unit.
    pub registers_per_compute_unit: u32,
    /// Shared memory available to one block, in bytes.
    pub shared_memory_per_block: u64,
    /// Shared memory of one compute unit, in bytes.
    pub shared_memory_per_compute_unit: u64,
    /// Nominal clock, in MHz.
    pub clock_mhz: u32,
}

/// The properties of `device`.
pub fn device_properties(device: usize) -> Result<DeviceProperties> {
    let device = runtime().device(device)?;
    Ok(DeviceProperties {
        id: device.index,
        name: DEVICE_NAME,
        total_memory: device.memory_total,
        compute_major: COMPUTE_MAJOR,
        compute_minor: COMPUTE_MINOR,
        compute_units: COMPUTE_UNITS,
        max_threads_per_block: MAX_THREADS_PER_BLOCK,
        max_threads_per_compute_unit: MAX_THREADS_PER_COMPUTE_UNIT,
        warp_size: WARP_SIZE,
        registers_per_block: REGISTERS_PER_BLOCK,
        registers_per_compute_unit: REGISTERS_PER_COMPUTE_UNIT,
        shared_memory_per_block: SHARED_MEMORY_PER_BLOCK,
        shared_memory_per_compute_unit: SHARED_MEMORY_PER_COMPUTE_UNIT,
        clock_mhz: CLOCK_MHZ,
    })
}

/// The value of one device property.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Property {
    /// A count or size (written as a JSON integer).
    Number(u64),
    /// A name (written as a JSON string).
    Text(&'static str),
}

impl DeviceProperties {
    /// The properties for a trace's `deviceProperties` array, with Kineto's CUDA key names
    /// and order (plus XPU's `maxClockFrequency`, in MHz, for the clock).
    pub fn kineto_entries(&self) -> [(&'static str, Property); 14] {
        use Property::Number;
        [
            ("id", Number(self.id as u64)),
            ("name", Property::Text(self.name)),
            ("totalGlobalMem", Number(self.total_memory)),
            ("computeMajor", Number(self.compute_major.into())),
            ("computeMinor", Number(self.compute_minor.into())),
            (
                "maxThreadsPerBlock",
                Number(self.max_threads_per_block.into()),
            ),
            (
                "maxThreadsPerMultiprocessor",
                Number(self.max_threads_per_compute_unit.into()),
            ),
            ("regsPerBlock", Number(self.registers_per_block.into())),
            ("warpSize", Number(self.warp_size.into())),
            ("sharedMemPerBlock", Number(self.shared_memory_per_block)),
            ("numSms", Number(self.compute_units.into())),
            (
                "regsPerMultiprocessor",
                Number(self.registers_per_compute_unit.into()),
            ),
            (
                "sharedMemPerMultiprocessor",
                Number(self.shared_memory_per_compute_unit),
            ),
            ("maxClockFrequency", Number(self.clock_mhz.into())),
        ]
    }
}

#[cfg(test)]
mod tests;
