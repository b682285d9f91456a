//! The stubs seen through the [`ActivityProfiler`] trait, so the engine drives them as it
//! drives any backend and has no mode of its own for them.
//!
//! A stubs backend records no activity type: it lives on the host ranges. One that times
//! records an event pair around every range through its correlation listener and, when the
//! trace is processed, hands each range's device time to the sink as an arg of that host
//! range; its device name and failures are its session's metadata, and its failures its
//! `backend_errors`. One that marks forwards ranges and instants to the stubs' markers and
//! hands over nothing.
//!
//! Where the events live: each thread that begins a range keeps its own store (the ranges
//! it began, as (correlation id, name id, device, start event, end event), and the stack of
//! those still open), registered with the session at the thread's first range. A range's
//! events are recorded and stored on the thread that runs it, taking only that thread's
//! uncontended lock; nothing is timed until the trace is processed. Then every `elapsed` is
//! called on a helper thread under a deadline (`OMNIPROF_STUBS_ELAPSED_TIMEOUT_MSECS`): an
//! `elapsed` that never returns costs the ops not yet timed their device time, never the
//! trace.
//!
//! With [device rows](timing_session), the session also records one reference event per
//! device at its start (`on_each_device`, with the host time of the record) and draws each
//! timed range on its device's row: from the reference's host time plus the device time from
//! the reference to the range's start event, for the range's device time, linked to the
//! range by its `External id` and carrying its `device_time_us` (which tells the summary not
//! to count it twice).

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::interface::{ProfilerStubs, RecordOut, StubError, StubEvent};
use super::registry::registered_stubs;
use crate::backend::{
    ActivityProfiler, ActivitySink, BackendError, DeviceInfo, HostOps, ProfilerSession,
    ResourceInfo,
};
use crate::config::Config;
use crate::keys::{arg, metadata};
use crate::lock;
use crate::record::{CorrelationListener, Name};
use crate::Value;
use crate::Window;
use crate::{Activity, ActivitySet, ActivityType, SessionHealth};

/// How many failures are kept word for word; the rest are only counted.
const KEPT_ERRORS: usize = 8;

/// What a stubs backend does with the host ranges.
#[derive(Clone, Copy)]
enum Use {
    /// Time each one on the device.
    Time,
    /// Forward each one (and each instant) to the markers.
    Mark,
}

/// A device's stubs as a backend.
pub(crate) struct StubsProfiler {
    device: String,
    name: String,
    what: Use,
}

impl StubsProfiler {
    /// Times every host op and user range on `device`.
    pub(crate) fn timer(device: &str) -> Self {
        Self::new(device, Use::Time, "stubs")
    }

    /// Forwards ranges and instants to `device`'s markers.
    pub(crate) fn markers(device: &str) -> Self {
        Self::new(device, Use::Mark, "markers")
    }

    fn new(device: &str, what: Use, role: &str) -> Self {
        Self {
            device: device.to_owned(),
            name: format!("{device} {role}"),
            what,
        }
    }
}

impl ActivityProfiler for StubsProfiler {
    fn name(&self) -> &str {
        &self.name
    }

    fn available_activities(&self) -> ActivitySet {
        ActivitySet::empty()
    }

    /// Fails with PyTorch's message when `device` has no enabled stubs.
    fn configure(
        &self,
        _: ActivitySet,
        config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        let stubs = registered_stubs(&self.device).map_err(|e| BackendError::new(e.to_string()))?;
        Ok(Some(match self.what {
            Use::Time => timing_session(&self.device, stubs, config, false),
            Use::Mark => Box::new(MarkersSession(Arc::new(Markers(stubs)))),
        }))
    }
}

/// A session that times every host op and user range on `device` through `stubs`, for a
/// backend that holds its stubs itself (the Python package's PyTorch bridge): each range gets
/// its device time as `device_time_us`, and with `device_rows` is drawn on its device's row
/// (see the module docs). The deadline of the timing is the config's
/// `OMNIPROF_STUBS_ELAPSED_TIMEOUT_MSECS`.
pub fn timing_session(
    device: &str,
    stubs: Arc<dyn ProfilerStubs>,
    config: &Config,
    device_rows: bool,
) -> Box<dyn ProfilerSession> {
    Box::new(StubsSession {
        device: device.to_owned(),
        timer: Arc::new(StubTimer::new(stubs)),
        deadline: config.stubs_elapsed_timeout(),
        device_rows,
        timed: Vec::new(),
        devices: BTreeSet::new(),
        errors: Vec::new(),
        error_count: 0,
    })
}

