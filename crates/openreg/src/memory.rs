//! Memory: device allocations, pinned host buffers, and the asynchronous copies and fills
//! between them.
//!
//! Device memory is host memory owned by a device: what makes it "device" memory is that only
//! stream work touches it, and that it counts against the device's simulated capacity. Both
//! kinds of buffer are shared handles because asynchronous work keeps using them after the
//! launching call returns (like pinned host memory for `cudaMemcpyAsync`).

//!
//! Memory sits on the streams it queues copies on and the device registry that accounts for
//! it; kernels, which compute on device buffers, sit above it.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use crate::activity_api::traced;
use crate::activity_records::{DeviceActivity, RuntimeApi};
use crate::device::runtime;
use crate::error::{OrError, Result};
use crate::hardware::MemcpyKind;
use crate::lock::lock;
use crate::queue::Work;
use crate::stream::Stream;

/// Memory of one device, freed when the last handle (including those held by queued work)
/// is dropped.
#[derive(Clone)]
pub struct DeviceBuffer {
    inner: Arc<Allocation>,
}

struct Allocation {
    device: usize,
    /// Kept beside the bytes so sizes can be checked while a kernel holds the lock.
    len: usize,
    bytes: Mutex<Vec<u8>>,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // Always found: the allocation was made through this device.
        if let Ok(device) = runtime().device(self.device) {
            device.release(self.len as u64);
        }
    }
}

impl DeviceBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device owning the memory.
    pub fn device(&self) -> usize {
        self.inner.device
    }

    pub(crate) fn bytes(&self) -> &Mutex<Vec<u8>> {
        &self.inner.bytes
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("device", &self.device())
            .field("len", &self.len())
            .finish()
    }
}

