//! Finding, opening and registering plugin libraries (`docs/plugin-abi.md`, section 2).

use std::ffi::{c_char, c_int, CStr};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, OnceLock};

use omniprof_plugin_sys::{
    read_versioned, AbiStruct, LastErrorFn, ProfileEventType, ProfilerInterface,
    ProfilerQueryParams, RegisterFn, Registry, RegistryHandle, LAST_ERROR_SYMBOL_C,
    REGISTER_SYMBOL_C,
};

use super::adapter::{LastError, PluginProfiler};
use super::deadline::Abandoned;
use super::error::PluginError;
use super::lend::{self, REFUSED};
use super::types::activity_type;
use crate::backend::{register_profiler_factory, ActivityProfiler};
use crate::lock;
use crate::ActivitySet;

/// Environment variables naming plugin directories: Kineto's, then omniprof's own (which may
/// list several directories separated by `:`).
pub const DIR_VARIABLES: [&str; 2] = ["KINETO_PLUGIN_LIB_DIR_PATH", "OMNIPROF_PLUGIN_DIR"];

/// The host's name buffer for `profilerQuery` (31 characters and a NUL).
const NAME_BUFFER: usize = 32;

/// What loading one library produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedPlugin {
    /// The library, as given.
    pub path: PathBuf,
    /// Every profiler it registered, usable or not.
    pub profilers: Vec<RegisteredProfiler>,
}

/// One registered profiler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredProfiler {
    /// Its name from `profilerQuery` (`N/A` when the query failed).
    pub name: String,
    /// The activity types it can record.
    pub supported: ActivitySet,
    /// Why it takes no part in traces, if it does not.
    pub rejected: Option<String>,
}

impl LoadedPlugin {
    /// The profilers that take part in traces.
    pub fn usable(&self) -> impl Iterator<Item = &RegisteredProfiler> {
        self.profilers.iter().filter(|p| p.rejected.is_none())
    }
}

/// Libraries already loaded, by canonical path: each is loaded once per process and never
/// unloaded, even when it is rejected.
static LOADED: Mutex<Vec<(PathBuf, LoadedPlugin)>> = Mutex::new(Vec::new());

