//! `Session`: one Python `omniprof.profile`'s hold on the session engine, and `Schedule`.
//!
//! Every `start` builds a fresh [`Profiler`] from the same builder, so a profile object can be
//! started again after it stopped (as `torch.profiler.profile` can). Finished traces never go
//! to Python from inside the engine: the engine's `on_trace_ready` only queues them, and the
//! Python side takes them after `step`/`stop` returned, then runs its own callback. So a
//! callback may call back into the profiler (export, key averages), and its exception
//! propagates from `step`/`stop` like any other.

use std::sync::{Arc, Mutex};

use omniprof::config_keys::{
    OMNIPROF_PRIVATEUSE1_STUBS, PROFILE_PROFILE_MEMORY, PROFILE_REPORT_INPUT_SHAPES,
    PROFILE_WITH_FLOPS, PROFILE_WITH_MODULES, PROFILE_WITH_STACK,
};
use omniprof::{Config, Profiler, ProfilerAction, ProfilerBuilder, Schedule, ScheduleArgs};
use omniprof_trace::keys::metadata;
use omniprof_trace::{ActivitySet, ActivityType, Trace, Value};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::error::profiler_error;
use crate::record_function_ids;
use crate::results::PyTrace;
use crate::storage_reads;
use omniprof_trace::lock;

/// A `torch.profiler.ProfilerActivity` member: the activity types it selects, and the ones
/// that name its device.
struct Member {
    name: &'static str,
    /// What selecting it asks of the backends. The device members select the device-neutral
    /// classes (kernels, copies, sets, annotations) besides their own runtime and driver
    /// types, as Kineto's do: backends are gated by type, so any device member selects every
    /// backend's kernels.
    selects: &'static [ActivityType],
    /// The types only a backend of this device offers (its runtime, driver and device
    /// calls). A backend offering one of them records this member and no other device
    /// member; one offering none of any member's (a Kineto plugin, a Rust backend that
    /// records kernels and copies only) records every member whose `selects` it offers.
    names_device: &'static [ActivityType],
    /// The types a filter of this member may name (`{ProfilerActivity.CPU: ["CPU_OP"]}`), as
    /// PyTorch checks them; `None`: any type.
    filters: Option<&'static [ActivityType]>,
    /// The types `toggle_collection_dynamic` switches for this member; `None`: those it
    /// selects.
    toggles: Option<&'static [ActivityType]>,
}

/// `torch.profiler.ProfilerActivity`'s members. `CUDA` leaves synchronization out, as
/// PyTorch does unless `_ExperimentalConfig(enable_cuda_sync_events=True)` asks (the Python
/// side then adds `cuda_sync`).
const PROFILER_ACTIVITIES: [Member; 6] = {
    use ActivityType::*;
    [
        Member {
            name: "CPU",
            selects: &[
                CpuOp,
                UserAnnotation,
                CpuInstantEvent,
                ExternalCorrelation,
                PythonFunction,
                Overhead,
            ],
            names_device: &[],
            // PyTorch's CPU group: its host types and the device runtimes' calls.
            filters: Some(&[
                CpuOp,
                CpuInstantEvent,
                UserAnnotation,
                ExternalCorrelation,
                PythonFunction,
                CudaRuntime,
                CudaDriver,
                XpuRuntime,
                PrivateUse1Runtime,
                PrivateUse1Driver,
            ]),
            // PyTorch's switch of CPU removes its RecordFunction callbacks: ops and user
            // ranges stop, its Python tracer and allocator reports go on.
            toggles: Some(&crate::observer::CALLBACK_TYPES),
        },
        Member {
            name: "CUDA",
            selects: &[
                ConcurrentKernel,
                GpuMemcpy,
                GpuMemset,
                GpuUserAnnotation,
                CudaRuntime,
                CudaDriver,
            ],
            names_device: &[CudaRuntime, CudaDriver, CudaSync],
            filters: None,
            toggles: None,
        },
        Member {
            name: "XPU",
            selects: &[
                ConcurrentKernel,
                GpuMemcpy,
                GpuMemset,
                GpuUserAnnotation,
                XpuRuntime,
                XpuDriver,
                XpuSync,
                XpuScopeProfiler,
            ],
            names_device: &[XpuRuntime, XpuDriver, XpuSync],
            filters: None,
            toggles: None,
        },
        Member {
            name: "MTIA",
            selects: &[MtiaCcpEvents, MtiaRuntime, MtiaCounters, MtiaInsight],
            names_device: &[MtiaCcpEvents, MtiaRuntime, MtiaCounters, MtiaInsight],
            filters: None,
            toggles: None,
        },
        Member {
            name: "HPU",
            selects: &[HpuOp, ConcurrentKernel, GpuMemcpy, GpuMemset],
            names_device: &[HpuOp],
            filters: None,
            toggles: None,
        },
        Member {
            name: "PrivateUse1",
            selects: &[
                ConcurrentKernel,
                GpuMemcpy,
                GpuMemset,
                GpuUserAnnotation,
                PrivateUse1Runtime,
                PrivateUse1Driver,
            ],
            names_device: &[PrivateUse1Runtime, PrivateUse1Driver],
            filters: None,
            toggles: None,
        },
    ]
};

