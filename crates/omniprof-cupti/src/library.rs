//! Finding and loading `libcupti` and the CUDA driver at run time.
//!
//! Nothing here is linked at build time, so omniprof builds and runs where CUDA is absent.
//! CUPTI is looked for where PyTorch finds it, the copy PyTorch already loaded first (two
//! copies of CUPTI in one process would each think they own the device's activity buffers):
//!
//! 1. [`LIBRARY_ENV`], a path the user names;
//! 2. a `libcupti.so.13`/`.12`/`.so` already loaded in the process (PyTorch's);
//! 3. each directory of [`SEARCH_PATH_ENV`] (the Python package sets it to the `lib`
//!    directories of the `nvidia` wheels on `sys.path`, as PyTorch's `_preload_cuda_deps`
//!    searches them);
//! 4. `$CUDA_HOME`/`$CUDA_PATH` and `/usr/local/cuda`'s `extras/CUPTI/lib64` and `lib64`;
//! 5. the dynamic loader's own search.
//!
//! The driver (`libcuda.so.1`) is looked for first: without it CUPTI cannot work, and
//! loading CUPTI would be wasted.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libc::RTLD_NOLOAD;
use libloading::os::unix::{Library, RTLD_LAZY, RTLD_LOCAL};

use crate::records;

/// A path to `libcupti` to load instead of searching.
pub const LIBRARY_ENV: &str = "OMNIPROF_CUPTI_LIBRARY";
/// Directories to look for `libcupti` in, `:`-separated.
pub const SEARCH_PATH_ENV: &str = "OMNIPROF_CUPTI_SEARCH_PATH";

const SONAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so.12", "libcupti.so"];
const DRIVER: &str = "libcuda.so.1";

/// `CUptiResult` and `CUresult` are C enums.
type Status = c_int;
/// `CUPTI_ERROR_MAX_LIMIT_REACHED`: no more records in a buffer.
pub(crate) const MAX_LIMIT_REACHED: Status = 12;

/// CUPTI's buffer-request callback: `(buffer, size, max_records)`.
pub(crate) type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
/// CUPTI's buffer-completed callback: `(context, stream, buffer, size, valid_size)`.
pub(crate) type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);

/// The CUPTI functions omniprof calls, from the loaded library.
pub(crate) struct Cupti {
    /// Where it was loaded from.
    pub(crate) path: String,
    /// `cuptiGetVersion`.
    pub(crate) version: u32,
    result_string: unsafe extern "C" fn(Status, *mut *const c_char) -> Status,
    register_callbacks: unsafe extern "C" fn(RequestFn, CompleteFn) -> Status,
    enable: unsafe extern "C" fn(u32) -> Status,
    disable: unsafe extern "C" fn(u32) -> Status,
    flush_all: unsafe extern "C" fn(u32) -> Status,
    next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> Status,
    dropped: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> Status,
    push_external: unsafe extern "C" fn(u32, u64) -> Status,
    pop_external: unsafe extern "C" fn(u32, *mut u64) -> Status,
    timestamp: unsafe extern "C" fn(*mut u64) -> Status,
    callback_name: unsafe extern "C" fn(u32, u32, *mut *const c_char) -> Status,
    /// `cuptiActivityEnableRuntimeApi` and `…DriverApi` (CUPTI 12.6 and later): per-call
    /// recording.
    pick_runtime: Option<unsafe extern "C" fn(u32, u8) -> Status>,
    pick_driver: Option<unsafe extern "C" fn(u32, u8) -> Status>,
}

/// The CUDA driver functions omniprof calls.
pub(crate) struct Driver {
    init: unsafe extern "C" fn(u32) -> Status,
    device_count: unsafe extern "C" fn(*mut c_int) -> Status,
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> Status,
    device_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status,
    total_mem: unsafe extern "C" fn(*mut usize, c_int) -> Status,
    attribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> Status,
    driver_version: unsafe extern "C" fn(*mut c_int) -> Status,
}

/// CUPTI and the driver, both loaded.
pub(crate) struct Loaded {
    pub(crate) cupti: Cupti,
    pub(crate) driver: Driver,
}

/// Loads both once per process; the error says in one line why CUDA activity cannot be
/// recorded here.
pub(crate) fn loaded() -> Result<&'static Loaded, &'static str> {
    static LOADED: OnceLock<Result<Loaded, String>> = OnceLock::new();
    LOADED
        .get_or_init(load)
        .as_ref()
        .map_err(|reason| reason.as_str())
}

