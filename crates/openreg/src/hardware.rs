//! The simulated hardware, as plain data: the limits every device shares, and what describes
//! the device work run on it (a kernel launch's shape and counters, a copy's direction).
//!
//! It sits at the bottom so that activity records can carry these values without knowing
//! kernels or buffers, and kernels, memory and device properties all read one definition.

/// Simulated hardware shape shared by all devices; kernels derive their launch dimensions and
/// occupancy from it, so metrics are deterministic.
pub(crate) const COMPUTE_UNITS: u32 = 8;
pub(crate) const MAX_THREADS_PER_BLOCK: u32 = 1024;
pub(crate) const MAX_THREADS_PER_COMPUTE_UNIT: u32 = 2048;
pub(crate) const MAX_BLOCKS_PER_COMPUTE_UNIT: u32 = 32;
pub(crate) const WARP_SIZE: u32 = 32;
pub(crate) const REGISTERS_PER_BLOCK: u32 = 65_536;
pub(crate) const REGISTERS_PER_COMPUTE_UNIT: u32 = 65_536;
pub(crate) const SHARED_MEMORY_PER_BLOCK: u64 = 48 * 1024;
pub(crate) const SHARED_MEMORY_PER_COMPUTE_UNIT: u64 = 96 * 1024;
pub(crate) const CLOCK_MHZ: u32 = 1_000;
pub(crate) const COMPUTE_MAJOR: u32 = 1;
pub(crate) const COMPUTE_MINOR: u32 = 0;

/// A launch shape, as CUDA's grid and block dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchDims {
    /// Blocks per grid dimension (x, y, z).
    pub grid: [u32; 3],
    /// Threads per block dimension (x, y, z).
    pub block: [u32; 3],
}

/// Simulated hardware counters of one kernel launch, for a scope profiler. Deterministic:
/// computed from the kernel's arguments and the device shape, not measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelMetrics {
    /// Output elements computed.
    pub elements: u64,
    /// Bytes read from device memory, each input read once.
    pub bytes_read: u64,
    /// Bytes written to device memory.
    pub bytes_written: u64,
    /// Floating-point operations (a fused multiply-add counts two).
    pub flops: u64,
    /// Estimated achieved occupancy: resident warps per compute unit over the maximum, in
    /// whole percent.
    pub occupancy_pct: u32,
}

/// Direction of a copy, from the kinds of its two buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemcpyKind {
    /// Host to device.
    HostToDevice,
    /// Device to host.
    DeviceToHost,
    /// Device to device (same device).
    DeviceToDevice,
    /// Host to host, through a stream.
    HostToHost,
}

impl MemcpyKind {
    /// The record name, as Kineto names CUDA copies.
    pub const fn name(self) -> &'static str {
        match self {
            Self::HostToDevice => "Memcpy HtoD",
            Self::DeviceToHost => "Memcpy DtoH",
            Self::DeviceToDevice => "Memcpy DtoD",
            Self::HostToHost => "Memcpy HtoH",
        }
    }
}
