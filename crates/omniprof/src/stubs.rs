//! The legacy profiler stubs (`reference/stubs-and-summary.md`, sections 1–3): the smallest
//! thing a device can offer — events on its current stream and the time between two of them
//! — for per-op device time in the summary table, without a device timeline.
//!
//! A backend implements [`ProfilerStubs`] and registers it under its device name
//! ([`register_stubs!`](crate::register_stubs) before `main`, or [`register_stubs`]). A
//! session built with [`ProfilerBuilder::stubs`](crate::ProfilerBuilder::stubs) then records
//! an event pair around every host op and user range and, at stop, stores each range's device
//! time in its `args` as `"device_time_us"` (whole microseconds, truncated as PyTorch does;
//! absent when an event is missing or the time is zero). With
//! [`ProfilerBuilder::markers`](crate::ProfilerBuilder::markers) ranges and instants are
//! forwarded to `range_push`/`range_pop`/`mark` instead (the NVTX-style path) and the trace
//! keeps nothing.
//!
//! ```
//! use std::sync::Arc;
//! use omniprof::stubs::{self, ProfilerStubs};
//!
//! let err = stubs::stubs("NoSuchDevice").err().unwrap();
//! assert_eq!(err.to_string(), "NoSuchDevice used in profiler but not enabled.");
//! ```

use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::hash::FastMap;
use crate::record::{CorrelationListener, Name};

/// A device event, owned; dropping it releases the backend's event.
pub type StubEvent = Box<dyn Any + Send + Sync>;

/// The `args` key that holds a range's device time in stubs mode.
pub const DEVICE_TIME_ARG: &str = "device_time_us";

/// Failures of the stubs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StubError {
    /// No stubs are registered under this device name.
    #[error("{0} used in profiler but not enabled.")]
    NotEnabled(String),
    /// The backend failed.
    #[error("{0}")]
    Backend(String),
}

/// Where [`ProfilerStubs::record`] stores what it was asked for; each output is optional.
#[derive(Default)]
pub struct RecordOut<'a> {
    /// The current device's index.
    pub device: Option<&'a mut i32>,
    /// The new event.
    pub event: Option<&'a mut Option<StubEvent>>,
    /// A host timestamp (Unix-epoch ns) taken just before the event is enqueued.
    pub cpu_ns: Option<&'a mut i64>,
}

/// The stubs a device offers.
pub trait ProfilerStubs: Send + Sync {
    /// Creates an event and enqueues it on the current stream of the current device.
    fn record(&self, out: RecordOut<'_>) -> Result<(), StubError>;
    /// Waits for both events; the device time from `start` to `end`, in microseconds.
    fn elapsed(&self, start: &StubEvent, end: &StubEvent) -> Result<f32, StubError>;
    /// An instant marker in an external tool (may do nothing).
    fn mark(&self, name: &str);
    /// Opens a nested external-tool range (may do nothing).
    fn range_push(&self, name: &str);
    /// Closes the innermost external-tool range (may do nothing).
    fn range_pop(&self);
    /// True for a real backend.
    fn enabled(&self) -> bool {
        true
    }
    /// Calls `op(i)` for every device index with device `i` made current.
    fn on_each_device(&self, op: &mut dyn FnMut(i32));
    /// Waits for all work on the device.
    fn synchronize(&self) -> Result<(), StubError>;
}

static REGISTERED: Mutex<Vec<(String, Arc<dyn ProfilerStubs>)>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers `stubs` for `device` (names compare case-insensitively); a later registration
/// for the same device replaces it, with a warning.
pub fn register_stubs(device: &str, stubs: Arc<dyn ProfilerStubs>) {
    let mut registered = lock(&REGISTERED);
    match registered
        .iter_mut()
        .find(|(name, _)| name.eq_ignore_ascii_case(device))
    {
        Some(slot) => {
            log::warn!("omniprof: profiler stubs for {device} already registered, overwriting");
            slot.1 = stubs;
        }
        None => registered.push((device.to_owned(), stubs)),
    }
}

/// The stubs registered for `device`, or the error PyTorch gives for an unregistered one.
pub fn stubs(device: &str) -> Result<Arc<dyn ProfilerStubs>, StubError> {
    lock(&REGISTERED)
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(device))
        .map(|(_, s)| s.clone())
        .filter(|s| s.enabled())
        .ok_or_else(|| StubError::NotEnabled(device.to_owned()))
}

/// Registers a [`ProfilerStubs`] type (with `Default`, or a constructor expression) for a
/// device name before `main` runs.
#[macro_export]
macro_rules! register_stubs {
    ($device:expr, $ty:ty) => {
        $crate::register_stubs!($device, $ty, <$ty as ::core::default::Default>::default());
    };
    ($device:expr, $ty:ty, $make:expr) => {
        const _: () = {
            extern "C" fn __omniprof_register_stubs() {
                let stubs: $ty = $make;
                $crate::stubs::register_stubs($device, ::std::sync::Arc::new(stubs));
            }
            #[used]
            #[link_section = ".init_array"]
            static __OMNIPROF_REGISTER_STUBS: extern "C" fn() = __omniprof_register_stubs;
        };
    };
}

/// How many failures are kept word for word; the rest are only counted.
const KEPT_ERRORS: usize = 8;

/// Records an event pair around every range and times them at the end.
pub(crate) struct StubTimer {
    stubs: Arc<dyn ProfilerStubs>,
    open: Mutex<FastMap<u64, StubEvent>>,
    done: Mutex<Vec<(u64, StubEvent, StubEvent)>>,
    errors: Mutex<(Vec<String>, u64)>,
}

