//! CUPTI activity records, decoded from their bytes by field offsets.
//!
//! CUPTI hands records as C structs whose version changes with the toolkit
//! (`CUpti_ActivityKernel9` in 12.x, `…Kernel10` in 13.0, `…Kernel11` in 13.1 and 13.2), but
//! the fields omniprof reads sit at the same offsets in every version checked, from CUPTI
//! 12.4 (API version 22) to 13.2 (130202): later versions append fields. So one table of
//! offsets ([`FIELDS`]) serves them all, and a version outside [`KNOWN_VERSIONS`] is refused
//! rather than decoded on a guess. `tests/layout.rs` compiles `tests/layout.c` against the
//! installed CUPTI headers and checks every offset and a filled record of each kind.
//!
//! Decoding reads from a byte slice with bounds checks; it never dereferences the kernel's
//! name pointer (the session does that, while the module that owns the name is loaded).

use std::fmt;

/// The CUPTI API versions (`cuptiGetVersion`) whose records were checked against their
/// headers, as inclusive ranges: 12.4–12.9 and 13.0–13.2.
pub const KNOWN_VERSIONS: [(u32, u32); 2] = [(22, 28), (130_001, 130_202)];

/// Whether records of CUPTI API `version` decode with [`FIELDS`].
pub fn is_known_version(version: u32) -> bool {
    KNOWN_VERSIONS
        .iter()
        .any(|&(low, high)| (low..=high).contains(&version))
}

/// `CUpti_ActivityKind` values omniprof enables or reads.
pub mod kind {
    /// `CUPTI_ACTIVITY_KIND_MEMCPY`.
    pub const MEMCPY: u32 = 1;
    /// `CUPTI_ACTIVITY_KIND_MEMSET`.
    pub const MEMSET: u32 = 2;
    /// `CUPTI_ACTIVITY_KIND_DRIVER`.
    pub const DRIVER: u32 = 4;
    /// `CUPTI_ACTIVITY_KIND_RUNTIME`.
    pub const RUNTIME: u32 = 5;
    /// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`.
    pub const CONCURRENT_KERNEL: u32 = 10;
    /// `CUPTI_ACTIVITY_KIND_OVERHEAD`.
    pub const OVERHEAD: u32 = 17;
    /// `CUPTI_ACTIVITY_KIND_CUDA_EVENT`: a `cudaEventRecord`'s event and stream.
    pub const CUDA_EVENT: u32 = 36;
    /// `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`.
    pub const SYNCHRONIZATION: u32 = 38;
    /// `CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION`.
    pub const EXTERNAL_CORRELATION: u32 = 39;
}

/// `CUpti_ExternalCorrelationKind` values omniprof pushes: host ops as `CUSTOM0` and user
/// ranges as `CUSTOM1`, as Kineto does.
pub mod external {
    /// `CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0`: a host op.
    pub const OP: u32 = 3;
    /// `CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1`: a user range.
    pub const USER: u32 = 4;
}

/// One field of a record: its C name, byte offset and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The C member's name.
    pub name: &'static str,
    /// Its byte offset in the record.
    pub offset: usize,
    /// Its size in bytes.
    pub size: usize,
}

const fn f(name: &'static str, offset: usize, size: usize) -> Field {
    Field { name, offset, size }
}

/// Declares a record's fields, each once: a constant per field and `ALL`, the list
/// [`FIELDS`] and [`bytes_read`] read.
macro_rules! fields {
    ($($name:ident = $c_name:literal at $offset:literal, $size:literal;)*) => {
        $(pub(super) const $name: Field = f($c_name, $offset, $size);)*
        pub(super) const ALL: &[Field] = &[$($name),*];
    };
}