impl Member {
    /// The member called `name`, if there is one.
    fn named(name: &str) -> Option<&'static Member> {
        PROFILER_ACTIVITIES.iter().find(|m| m.name == name)
    }

    /// Whether a backend offering `offered` records this member's activities: it names this
    /// device, or names none and offers something this member selects.
    fn recorded_by(&self, offered: ActivitySet) -> bool {
        let names = |m: &Member| m.names_device.iter().any(|t| offered.contains(*t));
        if names(self) {
            return true;
        }
        !PROFILER_ACTIVITIES.iter().any(names) && self.selects.iter().any(|t| offered.contains(*t))
    }
}

/// The selection named by `items`: `ProfilerActivity` names (`CPU`, `CUDA`, ...) and activity
/// type names (`kernel`, `gpu_pm_counter`, ...). An unknown name or the same item twice is a
/// `ValueError`.
fn activity_set(items: &[String]) -> PyResult<ActivitySet> {
    member_types(items, |member| member.selects)
}

/// The activity types `toggle_collection_dynamic` switches for `items` (as
/// [`activity_set`] takes them): each member's [`Member::toggles`].
fn toggled_set(items: &[String]) -> PyResult<ActivitySet> {
    member_types(items, |member| member.toggles.unwrap_or(member.selects))
}

/// The types of `items`, `ProfilerActivity` members (their `types_of`) or activity type
/// names; an unknown or repeated item is a `ValueError`.
fn member_types(
    items: &[String],
    types_of: impl Fn(&Member) -> &'static [ActivityType],
) -> PyResult<ActivitySet> {
    let mut set = ActivitySet::empty();
    let mut seen: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let types: Vec<ActivityType> = match Member::named(item) {
            Some(member) => types_of(member).to_vec(),
            None => vec![ActivityType::parse(item).map_err(|e| {
                let known: Vec<_> = PROFILER_ACTIVITIES.iter().map(|m| m.name).collect();
                PyValueError::new_err(format!(
                    "{e}: expected a ProfilerActivity ({}) or an activity type name \
                         (cpu_op, kernel, gpu_pm_counter, ...)",
                    known.join(", ")
                ))
            })?],
        };
        let key = item.to_ascii_lowercase();
        if seen.contains(&key) {
            return Err(PyValueError::new_err(format!(
                "activity {item:?} is given more than once"
            )));
        }
        seen.push(key);
        types.into_iter().for_each(|t| set.insert(t));
    }
    Ok(set)
}

