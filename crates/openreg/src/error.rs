//! The runtime's error type: every bad input is reported, none panics. It sits low, just
//! above the options it reports, because every layer of the runtime returns it.

use crate::options::Options;

/// What went wrong in an OpenReg call.
#[derive(Debug, thiserror::Error)]
pub enum OrError {
    /// A device index at or beyond [`device_count`](crate::device_count).
    #[error("invalid device {device}: {count} device(s) present")]
    InvalidDevice {
        /// The index asked for.
        device: usize,
        /// Devices present.
        count: usize,
    },
    /// A pooled stream index at or beyond `Options::streams_per_device`.
    #[error("invalid stream index {index} on device {device}: {count} pooled stream(s)")]
    InvalidStream {
        /// The device asked for.
        device: usize,
        /// The pool index asked for.
        index: usize,
        /// Pooled streams per device.
        count: usize,
    },
    /// An allocation would exceed the device's simulated memory.
    #[error(
        "out of memory on device {device}: {requested} bytes requested, {available} available"
    )]
    OutOfMemory {
        /// The device allocated on.
        device: usize,
        /// Bytes asked for.
        requested: u64,
        /// Bytes still free when asked.
        available: u64,
    },
    /// A copy, fill or kernel would reach past the end of a buffer.
    #[error("buffer of {len} bytes is too small: {needed} bytes needed")]
    BufferTooSmall {
        /// Bytes the operation touches (`usize::MAX` when that overflows).
        needed: usize,
        /// Bytes the buffer holds.
        len: usize,
    },
    /// A device buffer used on a stream of another device (OpenReg has no peer access).
    #[error("buffer lives on device {buffer} but the stream runs on device {stream}")]
    DeviceMismatch {
        /// The buffer's device.
        buffer: usize,
        /// The stream's device.
        stream: usize,
    },
    /// Timing asked of an event that was never recorded.
    #[error("event has not been recorded")]
    EventNotRecorded,
    /// [`init`](crate::init) after the runtime already started with other options.
    #[error("runtime already initialized with {active:?}")]
    AlreadyInitialized {
        /// The options the runtime runs with.
        active: Options,
    },
    /// [`init`](crate::init) with options the runtime cannot honour.
    #[error("invalid options: {0}")]
    InvalidOptions(&'static str),
    /// A PM sampler for a device that one samples already.
    #[error("device {device} is already sampled by another PM sampler")]
    AlreadySampled {
        /// The device.
        device: usize,
    },
    /// The OS refused a stream's worker thread.
    #[error("cannot start a stream worker thread: {0}")]
    ThreadSpawn(#[source] std::io::Error),
}

/// Shorthand for results of OpenReg calls.
pub type Result<T, E = OrError> = std::result::Result<T, E>;
