//! The Kineto profiler of a PyTorch PrivateUse1 backend, in omniprof's sessions without a
//! plugin file.
//!
//! A PrivateUse1 backend that profiles its device for Kineto registers a factory of its
//! `libkineto::IActivityProfiler` with `REGISTER_PRIVATEUSE1_PROFILER`. The op observer reads
//! that factory out of PyTorch's registry and serves it through the plugin SDK's Kineto
//! adapter (`omniprof_kineto_adapter.h`) as a plugin entry point, which it hands over in a
//! capsule ([`KinetoEntryPoint`], `python/omniprof/csrc/privateuse1_profiler.cpp`). It is
//! registered here exactly as a plugin library's entry point is
//! ([`omniprof::plugins::load_entry_point`]: the same checks, deadlines and token lending),
//! behind a gate: it sits out a session whose config clears `OMNIPROF_PRIVATEUSE1_PROFILER`
//! (`use_device=`, which times ops through the profiler stubs alone, as PyTorch's legacy
//! profiler does). While it is installed, the stubs bridge (`src/stubs.rs`) leaves the device
//! to it in the other sessions, as torch.profiler leaves it to Kineto.
//!
//! A plugin library from `KINETO_PLUGIN_LIB_DIR_PATH` that registered a profiler of the same
//! name is the same profiler: it is kept, and the registry's is not installed (the device
//! would be recorded twice).

use std::ffi::CStr;
use std::sync::{Arc, Mutex};

use omniprof::backends::{ActivityProfiler, BackendError, ProfilerSession, ScopeMetric};
use omniprof::plugins::EntryPointProfiler;
use omniprof::Config;
use omniprof_plugin_sys::{LastErrorFn, RegisterFn};
use omniprof_trace::{lock, ActivitySet};
use pyo3::prelude::*;

/// The layout version of [`KinetoEntryPoint`] (`kKinetoEntryPointVersion` in `table.h`).
const VERSION: u32 = 1;

/// The name of the observer's `privateuse1_profiler()` capsule (`kKinetoEntryPointCapsule`
/// in `table.h`).
const CAPSULE: &CStr = c"omniprof.observer.privateuse1_profiler";

/// What stands for a library path in the plugin loader's messages.
const LABEL: &str = "PyTorch's PrivateUse1 profiler registry";

/// The registry's profiler as a plugin entry point; mirrors `struct KinetoEntryPoint` in
/// `table.h`.
#[repr(C)]
struct KinetoEntryPoint {
    version: u32,
    register_profiler: RegisterFn,
    last_error: LastErrorFn,
}

/// The installed profiler's name, once one is.
static INSTALLED: Mutex<Option<String>> = Mutex::new(None);

fn lock_installed() -> std::sync::MutexGuard<'static, Option<String>> {
    lock(&INSTALLED)
}

/// The installed profiler's name (its backend's name), if one is.
pub(crate) fn installed_name() -> Option<String> {
    lock_installed().clone()
}

/// Whether a PrivateUse1 backend's Kineto profiler takes part in sessions (the stubs bridge
/// then leaves the device to it unless `OMNIPROF_PRIVATEUSE1_PROFILER` is cleared).
pub(crate) fn installed() -> bool {
    lock_installed().is_some()
}

/// PyTorch's name of a PrivateUse1 backend that has not renamed itself.
pub(crate) const UNRENAMED: &str = "privateuseone";

/// The name a PrivateUse1 backend gave itself in the running PyTorch
/// (`torch.utils.rename_privateuse1_backend`), if one did: PyTorch then reads every device
/// activity as that backend's (`DeviceType.PrivateUse1`) and names its `use_device` so.
pub(crate) fn renamed(py: Python<'_>) -> PyResult<Option<String>> {
    let name: String = py
        .import("torch._C")?
        .call_method0("_get_privateuse1_backend_name")?
        .extract()?;
    Ok((name != UNRENAMED).then_some(name))
}

/// A registry profiler behind the `OMNIPROF_PRIVATEUSE1_PROFILER` gate.
struct Gated(Arc<dyn ActivityProfiler>);

impl ActivityProfiler for Gated {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn available_activities(&self) -> ActivitySet {
        self.0.available_activities()
    }

    fn configure(
        &self,
        activities: ActivitySet,
        config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        if !config.privateuse1_profiler() {
            return Ok(None);
        }
        self.0.configure(activities, config)
    }

    fn scope_metrics(&self) -> Vec<ScopeMetric> {
        self.0.scope_metrics()
    }
}

/// Installs the Kineto profiler a PrivateUse1 backend registered with PyTorch, from the op
/// observer's `privateuse1_profiler()` capsule, as a backend of every session from now on.
/// Returns what the user should be told: a profiler the loader rejected. (The same profiler
/// already loaded from a plugin file is skipped without a word: it records.) Once per process: later
/// calls return nothing. Anything but a capsule named [`CAPSULE`] is a `TypeError`; a struct
/// of another version a `ValueError` saying to rebuild the observer.
#[pyfunction]
fn install_privateuse1_profiler(entry: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let pointer = crate::capsule::capsule_pointer(
        entry,
        CAPSULE,
        "the op observer's privateuse1_profiler()",
    )?;
    // SAFETY: a capsule of this name holds a `KinetoEntryPoint`, whose first field is the
    // `u32` version; it is read alone until it says the rest has this layout.
    let version = unsafe { pointer.cast::<u32>().read() };
    if version != VERSION {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "the op observer's PrivateUse1 profiler entry point is version {version}, \
             omniprof's native module expects {VERSION}: remove the omniprof_observer build \
             under TORCH_EXTENSIONS_DIR so it is rebuilt"
        )));
    }
    let mut installed = lock_installed();
    if installed.is_some() {
        return Ok(Vec::new());
    }
    // SAFETY: a `KinetoEntryPoint` of this version (above), static in the observer module,
    // which stays loaded.
    let entry: &'static KinetoEntryPoint = unsafe { pointer.cast::<KinetoEntryPoint>().as_ref() };
    // SAFETY: the observer's adapter functions, of the ABI's types, loaded for good.
    let profilers = unsafe {
        omniprof::plugins::load_entry_point(LABEL, entry.register_profiler, Some(entry.last_error))
    }
    .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
    let from_files: Vec<String> = omniprof::plugins::load_plugins_from_env()
        .into_iter()
        .flatten()
        .flat_map(|loaded| loaded.usable().map(|p| p.name.clone()).collect::<Vec<_>>())
        .collect();
    let mut messages = Vec::new();
    for (index, EntryPointProfiler { report, profiler }) in profilers.into_iter().enumerate() {
        let Some(profiler) = profiler else {
            messages.push(format!(
                "omniprof: the PrivateUse1 backend's Kineto profiler {} takes no part in \
                 traces: {}",
                report.name,
                report.rejected.as_deref().unwrap_or("rejected")
            ));
            continue;
        };
        if from_files.contains(&report.name) {
            continue;
        }
        let key = format!("pytorch privateuse1 profiler#{index}");
        omniprof::backends::register_profiler_factory(
            &key,
            Box::new(move || Box::new(Gated(profiler.clone()))),
        );
        *installed = Some(report.name);
    }
    Ok(messages)
}

/// Whether a PrivateUse1 backend's Kineto profiler was installed, and its name.
#[pyfunction]
fn privateuse1_profiler() -> Option<String> {
    lock_installed().clone()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(install_privateuse1_profiler, m)?)?;
    m.add_function(wrap_pyfunction!(privateuse1_profiler, m)?)
}
