//! Activity recording: OpenReg's counterpart of NVIDIA's CUPTI Activity API.
//!
//! While recording is [`enable`]d, every runtime API call produces a [`RuntimeRecord`] on the
//! calling host thread, and every piece of device work it launched produces a
//! [`DeviceRecord`] when the stream worker finishes it. Both carry the call's correlation id,
//! which is how a profiler links a launch to its device work (Kineto's `ac2g` flow), and the
//! innermost ids of the calling thread's two external correlation stacks at call time, which is
//! how it links device work to the host op or user range that launched it. Records wait in
//! one in-memory store, bounded by a record budget, until [`drain`]ed.
//!
//! | OpenReg | CUPTI |
//! |---|---|
//! | [`enable`] / [`disable`] | `cuptiActivityEnable` / `cuptiActivityDisable` per kind |
//! | [`push_external_correlation`] / [`pop_external_correlation`] | `cuptiActivityPushExternalCorrelationId` / `...Pop...` |
//! | [`RuntimeRecord`] | `CUpti_ActivityAPI` (`CUPTI_ACTIVITY_KIND_RUNTIME`) |
//! | [`DeviceRecord`] | `CUpti_ActivityKernel`, `...Memcpy`, `...Memset`, `...Synchronization` |
//! | [`ExternalIds`] on each record | `CUpti_ActivityExternalCorrelation` records |
//! | [`drain`] | `cuptiActivityFlushAll` and the buffer-completed callback |
//! | [`Records::dropped`] | `cuptiActivityGetNumDroppedRecords` |
//!
//! With recording disabled a runtime call pays one atomic load.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::BitOr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use crate::kernel::{KernelMetrics, LaunchDims};
use crate::lock;
use crate::memory::MemcpyKind;
use crate::sys::{now_ns, thread_id};

/// A set of record kinds to collect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Kinds(u8);

impl Kinds {
    /// Nothing: the same as [`disable`].
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

/// Everything recorded since the last [`drain`] (or [`enable`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Records {
    /// Runtime records, in the order calls returned.
    pub runtime: Vec<RuntimeRecord>,
    /// Device records, in the order work finished (per stream: execution order; across
    /// streams and threads: unordered).
    pub device: Vec<DeviceRecord>,
    /// Records lost because the store held the record budget.
    pub dropped: u64,
}

/// Records kept between drains unless [`set_record_budget`] says otherwise.
pub const DEFAULT_RECORD_BUDGET: usize = 1 << 18;

struct Store {
    runtime: Vec<RuntimeRecord>,
    device: Vec<DeviceRecord>,
    dropped: u64,
    budget: usize,
}

static STORE: Mutex<Store> = Mutex::new(Store {
    runtime: Vec::new(),
    device: Vec::new(),
    dropped: 0,
    budget: DEFAULT_RECORD_BUDGET,
});
/// The selected kinds; zero means disabled, which is all a runtime call checks.
static KINDS: AtomicU8 = AtomicU8::new(0);
/// Bumped by every [`enable`] (under the store lock) so work launched in an earlier session
/// cannot leak into this one.
static SESSION: AtomicU64 = AtomicU64::new(0);
static NEXT_CORRELATION: AtomicU64 = AtomicU64::new(1);

/// Starts a recording session collecting `kinds`: discards undrained records, resets the
/// dropped count. Work launched in an earlier session and finishing later is not recorded.
pub fn enable(kinds: Kinds) {
    let mut store = lock(&STORE);
    store.runtime.clear();
    store.device.clear();
    store.dropped = 0;
    SESSION.fetch_add(1, Ordering::Relaxed);
    // Release pairs with the Acquire in `traced`: a call that sees the new kinds sees the
    // new session too.
    KINDS.store(kinds.0, Ordering::Release);
}

/// Stops recording new calls. Work already launched still records when it finishes, so a
/// synchronize followed by [`drain`] collects everything launched while enabled.
pub fn disable() {
    KINDS.store(0, Ordering::Release);
}

/// The kinds being recorded ([`Kinds::NONE`] when disabled).
pub fn enabled_kinds() -> Kinds {
    Kinds(KINDS.load(Ordering::Relaxed))
}

/// Caps the records held between drains; further records are counted in
/// [`Records::dropped`] and discarded.
pub fn set_record_budget(records: usize) {
    lock(&STORE).budget = records;
}

