//! The activity API: OpenReg's counterpart of NVIDIA's CUPTI Activity API, and the recorder
//! behind it.
//!
//! While recording is [`enable_recording`]d, every runtime API call produces a
//! [`RuntimeRecord`] on the calling host thread, and every piece of device work it launched
//! produces a [`DeviceRecord`] when the stream worker finishes it. Both carry the call's
//! correlation id, which is how a profiler links a launch to its device work (Kineto's `ac2g`
//! flow), and the innermost ids of the calling thread's two external correlation stacks at
//! call time, which is how it links device work to the host op or user range that launched
//! it. Records wait in one in-memory store, bounded by a record budget, until
//! [`drain_records`]ed; or, recording for good ([`enable_ring_recording`], what a flight
//! recorder asks), the store is a ring: full, its oldest record gives way to the new one,
//! and [`copy_records_since`] reads the newest while recording goes on.
//!
//! | OpenReg | CUPTI |
//! |---|---|
//! | [`enable_recording`] / [`disable_recording`] | `cuptiActivityEnable` / `cuptiActivityDisable` per kind |
//! | [`push_external_correlation`] / [`pop_external_correlation`] | `cuptiActivityPushExternalCorrelationId` / `...Pop...` |
//! | [`RuntimeRecord`] | `CUpti_ActivityAPI` (`CUPTI_ACTIVITY_KIND_RUNTIME`) |
//! | [`DeviceRecord`] | `CUpti_ActivityKernel`, `...Memcpy`, `...Memset`, `...Synchronization` |
//! | [`ExternalIds`] on each record | `CUpti_ActivityExternalCorrelation` records |
//! | [`drain_records`] | `cuptiActivityFlushAll` and the buffer-completed callback |
//! | [`enable_ring_recording`], [`copy_records_since`] | CUPTI has none: its buffers are handed over, not kept |
//! | [`Records::dropped`] | `cuptiActivityGetNumDroppedRecords` |
//!
//! With recording disabled a runtime call pays one atomic load.
//!
//! Besides the public calls, this holds the store, the per-thread external correlation
//! stacks, and [`traced`], which every runtime call runs through. It sits just above the
//! record types ([`activity_records`](crate::activity_records)) and below the whole runtime:
//! every runtime call and every stream worker records through it, and it needs nothing of
//! theirs. The one call that does need the runtime, `finish_recording`, sits above it in
//! `activity_finish.rs`.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use crate::activity_records::{
    DeviceActivity, DeviceRecord, EventOrigin, ExternalIds, ExternalKind, Kinds, Records,
    RuntimeApi, RuntimeRecord, SyncKind,
};
use crate::lock::lock;
use crate::sys::{now_ns, thread_id};

/// Records kept between drains unless [`set_record_budget`] says otherwise.
pub const DEFAULT_RECORD_BUDGET: usize = 1 << 18;

/// The records the ring keeps when recording for good ([`enable_ring_recording`]) unless
/// [`set_ring_record_budget`] says otherwise: 65,536, at most 16 MiB with both queues'
/// allocations (a launch record takes 72 bytes, a device record 168), so that a flight
/// recorder's device ring stays small beside its host rings.
pub const DEFAULT_RING_RECORD_BUDGET: usize = 1 << 16;

struct Store {
    runtime: VecDeque<RuntimeRecord>,
    device: VecDeque<DeviceRecord>,
    dropped: u64,
    budget: usize,
    /// The budget while recording for good.
    ring_budget: usize,
    /// Recording for good: a full store drops its oldest record, not the new one.
    ring: bool,
    /// The latest end of a record the ring dropped.
    overwritten_up_to_ns: Option<i64>,
}

static STORE: Mutex<Store> = Mutex::new(Store {
    runtime: VecDeque::new(),
    device: VecDeque::new(),
    dropped: 0,
    budget: DEFAULT_RECORD_BUDGET,
    ring_budget: DEFAULT_RING_RECORD_BUDGET,
    ring: false,
    overwritten_up_to_ns: None,
});
/// The selected kinds; zero means disabled, which is all a runtime call checks.
static KINDS: AtomicU8 = AtomicU8::new(0);
/// Bumped by every [`enable_recording`] (under the store lock) so work launched in an earlier session
/// cannot leak into this one.
static SESSION: AtomicU64 = AtomicU64::new(0);
static NEXT_CORRELATION: AtomicU64 = AtomicU64::new(1);

/// Starts a recording session collecting `kinds`: discards undrained records, resets the
/// dropped count. Work launched in an earlier session and finishing later is not recorded.
pub fn enable_recording(kinds: Kinds) {
    enable(kinds, false);
}

