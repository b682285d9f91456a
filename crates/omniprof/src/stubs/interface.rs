//! What a device offers as profiler stubs ([`ProfilerStubs`], which documents stubs as a
//! whole), and the events and errors its calls trade in.

use std::any::Any;

/// A device event, owned; dropping it releases the backend's event.
pub type StubEvent = Box<dyn Any + Send + Sync>;

/// Failures of the stubs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StubError {
    /// No stubs are registered under this device name.
    #[error("{0} used in profiler but not enabled.")]
    NotEnabled(String),
    /// The backend failed.
    #[error("{0}")]
    Backend(String),
}

/// Where [`ProfilerStubs::record`] stores what it was asked for; each output is optional.
#[derive(Default)]
pub struct RecordOut<'a> {
    /// The current device's index.
    pub device: Option<&'a mut i32>,
    /// The new event.
    pub event: Option<&'a mut Option<StubEvent>>,
    /// A host timestamp (Unix-epoch ns) taken just before the event is enqueued.
    pub cpu_ns: Option<&'a mut i64>,
}

/// The stubs a device offers.
///
/// The legacy profiler stubs (`docs/stubs-and-summary.md`, sections 1–3): the smallest
/// thing a device can offer — events on its current stream and the time between two of them
/// — for per-op device time in the summary table, without a device timeline.
///
/// A backend implements [`ProfilerStubs`] and registers it under its device name
/// ([`register_stubs!`](macro@crate::register_stubs) before `main`, or [`register_stubs`](fn@crate::backends::register_stubs)). A
/// session built with [`ProfilerBuilder::stubs`](crate::ProfilerBuilder::stubs) then records
/// an event pair around every host op and user range and, at stop, stores each range's device
/// time in its `args` as `"device_time_us"` (whole microseconds, truncated as PyTorch does;
/// absent when an event is missing or the time is zero). With
/// [`ProfilerBuilder::markers`](crate::ProfilerBuilder::markers) ranges and instants are
/// forwarded to `range_push`/`range_pop`/`mark` instead (the NVTX-style path) and the trace
/// keeps nothing.
///
/// The session engine knows nothing of stubs: an adapter presents them to it as a backend,
/// the way the plugin adapter presents a C function table. A backend that holds its stubs
/// itself rather than registering them (the Python package's bridge to PyTorch's PrivateUse1
/// stubs) builds its sessions with [`timing_session`](super::timing_session), which can also draw every timed range
/// on a row per device; the adapter's docs say where the events live until they are timed.
///
/// ```
/// use std::sync::Arc;
/// use omniprof::backends::ProfilerStubs;
///
/// let err = omniprof::backends::registered_stubs("NoSuchDevice").err().unwrap();
/// assert_eq!(err.to_string(), "NoSuchDevice used in profiler but not enabled.");
/// ```
pub trait ProfilerStubs: Send + Sync {
    /// Creates an event and enqueues it on the current stream of the current device.
    fn record(&self, out: RecordOut<'_>) -> Result<(), StubError>;
    /// Waits for both events; the device time from `start` to `end`, in microseconds.
    fn elapsed(&self, start: &StubEvent, end: &StubEvent) -> Result<f32, StubError>;
    /// An instant marker in an external tool (may do nothing).
    fn mark(&self, name: &str);
    /// Opens a nested external-tool range (may do nothing).
    fn range_push(&self, name: &str);
    /// Closes the innermost external-tool range (may do nothing).
    fn range_pop(&self);
    /// True for a real backend.
    fn enabled(&self) -> bool {
        true
    }
    /// Calls `op(i)` for every device index with device `i` made current.
    fn on_each_device(&self, op: &mut dyn FnMut(i32));
    /// Waits for all work on the device.
    fn synchronize(&self) -> Result<(), StubError>;
}
