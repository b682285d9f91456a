//! The records the activity API produces, as plain data: runtime records, device records and
//! what each kind of device work carries, and the kinds a session selects.
//!
//! Only data lives here, below the activity API (`activity_api.rs`) that stores it and below
//! the kernels, copies and events that describe themselves with it.

use std::borrow::Cow;
use std::ops::BitOr;

use crate::hardware::{KernelMetrics, LaunchDims, MemcpyKind};

/// A set of record kinds to collect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Kinds(pub(crate) u8);

impl Kinds {
    /// Nothing: the same as [`disable`](crate::disable_recording).
    pub const NONE: Self = Self(0);
    /// [`RuntimeRecord`]s.
    pub const RUNTIME: Self = Self(1);
    /// Device records of kernels.
    pub const KERNEL: Self = Self(1 << 1);
    /// Device records of copies.
    pub const MEMCPY: Self = Self(1 << 2);
    /// Device records of fills.
    pub const MEMSET: Self = Self(1 << 3);
    /// Device records of event records reaching the front of their stream.
    pub const EVENT: Self = Self(1 << 4);
    /// Device records of synchronization: stream waits and host-side synchronize calls.
    pub const SYNC: Self = Self(1 << 5);
    /// Every kind.
    pub const ALL: Self = Self((1 << 6) - 1);

    /// Whether every kind of `other` is in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for Kinds {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// The runtime API calls that produce [`RuntimeRecord`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuntimeApi {
    /// [`malloc`](crate::malloc).
    Malloc,
    /// [`launch_kernel`](crate::launch_kernel).
    LaunchKernel,
    /// [`memcpy_async`](crate::memcpy_async).
    MemcpyAsync,
    /// [`memset_async`](crate::memset_async).
    MemsetAsync,
    /// [`Event::record`](crate::Event::record).
    EventRecord,
    /// [`Event::query`](crate::Event::query).
    EventQuery,
    /// [`Event::synchronize`](crate::Event::synchronize) and the waits inside
    /// [`Event::timestamp_ns`](crate::Event::timestamp_ns).
    EventSynchronize,
    /// [`Event::elapsed_ms`](crate::Event::elapsed_ms) and
    /// [`Event::elapsed_us`](crate::Event::elapsed_us).
    EventElapsedTime,
    /// [`Stream::wait_event`](crate::Stream::wait_event).
    StreamWaitEvent,
    /// [`Stream::synchronize`](crate::Stream::synchronize).
    StreamSynchronize,
    /// [`device_synchronize`](crate::device_synchronize).
    DeviceSynchronize,
}

impl RuntimeApi {
    /// The C-style API name a trace shows, e.g. `orLaunchKernel`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Malloc => "orMalloc",
            Self::LaunchKernel => "orLaunchKernel",
            Self::MemcpyAsync => "orMemcpyAsync",
            Self::MemsetAsync => "orMemsetAsync",
            Self::EventRecord => "orEventRecord",
            Self::EventQuery => "orEventQuery",
            Self::EventSynchronize => "orEventSynchronize",
            Self::EventElapsedTime => "orEventElapsedTime",
            Self::StreamWaitEvent => "orStreamWaitEvent",
            Self::StreamSynchronize => "orStreamSynchronize",
            Self::DeviceSynchronize => "orDeviceSynchronize",
        }
    }
}

/// The two external correlation stacks each host thread keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExternalKind {
    /// Host ops (Kineto's `pushCorrelationId`).
    Default,
    /// User ranges (Kineto's `pushUserCorrelationId`), for GPU user annotations.
    User,
}

/// The innermost external correlation ids of the launching thread at call time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ExternalIds {
    /// Top of the [`ExternalKind::Default`] stack; `None` when it was empty.
    pub default: Option<u64>,
    /// Top of the [`ExternalKind::User`] stack; `None` when it was empty.
    pub user: Option<u64>,
}

/// One runtime API call, recorded on the thread that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeRecord {
    /// Which call; [`RuntimeApi::name`] gives its name.
    pub api: RuntimeApi,
    /// OS id (`gettid`) of the calling thread.
    pub thread_id: i64,
    /// Call entry, Unix-epoch ns (`CLOCK_REALTIME`).
    pub start_ns: i64,
    /// Call exit, Unix-epoch ns.
    pub end_ns: i64,
    /// The call's correlation id: unique in the process, increasing in call order, shared by
    /// the [`DeviceRecord`]s of the work this call launched.
    pub correlation_id: u64,
    /// The calling thread's external correlation ids at call time.
    pub external: ExternalIds,
}