/// Kernel fields (`CUpti_ActivityKernel9/10/11`).
mod kernel {
    use super::{f, Field};
    fields! {
        REGISTERS = "registersPerThread" at 6, 2;
        START = "start" at 16, 8;
        END = "end" at 24, 8;
        DEVICE = "deviceId" at 40, 4;
        CONTEXT = "contextId" at 44, 4;
        STREAM = "streamId" at 48, 4;
        GRID_X = "gridX" at 52, 4;
        GRID_Y = "gridY" at 56, 4;
        GRID_Z = "gridZ" at 60, 4;
        BLOCK_X = "blockX" at 64, 4;
        BLOCK_Y = "blockY" at 68, 4;
        BLOCK_Z = "blockZ" at 72, 4;
        STATIC_SHARED = "staticSharedMemory" at 76, 4;
        DYNAMIC_SHARED = "dynamicSharedMemory" at 80, 4;
        CORRELATION = "correlationId" at 92, 4;
        NAME = "name" at 104, 8;
        QUEUED = "queued" at 120, 8;
    }
    pub(super) const GRID: [Field; 3] = [GRID_X, GRID_Y, GRID_Z];
    pub(super) const BLOCK: [Field; 3] = [BLOCK_X, BLOCK_Y, BLOCK_Z];
}

/// Memory copy fields (`CUpti_ActivityMemcpy5/6`).
mod memcpy {
    use super::{f, Field};
    fields! {
        COPY_KIND = "copyKind" at 4, 1;
        SRC_KIND = "srcKind" at 5, 1;
        DST_KIND = "dstKind" at 6, 1;
        BYTES = "bytes" at 8, 8;
        START = "start" at 16, 8;
        END = "end" at 24, 8;
        DEVICE = "deviceId" at 32, 4;
        CONTEXT = "contextId" at 36, 4;
        STREAM = "streamId" at 40, 4;
        CORRELATION = "correlationId" at 44, 4;
    }
}

/// Memory set fields (`CUpti_ActivityMemset4`).
mod memset {
    use super::{f, Field};
    fields! {
        VALUE = "value" at 4, 4;
        BYTES = "bytes" at 8, 8;
        START = "start" at 16, 8;
        END = "end" at 24, 8;
        DEVICE = "deviceId" at 32, 4;
        CONTEXT = "contextId" at 36, 4;
        STREAM = "streamId" at 40, 4;
        CORRELATION = "correlationId" at 44, 4;
        MEMORY_KIND = "memoryKind" at 50, 2;
    }
}

/// Runtime and driver API call fields (`CUpti_ActivityAPI`).
mod api {
    use super::{f, Field};
    fields! {
        CBID = "cbid" at 4, 4;
        START = "start" at 8, 8;
        END = "end" at 16, 8;
        PROCESS = "processId" at 24, 4;
        THREAD = "threadId" at 28, 4;
        CORRELATION = "correlationId" at 32, 4;
    }
}

/// CUPTI overhead fields (`CUpti_ActivityOverhead3`). `objectId` is a union: a process and
/// thread id, or a device, context and stream id.
mod overhead {
    use super::{f, Field};
    fields! {
        KIND = "overheadKind" at 4, 4;
        OBJECT_KIND = "objectKind" at 8, 4;
        OBJECT_ID = "objectId" at 12, 12;
        START = "start" at 24, 8;
        END = "end" at 32, 8;
    }
}

/// Synchronization fields (`CUpti_ActivitySynchronization`/`…2`).
mod sync {
    use super::{f, Field};
    fields! {
        TYPE = "type" at 4, 4;
        START = "start" at 8, 8;
        END = "end" at 16, 8;
        CORRELATION = "correlationId" at 24, 4;
        CONTEXT = "contextId" at 28, 4;
        STREAM = "streamId" at 32, 4;
        EVENT = "cudaEventId" at 36, 4;
    }
}

/// CUDA event record fields (`CUpti_ActivityCudaEvent`/`…2`).
mod cuda_event {
    use super::{f, Field};
    fields! {
        CORRELATION = "correlationId" at 4, 4;
        CONTEXT = "contextId" at 8, 4;
        STREAM = "streamId" at 12, 4;
        EVENT = "eventId" at 16, 4;
    }
}

/// External correlation fields (`CUpti_ActivityExternalCorrelation`).
mod correlation {
    use super::{f, Field};
    fields! {
        KIND = "externalKind" at 4, 4;
        EXTERNAL_ID = "externalId" at 8, 8;
        CORRELATION = "correlationId" at 16, 4;
    }
}