struct StubsSession {
    /// The device name as the session was built with it: the trace's `device_type`.
    device: String,
    timer: Arc<StubTimer>,
    deadline: Duration,
    device_rows: bool,
    /// What [`process_trace`](ProfilerSession::process_trace) timed.
    timed: Vec<Timed>,
    /// The devices drawn on.
    devices: BTreeSet<i32>,
    /// Failures met while recording and timing, the first [`KEPT_ERRORS`] word for word.
    errors: Vec<String>,
    error_count: u64,
}

impl ProfilerSession for StubsSession {
    fn start(&mut self) -> Result<(), BackendError> {
        if self.device_rows {
            self.timer.record_references();
        }
        Ok(())
    }

    fn process_trace(
        &mut self,
        sink: &mut dyn ActivitySink,
        _: &dyn HostOps,
        _: Window,
    ) -> Result<(), BackendError> {
        let (timed, errors, count) = self.timer.finish(self.deadline, self.device_rows);
        for t in &timed {
            sink.add_host_arg(t.id, arg::DEVICE_TIME_US, Value::Int(t.us));
            if let Some(start_ns) = t.start_ns {
                let end_ns = start_ns.saturating_add(t.us.saturating_mul(1000));
                let mut a = Activity::new(
                    ActivityType::GpuUserAnnotation,
                    t.name.resolve(),
                    t.device.into(),
                    0,
                    start_ns,
                    end_ns,
                );
                a.linked_correlation = Some(t.id);
                a.args.push((arg::DEVICE_TIME_US.into(), Value::Int(t.us)));
                sink.add(a);
                self.devices.insert(t.device);
            }
        }
        if count > 0 {
            log::warn!(
                "omniprof: {count} profiler stub calls failed; first: {:?}",
                errors.first()
            );
        }
        (self.timed, self.errors, self.error_count) = (timed, errors, count);
        Ok(())
    }

    fn device_info(&self) -> Vec<DeviceInfo> {
        self.devices
            .iter()
            .map(|&d| {
                let (name, label) = (
                    format!("{} {d}", self.device),
                    format!("{} {d} (profiler stubs)", self.device),
                );
                DeviceInfo::new(d.into(), name, label)
            })
            .collect()
    }

    fn resource_infos(&self) -> Vec<ResourceInfo> {
        self.devices
            .iter()
            .map(|&d| ResourceInfo {
                device_id: d.into(),
                id: 0,
                sort_index: 0,
                name: "ops (stub events)".to_owned(),
            })
            .collect()
    }

    fn errors(&self) -> Vec<String> {
        if self.error_count == 0 {
            return Vec::new();
        }
        vec![format!(
            "{} call(s) to the {} profiler stubs failed, first: {}",
            self.error_count,
            self.device,
            self.errors.first().map_or("", String::as_str)
        )]
    }

    fn metadata(&self) -> Vec<(String, Value)> {
        vec![(
            metadata::DEVICE_TYPE.to_owned(),
            Value::from(self.device.as_str()),
        )]
    }

    fn report(&self, report: &mut SessionHealth) {
        if self.error_count > 0 {
            report.stub_errors = Some(self.error_count);
            report.stub_error_messages = self.errors.clone();
        }
    }

    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        Some(self.timer.clone())
    }
}

/// A range timed: its correlation id, name and device, its device time in whole
/// microseconds, and where it starts on the device's row (with device rows and a reference
/// for its device).
struct Timed {
    id: u64,
    name: Name,
    device: i32,
    us: i64,
    start_ns: Option<i64>,
}

/// A range a thread began: its events, `end` `None` while it is open.
struct Range {
    id: u64,
    name: Name,
    device: i32,
    start: StubEvent,
    end: Option<StubEvent>,
}

/// One thread's ranges in one session, and the indices of those still open (innermost last).
#[derive(Default)]
struct Store {
    ranges: Vec<Range>,
    open: Vec<usize>,
}