/// Which synchronization a [`DeviceActivity::Sync`] record stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncKind {
    /// A stream worker blocked on an event recorded elsewhere.
    StreamWaitEvent,
    /// A host thread blocked on an event.
    EventSynchronize,
    /// A host thread blocked on a stream.
    StreamSynchronize,
    /// A host thread blocked on every stream of a device.
    DeviceSynchronize,
}

impl SyncKind {
    /// The record name, as Kineto names CUDA synchronization.
    pub const fn name(self) -> &'static str {
        match self {
            Self::StreamWaitEvent => "Stream Wait Event",
            Self::EventSynchronize => "Event Sync",
            Self::StreamSynchronize => "Stream Sync",
            Self::DeviceSynchronize => "Context Sync",
        }
    }
}

/// The event record a synchronization waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventOrigin {
    /// Stream the event was recorded on (HTA's `wait_on_stream`).
    pub stream: u32,
    /// Correlation id of the `orEventRecord` call, when it was made while recording (HTA's
    /// `wait_on_cuda_event_record_corr_id`).
    pub record_correlation_id: Option<u64>,
}

/// What a device record did; the variant carries what only that kind has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceActivity {
    /// A kernel.
    Kernel {
        /// The simulated launch shape.
        launch: LaunchDims,
        /// The simulated hardware counters of this launch.
        metrics: KernelMetrics,
    },
    /// A copy.
    Memcpy {
        /// Direction.
        kind: MemcpyKind,
        /// Bytes copied.
        bytes: u64,
    },
    /// A fill.
    Memset {
        /// The byte written.
        value: u8,
        /// Bytes written.
        bytes: u64,
    },
    /// An event record reaching the front of its stream; start and end bracket the moment
    /// the event's timestamp was taken.
    EventRecord,
    /// A synchronization: a stream waiting on an event (recorded by the stream worker), or a
    /// host thread waiting on an event, stream or device (recorded by that thread).
    Sync {
        /// Which synchronization.
        kind: SyncKind,
        /// The event record waited for, for event waits.
        waited: Option<EventOrigin>,
    },
}

impl DeviceActivity {
    /// The [`Kinds`] bit that selects this record.
    pub const fn kind(&self) -> Kinds {
        match self {
            Self::Kernel { .. } => Kinds::KERNEL,
            Self::Memcpy { .. } => Kinds::MEMCPY,
            Self::Memset { .. } => Kinds::MEMSET,
            Self::EventRecord => Kinds::EVENT,
            Self::Sync { .. } => Kinds::SYNC,
        }
    }
}

/// One piece of device work (or one synchronization), recorded when it finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceRecord {
    /// Display name: the kernel's name (`matmul_64x64`), `Memcpy HtoD`, `Memset`,
    /// `Event Record`, or the [`SyncKind::name`].
    pub name: Cow<'static, str>,
    /// What it did, with the kind's own fields.
    pub activity: DeviceActivity,
    /// Device index.
    pub device: u32,
    /// Stream id; `None` only for device-wide synchronization.
    pub stream: Option<u32>,
    /// Start of execution, Unix-epoch ns, measured on the stream worker (on the waiting host
    /// thread for host-side synchronization).
    pub start_ns: i64,
    /// End of execution, Unix-epoch ns.
    pub end_ns: i64,
    /// The correlation id of the runtime call that launched it.
    pub correlation_id: u64,
    /// The launching thread's external correlation ids, copied from the call so a device
    /// record links to its host op even when runtime records are off or were dropped.
    pub external: ExternalIds,
}

/// Everything recorded since the last [`drain`](crate::drain_records) (or [`enable`](crate::enable_recording)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Records {
    /// Runtime records, in the order calls returned.
    pub runtime: Vec<RuntimeRecord>,
    /// Device records, in the order work finished (per stream: execution order; across
    /// streams and threads: unordered).
    pub device: Vec<DeviceRecord>,
    /// Records lost because the store held the record budget: the new ones, or, recording
    /// in a ring ([`enable_ring_recording`](crate::enable_ring_recording)), the oldest.
    pub dropped: u64,
    /// Recording in a ring: the latest end of a record it dropped (a window that starts
    /// before it lost records); `None` when it dropped none.
    pub overwritten_up_to_ns: Option<i64>,
}