/// Every field omniprof reads, by record: the names `tests/layout.c` prints them under.
pub const FIELDS: [(&str, &[Field]); 8] = [
    ("kernel", kernel::ALL),
    ("memcpy", memcpy::ALL),
    ("memset", memset::ALL),
    ("api", api::ALL),
    ("overhead", overhead::ALL),
    ("sync", sync::ALL),
    ("cuda_event", cuda_event::ALL),
    ("external", correlation::ALL),
];

/// How many bytes of a record of `kind` decoding reads: the end of its last field read.
pub fn bytes_read(kind: u32) -> usize {
    let fields: &[Field] = match kind {
        kind::CONCURRENT_KERNEL => kernel::ALL,
        kind::MEMCPY => memcpy::ALL,
        kind::MEMSET => memset::ALL,
        kind::RUNTIME | kind::DRIVER => api::ALL,
        kind::OVERHEAD => overhead::ALL,
        kind::SYNCHRONIZATION => sync::ALL,
        kind::CUDA_EVENT => cuda_event::ALL,
        kind::EXTERNAL_CORRELATION => correlation::ALL,
        _ => &[],
    };
    fields.iter().map(|f| f.offset + f.size).max().unwrap_or(4)
}

/// A kernel execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// GPU start and end, in CUPTI's clock.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// The device, context and stream it ran on.
    pub device: u32,
    /// See `device`.
    pub context: u32,
    /// See `device`.
    pub stream: u32,
    /// The launch's grid and block dimensions.
    pub grid: [i32; 3],
    /// See `grid`.
    pub block: [i32; 3],
    /// Registers per thread.
    pub registers: u16,
    /// Static plus dynamic shared memory per block, in bytes.
    pub shared_memory: i64,
    /// The launching API call's correlation id.
    pub correlation: u32,
    /// The address of CUPTI's copy of the (mangled) name.
    pub name_ptr: u64,
    /// When the launch was queued, in CUPTI's clock (0 or `u64::MAX` when not recorded).
    pub queued: u64,
}

/// A memory copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Memcpy {
    /// `CUpti_ActivityMemcpyKind`.
    pub copy_kind: u8,
    /// `CUpti_ActivityMemoryKind` of the source and the destination.
    pub src_kind: u8,
    /// See `src_kind`.
    pub dst_kind: u8,
    /// Bytes copied.
    pub bytes: u64,
    /// GPU start and end, in CUPTI's clock.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// Device, context and stream.
    pub device: u32,
    /// See `device`.
    pub context: u32,
    /// See `device`.
    pub stream: u32,
    /// The launching API call's correlation id.
    pub correlation: u32,
}

/// A memory set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Memset {
    /// The value set.
    pub value: u32,
    /// Bytes set.
    pub bytes: u64,
    /// GPU start and end, in CUPTI's clock.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// Device, context and stream.
    pub device: u32,
    /// See `device`.
    pub context: u32,
    /// See `device`.
    pub stream: u32,
    /// The launching API call's correlation id.
    pub correlation: u32,
    /// `CUpti_ActivityMemoryKind` of the memory set.
    pub memory_kind: u16,
}

/// A runtime or driver API call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Api {
    /// True for a driver call, false for a runtime call.
    pub driver: bool,
    /// The callback id, which names the function.
    pub cbid: u32,
    /// Host start and end, in CUPTI's clock.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// The calling process and thread (CUPTI's default thread id: `pthread_self`, as 32
    /// bits).
    pub process: u32,
    /// See `process`.
    pub thread: u32,
    /// The call's correlation id, shared with the device work it launched.
    pub correlation: u32,
}

/// What CUPTI itself cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overhead {
    /// `CUpti_ActivityOverheadKind`.
    pub kind: u32,
    /// `CUpti_ActivityObjectKind` of `object`.
    pub object_kind: u32,
    /// The object's id, as three words: (process, thread, 0) for a process or thread,
    /// (device, context, stream) otherwise.
    pub object: [u32; 3],
    /// Start and end, in CUPTI's clock.
    pub start: u64,
    /// See `start`.
    pub end: u64,
}