impl StubTimer {
    pub(crate) fn new(stubs: Arc<dyn ProfilerStubs>) -> Self {
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
    pub(crate) fn finish(&self) -> (FastMap<u64, i64>, Vec<String>, u64) {
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

/// Forwards ranges and instants to the stubs' external-tool markers.
pub(crate) struct Markers(pub(crate) Arc<dyn ProfilerStubs>);

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{instant, record_function, record_op, Profiler, Value};
    use omniprof_test_support::lock::serial;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Events are host timestamps; `elapsed` is their difference. Recording fails while
    /// `FAIL_RECORD` is set, so a range can lose an event.
    struct HostClockStubs {
        log: Mutex<Vec<String>>,
    }

    static FAIL_RECORD: AtomicBool = AtomicBool::new(false);

    impl ProfilerStubs for HostClockStubs {
        fn record(&self, out: RecordOut<'_>) -> Result<(), StubError> {
            if FAIL_RECORD.load(Ordering::SeqCst) {
                return Err(StubError::Backend("device lost".into()));
            }
            if let Some(slot) = out.event {
                *slot = Some(Box::new(crate::clock::wall_now_ns()));
            }
            Ok(())
        }
        fn elapsed(&self, start: &StubEvent, end: &StubEvent) -> Result<f32, StubError> {
            let (s, e) = (start.downcast_ref::<i64>(), end.downcast_ref::<i64>());
            Ok((e.unwrap() - s.unwrap()) as f32 / 1000.0)
        }
        fn mark(&self, name: &str) {
            self.log.lock().unwrap().push(format!("mark {name}"));
        }
        fn range_push(&self, name: &str) {
            self.log.lock().unwrap().push(format!("push {name}"));
        }
        fn range_pop(&self) {
            self.log.lock().unwrap().push("pop".into());
        }
        fn on_each_device(&self, op: &mut dyn FnMut(i32)) {
            op(0);
        }
        fn synchronize(&self) -> Result<(), StubError> {
            Ok(())
        }
    }

    fn host_clock() -> Arc<HostClockStubs> {
        static STUBS: std::sync::OnceLock<Arc<HostClockStubs>> = std::sync::OnceLock::new();
        STUBS
            .get_or_init(|| {
                let s = Arc::new(HostClockStubs {
                    log: Mutex::new(Vec::new()),
                });
                register_stubs("HostClock", s.clone());
                s
            })
            .clone()
    }

    fn spin(us: u64) {
        let until = std::time::Instant::now() + std::time::Duration::from_micros(us);
        while std::time::Instant::now() < until {}
    }

    #[test]
    fn every_range_gets_its_device_time_and_a_lost_event_gives_none() {
        let _g = serial();
        host_clock();
        let mut p = Profiler::builder().stubs("hostclock").build().unwrap();
        p.start().unwrap();
        {
            let _outer = record_function("outer");
            {
                let _op = record_op("inner");
                spin(3_000);
            }
            FAIL_RECORD.store(true, Ordering::SeqCst);
            let _lost = record_op("lost");
            spin(500);
            FAIL_RECORD.store(false, Ordering::SeqCst);
        }
        let t = p.stop().unwrap();
        let time = |name: &str| {
            let a = t.activities.iter().find(|a| &*a.name == name).unwrap();
            a.arg(DEVICE_TIME_ARG).and_then(Value::as_i64)
        };
        let (outer, inner) = (time("outer").unwrap(), time("inner").unwrap());
        assert!((3_000..100_000).contains(&inner), "{inner}");
        assert!(outer >= inner, "{outer} < {inner}");
        assert_eq!(time("lost"), None, "no device time without both events");
        assert_eq!(t.metadata("device_type"), Some(&Value::from("hostclock")));
        assert_eq!(
            t.metadata("stub_errors"),
            Some(&Value::UInt(1)),
            "the failed begin"
        );
    }

    #[test]
    fn markers_forward_ranges_and_instants_and_keep_nothing() {
        let _g = serial();
        let stubs = host_clock();
        stubs.log.lock().unwrap().clear();
        let mut p = Profiler::builder().markers("HostClock").build().unwrap();
        p.start().unwrap();
        {
            let _a = record_function("a");
            let _b = record_op("b");
            instant("here");
        }
        let t = p.stop().unwrap();
        assert!(t.activities.is_empty());
        assert_eq!(
            *stubs.log.lock().unwrap(),
            ["push a", "push b", "mark here", "pop", "pop"]
        );
    }

    #[test]
    fn an_unregistered_device_is_a_clear_error_and_frees_the_recorder() {
        let _g = serial();
        let err = Profiler::builder()
            .stubs("Nope")
            .build()
            .unwrap()
            .start()
            .unwrap_err();
        assert_eq!(err.to_string(), "Nope used in profiler but not enabled.");
        let mut p = Profiler::builder().build().unwrap();
        p.start().unwrap();
        p.stop().unwrap();
    }

    #[test]
    fn the_last_registration_wins() {
        struct Off;
        impl ProfilerStubs for Off {
            fn record(&self, _: RecordOut<'_>) -> Result<(), StubError> {
                Ok(())
            }
            fn elapsed(&self, _: &StubEvent, _: &StubEvent) -> Result<f32, StubError> {
                Ok(0.0)
            }
            fn mark(&self, _: &str) {}
            fn range_push(&self, _: &str) {}
            fn range_pop(&self) {}
            fn enabled(&self) -> bool {
                false
            }
            fn on_each_device(&self, _: &mut dyn FnMut(i32)) {}
            fn synchronize(&self) -> Result<(), StubError> {
                Ok(())
            }
        }
        register_stubs("Twice", Arc::new(Off));
        assert!(stubs("Twice").is_err(), "a disabled backend is not enabled");
        register_stubs("twice", host_clock());
        assert!(stubs("TWICE").is_ok());
    }
}