fn load() -> Result<Loaded, String> {
    let driver = open(DRIVER, 0)
        .map_err(|e| format!("no CUDA driver: {DRIVER} could not be loaded ({e})"))?;
    let driver = Driver::from(leak(driver)).map_err(|e| format!("{DRIVER}: {e}"))?;
    let (library, path) = find_cupti()?;
    let cupti = Cupti::from(leak(library), path)?;
    if !records::is_known_version(cupti.version) {
        return Err(format!(
            "CUPTI at {} has API version {}, whose record layout omniprof does not know \
             (known: {}); its records are not decoded",
            cupti.path,
            cupti.version,
            records::KNOWN_VERSIONS
                .iter()
                .map(|(low, high)| format!("{low}–{high}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(Loaded { cupti, driver })
}

fn leak(library: Library) -> &'static Library {
    Box::leak(Box::new(library))
}

fn open(path: impl AsRef<std::ffi::OsStr>, extra: c_int) -> Result<Library, libloading::Error> {
    // SAFETY: loading CUPTI or the driver runs their initializers, which only set up their
    // own state; that is what loading them is for.
    unsafe { Library::open(Some(path), RTLD_LAZY | RTLD_LOCAL | extra) }
}

/// The places [`find_cupti`] tries after a library already loaded, in order.
fn candidates() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os(SEARCH_PATH_ENV)
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            dirs.push(Path::new(&root).join("extras/CUPTI/lib64"));
            dirs.push(Path::new(&root).join("lib64"));
        }
    }
    dirs.push("/usr/local/cuda/extras/CUPTI/lib64".into());
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.iter()
        .flat_map(|dir| SONAMES.iter().map(move |name| dir.join(name)))
        .chain(SONAMES.iter().map(PathBuf::from))
        .collect()
}

fn find_cupti() -> Result<(Library, String), String> {
    if let Some(path) = std::env::var_os(LIBRARY_ENV) {
        let shown = Path::new(&path).display().to_string();
        return open(&path, 0)
            .map(|l| (l, shown.clone()))
            .map_err(|e| format!("{LIBRARY_ENV}={shown} could not be loaded: {e}"));
    }
    for name in SONAMES {
        if let Ok(library) = open(name, RTLD_NOLOAD) {
            return Ok((library, format!("{name} (already loaded)")));
        }
    }
    let tried = candidates();
    for path in &tried {
        // A bare soname goes to the loader's search; a path is tried only where it exists.
        if path.components().count() > 1 && !path.exists() {
            continue;
        }
        if let Ok(library) = open(path, 0) {
            return Ok((library, path.display().to_string()));
        }
    }
    Err(format!(
        "no libcupti found (set {LIBRARY_ENV}, or install CUPTI: pip's nvidia-cuda-cupti or \
         the CUDA toolkit's extras/CUPTI); tried {} places",
        tried.len() + SONAMES.len()
    ))
}

/// A symbol as a function pointer of type `T`.
///
/// # Safety
/// `T` must be the symbol's real C signature.
unsafe fn symbol<T: Copy>(library: &'static Library, name: &str) -> Result<T, String> {
    let c_name = format!("{name}\0");
    // SAFETY: the caller gives the symbol's real type; the library is never unloaded.
    unsafe { library.get::<T>(c_name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("lacks {name}: {e}"))
}

impl Cupti {
    fn from(library: &'static Library, path: String) -> Result<Self, String> {
        let at = |e: String| format!("CUPTI at {path} {e}");
        // SAFETY: each type below is the function's signature in cupti_activity.h,
        // cupti_callbacks.h and cupti_result.h (enums as C ints, handles as pointers).
        unsafe {
            let version_fn: unsafe extern "C" fn(*mut u32) -> Status =
                symbol(library, "cuptiGetVersion").map_err(at)?;
            let mut version = 0u32;
            let status = version_fn(&mut version);
            if status != 0 {
                return Err(format!(
                    "CUPTI at {path}: cuptiGetVersion failed ({status})"
                ));
            }
            Ok(Self {
                version,
                result_string: symbol(library, "cuptiGetResultString").map_err(at)?,
                register_callbacks: symbol(library, "cuptiActivityRegisterCallbacks")
                    .map_err(at)?,
                enable: symbol(library, "cuptiActivityEnable").map_err(at)?,
                disable: symbol(library, "cuptiActivityDisable").map_err(at)?,
                flush_all: symbol(library, "cuptiActivityFlushAll").map_err(at)?,
                next_record: symbol(library, "cuptiActivityGetNextRecord").map_err(at)?,
                dropped: symbol(library, "cuptiActivityGetNumDroppedRecords").map_err(at)?,
                push_external: symbol(library, "cuptiActivityPushExternalCorrelationId")
                    .map_err(at)?,
                pop_external: symbol(library, "cuptiActivityPopExternalCorrelationId")
                    .map_err(at)?,
                timestamp: symbol(library, "cuptiGetTimestamp").map_err(at)?,
                callback_name: symbol(library, "cuptiGetCallbackName").map_err(at)?,
                pick_runtime: symbol(library, "cuptiActivityEnableRuntimeApi").ok(),
                pick_driver: symbol(library, "cuptiActivityEnableDriverApi").ok(),
                path,
            })
        }
    }

    /// A `CUptiResult` as `Err` with CUPTI's own text and the call's name.
    fn check(&self, call: &str, status: Status) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: cuptiGetResultString writes a pointer to a static string, or leaves null.
        let known = unsafe { (self.result_string)(status, &mut text) } == 0 && !text.is_null();
        let text = if known {
            // SAFETY: a non-null result string is a static NUL-terminated string.
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        } else {
            "unknown error".to_owned()
        };
        Err(format!("{call} failed: {text} ({status})"))
    }

    pub(crate) fn register_callbacks(
        &self,
        request: RequestFn,
        complete: CompleteFn,
    ) -> Result<(), String> {
        // SAFETY: both are `extern "C"` functions of CUPTI's callback types, alive forever.
        let status = unsafe { (self.register_callbacks)(request, complete) };
        self.check("cuptiActivityRegisterCallbacks", status)
    }

    pub(crate) fn enable(&self, kind: u32) -> Result<(), String> {
        // SAFETY: a plain call with an activity kind.
        let status = unsafe { (self.enable)(kind) };
        self.check(&format!("cuptiActivityEnable({kind})"), status)
    }

    pub(crate) fn disable(&self, kind: u32) -> Result<(), String> {
        // SAFETY: a plain call with an activity kind.
        let status = unsafe { (self.disable)(kind) };
        self.check(&format!("cuptiActivityDisable({kind})"), status)
    }

    /// Whether this CUPTI records API calls one by one ([`Self::pick_api`]).
    pub(crate) fn can_pick_api_calls(&self) -> bool {
        self.pick_runtime.is_some() && self.pick_driver.is_some()
    }

    /// Turns recording of one runtime or driver call on or off (where
    /// [`Self::can_pick_api_calls`]).
    pub(crate) fn pick_api(&self, driver: bool, cbid: u32, on: bool) -> Result<(), String> {
        let pick = if driver {
            self.pick_driver
        } else {
            self.pick_runtime
        };
        let Some(pick) = pick else {
            return Err("this CUPTI cannot record API calls one by one".into());
        };
        // SAFETY: a plain call with a callback id and a flag.
        let status = unsafe { pick(cbid, u8::from(on)) };
        let call = if driver {
            "cuptiActivityEnableDriverApi"
        } else {
            "cuptiActivityEnableRuntimeApi"
        };
        self.check(&format!("{call}({cbid}, {on})"), status)
    }

    /// Hands every buffer, full or not, to the completed callback (`FLUSH_FORCED`).
    pub(crate) fn flush_all(&self) -> Result<(), String> {
        // SAFETY: a plain call; CUPTI calls the completed callback from inside it.
        let status = unsafe { (self.flush_all)(1) };
        self.check("cuptiActivityFlushAll", status)
    }

    /// The record after `current` (null for the first) in `buffer[..valid]`, or `None` at
    /// the end.
    ///
    /// # Safety
    /// `buffer` must be a buffer CUPTI completed with `valid` bytes, and `current` null or a
    /// record this function returned for it.
    pub(crate) unsafe fn next_record(
        &self,
        buffer: *mut u8,
        valid: usize,
        current: *mut u8,
    ) -> Result<Option<*mut u8>, String> {
        let mut record = current;
        // SAFETY: as the caller promises.
        let status = unsafe { (self.next_record)(buffer, valid, &mut record) };
        match status {
            0 => Ok(Some(record)),
            MAX_LIMIT_REACHED => Ok(None),
            other => self
                .check("cuptiActivityGetNextRecord", other)
                .map(|()| None),
        }
    }

    /// Records CUPTI dropped for (context, stream) since it was last asked.
    pub(crate) fn dropped(&self, context: *mut c_void, stream: u32) -> usize {
        let mut n = 0usize;
        // SAFETY: the context and stream come from CUPTI's own completed callback.
        let status = unsafe { (self.dropped)(context, stream, &mut n) };
        if status == 0 {
            n
        } else {
            0
        }
    }

    /// Pushes a host op's (`external::OP`) or user range's (`external::USER`) id on the
    /// calling thread.
    #[inline]
    pub(crate) fn push_external(&self, kind: u32, id: u64) {
        // SAFETY: a plain call; CUPTI keeps a stack per thread and kind.
        unsafe { (self.push_external)(kind, id) };
    }

    /// Pops the calling thread's innermost id of `kind`.
    #[inline]
    pub(crate) fn pop_external(&self, kind: u32) {
        let mut last = 0u64;
        // SAFETY: a plain call writing one u64.
        unsafe { (self.pop_external)(kind, &mut last) };
    }

    /// CUPTI's clock now, in nanoseconds.
    pub(crate) fn timestamp(&self) -> u64 {
        let mut ts = 0u64;
        // SAFETY: a plain call writing one u64.
        unsafe { (self.timestamp)(&mut ts) };
        ts
    }

    /// The name of API function `cbid` (`cudaLaunchKernel_v7000`), if CUPTI knows it.
    pub(crate) fn callback_name(&self, driver: bool, cbid: u32) -> Option<String> {
        let domain = if driver { 1 } else { 2 };
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: CUPTI writes a pointer to a static string, or fails.
        let status = unsafe { (self.callback_name)(domain, cbid, &mut name) };
        if status != 0 || name.is_null() {
            return None;
        }
        // SAFETY: a non-null name is a static NUL-terminated string.
        Some(
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// One device's properties, as the driver reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeviceProperties {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) total_global_mem: u64,
    pub(crate) compute_major: i32,
    pub(crate) compute_minor: i32,
    pub(crate) max_threads_per_block: i32,
    pub(crate) max_threads_per_sm: i32,
    pub(crate) regs_per_block: i32,
    pub(crate) regs_per_sm: i32,
    pub(crate) warp_size: i32,
    pub(crate) shared_mem_per_block: i32,
    pub(crate) shared_mem_per_sm: i32,
    pub(crate) num_sms: i32,
    pub(crate) shared_mem_per_block_optin: i32,
    pub(crate) max_blocks_per_sm: i32,
}

impl Driver {
    fn from(library: &'static Library) -> Result<Self, String> {
        // SAFETY: each type below is the function's signature in cuda.h (CUdevice is an
        // int, CUresult and CUdevice_attribute C enums).
        unsafe {
            Ok(Self {
                init: symbol(library, "cuInit")?,
                device_count: symbol(library, "cuDeviceGetCount")?,
                device_get: symbol(library, "cuDeviceGet")?,
                device_name: symbol(library, "cuDeviceGetName")?,
                total_mem: symbol(library, "cuDeviceTotalMem_v2")?,
                attribute: symbol(library, "cuDeviceGetAttribute")?,
                driver_version: symbol(library, "cuDriverGetVersion")?,
            })
        }
    }

    /// Initializes the driver (a no-op once PyTorch has) and counts the devices.
    pub(crate) fn device_count(&self) -> Result<u32, String> {
        // SAFETY: plain calls writing one int.
        let status = unsafe { (self.init)(0) };
        if status != 0 {
            return Err(format!("cuInit failed ({status})"));
        }
        let mut n: c_int = 0;
        // SAFETY: as above.
        let status = unsafe { (self.device_count)(&mut n) };
        if status != 0 {
            return Err(format!("cuDeviceGetCount failed ({status})"));
        }
        Ok(n.max(0) as u32)
    }

    /// The driver's CUDA version (`13000` for 13.0).
    pub(crate) fn version(&self) -> Option<i32> {
        let mut v: c_int = 0;
        // SAFETY: a plain call writing one int.
        (unsafe { (self.driver_version)(&mut v) } == 0).then_some(v)
    }

    /// Device `ordinal`'s properties (the driver initialized).
    pub(crate) fn properties(&self, ordinal: u32) -> Option<DeviceProperties> {
        let mut device: c_int = 0;
        // SAFETY: plain calls writing into locals of the right size.
        if unsafe { (self.device_get)(&mut device, ordinal as c_int) } != 0 {
            return None;
        }
        let mut name = [0 as c_char; 256];
        // SAFETY: as above; the name buffer's length is passed.
        unsafe { (self.device_name)(name.as_mut_ptr(), name.len() as c_int, device) };
        let mut total = 0usize;
        // SAFETY: as above.
        unsafe { (self.total_mem)(&mut total, device) };
        let attr = |a: c_int| {
            let mut v: c_int = 0;
            // SAFETY: as above.
            unsafe { (self.attribute)(&mut v, a, device) };
            v
        };
        // SAFETY: the driver NUL-terminates the name within the buffer.
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Some(DeviceProperties {
            id: ordinal,
            name,
            total_global_mem: total as u64,
            compute_major: attr(75),
            compute_minor: attr(76),
            max_threads_per_block: attr(1),
            max_threads_per_sm: attr(39),
            regs_per_block: attr(12),
            regs_per_sm: attr(82),
            warp_size: attr(10),
            shared_mem_per_block: attr(8),
            shared_mem_per_sm: attr(81),
            num_sms: attr(16),
            shared_mem_per_block_optin: attr(97),
            max_blocks_per_sm: attr(106),
        })
    }
}