/// A synchronization call's wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sync {
    /// `CUpti_ActivitySynchronizationType`.
    pub sync_type: u32,
    /// Start and end, in CUPTI's clock.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// The API call's correlation id.
    pub correlation: u32,
    /// Context and stream (`u32::MAX` when none applies).
    pub context: u32,
    /// See `context`.
    pub stream: u32,
    /// The CUDA event waited for (`u32::MAX` when none).
    pub event: u32,
}

/// A CUDA event recorded on a stream (`cudaEventRecord`): what a wait on that event waits
/// for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaEvent {
    /// The recording API call's correlation id.
    pub correlation: u32,
    /// The context and stream it was recorded on.
    pub context: u32,
    /// See `context`.
    pub stream: u32,
    /// The event, as a synchronization's `event` names it.
    pub event: u32,
}

/// The external id pushed when an API call ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalCorrelation {
    /// `CUpti_ExternalCorrelationKind` ([`external::OP`] or [`external::USER`] for
    /// omniprof's).
    pub external_kind: u32,
    /// The id pushed: a host op's or user range's correlation id.
    pub external_id: u64,
    /// The API call's correlation id.
    pub correlation: u32,
}

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// `CONCURRENT_KERNEL`.
    Kernel(Kernel),
    /// `MEMCPY`.
    Memcpy(Memcpy),
    /// `MEMSET`.
    Memset(Memset),
    /// `RUNTIME` or `DRIVER`.
    Api(Api),
    /// `OVERHEAD`.
    Overhead(Overhead),
    /// `SYNCHRONIZATION`.
    Sync(Sync),
    /// `CUDA_EVENT`.
    CudaEvent(CudaEvent),
    /// `EXTERNAL_CORRELATION`.
    ExternalCorrelation(ExternalCorrelation),
    /// A kind omniprof does not read.
    Other(u32),
}

/// A record shorter than its kind's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncated {
    /// The record's kind.
    pub kind: u32,
    /// Bytes given.
    pub len: usize,
    /// Bytes its fields need.
    pub needed: usize,
}

impl fmt::Display for Truncated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a CUPTI record of kind {} has {} bytes, fewer than the {} its fields take",
            self.kind, self.len, self.needed
        )
    }
}

/// Reads a little-endian unsigned field (1 to 8 bytes) of a record already length-checked.
fn read(bytes: &[u8], field: Field) -> u64 {
    let mut word = [0u8; 8];
    word[..field.size].copy_from_slice(&bytes[field.offset..field.offset + field.size]);
    u64::from_le_bytes(word)
}

fn read_u32(bytes: &[u8], field: Field) -> u32 {
    read(bytes, field) as u32
}

fn read_i32(bytes: &[u8], field: Field) -> i32 {
    read(bytes, field) as u32 as i32
}

