//! A plugin profiler seen through the [`ActivityProfiler`] trait: the engine drives a `.so`
//! exactly as it drives a static backend.
//!
//! Per trace: `profilerCreate` with the requested types the plugin supports (at the warm-up
//! when the trace has one), `profilerStart` when the capture window opens, stop,
//! `profilerProcessEvents` into a [`HostTraceBuilder`], and `profilerDestroy` right after it
//! (or when a session that did not get that far is dropped). Starting at the window, as
//! Kineto starts its child profilers, is what the ABI allows for a warm-up: it has no call
//! to discard what a plugin recorded, so a plugin started at the warm-up would fill its own
//! buffers and the builder's budget with records the trace drops. A session dropped before
//! its window opened gets no `profilerStop`. A session whose create failed
//! makes no further call (`docs/plugin-abi.md`, defect 8). Each of these calls runs under
//! the deadline of [`deadline`](super::deadline).

use std::ffi::{c_int, CStr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use omniprof_plugin_sys::{
    LastErrorFn, ProfilerCreateParams, ProfilerDestroyParams, ProfilerHandle, ProfilerInterface,
    ProfilerPopCorrelationIdParams, ProfilerPopUserCorrelationIdParams,
    ProfilerProcessEventsParams, ProfilerPushCorrelationIdParams,
    ProfilerPushUserCorrelationIdParams, ProfilerStartParams, ProfilerStopParams,
};

use super::builder::HostTraceBuilder;
use super::deadline::Abandoned;
use super::types::abi_types;
use crate::backend::{
    ActivityProfiler, ActivitySink, BackendError, DeviceInfo, HostOps, ProfilerSession,
    ResourceInfo,
};
use crate::config::Config;
use crate::keys::arg;
use crate::record::CorrelationListener;
use crate::CounterTrack;
use crate::FastMap;
use crate::Value;
use crate::Window;
use crate::{lock, read_lock, write_lock};
use crate::{Activity, ActivitySet, ActivityType};

/// One profiler a plugin registered, validated and queried.
#[derive(Clone)]
pub(crate) struct PluginProfiler {
    pub(crate) path: PathBuf,
    pub(crate) name: String,
    pub(crate) supported: ActivitySet,
    /// Every required entry is non-null (checked at load).
    pub(crate) iface: ProfilerInterface,
    /// Set once a call overran its deadline; shared by every session of this profiler.
    pub(crate) abandoned: Abandoned,
    /// The plugin's `OmniprofPlugin_lastError`, if it has one.
    pub(crate) last_error: LastError,
}

/// A plugin's optional `OmniprofPlugin_lastError` (`omniprof_plugin.h`): asked, on the
/// thread of a call that failed and right after it, what went wrong.
#[derive(Clone, Copy, Default)]
pub(crate) struct LastError(pub(crate) Option<LastErrorFn>);

impl LastError {
    /// The call's return code, with the plugin's account of it when it failed.
    fn outcome(self, rc: c_int) -> Outcome {
        let why = if rc == 0 { None } else { self.read() };
        Outcome { rc, why }
    }

    fn read(self) -> Option<String> {
        let last_error = self.0?;
        // SAFETY: the plugin's own function of the ABI's type, called on the thread whose
        // failure it describes; it takes nothing.
        let text = unsafe { last_error() };
        if text.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string the plugin keeps valid until this thread's next
        // call into it; copied at once.
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    }
}

/// What one call into the plugin returned.
struct Outcome {
    rc: c_int,
    /// The plugin's `OmniprofPlugin_lastError` text, when the call failed and it said.
    why: Option<String>,
}

/// The plugin's handle for one trace. The ABI lets the host call a profiler from any thread
/// (Kineto does), so the pointer may move between threads.
#[derive(Clone, Copy)]
struct Handle(*mut ProfilerHandle);

impl Handle {
    /// The pointer (a method, so that a closure captures the whole `Send` handle).
    fn get(self) -> *mut ProfilerHandle {
        self.0
    }
}

// SAFETY: the handle is an opaque token owned by the plugin, which the ABI requires to accept
// calls from any host thread; omniprof never dereferences it.
unsafe impl Send for Handle {}
// SAFETY: as above; shared use only passes the token back to the plugin.
unsafe impl Sync for Handle {}

fn failed(call: &str, outcome: Outcome) -> Result<(), BackendError> {
    match (outcome.rc, outcome.why) {
        (0, _) => Ok(()),
        (rc, Some(why)) => Err(BackendError::new(format!("{call} returned {rc}: {why}"))),
        (rc, None) => Err(BackendError::new(format!("{call} returned {rc}"))),
    }
}

impl ActivityProfiler for PluginProfiler {
    fn name(&self) -> &str {
        &self.name
    }

    fn available_activities(&self) -> ActivitySet {
        self.supported
    }

    fn configure(
        &self,
        activities: ActivitySet,
        config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        let mut enabled = abi_types(activities);
        if enabled.is_empty() {
            return Ok(None);
        }
        let timeout = config.plugin_call_timeout();
        let create = self.iface.profiler_create.expect("checked at load");
        let last_error = self.last_error;
        let (rc, handle) = self.abandoned.call("profilerCreate", timeout, move || {
            let mut params = ProfilerCreateParams {
                enabled_activity_types: enabled.as_mut_ptr(),
                enabled_activity_types_max_len: enabled.len(),
                ..ProfilerCreateParams::default()
            };
            // SAFETY: `params` is a complete create struct whose array outlives the call, and
            // `create` is the plugin's entry for it.
            let rc = unsafe { create(&mut params) };
            (last_error.outcome(rc), Handle(params.profiler_handle))
        })?;
        failed("profilerCreate", rc)?;
        if handle.get().is_null() {
            return Err(BackendError::new("profilerCreate returned no handle"));
        }
        let listener = Arc::new(PluginListener {
            iface: self.iface,
            handle: RwLock::new(Some(handle)),
            pushed: Mutex::new(FastMap::default()),
        });
        Ok(Some(Box::new(PluginSession {
            iface: self.iface,
            name: self.name.clone(),
            path: self.path.clone(),
            handle: Some(handle),
            listener,
            built: HostTraceBuilder::default(),
            abandoned: self.abandoned.clone(),
            last_error: self.last_error,
            timeout,
            max_events: usize::try_from(config.max_events_per_backend()).unwrap_or(usize::MAX),
            errors: Vec::new(),
            started: false,
        })))
    }
}

struct PluginSession {
    iface: ProfilerInterface,
    name: String,
    path: PathBuf,
    /// Until `profilerDestroy` was called.
    handle: Option<Handle>,
    listener: Arc<PluginListener>,
    built: HostTraceBuilder,
    abandoned: Abandoned,
    last_error: LastError,
    timeout: Duration,
    /// Events the builder keeps per trace.
    max_events: usize,
    /// Problems of calls after processEvents (destroy).
    errors: Vec<String>,
    /// Whether `profilerStart` was called (at the window).
    started: bool,
}

impl PluginSession {
    /// Runs one call with the live handle under the deadline.
    fn call<R: Send + 'static>(
        &self,
        call: &str,
        f: impl FnOnce(*mut ProfilerHandle) -> R + Send + 'static,
    ) -> Result<R, BackendError> {
        let handle = self
            .handle
            .ok_or_else(|| BackendError::new(format!("{call} after profilerDestroy")))?;
        let result = self
            .abandoned
            .call(call, self.timeout, move || f(handle.get()));
        if self.abandoned.reason().is_some() {
            // No push or pop may reach a plugin that stopped answering.
            self.listener.forget_handle();
        }
        result
    }

    /// `profilerDestroy`, once; no push or pop reaches the plugin afterwards.
    fn destroy(&mut self) -> Result<(), BackendError> {
        self.listener.forget_handle();
        if self.handle.is_none() || self.abandoned.reason().is_some() {
            return Ok(());
        }
        let destroy = self.iface.profiler_destroy.expect("checked at load");
        let last_error = self.last_error;
        let rc = self.call("profilerDestroy", move |handle| {
            let mut params = ProfilerDestroyParams {
                profiler_handle: handle,
                ..ProfilerDestroyParams::default()
            };
            // SAFETY: the last call with this handle, which the session owns.
            last_error.outcome(unsafe { destroy(&mut params) })
        });
        self.handle = None;
        failed("profilerDestroy", rc?)
    }
}

