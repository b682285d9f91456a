//! Kernels: real work on device buffers, with the launch shape and simulated hardware
//! counters a real device would report for it.
//!
//! Kernels compute on [`DeviceBuffer`]s, so they sit above memory; their shape and counters
//! are plain data from below, which activity records carry without knowing kernels.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use crate::activity_api::traced;
use crate::activity_records::{DeviceActivity, RuntimeApi};
use crate::error::Result;
use crate::hardware::{
    KernelMetrics, LaunchDims, COMPUTE_UNITS, MAX_BLOCKS_PER_COMPUTE_UNIT,
    MAX_THREADS_PER_COMPUTE_UNIT, WARP_SIZE,
};
use crate::lock::lock;
use crate::memory::{check_device, check_len, f32s, DeviceBuffer};
use crate::queue::Work;
use crate::stream::Stream;

/// Threads per block side of a matmul tile (16 × 16 = 256 threads).
const MATMUL_TILE: usize = 16;
/// Threads per block of element-wise kernels.
const ELEMENTWISE_BLOCK: usize = 256;

/// A kernel and its arguments. Buffers are shared handles: the kernel keeps them alive until
/// it has run.
#[derive(Clone, Debug)]
pub enum Kernel {
    /// `out = a · b` for row-major `n × n` `f32` matrices (`out` may alias `a` or `b`).
    Matmul {
        /// Left operand, at least `n * n * 4` bytes.
        a: DeviceBuffer,
        /// Right operand, at least `n * n * 4` bytes.
        b: DeviceBuffer,
        /// Product, at least `n * n * 4` bytes.
        out: DeviceBuffer,
        /// Matrix side.
        n: usize,
    },
    /// Sets every whole `f32` of `out` to `value`.
    Fill {
        /// The buffer filled; a trailing partial `f32` is left alone.
        out: DeviceBuffer,
        /// The value written.
        value: f32,
    },
    /// Spins one warp for the given time: a kernel of known length for timing tests.
    Busy(Duration),
}

/// Queues `kernel` on `stream` (`orLaunchKernel`). Its buffers must belong to the stream's
/// device and be large enough.
pub fn launch_kernel(kernel: Kernel, stream: &Stream) -> Result<()> {
    kernel.validate(stream)?;
    traced(RuntimeApi::LaunchKernel, |tag| {
        stream.submit(kernel, tag);
    });
    Ok(())
}

impl Kernel {
    /// The name a trace shows, e.g. `matmul_64x64`.
    pub fn name(&self) -> Cow<'static, str> {
        match self {
            Self::Matmul { n, .. } => format!("matmul_{n}x{n}").into(),
            Self::Fill { .. } => "fill_f32".into(),
            Self::Busy(_) => "busy_spin".into(),
        }
    }

    /// The simulated launch shape: one thread per output element, in 16 × 16 tiles for
    /// matmul and 256-thread blocks for fills; a busy kernel is one warp.
    pub fn launch_dims(&self) -> LaunchDims {
        match self {
            Self::Matmul { n, .. } => {
                let tiles = saturate(n.div_ceil(MATMUL_TILE).max(1));
                let tile = MATMUL_TILE as u32;
                LaunchDims {
                    grid: [tiles, tiles, 1],
                    block: [tile, tile, 1],
                }
            }
            Self::Fill { out, .. } => LaunchDims {
                grid: [
                    saturate((out.len() / 4).div_ceil(ELEMENTWISE_BLOCK).max(1)),
                    1,
                    1,
                ],
                block: [ELEMENTWISE_BLOCK as u32, 1, 1],
            },
            Self::Busy(_) => LaunchDims {
                grid: [1, 1, 1],
                block: [WARP_SIZE, 1, 1],
            },
        }
    }

    /// The simulated hardware counters of this launch.
    pub fn metrics(&self) -> KernelMetrics {
        let (elements, bytes_read, bytes_written, flops) = match self {
            Self::Matmul { n, .. } => {
                let n = *n as u64;
                // Reads a and b, writes out: n × n matrices of 4 bytes; n multiply-adds per
                // output element.
                (n * n, 2 * n * n * 4, n * n * 4, 2 * n * n * n)
            }
            Self::Fill { out, .. } => {
                let elements = (out.len() / 4) as u64;
                (elements, 0, elements * 4, 0)
            }
            Self::Busy(_) => (0, 0, 0, 0),
        };
        KernelMetrics {
            elements,
            bytes_read,
            bytes_written,
            flops,
            occupancy_pct: occupancy_pct(self.launch_dims()),
        }
    }

    fn validate(&self, stream: &Stream) -> Result<()> {
        match self {
            Self::Matmul { a, b, out, n } => {
                let needed = n
                    .checked_mul(*n)
                    .and_then(|e| e.checked_mul(4))
                    .unwrap_or(usize::MAX);
                for buffer in [a, b, out] {
                    check_device(buffer, stream)?;
                    check_len(buffer.len(), needed)?;
                }
                Ok(())
            }
            Self::Fill { out, .. } => check_device(out, stream),
            Self::Busy(_) => Ok(()),
        }
    }
}