/// Ends a session the way a profiler's `stop` does: stops recording new calls, waits for the
/// work already launched on every device (restoring the calling thread's device), and takes
/// the records, so everything launched while enabled is in them.
pub fn finish() -> crate::Result<Records> {
    // First, so the synchronization below is not itself recorded.
    disable();
    let current = crate::current_device();
    for device in 0..crate::device_count() {
        crate::set_device(device)?;
        crate::device_synchronize()?;
    }
    crate::set_device(current)?;
    Ok(drain())
}

/// Takes every record stored so far and the dropped count.
pub fn drain() -> Records {
    let mut store = lock(&STORE);
    Records {
        runtime: std::mem::take(&mut store.runtime),
        device: std::mem::take(&mut store.device),
        dropped: std::mem::take(&mut store.dropped),
    }
}

thread_local! {
    /// This thread's external correlation stacks, indexed by `ExternalKind as usize`.
    static EXTERNAL: RefCell<[Vec<u64>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
}

/// Pushes `id` on the calling thread's `kind` stack: calls made until the matching pop carry
/// it (unless a newer push covers it).
pub fn push_external_correlation(kind: ExternalKind, id: u64) {
    // A push during thread teardown has no later call to tag; ignoring it is correct.
    let _ = EXTERNAL.try_with(|stacks| stacks.borrow_mut()[kind as usize].push(id));
}

/// Pops the calling thread's `kind` stack; `None` when it was empty.
pub fn pop_external_correlation(kind: ExternalKind) -> Option<u64> {
    EXTERNAL
        .try_with(|stacks| stacks.borrow_mut()[kind as usize].pop())
        .ok()
        .flatten()
}

fn current_external() -> ExternalIds {
    EXTERNAL
        .try_with(|stacks| {
            let stacks = stacks.borrow();
            ExternalIds {
                default: stacks[ExternalKind::Default as usize].last().copied(),
                user: stacks[ExternalKind::User as usize].last().copied(),
            }
        })
        .unwrap_or_default()
}

/// What a recorded call hands to the device work it launches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tag {
    session: u64,
    kinds: Kinds,
    correlation_id: u64,
    external: ExternalIds,
}

/// Runs the body of runtime call `api`. While recording, the body gets the call's [`Tag`] to
/// attach to the work it launches, and the call is recorded around it.
#[inline]
pub(crate) fn traced<R>(api: RuntimeApi, body: impl FnOnce(Option<Tag>) -> R) -> R {
    let kinds = Kinds(KINDS.load(Ordering::Acquire));
    if kinds.is_empty() {
        return body(None);
    }
    let tag = Tag {
        session: SESSION.load(Ordering::Relaxed),
        kinds,
        correlation_id: NEXT_CORRELATION.fetch_add(1, Ordering::Relaxed),
        external: current_external(),
    };
    let start_ns = now_ns();
    let result = body(Some(tag));
    if kinds.contains(Kinds::RUNTIME) {
        let record = RuntimeRecord {
            api,
            thread_id: thread_id(),
            start_ns,
            end_ns: now_ns(),
            correlation_id: tag.correlation_id,
            external: tag.external,
        };
        store(tag.session, |s| s.runtime.push(record));
    }
    result
}

impl Tag {
    pub(crate) fn correlation_id(self) -> u64 {
        self.correlation_id
    }

    /// Records device work launched by the tagged call, if its kind is selected.
    pub(crate) fn record_device(
        self,
        name: Cow<'static, str>,
        activity: DeviceActivity,
        device: usize,
        stream: Option<u32>,
        start_ns: i64,
        end_ns: i64,
    ) {
        if !self.kinds.contains(activity.kind()) {
            return;
        }
        let record = DeviceRecord {
            name,
            activity,
            device: device as u32,
            stream,
            start_ns,
            end_ns,
            correlation_id: self.correlation_id,
            external: self.external,
        };
        store(self.session, |s| s.device.push(record));
    }

    /// Records a synchronization made by the tagged call.
    pub(crate) fn record_sync(
        self,
        kind: SyncKind,
        waited: Option<EventOrigin>,
        device: usize,
        stream: Option<u32>,
        start_ns: i64,
        end_ns: i64,
    ) {
        let activity = DeviceActivity::Sync { kind, waited };
        self.record_device(
            kind.name().into(),
            activity,
            device,
            stream,
            start_ns,
            end_ns,
        );
    }
}