/// A device's reference: the host time (Unix-epoch ns) its event was recorded at.
struct Reference {
    device: i32,
    cpu_ns: i64,
    event: StubEvent,
}

/// Numbers the timers, so that a thread's cached store is known to be this session's.
static NEXT_TIMER: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's store for the timer numbered `.0`.
    static STORE: RefCell<Option<(u64, Arc<Mutex<Store>>)>> = const { RefCell::new(None) };
    /// Set while this thread is inside the stubs' `record`: ranges the stubs themselves begin
    /// there (a device whose events are ops of its own) are not timed, which would recurse.
    static IN_RECORD: Cell<bool> = const { Cell::new(false) };
}

/// Records an event pair around every range and times them at the end.
struct StubTimer {
    serial: u64,
    stubs: Arc<dyn ProfilerStubs>,
    stores: Mutex<Vec<Arc<Mutex<Store>>>>,
    references: Mutex<Vec<Reference>>,
    errors: Mutex<(Vec<String>, u64)>,
}

impl StubTimer {
    fn new(stubs: Arc<dyn ProfilerStubs>) -> Self {
        Self {
            serial: NEXT_TIMER.fetch_add(1, Ordering::Relaxed),
            stubs,
            stores: Mutex::new(Vec::new()),
            references: Mutex::new(Vec::new()),
            errors: Mutex::new((Vec::new(), 0)),
        }
    }

    /// A new event on the current stream, and the current device.
    fn event(&self) -> Option<(StubEvent, i32)> {
        let (mut event, mut device) = (None, 0);
        let out = RecordOut {
            event: Some(&mut event),
            device: Some(&mut device),
            cpu_ns: None,
        };
        /// Clears `IN_RECORD` however `record` returns.
        struct Recording;
        impl Drop for Recording {
            fn drop(&mut self) {
                IN_RECORD.with(|r| r.set(false));
            }
        }
        IN_RECORD.with(|r| r.set(true));
        let recording = Recording;
        let recorded = self.stubs.record(out);
        drop(recording);
        match recorded {
            Ok(()) => event.map(|e| (e, device)),
            Err(e) => {
                self.error(e);
                None
            }
        }
    }

    fn error(&self, e: StubError) {
        let mut errors = lock(&self.errors);
        if errors.0.len() < KEPT_ERRORS {
            errors.0.push(e.to_string());
        }
        errors.1 += 1;
    }

    /// This thread's store, registered with this timer at the thread's first range.
    fn store(&self) -> Arc<Mutex<Store>> {
        STORE.with(|cell| {
            let mut cell = cell.borrow_mut();
            match &*cell {
                Some((serial, store)) if *serial == self.serial => store.clone(),
                _ => {
                    let store = Arc::new(Mutex::new(Store::default()));
                    lock(&self.stores).push(store.clone());
                    *cell = Some((self.serial, store.clone()));
                    store
                }
            }
        })
    }

    /// Records a reference event on every device.
    fn record_references(&self) {
        let mut references = Vec::new();
        self.stubs.on_each_device(&mut |index| {
            let (mut event, mut device, mut cpu_ns) = (None, index, 0);
            let out = RecordOut {
                event: Some(&mut event),
                device: Some(&mut device),
                cpu_ns: Some(&mut cpu_ns),
            };
            match self.stubs.record(out) {
                Ok(()) => {
                    if let Some(event) = event {
                        references.push(Reference {
                            device,
                            cpu_ns,
                            event,
                        });
                    }
                }
                Err(e) => self.error(e),
            }
        });
        *lock(&self.references) = references;
    }