/// Decodes one record: its kind is its first four bytes.
pub fn decode(bytes: &[u8]) -> Result<Record, Truncated> {
    let kind = bytes
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(Truncated {
            kind: 0,
            len: bytes.len(),
            needed: 4,
        })?;
    let needed = bytes_read(kind);
    if bytes.len() < needed {
        return Err(Truncated {
            kind,
            len: bytes.len(),
            needed,
        });
    }
    let b = bytes;
    Ok(match kind {
        kind::CONCURRENT_KERNEL => Record::Kernel(Kernel {
            start: read(b, kernel::START),
            end: read(b, kernel::END),
            device: read_u32(b, kernel::DEVICE),
            context: read_u32(b, kernel::CONTEXT),
            stream: read_u32(b, kernel::STREAM),
            grid: kernel::GRID.map(|f| read_i32(b, f)),
            block: kernel::BLOCK.map(|f| read_i32(b, f)),
            registers: read(b, kernel::REGISTERS) as u16,
            shared_memory: i64::from(read_i32(b, kernel::STATIC_SHARED))
                + i64::from(read_i32(b, kernel::DYNAMIC_SHARED)),
            correlation: read_u32(b, kernel::CORRELATION),
            name_ptr: read(b, kernel::NAME),
            queued: read(b, kernel::QUEUED),
        }),
        kind::MEMCPY => Record::Memcpy(Memcpy {
            copy_kind: read(b, memcpy::COPY_KIND) as u8,
            src_kind: read(b, memcpy::SRC_KIND) as u8,
            dst_kind: read(b, memcpy::DST_KIND) as u8,
            bytes: read(b, memcpy::BYTES),
            start: read(b, memcpy::START),
            end: read(b, memcpy::END),
            device: read_u32(b, memcpy::DEVICE),
            context: read_u32(b, memcpy::CONTEXT),
            stream: read_u32(b, memcpy::STREAM),
            correlation: read_u32(b, memcpy::CORRELATION),
        }),
        kind::MEMSET => Record::Memset(Memset {
            value: read_u32(b, memset::VALUE),
            bytes: read(b, memset::BYTES),
            start: read(b, memset::START),
            end: read(b, memset::END),
            device: read_u32(b, memset::DEVICE),
            context: read_u32(b, memset::CONTEXT),
            stream: read_u32(b, memset::STREAM),
            correlation: read_u32(b, memset::CORRELATION),
            memory_kind: read(b, memset::MEMORY_KIND) as u16,
        }),
        kind::RUNTIME | kind::DRIVER => Record::Api(Api {
            driver: kind == kind::DRIVER,
            cbid: read_u32(b, api::CBID),
            start: read(b, api::START),
            end: read(b, api::END),
            process: read_u32(b, api::PROCESS),
            thread: read_u32(b, api::THREAD),
            correlation: read_u32(b, api::CORRELATION),
        }),
        kind::OVERHEAD => {
            let at = overhead::OBJECT_ID.offset;
            let word = |i: usize| read_u32(b, f("objectId", at + 4 * i, 4));
            Record::Overhead(Overhead {
                kind: read_u32(b, overhead::KIND),
                object_kind: read_u32(b, overhead::OBJECT_KIND),
                object: [word(0), word(1), word(2)],
                start: read(b, overhead::START),
                end: read(b, overhead::END),
            })
        }
        kind::SYNCHRONIZATION => Record::Sync(Sync {
            sync_type: read_u32(b, sync::TYPE),
            start: read(b, sync::START),
            end: read(b, sync::END),
            correlation: read_u32(b, sync::CORRELATION),
            context: read_u32(b, sync::CONTEXT),
            stream: read_u32(b, sync::STREAM),
            event: read_u32(b, sync::EVENT),
        }),
        kind::CUDA_EVENT => Record::CudaEvent(CudaEvent {
            correlation: read_u32(b, cuda_event::CORRELATION),
            context: read_u32(b, cuda_event::CONTEXT),
            stream: read_u32(b, cuda_event::STREAM),
            event: read_u32(b, cuda_event::EVENT),
        }),
        kind::EXTERNAL_CORRELATION => Record::ExternalCorrelation(ExternalCorrelation {
            external_kind: read_u32(b, correlation::KIND),
            external_id: read(b, correlation::EXTERNAL_ID),
            correlation: read_u32(b, correlation::CORRELATION),
        }),
        other => Record::Other(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_shorter_than_its_fields_is_refused_with_both_lengths() {
        let mut bytes = vec![0u8; 40];
        bytes[..4].copy_from_slice(&kind::CONCURRENT_KERNEL.to_le_bytes());
        assert_eq!(
            decode(&bytes),
            Err(Truncated {
                kind: 10,
                len: 40,
                needed: 128
            })
        );
        assert_eq!(
            decode(&bytes).unwrap_err().to_string(),
            "a CUPTI record of kind 10 has 40 bytes, fewer than the 128 its fields take"
        );
    }

    #[test]
    fn a_kind_omniprof_does_not_read_decodes_as_other() {
        assert_eq!(decode(&9u32.to_le_bytes()), Ok(Record::Other(9)));
    }

    #[test]
    fn only_the_checked_versions_are_known() {
        assert!(is_known_version(22));
        assert!(is_known_version(28));
        assert!(is_known_version(130_001));
        assert!(is_known_version(130_202));
        assert!(!is_known_version(21));
        assert!(!is_known_version(29));
        assert!(!is_known_version(130_300));
    }
}