impl ProfilerSession for PluginSession {
    /// Nothing yet: the plugin starts when the window opens.
    fn start(&mut self) -> Result<(), BackendError> {
        Ok(())
    }

    fn window_opened(&mut self) -> Result<(), BackendError> {
        let start = self.iface.profiler_start.expect("checked at load");
        let last_error = self.last_error;
        let rc = self.call("profilerStart", move |handle| {
            let mut params = ProfilerStartParams {
                profiler_handle: handle,
                ..ProfilerStartParams::default()
            };
            // SAFETY: a complete start struct carrying this session's live handle.
            last_error.outcome(unsafe { start(&mut params) })
        })?;
        self.started = true;
        failed("profilerStart", rc)
    }

    fn stop(&mut self) -> Result<(), BackendError> {
        if !self.started {
            return Ok(());
        }
        let stop = self.iface.profiler_stop.expect("checked at load");
        let last_error = self.last_error;
        let rc = self.call("profilerStop", move |handle| {
            let mut params = ProfilerStopParams {
                profiler_handle: handle,
                ..ProfilerStopParams::default()
            };
            // SAFETY: as in `start`.
            last_error.outcome(unsafe { stop(&mut params) })
        })?;
        failed("profilerStop", rc)
    }

    fn process_trace(
        &mut self,
        sink: &mut dyn ActivitySink,
        host_ops: &dyn HostOps,
        _window: Window,
    ) -> Result<(), BackendError> {
        let process = self.iface.profiler_process_events.expect("checked at load");
        let max_events = self.max_events;
        let last_error = self.last_error;
        let (rc, mut built) = self.call("profilerProcessEvents", move |handle| {
            let mut built = HostTraceBuilder::with_max_events(max_events);
            let rc = built.lend(|table| {
                let mut params = ProfilerProcessEventsParams {
                    profiler_handle: handle,
                    trace_builder: table,
                    ..ProfilerProcessEventsParams::default()
                };
                // SAFETY: a complete params struct with this session's live handle and a
                // table that outlives the call.
                unsafe { process(&mut params) }
            });
            (last_error.outcome(rc), built)
        })?;
        failed("profilerProcessEvents", rc)?;
        // Nothing but host-side data is asked of the session after this: destroying the
        // plugin's handle now lets a destroy that fails or hangs reach the trace's errors.
        if let Err(e) = self.destroy() {
            self.errors.push(e.to_string());
        }
        let pushed = std::mem::take(&mut *lock(&self.listener.pushed));
        for mut event in std::mem::take(&mut built.events) {
            if event.kind == ActivityType::GpuPmCounter {
                add_counter(sink, event);
                continue;
            }
            // omniprof extension: an event whose id is a host op this plugin was pushed is
            // that op's work. (Only pushed ids count: a plugin's own ids may look the same.)
            let id = event.correlation;
            if pushed.contains_key(&id) && host_ops.get(id).is_some() {
                event.linked_correlation = Some(id);
                event.correlation = event
                    .arg(arg::CORRELATION)
                    .and_then(metadata_id)
                    .unwrap_or(0);
            }
            sink.add(event);
        }
        self.built = built;
        Ok(())
    }

