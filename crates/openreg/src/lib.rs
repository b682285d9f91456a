//! OpenReg: a simulated accelerator runtime that does real work on real threads, with a
//! CUPTI-like activity-recording layer.
//!
//! OpenReg is omniprof's test double on machines without a GPU, and the worked example a
//! vendor copies when connecting a real device to omniprof. It is small, but nothing in it is
//! faked: kernels compute, copies copy, streams run in order on their own threads, and every
//! timestamp is a real `CLOCK_REALTIME` reading taken where the work ran.
//!
//! # What a device runtime provides
//!
//! | OpenReg | CUDA runtime |
//! |---|---|
//! | [`init`], [`device_count`], [`set_device`], [`current_device`], [`device_synchronize`] | `cudaGetDeviceCount`, `cudaSetDevice`, ... |
//! | [`device_properties`], [`DeviceProperties::kineto_entries`] | `cudaGetDeviceProperties`, Kineto's `deviceProperties` |
//! | [`Stream`], [`current_stream`], [`set_current_stream`] | `cudaStream_t`, PyTorch's current stream |
//! | [`malloc`], [`memcpy_async`], [`memset_async`], [`HostBuffer`] | `cudaMalloc`, `cudaMemcpyAsync`, `cudaMemsetAsync`, pinned memory |
//! | [`launch_kernel`], [`Kernel`] | `<<<grid, block, 0, stream>>>` |
//! | [`Event`] | `cudaEvent_t`: record, query, synchronize, elapsed time |
//!
//! A stream is a queue with one worker thread: calls return as soon as the work is queued,
//! the worker runs items in order and stamps each with its real start and end. Device memory
//! is host memory that only stream work touches, counted against a simulated capacity.
//!
//! # How activity recording maps onto it
//!
//! The activity API ([`enable_recording`] ... [`finish_recording`]) plays CUPTI's part. While
//! it is enabled, each runtime call records a
//! [`RuntimeRecord`] (name such as `orLaunchKernel`, thread, times,
//! a fresh correlation id) and each piece of device work it launched records a
//! [`DeviceRecord`] on completion with the *same* correlation id.
//! A profiler integration, like Kineto's CUPTI activity profiler, then:
//!
//! 1. enables recording when its trace starts ([`enable_recording`]);
//! 2. pushes and pops each host op's correlation id, and each user range's, on the calling
//!    thread ([`push_external_correlation`] with
//!    [`ExternalKind::Default`] or `User`): records carry the
//!    innermost of each, which links device work to the host op (`External id`) and to user
//!    ranges (GPU user annotations);
//! 3. at stop, synchronizes, disables and [`drain_records`]s, then turns runtime records
//!    into runtime events, device records into kernel / memcpy / memset / sync events, and
//!    each correlation id into an `ac2g` flow from the launch to its device work.
//!
//! [`OpenRegProfiler`] is that integration for omniprof, registered with
//! `register_profiler!`, and [`OpenRegStubs`] the minimal alternative (per-op device time from events, no timeline),
//! registered with `register_stubs!` (both behind the cargo feature `omniprof-backend`, on by
//! default). The crate `openreg-plugin` is the same integration as a dynamic plugin, through
//! the plugin C ABI. A [`PmSampler`] samples each device's performance monitor
//! ([`PmSample`]: [`BUSY_FRACTION`] and the bytes copied) from the usage changes the
//! runtime reports.
//!
//! A vendor replaces the simulated runtime with its own and keeps this shape: an activity
//! API with per-kind enablement, a correlation id per runtime call propagated to device
//! work, per-thread external correlation stacks, bounded buffers with a dropped count.
//!
//! # Example
//!
//! ```
//! use openreg::{ExternalKind, Kinds};
//! use openreg::{Event, HostBuffer, Kernel, Stream};
//!
//! # fn main() -> openreg::Result<()> {
//! let n = 32;
//! let bytes = n * n * 4;
//! let stream = Stream::new(0)?;
//! let (a, out) = (openreg::malloc(0, bytes)?, openreg::malloc(0, bytes)?);
//! let host = HostBuffer::from_f32s(&vec![1.0; n * n]);
//!
//! openreg::enable_recording(Kinds::ALL);
//! openreg::push_external_correlation(ExternalKind::Default, 7); // a host op begins
//! let (start, end) = (Event::new(), Event::new());
//! start.record(&stream);
//! openreg::memcpy_async(&a, &host, bytes, &stream)?;
//! openreg::launch_kernel(Kernel::Matmul { a: a.clone(), b: a.clone(), out: out.clone(), n }, &stream)?;
//! openreg::memcpy_async(&host, &out, bytes, &stream)?;
//! end.record(&stream);
//! openreg::pop_external_correlation(ExternalKind::Default); // the host op ends
//! stream.synchronize();
//! openreg::disable_recording();
//!
//! assert!(host.to_f32s().iter().all(|&v| v == n as f32));
//! assert!(Event::elapsed_us(&start, &end)? > 0.0);
//! let records = openreg::drain_records();
//! let launch = records.runtime.iter().find(|r| r.api.name() == "orLaunchKernel").unwrap();
//! let kernel = records.device.iter().find(|d| d.name == "matmul_32x32").unwrap();
//! assert_eq!(kernel.correlation_id, launch.correlation_id);
//! assert_eq!(kernel.external.default, Some(7));
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