/// The activity types `names` name, as a filter of the `ProfilerActivity` member `group`
/// selects them (`{ProfilerActivity.CPU: ["CPU_OP", "USER_ANNOTATION"]}`): Kineto's names
/// (`GPU_MEMCPY`) or omniprof's (`gpu_memcpy`, `kernel`). A name that is no type, or a type
/// the group does not hold, is a `ProfilerError` (a `RuntimeError`, as PyTorch raises).
#[pyfunction]
pub(crate) fn activity_filter(group: &str, names: Vec<String>) -> PyResult<Vec<String>> {
    let member = Member::named(group).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{group:?} is not a ProfilerActivity: a filter's key must be one"
        ))
    })?;
    names
        .iter()
        .map(|name| {
            let t = ActivityType::parse(name)
                .ok()
                .filter(|t| member.filters.is_none_or(|allowed| allowed.contains(t)));
            t.map(|t| t.name().to_owned()).ok_or_else(|| {
                profiler_error(format!(
                    "Unknown or non-member activity type name: '{name}' \
                     (in the filter of ProfilerActivity.{group})"
                ))
            })
        })
        .collect()
}

/// What a session holds between calls.
struct Inner {
    /// The running profiler, from `start` until `stop` or `abort`.
    profiler: Option<Profiler>,
    /// A profiler `prepare` warmed up, which `start` takes.
    prepared: Option<Profiler>,
    /// Held with the profiler when the observer is to pack the storages ops read.
    storages: Option<storage_reads::Wanted>,
    /// Metadata added with `add_metadata`, set on every trace taken.
    metadata: Vec<(String, Value)>,
}

/// The `ProfilerActivity` members in `items` that no backend registered now records (`CPU`
/// is always recorded): a CUDA-only process records neither XPU nor HPU nor PrivateUse1,
/// though their selections include the kernels CUPTI records.
fn unrecorded(items: &[String], sitting_out: Option<&str>) -> Vec<String> {
    let offered: Vec<ActivitySet> = omniprof::backends::profilers_present()
        .iter()
        .filter(|p| Some(p.name()) != sitting_out)
        .map(|p| p.available_activities())
        .collect();
    items
        .iter()
        .filter(|item| item.as_str() != "CPU")
        .filter(|item| {
            Member::named(item)
                .is_some_and(|member| !offered.iter().any(|set| member.recorded_by(*set)))
        })
        .cloned()
        .collect()
}

/// The native side of `omniprof.profile`.
#[pyclass(module = "omniprof._native", frozen)]
pub(crate) struct Session {
    builder: ProfilerBuilder,
    /// The `ProfilerActivity` members given, by name: in `activities`, or as `groups`.
    members: Vec<String>,
    /// What the config text warned about (an unknown key, an unsupported one), one line each.
    config_warnings: Vec<String>,
    /// The per-thread cap of host records, which a warning about dropped events names.
    max_host_records: u64,
    /// Whether the PrivateUse1 backend's Kineto profiler may take part
    /// (`OMNIPROF_PRIVATEUSE1_PROFILER`).
    privateuse1_profiler: bool,
    scheduled: bool,
    /// Whether the ops' storages are recorded: with `record_shapes` and `profile_memory`
    /// (for `export_memory_timeline`).
    wants_storages: bool,
    /// What a callable schedule raised (or returned that is no action), raised by the
    /// `start` or `step` that called it.
    schedule_error: Arc<Mutex<Option<PyErr>>>,
    /// Traces the engine finished and Python has not taken yet.
    finished: Arc<Mutex<Vec<Trace>>>,
    inner: Mutex<Inner>,
}

impl Session {
    /// A new profiler from the builder, with the storages wanted held first (before the
    /// observer is configured, at the start or a cycle's warm-up).
    fn fresh(&self) -> PyResult<(Profiler, Option<storage_reads::Wanted>)> {
        let storages = self.wants_storages.then(storage_reads::Wanted::new);
        let profiler = self.builder.clone().build().map_err(profiler_error)?;
        Ok((profiler, storages))
    }

    fn set_metadata(&self, key: String, value: Value) {
        let mut inner = lock(&self.inner);
        inner.metadata.retain(|(k, _)| *k != key);
        inner.metadata.push((key, value));
    }