    fn device_info(&self) -> Vec<DeviceInfo> {
        self.built.devices.clone()
    }

    fn resource_infos(&self) -> Vec<ResourceInfo> {
        self.built.resources.clone()
    }

    fn errors(&self) -> Vec<String> {
        let mut errors = self.built.problem_report();
        errors.extend(self.errors.iter().cloned());
        errors
    }

    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        let i = &self.iface;
        let any = i.profiler_push_correlation_id.is_some()
            || i.profiler_pop_correlation_id.is_some()
            || i.profiler_push_user_correlation_id.is_some()
            || i.profiler_pop_user_correlation_id.is_some();
        any.then(|| self.listener.clone() as Arc<dyn CorrelationListener>)
    }
}

/// An id a plugin gave as event metadata.
fn metadata_id(value: &Value) -> Option<u64> {
    u64::try_from(value.as_i64()?).ok()
}

impl Drop for PluginSession {
    fn drop(&mut self) {
        if let Err(e) = self.destroy() {
            log::warn!(
                "omniprof: plugin {} ({}): {e}",
                self.name,
                self.path.display()
            );
        }
    }
}

/// Forwards the engine's correlation pushes to the plugin's optional entries (missing ones
/// are no-ops), while the session's handle is alive.
struct PluginListener {
    iface: ProfilerInterface,
    handle: RwLock<Option<Handle>>,
    /// Host op ids pushed to the plugin: the event ids it may link to.
    pushed: Mutex<FastMap<u64, ()>>,
}