    /// Times every range with both events on a helper thread, waiting at most `deadline`:
    /// each range with a device time above zero, in whole microseconds (truncated, as
    /// PyTorch does), placed on its device's row when `rows`; and the errors met on the way.
    fn finish(self: &Arc<Self>, deadline: Duration, rows: bool) -> (Vec<Timed>, Vec<String>, u64) {
        let stores = std::mem::take(&mut *lock(&self.stores));
        let mut ranges = Vec::new();
        for store in stores {
            let store = std::mem::take(&mut *lock(&store));
            ranges.extend(store.ranges.into_iter().filter(|r| r.end.is_some()));
        }
        let references = if rows {
            std::mem::take(&mut *lock(&self.references))
        } else {
            Vec::new()
        };
        let total = ranges.len();
        let timed = Arc::new(Mutex::new(Vec::with_capacity(total)));
        let (done, finished) = mpsc::channel();
        let (timer, out) = (self.clone(), timed.clone());
        let spawned = std::thread::Builder::new()
            .name("omniprof-stubs-elapsed".into())
            .spawn(move || {
                for r in ranges {
                    let Some(end) = &r.end else { continue };
                    let us = match timer.stubs.elapsed(&r.start, end) {
                        Ok(us) if us as i64 > 0 => us as i64,
                        Ok(_) => continue,
                        Err(e) => {
                            timer.error(e);
                            continue;
                        }
                    };
                    let start_ns = references
                        .iter()
                        .find(|x| x.device == r.device)
                        .and_then(|x| match timer.stubs.elapsed(&x.event, &r.start) {
                            Ok(offset) => Some(x.cpu_ns + (f64::from(offset) * 1000.0) as i64),
                            Err(e) => {
                                timer.error(e);
                                None
                            }
                        });
                    lock(&out).push(Timed {
                        id: r.id,
                        name: r.name,
                        device: r.device,
                        us,
                        start_ns,
                    });
                }
                let _ = done.send(());
            });
        match spawned {
            Ok(_) => {
                if finished.recv_timeout(deadline).is_err() {
                    let n = lock(&timed).len();
                    self.error(StubError::Backend(format!(
                        "elapsed did not return within {} ms: device time resolved for {n} of \
                         {total} ranges, the rest have none",
                        deadline.as_millis()
                    )));
                }
            }
            Err(e) => self.error(StubError::Backend(format!(
                "no thread to time the ranges on: {e}"
            ))),
        }
        let timed = std::mem::take(&mut *lock(&timed));
        let (kept, count) = std::mem::take(&mut *lock(&self.errors));
        (timed, kept, count)
    }
}

impl CorrelationListener for StubTimer {
    fn push_correlation_id(&self, _: u64) {}
    fn pop_correlation_id(&self) {}
    fn push_user_correlation_id(&self, _: u64) {}
    fn pop_user_correlation_id(&self) {}

    fn range_begin(&self, id: u64, name: Name, _: bool) {
        if IN_RECORD.with(Cell::get) {
            return;
        }
        if let Some((start, device)) = self.event() {
            let store = self.store();
            let mut store = lock(&store);
            let index = store.ranges.len();
            store.ranges.push(Range {
                id,
                name,
                device,
                start,
                end: None,
            });
            store.open.push(index);
        }
    }

    fn range_end(&self, id: u64, _: bool) {
        if IN_RECORD.with(Cell::get) {
            return;
        }
        let end = self.event();
        let store = self.store();
        let mut store = lock(&store);
        let Store { ranges, open } = &mut *store;
        // Innermost first: a range ends above the ones it encloses.
        if let Some(at) = open.iter().rposition(|&i| ranges[i].id == id) {
            let index = open.remove(at);
            // A range whose end event failed keeps no end, and is not timed.
            ranges[index].end = end.map(|(end, _)| end);
        }
    }
}

struct MarkersSession(Arc<Markers>);

impl ProfilerSession for MarkersSession {
    fn process_trace(
        &mut self,
        _: &mut dyn ActivitySink,
        _: &dyn HostOps,
        _: Window,
    ) -> Result<(), BackendError> {
        Ok(())
    }

    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        Some(self.0.clone())
    }
}

/// Forwards ranges and instants to the stubs' markers (the NVTX-style path).
struct Markers(Arc<dyn ProfilerStubs>);

impl CorrelationListener for Markers {
    fn push_correlation_id(&self, _: u64) {}
    fn pop_correlation_id(&self) {}
    fn push_user_correlation_id(&self, _: u64) {}
    fn pop_user_correlation_id(&self) {}

    fn range_begin(&self, _: u64, name: Name, _: bool) {
        self.0.range_push(&name.resolve());
    }

    fn range_end(&self, _: u64, _: bool) {
        self.0.range_pop();
    }

    fn instant(&self, name: Name) {
        self.0.mark(&name.resolve());
    }
}