// Modules bottom-up, as the runtime is built: a module imports only from groups above it.

// Plain data and OS facts.
mod hardware;
mod lock;
mod options;
mod sys;

// Errors (they report options) and activity records (they carry hardware data).
mod activity_records;
mod error;

// What every runtime call records through, and what the performance monitor counts.
mod activity_api;
mod device_usage;

// The execution core: queues and their workers, the device registry, stream handles.
mod queue;

mod device;

mod stream;

// The operations that queue work: copies, the kernels that compute on their buffers, the
// events that time both.
mod memory;

mod kernel;

mod event;

// What profilers use: the end of a recording session, the PM sampler, omniprof's backend
// over them, the profiler stubs.
mod activity_finish;

mod pm_sampler;

#[cfg(feature = "omniprof-backend")]
mod omniprof_backend;

#[cfg(feature = "omniprof-backend")]
mod omniprof_stubs;

// The runtime.
pub use device::{
    current_device, device_count, device_properties, device_synchronize, init, set_device,
    DeviceProperties, Property,
};
pub use error::{OrError, Result};
pub use event::Event;
pub use hardware::{KernelMetrics, LaunchDims, MemcpyKind};
pub use kernel::{launch_kernel, Kernel};
pub use memory::{malloc, memcpy_async, memset_async, Buffer, DeviceBuffer, HostBuffer};
pub use options::Options;
pub use queue::MIN_WORK_NS;
pub use stream::{current_stream, set_current_stream, Stream};

// Activity recording (CUPTI's part) and the performance monitor.
pub use activity_api::{
    copy_records_since, disable_recording, drain_records, enable_recording, enable_ring_recording,
    pop_external_correlation, push_external_correlation, set_record_budget, set_ring_record_budget,
    DEFAULT_RECORD_BUDGET, DEFAULT_RING_RECORD_BUDGET,
};
pub use activity_finish::finish_recording;
pub use activity_records::{
    DeviceActivity, DeviceRecord, EventOrigin, ExternalIds, ExternalKind, Kinds, Records,
    RuntimeApi, RuntimeRecord, SyncKind,
};
pub use pm_sampler::{
    PmSample, PmSampler, BUSY_FRACTION, DEVICE_TO_HOST_BYTES, HOST_TO_DEVICE_BYTES,
    MEMORY_USED_BYTES,
};

// omniprof's backend and stubs over them.
#[cfg(feature = "omniprof-backend")]
pub use omniprof_backend::{
    take_part_in_sessions, OpenRegProfiler, DEVICE_TYPE, PM_SERIES, SCOPE_METRICS,
};
#[cfg(feature = "omniprof-backend")]
pub use omniprof_stubs::OpenRegStubs;

// What the unit tests share.
#[cfg(test)]
mod test_support;