/// Loads one plugin library and registers its profilers with the backend registry.
///
/// ```no_run
/// let plugin = omniprof::plugins::load_plugin("/opt/vendor/libvendor_profiler.so").unwrap();
/// for p in plugin.usable() {
///     println!("{}: {:?}", p.name, p.supported);
/// }
/// ```
pub fn load_plugin(path: impl AsRef<Path>) -> Result<LoadedPlugin, PluginError> {
    let path = path.as_ref();
    let canonical = path.canonicalize().map_err(|e| PluginError::Open {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let mut loaded = lock(&LOADED);
    if let Some((_, plugin)) = loaded.iter().find(|(p, _)| *p == canonical) {
        return Ok(plugin.clone());
    }
    let plugin = open_and_register(path, &canonical)?;
    loaded.push((canonical, plugin.clone()));
    Ok(plugin)
}

/// Every regular `*.so` file directly in `dir` (symlinks followed, not recursive), sorted by
/// file name.
pub fn plugin_files(dir: &Path) -> Result<Vec<PathBuf>, PluginError> {
    let listing_error = |e: std::io::Error| PluginError::Directory {
        dir: dir.to_owned(),
        reason: e.to_string(),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(listing_error)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|p| p.extension().is_some_and(|e| e == "so") && p.is_file())
        .collect();
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

/// The plugin directories named by [`DIR_VARIABLES`].
pub fn plugin_dirs() -> Vec<PathBuf> {
    DIR_VARIABLES
        .iter()
        .filter_map(std::env::var_os)
        .flat_map(|dirs| std::env::split_paths(&dirs).collect::<Vec<_>>())
        .filter(|d| !d.as_os_str().is_empty())
        .collect()
}

/// Loads every plugin in the directories named by the environment; each failure is one
/// entry naming the file, and the others still load.
pub fn load_plugins_from_env() -> Vec<Result<LoadedPlugin, PluginError>> {
    let mut results = Vec::new();
    for dir in plugin_dirs() {
        match plugin_files(&dir) {
            Ok(files) => results.extend(files.into_iter().map(load_plugin)),
            Err(e) => results.push(Err(e)),
        }
    }
    results
}

/// One line per library, or profiler in a library, that takes no part in traces, in the
/// form `omniprof plugins list` prints: `PATH: REJECTED: reason`,
/// `PATH: PROFILER: REJECTED: reason`, `PATH: registered no profiler`.
///
/// ```
/// use omniprof::plugins::{plugin_rejections, PluginError};
///
/// let missing = Err(PluginError::MissingSymbol { path: "/x/libfoo.so".into() });
/// assert_eq!(
///     plugin_rejections(&[missing]),
///     ["/x/libfoo.so: REJECTED: no KinetoPlugin_register symbol; not a profiler plugin"]
/// );
/// ```
pub fn plugin_rejections(results: &[Result<LoadedPlugin, PluginError>]) -> Vec<String> {
    let mut lines = Vec::new();
    for result in results {
        match result {
            Err(e) => lines.push(format!(
                "{}: REJECTED: {}",
                e.subject().display(),
                e.reason()
            )),
            Ok(p) if p.profilers.is_empty() => {
                lines.push(format!("{}: registered no profiler", p.path.display()))
            }
            Ok(p) => lines.extend(p.profilers.iter().filter_map(|prof| {
                let why = prof.rejected.as_deref()?;
                Some(format!(
                    "{}: {}: REJECTED: {why}",
                    p.path.display(),
                    prof.name
                ))
            })),
        }
    }
    lines
}

/// The rejections among the environment's plugins (`plugin_rejections` of what the engine
/// loaded from [`DIR_VARIABLES`] when the first session was prepared, loading them now if no
/// session was). Each was also logged once, as a warning, when it was loaded; every trace
/// carries them in its `plugin_errors` metadata.
pub fn env_plugin_rejections() -> &'static [String] {
    static REJECTIONS: OnceLock<Vec<String>> = OnceLock::new();
    REJECTIONS.get_or_init(|| {
        let lines = plugin_rejections(&load_plugins_from_env());
        for line in &lines {
            log::warn!("omniprof: plugin {line}");
        }
        lines
    })
}

/// Loads the environment's plugins once per process (the engine calls this at prepare).
pub(crate) fn load_env_once() {
    env_plugin_rejections();
}

/// Interfaces a library hands over during `KinetoPlugin_register`.
#[derive(Default)]
struct Registration {
    interfaces: Vec<Result<ProfilerInterface, String>>,
}

fn open_and_register(path: &Path, canonical: &Path) -> Result<LoadedPlugin, PluginError> {
    let open_error = |reason: String| PluginError::Open {
        path: path.to_owned(),
        reason,
    };
    // SAFETY: loading a library runs its initializers; loading plugins from the configured
    // directories is exactly what the user asked for.
    let library =
        unsafe { libloading::Library::new(canonical) }.map_err(|e| open_error(e.to_string()))?;
    // A library that was loaded is never unloaded, whatever happens next: its initializers
    // or its entry point may have started threads that run its code, and registered
    // profilers keep pointers into it.
    let library: &'static libloading::Library = Box::leak(Box::new(library));
    // SAFETY: the symbol's type is fixed by the plugin ABI.
    let register: RegisterFn =
        match unsafe { library.get::<RegisterFn>(REGISTER_SYMBOL_C.to_bytes_with_nul()) } {
            Ok(symbol) => *symbol,
            Err(_) => {
                return Err(PluginError::MissingSymbol {
                    path: path.to_owned(),
                })
            }
        };
    // SAFETY: the optional extension symbol's type is fixed by `omniprof_plugin.h`.
    let last_error = unsafe { library.get::<LastErrorFn>(LAST_ERROR_SYMBOL_C.to_bytes_with_nul()) }
        .ok()
        .map(|symbol| *symbol);
    let adopted = register_entry(path, register, LastError(last_error))?;
    let mut profilers = Vec::with_capacity(adopted.len());
    for (index, (report, profiler)) in adopted.into_iter().enumerate() {
        if let Some(profiler) = profiler {
            let key = format!("plugin:{}#{index}", path.display());
            register_profiler_factory(&key, Box::new(move || Box::new(profiler.clone())));
        }
        profilers.push(report);
    }
    Ok(LoadedPlugin {
        path: path.to_owned(),
        profilers,
    })
}

/// One profiler an in-process entry point registered ([`load_entry_point`]).
pub struct EntryPointProfiler {
    /// Its name, types and verdict, as for a library.
    pub report: RegisteredProfiler,
    /// The backend that drives it, when it is usable: not yet registered, so that the caller
    /// decides how it takes part (e.g. behind a gate of its own).
    pub profiler: Option<Arc<dyn ActivityProfiler>>,
}

/// Registers the profilers of a plugin entry point that is already in this process (a
/// `KinetoPlugin_register` function of a library someone else loaded, such as the Kineto
/// adapter omniprof's Python package builds over PyTorch's PrivateUse1 profiler registry),
/// with the same checks as a library's; `label` stands for the library's path in messages.
/// `last_error` is the entry point's `OmniprofPlugin_lastError`, if it has one.
///
/// # Safety
///
/// `register` and `last_error` must be functions of the ABI's types that stay callable for
/// the rest of the process, as a loaded plugin's are.
pub unsafe fn load_entry_point(
    label: &str,
    register: RegisterFn,
    last_error: Option<LastErrorFn>,
) -> Result<Vec<EntryPointProfiler>, PluginError> {
    let adopted = register_entry(Path::new(label), register, LastError(last_error))?;
    Ok(adopted
        .into_iter()
        .map(|(report, profiler)| EntryPointProfiler {
            report,
            profiler: profiler.map(|p| Arc::new(p) as Arc<dyn ActivityProfiler>),
        })
        .collect())
}

/// Calls an entry point with a registry and adopts what it registered: a report per
/// profiler, and the usable ones.
fn register_entry(
    path: &Path,
    register: RegisterFn,
    last_error: LastError,
) -> Result<Vec<(RegisteredProfiler, Option<PluginProfiler>)>, PluginError> {
    let mut registration = Registration::default();
    let (rc, refused) = lend::lend(&mut registration, |handle| {
        let registry = Registry {
            registry_handle: handle.cast::<RegistryHandle>(),
            register_profiler: Some(register_profiler),
            ..Registry::default()
        };
        // SAFETY: `register` is the plugin's entry point, called with a complete registry
        // that outlives the call.
        unsafe { register(&registry) }
    });
    if refused > 0 {
        log::warn!(
            "omniprof: plugin {}: {refused} registerProfiler call(s) from another thread or \
             through a wrong handle refused",
            path.display()
        );
    }
    if rc != 0 {
        // The plugin may be passing on a refusal of ours: say what it was.
        let refused: Vec<String> = registration
            .interfaces
            .into_iter()
            .filter_map(Result::err)
            .collect();
        let detail = match refused.is_empty() {
            true => String::new(),
            false => format!(" (registerProfiler refused: {})", refused.join("; ")),
        };
        return Err(PluginError::Register {
            path: path.to_owned(),
            code: rc,
            detail,
        });
    }
    Ok(registration
        .interfaces
        .into_iter()
        .enumerate()
        .map(|(index, iface)| adopt(path, index, iface, last_error))
        .collect())
}

/// Validates and queries one registered interface, and hands a usable one to the registry.
fn adopt(
    path: &Path,
    index: usize,
    iface: Result<ProfilerInterface, String>,
    last_error: LastError,
) -> (RegisteredProfiler, Option<PluginProfiler>) {
    let rejected = |name: String, reason: String| {
        log::debug!(
            "omniprof: plugin {}: profiler {name} disabled: {reason}",
            path.display()
        );
        let report = RegisteredProfiler {
            name,
            supported: ActivitySet::empty(),
            rejected: Some(reason),
        };
        (report, None)
    };
    let iface = match iface {
        Ok(iface) => iface,
        Err(reason) => return rejected(format!("#{index}"), reason),
    };
    let missing: Vec<&str> = [
        ("profilerCreate", iface.profiler_create.is_none()),
        ("profilerDestroy", iface.profiler_destroy.is_none()),
        ("profilerQuery", iface.profiler_query.is_none()),
        ("profilerStart", iface.profiler_start.is_none()),
        ("profilerStop", iface.profiler_stop.is_none()),
        (
            "profilerProcessEvents",
            iface.profiler_process_events.is_none(),
        ),
    ]
    .into_iter()
    .filter_map(|(name, is_missing)| is_missing.then_some(name))
    .collect();
    if !missing.is_empty() {
        return rejected(
            format!("#{index}"),
            format!("required function(s) missing: {}", missing.join(", ")),
        );
    }
    let (name, supported) = query(&iface);
    if supported.is_empty() {
        return rejected(name, "supports no activity type omniprof knows".to_owned());
    }
    let profiler = PluginProfiler {
        path: path.to_owned(),
        name: name.clone(),
        supported,
        iface,
        abandoned: Abandoned::default(),
        last_error,
    };
    let report = RegisteredProfiler {
        name,
        supported,
        rejected: None,
    };
    (report, Some(profiler))
}

/// `profilerQuery` with a NULL handle: the name (`N/A` on failure) and the supported types.
fn query(iface: &ProfilerInterface) -> (String, ActivitySet) {
    let mut name = [0 as c_char; NAME_BUFFER];
    let mut types = [ProfileEventType::INVALID; ProfileEventType::NUM_TYPES.0 as usize];
    let mut params = ProfilerQueryParams {
        profiler_name: name.as_mut_ptr(),
        profiler_name_max_len: NAME_BUFFER - 1,
        supported_activity_types: types.as_mut_ptr(),
        supported_activity_types_max_len: types.len(),
        ..ProfilerQueryParams::default()
    };
    let query = iface.profiler_query.expect("checked by the caller");
    // SAFETY: a complete query struct whose buffers outlive the call and whose lengths leave
    // room for the NUL.
    let rc = unsafe { query(&mut params) };
    name[NAME_BUFFER - 1] = 0;
    // SAFETY: the buffer is NUL-terminated (forced just above) and lives here.
    let text = unsafe { CStr::from_ptr(name.as_ptr()) };
    let name = match (rc, text.to_str()) {
        (0, Ok(n)) if !n.is_empty() => n.to_owned(),
        _ => "N/A".to_owned(),
    };
    let supported = if rc == 0 {
        types.iter().filter_map(|&t| activity_type(t)).collect()
    } else {
        ActivitySet::empty()
    };
    (name, supported)
}

/// `registerProfiler`: copies the interface after checking its size (`docs/plugin-abi.md`,
/// defect 4).
unsafe extern "C" fn register_profiler(
    handle: *mut RegistryHandle,
    iface: *const ProfilerInterface,
) -> c_int {
    lend::with_lent(handle.cast(), |registration: &mut Registration| {
        let Some(iface) = NonNull::new(iface.cast_mut()) else {
            return REFUSED;
        };
        // SAFETY: the plugin's interface struct, readable for the size it declares.
        let copied = unsafe { read_versioned(iface) }.map_err(|e| {
            format!(
                "interface struct too small ({} bytes, at least {} needed)",
                e.given,
                ProfilerInterface::UNPADDED_SIZE
            )
        });
        let ok = copied.is_ok();
        registration.interfaces.push(copied);
        if ok {
            0
        } else {
            REFUSED
        }
    })
}
