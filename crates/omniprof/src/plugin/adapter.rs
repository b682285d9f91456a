//! A plugin profiler seen through the [`ActivityProfiler`] trait: the engine drives a `.so`
//! exactly as it drives a static backend.
//!
//! Per trace: `profilerCreate` with the requested types the plugin supports, start, stop,
//! `profilerProcessEvents` into a [`HostTraceBuilder`], and `profilerDestroy` when the session
//! is dropped. A session whose create failed makes no further call (defect 8).

use std::ffi::c_int;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use omniprof_plugin_sys::{
    ProfilerCreateParams, ProfilerDestroyParams, ProfilerHandle, ProfilerInterface,
    ProfilerPopCorrelationIdParams, ProfilerPopUserCorrelationIdParams,
    ProfilerProcessEventsParams, ProfilerPushCorrelationIdParams,
    ProfilerPushUserCorrelationIdParams, ProfilerStartParams, ProfilerStopParams,
};

use super::builder::HostTraceBuilder;
use super::types::abi_types;
use crate::activity::{Activity, ActivitySet, ActivityType};
use crate::backend::{
    ActivityProfiler, ActivitySink, BackendError, DeviceInfo, HostOps, ProfilerSession,
    ResourceInfo,
};
use crate::config::Config;
use crate::counter::CounterTrack;
use crate::hash::FastMap;
use crate::keys::arg;
use crate::record::CorrelationListener;
use crate::trace::Window;
use crate::value::Value;

/// One profiler a plugin registered, validated and queried.
#[derive(Clone)]
pub(crate) struct PluginProfiler {
    pub(crate) path: PathBuf,
    pub(crate) name: String,
    pub(crate) supported: ActivitySet,
    /// Every required entry is non-null (checked at load).
    pub(crate) iface: ProfilerInterface,
}

/// The plugin's handle for one trace. The ABI lets the host call a profiler from any thread
/// (Kineto does), so the pointer may move between threads.
#[derive(Clone, Copy)]
struct Handle(*mut ProfilerHandle);

// SAFETY: the handle is an opaque token owned by the plugin, which the ABI requires to accept
// calls from any host thread; omniprof never dereferences it.
unsafe impl Send for Handle {}
// SAFETY: as above; shared use only passes the token back to the plugin.
unsafe impl Sync for Handle {}

fn failed(call: &str, rc: c_int) -> Result<(), BackendError> {
    match rc {
        0 => Ok(()),
        rc => Err(BackendError::new(format!("{call} returned {rc}"))),
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
        _config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        let mut enabled = abi_types(activities);
        if enabled.is_empty() {
            return Ok(None);
        }
        let mut params = ProfilerCreateParams {
            enabled_activity_types: enabled.as_mut_ptr(),
            enabled_activity_types_max_len: enabled.len(),
            ..ProfilerCreateParams::default()
        };
        let create = self.iface.profiler_create.expect("checked at load");
        // SAFETY: `params` is a complete create struct whose array outlives the call, and
        // `create` is the plugin's entry for it.
        failed("profilerCreate", unsafe { create(&mut params) })?;
        if params.profiler_handle.is_null() {
            return Err(BackendError::new("profilerCreate returned no handle"));
        }
        let handle = Handle(params.profiler_handle);
        let listener = Arc::new(PluginListener {
            iface: self.iface,
            handle: RwLock::new(Some(handle)),
            pushed: Mutex::new(FastMap::default()),
        });
        Ok(Some(Box::new(PluginSession {
            iface: self.iface,
            name: self.name.clone(),
            path: self.path.clone(),
            handle,
            listener,
            built: HostTraceBuilder::default(),
        })))
    }
}

struct PluginSession {
    iface: ProfilerInterface,
    name: String,
    path: PathBuf,
    handle: Handle,
    listener: Arc<PluginListener>,
    built: HostTraceBuilder,
}

impl ProfilerSession for PluginSession {
    fn start(&mut self) -> Result<(), BackendError> {
        let mut params = ProfilerStartParams {
            profiler_handle: self.handle.0,
            ..ProfilerStartParams::default()
        };
        let start = self.iface.profiler_start.expect("checked at load");
        // SAFETY: a complete start struct carrying this session's live handle.
        failed("profilerStart", unsafe { start(&mut params) })
    }

    fn stop(&mut self) -> Result<(), BackendError> {
        let mut params = ProfilerStopParams {
            profiler_handle: self.handle.0,
            ..ProfilerStopParams::default()
        };
        let stop = self.iface.profiler_stop.expect("checked at load");
        // SAFETY: as in `start`.
        failed("profilerStop", unsafe { stop(&mut params) })
    }

    fn process_trace(
        &mut self,
        sink: &mut dyn ActivitySink,
        host_ops: &dyn HostOps,
        _window: Window,
    ) -> Result<(), BackendError> {
        let mut built = HostTraceBuilder::default();
        let table = built.table();
        let mut params = ProfilerProcessEventsParams {
            profiler_handle: self.handle.0,
            trace_builder: &table,
            ..ProfilerProcessEventsParams::default()
        };
        let process = self.iface.profiler_process_events.expect("checked at load");
        // SAFETY: `table` points at `built`, which stays in place until the call returns; the
        // plugin may use the builder only during the call (ABI contract).
        let rc = unsafe { process(&mut params) };
        failed("profilerProcessEvents", rc)?;
        let pushed = std::mem::take(
            &mut *self
                .listener
                .pushed
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
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
        self.built
            .problems
            .iter()
            .map(|(reason, n)| format!("{n} × {reason}"))
            .collect()
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
        // No push or pop may reach the plugin once its handle is destroyed.
        *self
            .listener
            .handle
            .write()
            .unwrap_or_else(|e| e.into_inner()) = None;
        let mut params = ProfilerDestroyParams {
            profiler_handle: self.handle.0,
            ..ProfilerDestroyParams::default()
        };
        let destroy = self.iface.profiler_destroy.expect("checked at load");
        // SAFETY: the last call with this handle, which the session owns.
        let rc = unsafe { destroy(&mut params) };
        if rc != 0 {
            log::warn!(
                "omniprof: plugin {} ({}): profilerDestroy returned {rc}",
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
    fn with_handle(&self, f: impl FnOnce(Handle)) {
        if let Some(handle) = *self.handle.read().unwrap_or_else(|e| e.into_inner()) {
            f(handle);
        }
    }
}

impl CorrelationListener for PluginListener {
    fn push_correlation_id(&self, id: u64) {
        let Some(push) = self.iface.profiler_push_correlation_id else {
            return;
        };
        self.pushed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, ());
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
