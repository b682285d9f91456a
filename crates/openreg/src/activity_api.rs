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
//! [`drain_records`]ed.
//!
//! | OpenReg | CUPTI |
//! |---|---|
//! | [`enable_recording`] / [`disable_recording`] | `cuptiActivityEnable` / `cuptiActivityDisable` per kind |
//! | [`push_external_correlation`] / [`pop_external_correlation`] | `cuptiActivityPushExternalCorrelationId` / `...Pop...` |
//! | [`RuntimeRecord`] | `CUpti_ActivityAPI` (`CUPTI_ACTIVITY_KIND_RUNTIME`) |
//! | [`DeviceRecord`] | `CUpti_ActivityKernel`, `...Memcpy`, `...Memset`, `...Synchronization` |
//! | [`ExternalIds`] on each record | `CUpti_ActivityExternalCorrelation` records |
//! | [`drain_records`] | `cuptiActivityFlushAll` and the buffer-completed callback |
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
/// Bumped by every [`enable_recording`] (under the store lock) so work launched in an earlier session
/// cannot leak into this one.
static SESSION: AtomicU64 = AtomicU64::new(0);
static NEXT_CORRELATION: AtomicU64 = AtomicU64::new(1);

/// Starts a recording session collecting `kinds`: discards undrained records, resets the
/// dropped count. Work launched in an earlier session and finishing later is not recorded.
pub fn enable_recording(kinds: Kinds) {
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

/// Takes every record stored so far and the dropped count.
pub fn drain_records() -> Records {
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