/// Page-locked host memory, the only host memory asynchronous copies accept (they read or
/// write it after the launching call returned). Read it after synchronizing.
#[derive(Clone, Debug, Default)]
pub struct HostBuffer {
    len: usize,
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl HostBuffer {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> Self {
        Self {
            len,
            bytes: Arc::new(Mutex::new(vec![0; len])),
        }
    }

    /// A copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self {
            len: bytes.len(),
            bytes: Arc::new(Mutex::new(bytes.to_vec())),
        }
    }

    /// `values` in native byte order, the layout kernels use.
    pub fn from_f32s(values: &[f32]) -> Self {
        Self::from_bytes(
            &values
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect::<Vec<_>>(),
        )
    }

    /// A copy of the contents.
    pub fn to_bytes(&self) -> Vec<u8> {
        lock(&self.bytes).clone()
    }

    /// The contents as `f32`s in native byte order (a trailing partial value is ignored).
    pub fn to_f32s(&self) -> Vec<f32> {
        f32s(&lock(&self.bytes))
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Either side of a copy.
#[derive(Clone, Debug)]
pub enum Buffer {
    /// Pinned host memory.
    Host(HostBuffer),
    /// Device memory.
    Device(DeviceBuffer),
}

impl From<&HostBuffer> for Buffer {
    fn from(buffer: &HostBuffer) -> Self {
        Self::Host(buffer.clone())
    }
}

impl From<&DeviceBuffer> for Buffer {
    fn from(buffer: &DeviceBuffer) -> Self {
        Self::Device(buffer.clone())
    }
}

impl Buffer {
    fn bytes(&self) -> &Mutex<Vec<u8>> {
        match self {
            Self::Host(h) => &h.bytes,
            Self::Device(d) => d.bytes(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Host(h) => h.len(),
            Self::Device(d) => d.len(),
        }
    }

    fn is_device(&self) -> bool {
        matches!(self, Self::Device(_))
    }
}

/// Direction of a copy from `src` to `dst`.
fn memcpy_kind(dst: &Buffer, src: &Buffer) -> MemcpyKind {
    match (src.is_device(), dst.is_device()) {
        (false, true) => MemcpyKind::HostToDevice,
        (true, false) => MemcpyKind::DeviceToHost,
        (true, true) => MemcpyKind::DeviceToDevice,
        (false, false) => MemcpyKind::HostToHost,
    }
}

/// Allocates `bytes` zeroed bytes on `device` (`orMalloc`).
pub fn malloc(device: usize, bytes: usize) -> Result<DeviceBuffer> {
    let owner = runtime().device(device)?;
    traced(RuntimeApi::Malloc, |_| {
        owner.reserve(bytes as u64)?;
        Ok(DeviceBuffer {
            inner: Arc::new(Allocation {
                device,
                len: bytes,
                bytes: Mutex::new(vec![0; bytes]),
            }),
        })
    })
}

/// Queues a copy of the first `bytes` bytes of `src` to the start of `dst` on `stream`
/// (`orMemcpyAsync`). Device buffers must belong to the stream's device.
pub fn memcpy_async(
    dst: impl Into<Buffer>,
    src: impl Into<Buffer>,
    bytes: usize,
    stream: &Stream,
) -> Result<()> {
    let (dst, src) = (dst.into(), src.into());
    for buffer in [&dst, &src] {
        check_len(buffer.len(), bytes)?;
        if let Buffer::Device(d) = buffer {
            check_device(d, stream)?;
        }
    }
    let kind = memcpy_kind(&dst, &src);
    traced(RuntimeApi::MemcpyAsync, |tag| {
        let transfer = Transfer {
            dst,
            src,
            bytes,
            kind,
        };
        stream.submit(transfer, tag);
    });
    Ok(())
}

/// Queues filling the first `bytes` bytes of `dst` with `value` on `stream`
/// (`orMemsetAsync`).
pub fn memset_async(dst: &DeviceBuffer, value: u8, bytes: usize, stream: &Stream) -> Result<()> {
    check_len(dst.len(), bytes)?;
    check_device(dst, stream)?;
    let dst = dst.clone();
    traced(RuntimeApi::MemsetAsync, |tag| {
        stream.submit(Fill { dst, value, bytes }, tag);
    });
    Ok(())
}

pub(crate) fn check_len(len: usize, needed: usize) -> Result<()> {
    if needed > len {
        return Err(OrError::BufferTooSmall { needed, len });
    }
    Ok(())
}

pub(crate) fn check_device(buffer: &DeviceBuffer, stream: &Stream) -> Result<()> {
    if buffer.device() != stream.device() {
        return Err(OrError::DeviceMismatch {
            buffer: buffer.device(),
            stream: stream.device(),
        });
    }
    Ok(())
}

/// Native-endian `f32`s of `bytes`.
pub(crate) fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A queued copy.
struct Transfer {
    dst: Buffer,
    src: Buffer,
    bytes: usize,
    kind: MemcpyKind,
}

impl Work for Transfer {
    fn execute(&self) {
        // Slicing cannot fail: lengths were checked at launch and buffers never resize.
        // Copy out of the source before locking the destination: holding both locks could
        // deadlock against a reverse copy on another stream, and a buffer copied onto itself
        // would lock its own mutex twice.
        let data = lock(self.src.bytes())[..self.bytes].to_vec();
        lock(self.dst.bytes())[..self.bytes].copy_from_slice(&data);
    }

    fn describe(&self) -> (Cow<'static, str>, DeviceActivity) {
        let activity = DeviceActivity::Memcpy {
            kind: self.kind,
            bytes: self.bytes as u64,
        };
        (self.kind.name().into(), activity)
    }

    fn takes_device_time(&self) -> bool {
        true
    }

    fn copied(&self) -> Option<(MemcpyKind, u64)> {
        Some((self.kind, self.bytes as u64))
    }
}

/// A queued fill.
struct Fill {
    dst: DeviceBuffer,
    value: u8,
    bytes: usize,
}

impl Work for Fill {
    fn execute(&self) {
        lock(self.dst.bytes())[..self.bytes].fill(self.value);
    }

    fn describe(&self) -> (Cow<'static, str>, DeviceActivity) {
        let activity = DeviceActivity::Memset {
            value: self.value,
            bytes: self.bytes as u64,
        };
        ("Memset".into(), activity)
    }

    fn takes_device_time(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::device_memory_used;
    use crate::test_support::{exclusive, shared};

    #[test]
    fn copies_and_fills_move_real_bytes() {
        let _guard = shared();
        let stream = Stream::new(1).unwrap();
        let pattern: Vec<u8> = (0..=255).collect();
        let src = HostBuffer::from_bytes(&pattern);
        let (a, b) = (malloc(1, 256).unwrap(), malloc(1, 256).unwrap());
        let (back, again) = (HostBuffer::zeroed(256), HostBuffer::zeroed(256));
        memcpy_async(&a, &src, 256, &stream).unwrap();
        memcpy_async(&b, &a, 256, &stream).unwrap();
        memset_async(&b, 0xAB, 16, &stream).unwrap();
        memcpy_async(&back, &b, 256, &stream).unwrap();
        memcpy_async(&again, &back, 100, &stream).unwrap();
        memcpy_async(&a, &a, 256, &stream).unwrap();
        stream.synchronize();
        let mut expected = pattern.clone();
        expected[..16].fill(0xAB);
        assert_eq!(back.to_bytes(), expected);
        assert_eq!(again.to_bytes()[..100], expected[..100]);
        assert!(again.to_bytes()[100..].iter().all(|&b| b == 0));
    }

    #[test]
    fn memcpy_kind_follows_the_buffers() {
        let _guard = shared();
        let (h, d) = (
            Buffer::from(&HostBuffer::zeroed(4)),
            Buffer::from(&malloc(0, 4).unwrap()),
        );
        assert_eq!(memcpy_kind(&d, &h), MemcpyKind::HostToDevice);
        assert_eq!(memcpy_kind(&h, &d), MemcpyKind::DeviceToHost);
        assert_eq!(memcpy_kind(&d, &d), MemcpyKind::DeviceToDevice);
        assert_eq!(memcpy_kind(&h, &h), MemcpyKind::HostToHost);
        assert_eq!(MemcpyKind::HostToDevice.name(), "Memcpy HtoD");
    }

    #[test]
    fn out_of_bounds_and_foreign_buffers_are_errors() {
        let _guard = shared();
        let stream = Stream::new(0).unwrap();
        let (small, big) = (malloc(0, 8).unwrap(), malloc(0, 64).unwrap());
        let other = malloc(1, 64).unwrap();
        let too_small = |r| matches!(r, Err(OrError::BufferTooSmall { needed: 64, len: 8 }));
        assert!(too_small(memcpy_async(&small, &big, 64, &stream)));
        assert!(too_small(memcpy_async(&big, &small, 64, &stream)));
        assert!(too_small(memset_async(&small, 0, 64, &stream)));
        let mismatch = |r| {
            matches!(
                r,
                Err(OrError::DeviceMismatch {
                    buffer: 1,
                    stream: 0
                })
            )
        };
        assert!(mismatch(memcpy_async(&big, &other, 64, &stream)));
        assert!(mismatch(memset_async(&other, 0, 1, &stream)));
        let missing = |r| {
            matches!(
                r,
                Err(OrError::InvalidDevice {
                    device: 2,
                    count: 2
                })
            )
        };
        assert!(missing(malloc(2, 4).map(drop)));
    }

    #[test]
    fn device_memory_is_accounted_and_bounded() {
        // Exclusive: other tests allocate on the same device.
        let _guard = exclusive();
        let stream = Stream::new(0).unwrap();
        let before = device_memory_used(0).unwrap();
        let buf = malloc(0, 1 << 20).unwrap();
        assert_eq!(device_memory_used(0).unwrap(), before + (1 << 20));
        let total = crate::options::Options::default().memory_per_device;
        assert!(matches!(
            malloc(0, total as usize),
            Err(OrError::OutOfMemory { device: 0, requested, .. }) if requested == total
        ));
        // Queued work keeps the memory alive; it is freed once that work is done.
        memset_async(&buf, 1, 1 << 20, &stream).unwrap();
        drop(buf);
        stream.synchronize();
        assert_eq!(device_memory_used(0).unwrap(), before);
    }

    #[test]
    fn host_buffers_round_trip_f32s() {
        let values = [1.5f32, -2.0, 0.0];
        let host = HostBuffer::from_f32s(&values);
        assert_eq!((host.len(), host.is_empty()), (12, false));
        assert_eq!(host.to_f32s(), values);
        assert!(HostBuffer::default().is_empty());
    }
}