fn store(session: u64, push: impl FnOnce(&mut Store)) {
    let mut store = lock(&STORE);
    // Read under the lock that `enable` holds while bumping it, so the check is exact.
    if session != SESSION.load(Ordering::Relaxed) {
        return;
    }
    if store.runtime.len() + store.device.len() >= store.budget {
        store.dropped += 1;
        return;
    }
    push(&mut store);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Kernel;
    use crate::memory::{malloc, memcpy_async, memset_async, HostBuffer};
    use crate::test_support::exclusive;
    use crate::{device_synchronize, launch_kernel, Event, Stream};
    use std::collections::{HashMap, HashSet};
    use std::time::Duration;

    /// Starts a clean session of `kinds` and returns what it recorded once `f` has run.
    fn session(kinds: Kinds, f: impl FnOnce()) -> Records {
        enable(kinds);
        f();
        disable();
        drain()
    }

    fn runtime_by_correlation(records: &Records) -> HashMap<u64, &RuntimeRecord> {
        let map: HashMap<_, _> = records
            .runtime
            .iter()
            .map(|r| (r.correlation_id, r))
            .collect();
        assert_eq!(
            map.len(),
            records.runtime.len(),
            "correlation ids are unique"
        );
        map
    }

    #[test]
    fn device_records_link_to_their_launch_and_lie_within_it() {
        let _guard = exclusive();
        let stream = Stream::new(0).unwrap();
        let n = 16;
        let host = HostBuffer::from_f32s(&vec![1.0; n * n]);
        let (a, out) = (malloc(0, n * n * 4).unwrap(), malloc(0, n * n * 4).unwrap());
        let event = Event::new();
        let records = session(Kinds::ALL, || {
            memcpy_async(&a, &host, n * n * 4, &stream).unwrap();
            memset_async(&out, 0, 64, &stream).unwrap();
            let matmul = Kernel::Matmul {
                a: a.clone(),
                b: a.clone(),
                out: out.clone(),
                n,
            };
            launch_kernel(matmul, &stream).unwrap();
            event.record(&stream);
            memcpy_async(&host, &out, n * n * 4, &stream).unwrap();
            stream.synchronize();
        });
        assert_eq!(records.dropped, 0);
        let names: Vec<_> = records.runtime.iter().map(|r| r.api.name()).collect();
        assert_eq!(
            names,
            [
                "orMemcpyAsync",
                "orMemsetAsync",
                "orLaunchKernel",
                "orEventRecord",
                "orMemcpyAsync",
                "orStreamSynchronize"
            ]
        );
        let ids: Vec<_> = records.runtime.iter().map(|r| r.correlation_id).collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ids increase in call order"
        );
        let tid = crate::sys::thread_id();
        assert!(records
            .runtime
            .iter()
            .all(|r| r.thread_id == tid && r.start_ns <= r.end_ns));

        let sync_end = records.runtime.last().unwrap().end_ns;
        let launches = runtime_by_correlation(&records);
        let names: Vec<_> = records.device.iter().map(|d| &*d.name).collect();
        assert_eq!(
            names,
            [
                "Memcpy HtoD",
                "Memset",
                "matmul_16x16",
                "Event Record",
                "Memcpy DtoH",
                "Stream Sync"
            ]
        );
        for (device, runtime) in records.device.iter().zip(&records.runtime) {
            assert_eq!(launches[&device.correlation_id], runtime);
            assert_eq!((device.device, device.stream), (0, Some(stream.id())));
            assert!(
                runtime.start_ns <= device.start_ns,
                "{device:?} starts before its launch"
            );
            assert!(device.start_ns <= device.end_ns && device.end_ns <= sync_end);
        }
        // The host's wait overlaps the work it waits for; the stream's own work does not.
        for pair in records.device[..5].windows(2) {
            assert!(
                pair[0].end_ns <= pair[1].start_ns,
                "in order, one at a time"
            );
        }
        assert_eq!(
            records.device[0].activity,
            DeviceActivity::Memcpy {
                kind: MemcpyKind::HostToDevice,
                bytes: 1024
            }
        );
        assert_eq!(
            records.device[1].activity,
            DeviceActivity::Memset {
                value: 0,
                bytes: 64
            }
        );
        let matmul = Kernel::Matmul {
            a: a.clone(),
            b: a.clone(),
            out,
            n,
        };
        assert_eq!(
            records.device[2].activity,
            DeviceActivity::Kernel {
                launch: matmul.launch_dims(),
                metrics: matmul.metrics()
            }
        );
    }

    #[test]
    fn synchronization_records_name_what_they_waited_for() {
        let _guard = exclusive();
        let set_device = |d| crate::set_device(d).unwrap();
        let (producer, consumer) = (Stream::new(1).unwrap(), Stream::new(1).unwrap());
        let event = Event::new();
        let records = session(Kinds::RUNTIME | Kinds::SYNC, || {
            launch_kernel(Kernel::Busy(Duration::from_micros(200)), &producer).unwrap();
            event.record(&producer);
            consumer.wait_event(&event);
            event.synchronize();
            set_device(1);
            device_synchronize().unwrap();
            set_device(0);
        });
        let runtime = runtime_by_correlation(&records);
        let record_call = records
            .runtime
            .iter()
            .find(|r| r.api == RuntimeApi::EventRecord);
        let origin = EventOrigin {
            stream: producer.id(),
            record_correlation_id: Some(record_call.unwrap().correlation_id),
        };
        let syncs: Vec<_> = records
            .device
            .iter()
            .map(|d| (runtime[&d.correlation_id].api, d.stream, d.activity.clone()))
            .collect();
        let sync = |kind, waited| DeviceActivity::Sync { kind, waited };
        assert_eq!(syncs.len(), 3, "{syncs:?}");
        for expected in [
            (
                RuntimeApi::StreamWaitEvent,
                Some(consumer.id()),
                sync(SyncKind::StreamWaitEvent, Some(origin)),
            ),
            (
                RuntimeApi::EventSynchronize,
                Some(producer.id()),
                sync(SyncKind::EventSynchronize, Some(origin)),
            ),
            (
                RuntimeApi::DeviceSynchronize,
                None,
                sync(SyncKind::DeviceSynchronize, None),
            ),
        ] {
            assert!(
                syncs.contains(&expected),
                "{expected:?} missing from {syncs:?}"
            );
        }
        assert!(records.device.iter().all(|d| d.device == 1));
    }

    #[test]
    fn external_correlation_stacks_are_per_thread_and_nest() {
        let _guard = exclusive();
        let stream = Stream::new(0).unwrap();
        let launch = || launch_kernel(Kernel::Busy(Duration::ZERO), &stream).unwrap();
        let records = session(Kinds::RUNTIME | Kinds::KERNEL, || {
            push_external_correlation(ExternalKind::Default, 10);
            push_external_correlation(ExternalKind::User, 20);
            launch();
            push_external_correlation(ExternalKind::Default, 11);
            launch();
            std::thread::scope(|s| {
                s.spawn(|| {
                    push_external_correlation(ExternalKind::Default, 30);
                    launch();
                    assert_eq!(pop_external_correlation(ExternalKind::Default), Some(30));
                });
            });
            assert_eq!(pop_external_correlation(ExternalKind::Default), Some(11));
            launch();
            assert_eq!(pop_external_correlation(ExternalKind::Default), Some(10));
            assert_eq!(pop_external_correlation(ExternalKind::User), Some(20));
            assert_eq!(pop_external_correlation(ExternalKind::User), None);
            launch();
            stream.synchronize();
        });
        let ids = |default, user| ExternalIds { default, user };
        let seen: Vec<_> = records
            .runtime
            .iter()
            .filter(|r| r.api == RuntimeApi::LaunchKernel)
            .map(|r| r.external)
            .collect();
        assert_eq!(
            seen,
            [
                ids(Some(10), Some(20)),
                ids(Some(11), Some(20)),
                ids(Some(30), None),
                ids(Some(10), Some(20)),
                ids(None, None)
            ]
        );
        let runtime = runtime_by_correlation(&records);
        assert_eq!(records.device.len(), seen.len());
        for device in &records.device {
            assert_eq!(device.external, runtime[&device.correlation_id].external);
        }
    }

    #[test]
    fn concurrent_launches_are_recorded_exactly_once() {
        let _guard = exclusive();
        const THREADS: u64 = 4;
        const CALLS: usize = 40;
        let streams = [Stream::new(0).unwrap(), Stream::new(0).unwrap()];
        let records = session(Kinds::ALL, || {
            std::thread::scope(|s| {
                for t in 0..THREADS {
                    let stream = &streams[t as usize % 2];
                    s.spawn(move || {
                        let buf = malloc(0, 256).unwrap();
                        let host = HostBuffer::zeroed(256);
                        let event = Event::new();
                        push_external_correlation(ExternalKind::Default, 1000 + t);
                        for i in 0..CALLS {
                            match i % 4 {
                                0 => launch_kernel(
                                    Kernel::Fill {
                                        out: buf.clone(),
                                        value: 1.0,
                                    },
                                    stream,
                                )
                                .unwrap(),
                                1 => memset_async(&buf, 7, 256, stream).unwrap(),
                                2 => memcpy_async(&host, &buf, 256, stream).unwrap(),
                                _ => event.record(stream),
                            }
                        }
                        pop_external_correlation(ExternalKind::Default);
                    });
                }
            });
            streams.iter().for_each(Stream::synchronize);
        });
        assert_eq!(records.dropped, 0);
        let runtime = runtime_by_correlation(&records);
        let launches: Vec<_> = records
            .runtime
            .iter()
            .filter(|r| r.external.default.is_some())
            .collect();
        assert_eq!(launches.len(), THREADS as usize * CALLS);
        let work: Vec<_> = records
            .device
            .iter()
            .filter(|d| d.external.default.is_some())
            .collect();
        assert_eq!(work.len(), launches.len());
        let linked: HashSet<_> = work.iter().map(|d| d.correlation_id).collect();
        assert_eq!(linked.len(), work.len(), "one device record per launch");
        let mut tids: HashMap<u64, HashSet<i64>> = HashMap::new();
        for device in &work {
            let launch = runtime[&device.correlation_id];
            let thread = device.external.default.unwrap() - 1000;
            assert_eq!(launch.external, device.external);
            assert_eq!(device.stream, Some(streams[thread as usize % 2].id()));
            assert!(launch.start_ns <= device.start_ns);
            tids.entry(thread).or_default().insert(launch.thread_id);
        }
        assert_eq!(tids.len(), THREADS as usize);
        assert!(
            tids.values().all(|t| t.len() == 1),
            "each thread records its own tid"
        );
        for stream in &streams {
            let mut on_stream: Vec<_> = work
                .iter()
                .filter(|d| d.stream == Some(stream.id()))
                .collect();
            assert_eq!(on_stream.len(), 2 * CALLS);
            on_stream.sort_by_key(|d| d.start_ns);
            assert!(on_stream.windows(2).all(|w| w[0].end_ns <= w[1].start_ns));
        }
    }

    #[test]
    fn kinds_select_what_is_recorded() {
        let _guard = exclusive();
        let stream = Stream::new(0).unwrap();
        let buf = malloc(0, 64).unwrap();
        let records = session(Kinds::KERNEL, || {
            memset_async(&buf, 1, 64, &stream).unwrap();
            launch_kernel(
                Kernel::Fill {
                    out: buf.clone(),
                    value: 0.0,
                },
                &stream,
            )
            .unwrap();
            stream.synchronize();
        });
        assert!(records.runtime.is_empty());
        assert_eq!(records.device.len(), 1);
        assert_eq!(records.device[0].name, "fill_f32");
        assert!(Kinds::ALL.contains(Kinds::SYNC | Kinds::EVENT));
        assert!(!Kinds::KERNEL.contains(Kinds::ALL));
        assert!(Kinds::NONE.is_empty());
    }

    #[test]
    fn disabled_recording_records_nothing() {
        let _guard = exclusive();
        let records = session(Kinds::NONE, || {
            let stream = Stream::new(0).unwrap();
            launch_kernel(Kernel::Busy(Duration::ZERO), &stream).unwrap();
            Event::new().query();
            stream.synchronize();
        });
        assert_eq!(records, Records::default());
        assert_eq!(enabled_kinds(), Kinds::NONE);
    }

    #[test]
    fn work_in_flight_records_after_disable_but_not_into_a_new_session() {
        let _guard = exclusive();
        let stream = Stream::new(0).unwrap();
        let buf = malloc(0, 16).unwrap();
        let fill = || Kernel::Fill {
            out: buf.clone(),
            value: 1.0,
        };
        // Holding the buffer's lock keeps the fill in flight across the state change.
        let held = lock(buf.bytes());
        enable(Kinds::KERNEL);
        launch_kernel(fill(), &stream).unwrap();
        disable();
        drop(held);
        stream.synchronize();
        assert_eq!(drain().device.len(), 1, "launched while enabled: kept");

        let held = lock(buf.bytes());
        enable(Kinds::KERNEL);
        launch_kernel(fill(), &stream).unwrap();
        enable(Kinds::KERNEL);
        drop(held);
        stream.synchronize();
        disable();
        assert!(
            drain().device.is_empty(),
            "launched in an earlier session: discarded"
        );
    }

    #[test]
    fn records_beyond_the_budget_are_counted_not_kept() {
        let _guard = exclusive();
        set_record_budget(5);
        let records = session(Kinds::ALL, || {
            let event = Event::new();
            for _ in 0..12 {
                event.query();
            }
        });
        set_record_budget(DEFAULT_RECORD_BUDGET);
        assert_eq!((records.runtime.len(), records.dropped), (5, 7));
        assert!(records
            .runtime
            .iter()
            .all(|r| r.api == RuntimeApi::EventQuery));
        enable(Kinds::ALL);
        disable();
        assert_eq!(drain().dropped, 0, "enable resets the count");
    }
}