impl Work for Kernel {
    fn execute(&self) {
        match self {
            Self::Matmul { a, b, out, n } => matmul(a, b, out, *n),
            Self::Fill { out, value } => {
                let bytes = value.to_ne_bytes();
                for chunk in lock(out.bytes()).chunks_exact_mut(4) {
                    chunk.copy_from_slice(&bytes);
                }
            }
            Self::Busy(duration) => {
                let start = Instant::now();
                while start.elapsed() < *duration {
                    std::hint::spin_loop();
                }
            }
        }
    }

    fn describe(&self) -> (Cow<'static, str>, DeviceActivity) {
        let activity = DeviceActivity::Kernel {
            launch: self.launch_dims(),
            metrics: self.metrics(),
        };
        (self.name(), activity)
    }

    fn takes_device_time(&self) -> bool {
        true
    }
}

fn matmul(a: &DeviceBuffer, b: &DeviceBuffer, out: &DeviceBuffer, n: usize) {
    if n == 0 {
        return;
    }
    // Checked at launch to fit every buffer, which never resize.
    let len = n * n * 4;
    // Inputs are copied out one lock at a time, so aliased buffers never lock twice.
    let a = f32s(&lock(a.bytes())[..len]);
    let b = f32s(&lock(b.bytes())[..len]);
    let mut c = vec![0f32; n * n];
    // i-k-j order walks b and c row by row, which keeps the inner loop cache-friendly.
    for (a_row, c_row) in a.chunks_exact(n).zip(c.chunks_exact_mut(n)) {
        for (&a_ik, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
            for (c_ij, &b_kj) in c_row.iter_mut().zip(b_row) {
                *c_ij += a_ik * b_kj;
            }
        }
    }
    let mut out = lock(out.bytes());
    for (chunk, value) in out[..len].chunks_exact_mut(4).zip(c) {
        chunk.copy_from_slice(&value.to_ne_bytes());
    }
}