impl PluginListener {
    /// Stops every later push and pop from reaching the plugin.
    fn forget_handle(&self) {
        *write_lock(&self.handle) = None;
    }

    fn with_handle(&self, f: impl FnOnce(Handle)) {
        if let Some(handle) = *read_lock(&self.handle) {
            f(handle);
        }
    }
}

impl CorrelationListener for PluginListener {
    fn push_correlation_id(&self, id: u64) {
        let Some(push) = self.iface.profiler_push_correlation_id else {
            return;
        };
        lock(&self.pushed).insert(id, ());
        self.with_handle(|h| {
            let mut params = ProfilerPushCorrelationIdParams {
                correlation_id: id,
                profiler_handle: h.0,
                ..ProfilerPushCorrelationIdParams::default()
            };
            // SAFETY: a complete struct with the live handle (the read lock keeps it alive).
            unsafe { push(&mut params) };
        });
    }

    fn pop_correlation_id(&self) {
        let Some(pop) = self.iface.profiler_pop_correlation_id else {
            return;
        };
        self.with_handle(|h| {
            let mut params = ProfilerPopCorrelationIdParams {
                profiler_handle: h.0,
                ..ProfilerPopCorrelationIdParams::default()
            };
            // SAFETY: as in `push_correlation_id`.
            unsafe { pop(&mut params) };
        });
    }

    fn push_user_correlation_id(&self, id: u64) {
        let Some(push) = self.iface.profiler_push_user_correlation_id else {
            return;
        };
        self.with_handle(|h| {
            let mut params = ProfilerPushUserCorrelationIdParams {
                user_correlation_id: id,
                profiler_handle: h.0,
                ..ProfilerPushUserCorrelationIdParams::default()
            };
            // SAFETY: as in `push_correlation_id`.
            unsafe { push(&mut params) };
        });
    }

    fn pop_user_correlation_id(&self) {
        let Some(pop) = self.iface.profiler_pop_user_correlation_id else {
            return;
        };
        self.with_handle(|h| {
            let mut params = ProfilerPopUserCorrelationIdParams {
                profiler_handle: h.0,
                ..ProfilerPopUserCorrelationIdParams::default()
            };
            // SAFETY: as in `push_correlation_id`.
            unsafe { pop(&mut params) };
        });
    }
}

/// A `GPU_PM_COUNTER` event as the counter sample it stands for: its track is (type, device,
/// resource, name), its values the numbers the builder kept in its args.
fn add_counter(sink: &mut dyn ActivitySink, event: Activity) {
    let track = CounterTrack::new(event.kind, event.name, event.device, event.resource);
    let values = event
        .args
        .into_iter()
        .filter_map(|(key, value)| Some((key, value.as_f64()?)))
        .collect();
    sink.add_counter(&track, event.start_ns, values);
}