    /// Runs `f` on the running profiler with the GIL released (a stop merges the trace,
    /// which other Python threads need not wait for).
    fn with_profiler<R: Send>(
        &self,
        py: Python<'_>,
        call: &str,
        f: impl FnOnce(&mut Profiler) -> R + Send,
    ) -> PyResult<R> {
        py.detach(|| {
            let mut inner = lock(&self.inner);
            let profiler = inner.profiler.as_mut().ok_or_else(|| {
                profiler_error(format!("cannot {call}: the profiler is not running"))
            })?;
            Ok(f(profiler))
        })
    }

    /// What a callable schedule raised during the last call, if anything.
    fn schedule_raised(&self) -> PyResult<()> {
        match lock(&self.schedule_error).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// PyTorch's `ProfilerAction.DEVICE_STOPPED`: its profiler's own state once the device
/// stopped collecting early, which a schedule must not return.
const DEVICE_STOPPED: i64 = 4;

/// The action a callable schedule returned: a `ProfilerAction` (omniprof's or
/// torch.profiler's, whose `value` is the number) or its number.
fn action_of(value: &Bound<'_, PyAny>) -> PyResult<ProfilerAction> {
    let number = match value.getattr("value") {
        Ok(inner) => inner.extract::<i64>(),
        Err(_) => value.extract::<i64>(),
    };
    let number = number.ok();
    if number == Some(DEVICE_STOPPED) {
        // PyTorch's step refuses it with these words.
        return Err(PyValueError::new_err(
            "ProfilerAction.DEVICE_STOPPED is set internally by the profiler and must not be \
             returned by a user-provided schedule",
        ));
    }
    match number.and_then(ProfilerAction::from_number) {
        Some(action) => Ok(action),
        None => Err(PyTypeError::new_err(format!(
            "the schedule returned {}, not a ProfilerAction",
            value
                .repr()
                .map_or_else(|_| "?".to_owned(), |r| r.to_string())
        ))),
    }
}

#[pymethods]
impl Session {
    #[new]
    #[pyo3(signature = (
        activities=None,
        schedule=None,
        config=None,
        record_shapes=false,
        profile_memory=false,
        with_flops=false,
        with_stack=false,
        with_modules=false,
        groups=None
    ))]
    // One keyword argument each, as torch.profiler.profile takes them.
    #[allow(clippy::too_many_arguments)]
    fn new(
        activities: Option<Vec<String>>,
        schedule: Option<Bound<'_, PyAny>>,
        config: Option<&str>,
        record_shapes: bool,
        profile_memory: bool,
        with_flops: bool,
        with_stack: bool,
        with_modules: bool,
        groups: Option<Vec<String>>,
    ) -> PyResult<Self> {
        let invalid = |e: omniprof::ConfigError| PyValueError::new_err(e.to_string());
        let mut config_warnings = Vec::new();
        let mut config = match config {
            Some(text) => {
                let mut config = Config::default();
                config_warnings = config
                    .apply(text)
                    .map_err(invalid)?
                    .iter()
                    .map(|w| format!("omniprof: config: {w}"))
                    .collect();
                config
            }
            None => Config::default(),
        };
        // The observer backend reads them (src/observer.rs), as on-demand configs set them.
        for (on, key) in [
            (record_shapes, PROFILE_REPORT_INPUT_SHAPES),
            (profile_memory, PROFILE_PROFILE_MEMORY),
            (with_flops, PROFILE_WITH_FLOPS),
            (with_stack, PROFILE_WITH_STACK),
            (with_modules, PROFILE_WITH_MODULES),
        ] {
            if on {
                config.apply(&format!("{key}=true")).map_err(invalid)?;
            }
        }
        // The members given, whole or filtered (`groups`: their filters' types are among
        // the activities).
        let members: Vec<String> = (activities.iter().flatten())
            .chain(groups.iter().flatten())
            .filter(|item| Member::named(item).is_some())
            .cloned()
            .collect();
        // Only a session that asks times ops through PyTorch's PrivateUse1 stubs (src/stubs.rs).
        if members.iter().any(|m| m == "PrivateUse1") {
            config
                .apply(&format!("{OMNIPROF_PRIVATEUSE1_STUBS}=true"))
                .map_err(invalid)?;
        }
        let max_host_records = config.max_host_records_per_thread();
        let privateuse1_profiler = config.privateuse1_profiler();
        let wants_storages = storage_reads::asked(&config);
        let finished: Arc<Mutex<Vec<Trace>>> = Arc::default();
        let queue = finished.clone();
        let mut builder = Profiler::builder()
            .config(config)
            .on_trace_ready(move |trace| lock(&queue).push(trace));
        if let Some(items) = &activities {
            let selection = activity_set(items)?;
            builder = if groups.as_ref().is_some_and(|g| !g.is_empty()) {
                // Filters may select nothing (`{ProfilerActivity.CPU: []}`), as in PyTorch.
                builder.only_activities(selection)
            } else {
                builder.activities(selection)
            };
        }
        let scheduled = schedule.is_some();
        let schedule_error: Arc<Mutex<Option<PyErr>>> = Arc::default();
        if let Some(schedule) = schedule {
            if let Ok(cycle) = schedule.cast::<PySchedule>() {
                builder = builder.schedule(cycle.get().0);
            } else if schedule.is_callable() {
                // PyTorch calls any callable with the step number for its action.
                let callable = schedule.unbind();
                let failed = schedule_error.clone();
                builder = builder.schedule_fn(move |step| {
                    Python::attach(|py| {
                        let action = callable.call1(py, (step,));
                        match action.and_then(|a| action_of(a.bind(py))) {
                            Ok(action) => action,
                            Err(e) => {
                                lock(&failed).get_or_insert(e);
                                ProfilerAction::None
                            }
                        }
                    })
                });
            } else {
                return Err(PyTypeError::new_err(format!(
                    "schedule must be an omniprof.schedule(...) or a callable taking a step \
                     number and returning a ProfilerAction, not {}",
                    schedule.get_type().name()?
                )));
            }
        }
        Ok(Self {
            builder,
            members,
            config_warnings,
            max_host_records,
            privateuse1_profiler,
            scheduled,
            wants_storages,
            schedule_error,
            finished,
            inner: Mutex::new(Inner {
                profiler: None,
                prepared: None,
                storages: None,
                metadata: Vec::new(),
            }),
        })
    }

    /// Builds a fresh profiler and starts it (with a schedule: step 0's action).
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let mut inner = lock(&self.inner);
            if inner.profiler.is_some() {
                return Err(profiler_error(
                    "cannot start: this profiler is already running",
                ));
            }
            let (mut profiler, storages) = match inner.prepared.take() {
                Some(prepared) => (prepared, inner.storages.take()),
                None => self.fresh()?,
            };
            profiler.start().map_err(profiler_error)?;
            inner.profiler = Some(profiler);
            inner.storages = storages;
            Ok(())
        })?;
        self.schedule_raised()
    }

    /// Claims the recorder and warms the backends up without recording yet (PyTorch's
    /// `prepare_trace`); `start` then opens the window. A `ProfilerError` with a schedule
    /// (its steps warm up) or when prepared or running already.
    fn prepare(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let mut inner = lock(&self.inner);
            if inner.profiler.is_some() || inner.prepared.is_some() {
                return Err(profiler_error(
                    "cannot prepare: this profiler is already prepared or running",
                ));
            }
            let (mut profiler, storages) = self.fresh()?;
            profiler.prepare().map_err(profiler_error)?;
            inner.prepared = Some(profiler);
            inner.storages = storages;
            Ok(())
        })
    }

    /// Whether `prepare` warmed a profiler up that `start` has not taken.
    #[getter]
    fn prepared(&self) -> bool {
        lock(&self.inner).prepared.is_some()
    }

    /// Ends a step (with a schedule, takes the next step's action).
    fn step(&self, py: Python<'_>) -> PyResult<()> {
        let stepped = self.with_profiler(py, "step", Profiler::step)?;
        self.schedule_raised()?;
        stepped.map_err(profiler_error)
    }

    /// Stops: without a schedule the trace is queued; with one the run finishes (a recording
    /// cycle's trace is queued). The profiler is released either way.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let scheduled = self.scheduled;
        let finished = self.finished.clone();
        py.detach(|| {
            let mut inner = lock(&self.inner);
            let storages = inner.storages.take();
            let mut profiler = inner
                .profiler
                .take()
                .ok_or_else(|| profiler_error("cannot stop: the profiler is not running"))?;
            drop(inner);
            // Wanted until the last window closed.
            let _storages = storages;
            if scheduled {
                profiler.finish().map_err(profiler_error)
            } else {
                let trace = profiler.stop().map_err(profiler_error)?;
                lock(&finished).push(trace);
                Ok(())
            }
        })
    }

    /// Drops the running profiler (what runs stops, the cycle in progress is discarded) and
    /// the traces not taken: after a callback raised, the profile is stopped and can start
    /// again.
    fn abort(&self, py: Python<'_>) {
        py.detach(|| {
            let mut inner = lock(&self.inner);
            drop(inner.profiler.take());
            drop(inner.prepared.take());
            inner.storages = None;
            lock(&self.finished).clear();
        });
    }

    /// The traces finished since the last call, oldest first, with the added metadata.
    fn take_traces(&self) -> Vec<PyTrace> {
        let traces = std::mem::take(&mut *lock(&self.finished));
        let metadata = lock(&self.inner).metadata.clone();
        traces
            .into_iter()
            .map(|mut trace| {
                for (key, value) in &metadata {
                    trace.set_metadata(key.clone(), value.clone());
                }
                record_function_ids::number_host_ops_by_record_function(&mut trace);
                PyTrace::new(trace, self.wants_storages)
            })
            .collect()
    }

    /// A top-level trace key for every trace taken from now on.
    fn add_metadata(&self, key: String, value: String) {
        self.set_metadata(key, Value::from(value));
    }

    /// Switches collection of `activities` (`ProfilerActivity` members' names, or activity
    /// type names) off, or back on with `enable`, from now: PyTorch's
    /// `toggle_collection_dynamic` (see `Profiler::toggle_collection`). Nothing happens
    /// while the profiler is not running, as in PyTorch.
    fn toggle_collection(
        &self,
        py: Python<'_>,
        enable: bool,
        activities: Vec<String>,
    ) -> PyResult<()> {
        let types = toggled_set(&activities)?;
        py.detach(|| {
            if let Some(profiler) = lock(&self.inner).profiler.as_mut() {
                profiler.toggle_collection(enable, types);
            }
        });
        Ok(())
    }

    /// The `trace_id` of every trace taken from now on: `id` (what PyTorch's
    /// `custom_trace_id_callback` gave for a cycle), or with `None` the one each trace was
    /// given (the config's `REQUEST_TRACE_ID`, else a new one).
    #[pyo3(signature = (id))]
    fn set_trace_id(&self, id: Option<String>) {
        match id {
            Some(id) => self.set_metadata(metadata::TRACE_ID.to_string(), Value::from(id)),
            None => lock(&self.inner)
                .metadata
                .retain(|(k, _)| k != metadata::TRACE_ID),
        }
    }

    /// A top-level trace key whose value is the JSON `json` (PyTorch's `add_metadata_json`).
    fn add_metadata_json(&self, key: String, json: &str) -> PyResult<()> {
        let value: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| PyValueError::new_err(format!("metadata {key:?} is not JSON: {e}")))?;
        self.set_metadata(key, Value::from(&value));
        Ok(())
    }

    /// What the config text warned about, one message each.
    #[getter]
    fn config_warnings(&self) -> Vec<String> {
        self.config_warnings.clone()
    }

    /// The per-thread cap of host records (`OMNIPROF_MAX_HOST_RECORDS_PER_THREAD`).
    #[getter]
    fn max_host_records(&self) -> u64 {
        self.max_host_records
    }

    /// The `ProfilerActivity` members given that no backend registered now can record.
    fn unrecorded_activities(&self) -> Vec<String> {
        // A session that cleared OMNIPROF_PRIVATEUSE1_PROFILER (`use_device=`) has the
        // PrivateUse1 backend's Kineto profiler sit out (src/privateuse1.rs).
        let sitting_out = (!self.privateuse1_profiler)
            .then(crate::privateuse1::installed_name)
            .flatten();
        unrecorded(&self.members, sitting_out.as_deref())
    }

    #[getter]
    fn running(&self) -> bool {
        lock(&self.inner).profiler.is_some()
    }

    #[getter]
    fn scheduled(&self) -> bool {
        self.scheduled
    }

    /// The number of `step` calls of the running profiler (0 when none runs).
    #[getter]
    fn step_num(&self) -> u64 {
        lock(&self.inner)
            .profiler
            .as_ref()
            .map_or(0, Profiler::step_num)
    }

    /// The current step's action as `ProfilerAction`'s integer (`NONE` when none runs).
    #[getter]
    fn current_action(&self) -> u8 {
        let inner = lock(&self.inner);
        action_number(
            inner
                .profiler
                .as_ref()
                .map_or(ProfilerAction::None, Profiler::current_action),
        )
    }
}

