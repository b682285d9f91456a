//! The stubs seen through the [`ActivityProfiler`] trait, so the engine drives them as it
//! drives any backend and has no mode of its own for them.
//!
//! A stubs backend records no activity type: it lives on the host ranges. One that times
//! records an event pair around every range through its correlation listener and, when the
//! trace is processed, hands each range's device time to the sink as an arg of that host
//! range; its device name and failures are its session's metadata. One that marks forwards
//! ranges and instants to the stubs' markers and hands over nothing.

use std::sync::{Arc, Mutex};

use super::{lock, stubs, ProfilerStubs, RecordOut, StubError, StubEvent};
use crate::activity::ActivitySet;
use crate::backend::{ActivityProfiler, ActivitySink, BackendError, HostOps, ProfilerSession};
use crate::config::Config;
use crate::hash::FastMap;
use crate::keys::{arg, metadata};
use crate::record::{CorrelationListener, Name};
use crate::trace::Window;
use crate::value::Value;

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
        _: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        let stubs = stubs(&self.device).map_err(|e| BackendError::new(e.to_string()))?;
        Ok(Some(match self.what {
            Use::Time => Box::new(StubsSession {
                device: self.device.clone(),
                timer: Arc::new(StubTimer::new(stubs)),
                errors: Vec::new(),
                error_count: 0,
            }),
            Use::Mark => Box::new(MarkersSession(Arc::new(Markers(stubs)))),
        }))
    }
}

struct StubsSession {
    /// The device name as the session was built with it: the trace's `device_type`.
    device: String,
    timer: Arc<StubTimer>,
    /// Failures met while recording and timing, the first [`KEPT_ERRORS`] word for word.
    errors: Vec<String>,
    error_count: u64,
}

impl ProfilerSession for StubsSession {
    fn process_trace(
        &mut self,
        sink: &mut dyn ActivitySink,
        _: &dyn HostOps,
        _: Window,
    ) -> Result<(), BackendError> {
        let (times, errors, count) = self.timer.finish();
        for (correlation, us) in times {
            sink.add_host_arg(correlation, arg::DEVICE_TIME_US, Value::Int(us));
        }
        if count > 0 {
            log::warn!(
                "omniprof: {count} profiler stub calls failed; first: {:?}",
                errors.first()
            );
        }
        (self.errors, self.error_count) = (errors, count);
        Ok(())
    }

    fn metadata(&self) -> Vec<(String, Value)> {
        let mut metadata = vec![(
            metadata::DEVICE_TYPE.to_owned(),
            Value::from(self.device.as_str()),
        )];
        if self.error_count > 0 {
            let messages = self.errors.iter().map(|e| Value::from(e.as_str()));
            metadata.push((
                metadata::STUB_ERRORS.to_owned(),
                Value::UInt(self.error_count),
            ));
            metadata.push((
                metadata::STUB_ERROR_MESSAGES.to_owned(),
                Value::List(messages.collect()),
            ));
        }
        metadata
    }

    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        Some(self.timer.clone())
    }
}

/// Records an event pair around every range and times them at the end.
struct StubTimer {
    stubs: Arc<dyn ProfilerStubs>,
    open: Mutex<FastMap<u64, StubEvent>>,
    done: Mutex<Vec<(u64, StubEvent, StubEvent)>>,
    errors: Mutex<(Vec<String>, u64)>,
}

impl StubTimer {
    fn new(stubs: Arc<dyn ProfilerStubs>) -> Self {
        Self {
            stubs,
            open: Mutex::new(FastMap::default()),
            done: Mutex::new(Vec::new()),
            errors: Mutex::new((Vec::new(), 0)),
        }
    }

    fn event(&self) -> Option<StubEvent> {
        let mut event = None;
        let out = RecordOut {
            event: Some(&mut event),
            ..RecordOut::default()
        };
        match self.stubs.record(out) {
            Ok(()) => event,
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

    /// The device time of every range with both events and a time above zero, in whole
    /// microseconds (truncated, as PyTorch does), and the errors met on the way.
    fn finish(&self) -> (FastMap<u64, i64>, Vec<String>, u64) {
        let done = std::mem::take(&mut *lock(&self.done));
        lock(&self.open).clear();
        let mut times = FastMap::default();
        for (id, start, end) in done {
            match self.stubs.elapsed(&start, &end) {
                Ok(us) if us as i64 > 0 => {
                    times.insert(id, us as i64);
                }
                Ok(_) => {}
                Err(e) => self.error(e),
            }
        }
        let (kept, count) = std::mem::take(&mut *lock(&self.errors));
        (times, kept, count)
    }
}

impl CorrelationListener for StubTimer {
    fn push_correlation_id(&self, _: u64) {}
    fn pop_correlation_id(&self) {}
    fn push_user_correlation_id(&self, _: u64) {}
    fn pop_user_correlation_id(&self) {}

    fn range_begin(&self, id: u64, _: Name, _: bool) {
        if let Some(event) = self.event() {
            lock(&self.open).insert(id, event);
        }
    }

    fn range_end(&self, id: u64, _: bool) {
        let end = self.event();
        let start = lock(&self.open).remove(&id);
        if let (Some(start), Some(end)) = (start, end) {
            lock(&self.done).push((id, start, end));
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