/// Resident warps per compute unit over the maximum, with blocks spread evenly over the
/// compute units and limited by thread and block slots.
fn occupancy_pct(dims: LaunchDims) -> u32 {
    let blocks: u64 = dims.grid.iter().map(|&d| u64::from(d)).product();
    let threads: u64 = dims.block.iter().map(|&d| u64::from(d)).product();
    let max_warps = u64::from(MAX_THREADS_PER_COMPUTE_UNIT / WARP_SIZE);
    // A partial warp still occupies a whole warp slot.
    let warps_per_block = threads.div_ceil(u64::from(WARP_SIZE));
    if blocks == 0 || warps_per_block == 0 || warps_per_block > max_warps {
        return 0;
    }
    let resident_blocks = (max_warps / warps_per_block)
        .min(blocks.div_ceil(u64::from(COMPUTE_UNITS)))
        .min(u64::from(MAX_BLOCKS_PER_COMPUTE_UNIT));
    (resident_blocks * warps_per_block * 100 / max_warps) as u32
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::OrError;
    use crate::memory::{malloc, memcpy_async, HostBuffer};
    use crate::test_support::shared;

    fn upload(values: &[f32], stream: &Stream) -> DeviceBuffer {
        let buf = malloc(stream.device(), values.len() * 4).unwrap();
        memcpy_async(
            &buf,
            &HostBuffer::from_f32s(values),
            values.len() * 4,
            stream,
        )
        .unwrap();
        buf
    }

    fn download(buf: &DeviceBuffer, stream: &Stream) -> Vec<f32> {
        let host = HostBuffer::zeroed(buf.len());
        memcpy_async(&host, buf, buf.len(), stream).unwrap();
        stream.synchronize();
        host.to_f32s()
    }

    fn reference(a: &[f32], b: &[f32], n: usize) -> Vec<f32> {
        let mut c = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                c[i * n + j] = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum();
            }
        }
        c
    }

    #[test]
    fn matmul_computes_the_product() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        // 19 is not a multiple of the tile; small integers keep the sums exact.
        let n = 19;
        let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32).collect();
        let b: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32 - 2.0).collect();
        let (da, db, out) = (
            upload(&a, &stream),
            upload(&b, &stream),
            malloc(0, n * n * 4).unwrap(),
        );
        let kernel = Kernel::Matmul {
            a: da.clone(),
            b: db,
            out: out.clone(),
            n,
        };
        launch_kernel(kernel, &stream).unwrap();
        assert_eq!(download(&out, &stream), reference(&a, &b, n));
        // In place, squaring: aliased buffers must neither deadlock nor read half-written data.
        launch_kernel(
            Kernel::Matmul {
                a: da.clone(),
                b: da.clone(),
                out: da.clone(),
                n,
            },
            &stream,
        )
        .unwrap();
        assert_eq!(download(&da, &stream), reference(&a, &a, n));
        launch_kernel(
            Kernel::Matmul {
                a: da.clone(),
                b: da.clone(),
                out: da,
                n: 0,
            },
            &stream,
        )
        .unwrap();
        stream.synchronize();
    }

    #[test]
    fn matmul_rejects_small_buffers() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        let buf = malloc(0, 16).unwrap();
        let kernel = |n| Kernel::Matmul {
            a: buf.clone(),
            b: buf.clone(),
            out: buf.clone(),
            n,
        };
        assert!(matches!(
            launch_kernel(kernel(3), &stream),
            Err(OrError::BufferTooSmall {
                needed: 36,
                len: 16
            })
        ));
        assert!(matches!(
            launch_kernel(kernel(usize::MAX), &stream),
            Err(OrError::BufferTooSmall {
                needed: usize::MAX,
                ..
            })
        ));
    }

    #[test]
    fn kernels_reject_buffers_of_another_device() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        let fill = Kernel::Fill {
            out: malloc(1, 64).unwrap(),
            value: 0.0,
        };
        assert!(matches!(
            launch_kernel(fill, &stream),
            Err(OrError::DeviceMismatch {
                buffer: 1,
                stream: 0
            })
        ));
    }

    #[test]
    fn fill_sets_every_whole_value() {
        let _guard = shared();
        let stream = Stream::new(1).unwrap();
        let buf = malloc(1, 4 * 1000 + 3).unwrap();
        launch_kernel(
            Kernel::Fill {
                out: buf.clone(),
                value: 2.5,
            },
            &stream,
        )
        .unwrap();
        let host = HostBuffer::zeroed(buf.len());
        memcpy_async(&host, &buf, buf.len(), &stream).unwrap();
        stream.synchronize();
        assert!(host.to_f32s().iter().all(|&v| v == 2.5));
        assert_eq!(host.to_bytes()[4000..], [0, 0, 0]);
    }

    #[test]
    fn launch_shape_and_metrics_are_deterministic() {
        let _guard = shared();
        let buf = malloc(0, 64 * 64 * 4).unwrap();
        let matmul = Kernel::Matmul {
            a: buf.clone(),
            b: buf.clone(),
            out: buf.clone(),
            n: 64,
        };
        assert_eq!(matmul.name(), "matmul_64x64");
        assert_eq!(
            matmul.launch_dims(),
            LaunchDims {
                grid: [4, 4, 1],
                block: [16, 16, 1]
            }
        );
        // 16 blocks of 8 warps over 8 compute units: 2 blocks, 16 of 64 warps each.
        assert_eq!(
            matmul.metrics(),
            KernelMetrics {
                elements: 4096,
                bytes_read: 2 * 4096 * 4,
                bytes_written: 4096 * 4,
                flops: 2 * 64 * 64 * 64,
                occupancy_pct: 25,
            }
        );
        let fill = Kernel::Fill {
            out: buf,
            value: 0.0,
        };
        assert_eq!(fill.launch_dims().grid, [16, 1, 1]);
        assert_eq!(fill.metrics().occupancy_pct, 25);
        let big = Kernel::Fill {
            out: malloc(0, 1 << 24).unwrap(),
            value: 0.0,
        };
        assert_eq!(big.metrics().occupancy_pct, 100);
        let busy = Kernel::Busy(Duration::from_millis(1));
        assert_eq!(
            (busy.name(), busy.metrics().occupancy_pct),
            ("busy_spin".into(), 1)
        );
    }
}