/// Starts a recording session collecting `kinds` for good, in bounded memory: as
/// [`enable_recording`], but once the store holds the ring's budget
/// ([`set_ring_record_budget`], runtime and device records together) each new record
/// replaces the oldest, counted in
/// [`Records::dropped`]. [`copy_records_since`] reads the newest records while recording
/// goes on.
///
/// ```
/// use openreg::{Event, Kinds};
///
/// openreg::set_ring_record_budget(4);
/// openreg::enable_ring_recording(Kinds::RUNTIME);
/// let event = Event::new();
/// for _ in 0..10 {
///     event.query();
/// }
/// let newest = openreg::copy_records_since(i64::MIN);
/// assert_eq!((newest.runtime.len(), newest.dropped), (4, 6));
/// assert!(newest.overwritten_up_to_ns.unwrap() <= newest.runtime[0].start_ns);
/// openreg::disable_recording();
/// openreg::set_ring_record_budget(openreg::DEFAULT_RING_RECORD_BUDGET);
/// ```
pub fn enable_ring_recording(kinds: Kinds) {
    enable(kinds, true);
}

fn enable(kinds: Kinds, ring: bool) {
    let mut store = lock(&STORE);
    store.runtime.clear();
    store.device.clear();
    // What an earlier, larger ring allocated is not kept.
    store.runtime.shrink_to_fit();
    store.device.shrink_to_fit();
    store.dropped = 0;
    store.ring = ring;
    store.overwritten_up_to_ns = None;
    SESSION.fetch_add(1, Ordering::Relaxed);
    // Release pairs with the Acquire in `traced`: a call that sees the new kinds sees the
    // new session too.
    KINDS.store(kinds.0, Ordering::Release);
}

/// Stops recording new calls. Work already launched still records when it finishes, so a
/// synchronize followed by [`drain_records`] collects everything launched while enabled.
pub fn disable_recording() {
    KINDS.store(0, Ordering::Release);
}

/// The kinds being recorded ([`Kinds::NONE`] when disabled).
#[cfg(test)]
pub(crate) fn recording_kinds() -> Kinds {
    Kinds(KINDS.load(Ordering::Relaxed))
}

/// Caps the records held between drains; further records are counted in
/// [`Records::dropped`] and discarded.
pub fn set_record_budget(records: usize) {
    lock(&STORE).budget = records;
}

/// Sets how many records the ring keeps while recording for good
/// ([`enable_ring_recording`]; default [`DEFAULT_RING_RECORD_BUDGET`]).
pub fn set_ring_record_budget(records: usize) {
    lock(&STORE).ring_budget = records;
}

/// Takes every record stored so far and the dropped count.
pub fn drain_records() -> Records {
    let mut store = lock(&STORE);
    Records {
        runtime: std::mem::take(&mut store.runtime).into(),
        device: std::mem::take(&mut store.device).into(),
        dropped: std::mem::take(&mut store.dropped),
        overwritten_up_to_ns: store.overwritten_up_to_ns.take(),
    }
}

/// Copies the stored records that ended at or after `start_ns`, leaving them stored:
/// how a flight recorder reads its last seconds from the ring while recording goes on
/// (runtime calls wait on the store while it copies). `dropped` and `overwritten_up_to_ns`
/// are the store's.
pub fn copy_records_since(start_ns: i64) -> Records {
    let store = lock(&STORE);
    Records {
        runtime: store
            .runtime
            .iter()
            .filter(|r| r.end_ns >= start_ns)
            .cloned()
            .collect(),
        device: store
            .device
            .iter()
            .filter(|r| r.end_ns >= start_ns)
            .cloned()
            .collect(),
        dropped: store.dropped,
        overwritten_up_to_ns: store.overwritten_up_to_ns,
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
        store(tag.session, |s| s.runtime.push_back(record));
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
        store(self.session, |s| s.device.push_back(record));
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
    let budget = if store.ring {
        store.ring_budget
    } else {
        store.budget
    };
    if store.runtime.len() + store.device.len() >= budget.max(1) {
        store.dropped += 1;
        if !store.ring {
            return;
        }
        store.drop_oldest();
    }
    push(&mut store);
}

impl Store {
    /// Drops the record that ended first of the two queues' oldest (each queue is in the
    /// order its records were stored, near enough the order they ended).
    fn drop_oldest(&mut self) {
        let runtime = self.runtime.front().map(|r| r.end_ns);
        let device = self.device.front().map(|r| r.end_ns);
        let end = match (runtime, device) {
            (Some(r), Some(d)) if r <= d => self.runtime.pop_front().map(|r| r.end_ns),
            (Some(_), None) => self.runtime.pop_front().map(|r| r.end_ns),
            _ => self.device.pop_front().map(|r| r.end_ns),
        };
        self.overwritten_up_to_ns = self.overwritten_up_to_ns.max(end);
    }
}