/// PyTorch's `ProfilerAction` integer: the action's discriminant.
fn action_number(action: ProfilerAction) -> u8 {
    action as u8
}

/// `omniprof.schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0)`,
/// PyTorch's schedule: cycles of `wait` idle steps, `warmup` steps and `active` recorded
/// steps, `repeat` times (0: until the profiler stops), after `skip_first` steps;
/// `skip_first_wait` skips the first cycle's wait. A `ValueError` lists every value when one
/// is out of range (`active` > 0, the others >= 0). Called with a step number it returns
/// that step's `ProfilerAction`, as PyTorch's schedule does:
///
/// ```text
/// >>> s = omniprof.schedule(wait=1, warmup=1, active=2, repeat=1)
/// >>> [s(i).name for i in range(5)]
/// ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE', 'NONE']
/// ```
#[pyclass(module = "omniprof._native", name = "Schedule", frozen)]
pub(crate) struct PySchedule(Schedule);

#[pymethods]
impl PySchedule {
    #[new]
    #[pyo3(signature = (*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0))]
    fn new(
        wait: i64,
        warmup: i64,
        active: i64,
        repeat: i64,
        skip_first: i64,
        skip_first_wait: i64,
    ) -> PyResult<Self> {
        Schedule::new(ScheduleArgs {
            wait,
            warmup,
            active,
            repeat,
            skip_first,
            skip_first_wait: skip_first_wait != 0,
        })
        .map(Self)
        .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    fn __call__<'py>(&self, py: Python<'py>, step: i64) -> PyResult<Bound<'py, PyAny>> {
        let action = self
            .0
            .action(step)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        // The Python enum (omniprof/profiler.py), whose members equal PyTorch's.
        py.import("omniprof.profiler")?
            .getattr("ProfilerAction")?
            .call1((action_number(action),))
    }

    fn __repr__(&self) -> String {
        let s = &self.0;
        format!(
            "schedule(wait={}, warmup={}, active={}, repeat={}, skip_first={}, skip_first_wait={})",
            s.wait(),
            s.warmup(),
            s.active(),
            s.repeat(),
            s.skip_first(),
            u8::from(s.skip_first_wait())
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The Python `ProfilerActivity` enum is checked against these names (tests/test_record.py).
    let names = PROFILER_ACTIVITIES.map(|member| member.name);
    m.add(
        "PROFILER_ACTIVITIES",
        pyo3::types::PyTuple::new(m.py(), names)?,
    )?;
    m.add_class::<Session>()?;
    m.add_function(wrap_pyfunction!(activity_filter, m)?)?;
    m.add_class::<PySchedule>()?;
    Ok(())
}
