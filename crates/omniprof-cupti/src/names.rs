//! The names Kineto gives CUPTI's records: copy and memory kinds, synchronization and
//! overhead kinds, API functions, and kernels demangled by the C++ runtime's own demangler
//! (so they read exactly as in PyTorch's traces).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr};
use std::sync::{Arc, OnceLock};

use crate::library::Cupti;

/// `CUpti_ActivityMemcpyKind`'s short names.
pub(crate) fn copy_kind(kind: u8) -> &'static str {
    const NAMES: [&str; 11] = [
        "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP",
    ];
    NAMES.get(usize::from(kind)).copied().unwrap_or("Unknown")
}

/// `CUpti_ActivityMemoryKind`'s names.
pub(crate) fn memory_kind(kind: u16) -> &'static str {
    const NAMES: [&str; 8] = [
        "Unknown",
        "Pageable",
        "Pinned",
        "Device",
        "Array",
        "Managed",
        "Device Static",
        "Managed Static",
    ];
    NAMES.get(usize::from(kind)).copied().unwrap_or("Unknown")
}

/// A copy's name: `Memcpy HtoD (Pageable -> Device)`.
pub(crate) fn memcpy(copy: u8, src: u8, dst: u8) -> String {
    format!(
        "Memcpy {} ({} -> {})",
        copy_kind(copy),
        memory_kind(src.into()),
        memory_kind(dst.into())
    )
}

/// A set's name: `Memset (Device)`.
pub(crate) fn memset(kind: u16) -> String {
    format!("Memset ({})", memory_kind(kind))
}

/// `CUpti_ActivitySynchronizationType`'s names.
pub(crate) fn sync(kind: u32) -> &'static str {
    match kind {
        1 => "Event Sync",
        2 => "Stream Wait Event",
        3 => "Stream Sync",
        4 => "Context Sync",
        _ => "Unknown Sync",
    }
}

/// `CUpti_ActivityOverheadKind`'s names.
pub(crate) fn overhead(kind: u32) -> &'static str {
    match kind {
        1 => "Driver Compiler",
        0x1_0000 => "Buffer Flush",
        0x2_0000 => "Instrumentation",
        0x3_0000 => "Resource",
        0x4_0000 => "Runtime Triggered Module Loading",
        0x5_0000 => "Lazy Function Loading",
        0x6_0000 => "Command Buffer Full",
        0x7_0000 => "Activity Buffer Request",
        0x8_0000 => "UVM Activity Init",
        _ => "Unknown Overhead",
    }
}

/// An API function's name without CUPTI's version suffix: `cudaLaunchKernel_v7000` is
/// `cudaLaunchKernel`, as PyTorch's traces write it.
pub(crate) fn strip_version(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((base, digits))
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

/// Runtime calls Kineto leaves out of traces, queries that launch nothing and would bury the
/// launches, with their callback ids (`cupti_runtime_cbid.h`): where CUPTI can pick API
/// calls, they are not even recorded.
pub(crate) const LEFT_OUT_RUNTIME: [(&str, &[u32]); 8] = [
    ("cudaGetDeviceCount", &[3]),
    ("cudaGetLastError", &[10]),
    ("cudaPeekAtLastError", &[11]),
    ("cudaSetDevice", &[16]),
    ("cudaGetDevice", &[17]),
    ("cudaEventQuery", &[138]),
    ("cudaStreamIsCapturing", &[317]),
    ("cudaStreamGetCaptureInfo", &[324, 461]),
];

/// The driver calls Kineto keeps, kernel launches (cuBLAS and Triton launch through the
/// driver), by callback id (`cupti_driver_cbid.h`): `cuLaunchKernel`,
/// `cuLaunchCooperativeKernel` and `cuLaunchKernelEx`, each with its `_ptsz` form. The
/// runtime's calls make driver calls of their own, which would double every launch.
pub(crate) const DRIVER_LAUNCHES: [u32; 6] = [307, 442, 477, 478, 652, 653];

/// Whether an API call is left out of the trace (for a CUPTI that records them all).
pub(crate) fn is_left_out(driver: bool, name: &str) -> bool {
    if driver {
        !name.starts_with("cuLaunch")
    } else {
        LEFT_OUT_RUNTIME.iter().any(|(n, _)| *n == name)
    }
}

/// API names by (driver, cbid), asked of CUPTI once each.
#[derive(Default)]
pub(crate) struct ApiNames(HashMap<(bool, u32), Arc<str>>);

impl ApiNames {
    pub(crate) fn get(&mut self, cupti: &Cupti, driver: bool, cbid: u32) -> Arc<str> {
        self.0
            .entry((driver, cbid))
            .or_insert_with(|| match cupti.callback_name(driver, cbid) {
                Some(name) => strip_version(&name).into(),
                None => format!("{} cbid {cbid}", if driver { "driver" } else { "runtime" }).into(),
            })
            .clone()
    }
}

type Demangler =
    unsafe extern "C" fn(*const c_char, *mut c_char, *mut usize, *mut c_int) -> *mut c_char;

/// The C++ runtime's `__cxa_demangle`, from the process or `libstdc++.so.6`.
fn demangler() -> Option<Demangler> {
    static DEMANGLER: OnceLock<Option<Demangler>> = OnceLock::new();
    *DEMANGLER.get_or_init(|| {
        // SAFETY: dlsym on the default handle only looks a symbol up.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__cxa_demangle".as_ptr()) };
        let found = if found.is_null() {
            // SAFETY: loading libstdc++ runs only its own initializers.
            let handle = unsafe {
                libc::dlopen(
                    c"libstdc++.so.6".as_ptr(),
                    libc::RTLD_LAZY | libc::RTLD_LOCAL,
                )
            };
            if handle.is_null() {
                return None;
            }
            // SAFETY: as above, on the handle just opened (never closed).
            unsafe { libc::dlsym(handle, c"__cxa_demangle".as_ptr()) }
        } else {
            found
        };
        // SAFETY: `__cxa_demangle` has the type `Demangler` in the Itanium C++ ABI.
        (!found.is_null())
            .then(|| unsafe { std::mem::transmute::<*mut libc::c_void, Demangler>(found) })
    })
}

/// A kernel's name as PyTorch shows it: demangled when it is a mangled C++ name.
pub(crate) fn demangle(mangled: &CStr) -> String {
    let plain = || mangled.to_string_lossy().into_owned();
    if !mangled.to_bytes().starts_with(b"_Z") {
        return plain();
    }
    let Some(demangle) = demangler() else {
        return plain();
    };
    let mut status: c_int = 0;
    // SAFETY: a NUL-terminated input; null output buffer asks for a malloc'd result.
    let out = unsafe {
        demangle(
            mangled.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        )
    };
    if out.is_null() || status != 0 {
        return plain();
    }
    // SAFETY: a successful result is a NUL-terminated string from malloc, ours to free.
    let name = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above.
    unsafe { libc::free(out.cast()) };
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_kinetos() {
        assert_eq!(memcpy(1, 1, 3), "Memcpy HtoD (Pageable -> Device)");
        assert_eq!(memcpy(2, 3, 2), "Memcpy DtoH (Device -> Pinned)");
        assert_eq!(memcpy(99, 42, 3), "Memcpy Unknown (Unknown -> Device)");
        assert_eq!(memset(3), "Memset (Device)");
        assert_eq!(sync(3), "Stream Sync");
        assert_eq!(overhead(0x1_0000), "Buffer Flush");
    }

    #[test]
    fn api_names_lose_their_version_suffix_only() {
        assert_eq!(strip_version("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
        assert_eq!(
            strip_version("cudaMemcpyAsync_ptsz_v7000"),
            "cudaMemcpyAsync_ptsz"
        );
        assert_eq!(strip_version("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(strip_version("cudaFoo_vx"), "cudaFoo_vx");
    }

    #[test]
    fn mangled_kernel_names_are_demangled_by_the_cxx_runtime() {
        assert_eq!(
            demangle(c"_ZN2at6native6kernelIfEEvPT_i"),
            "void at::native::kernel<float>(float*, int)"
        );
        assert_eq!(
            demangle(c"ampere_sgemm_128x64_nn"),
            "ampere_sgemm_128x64_nn"
        );
        assert_eq!(demangle(c"_Znot a name"), "_Znot a name");
    }
}
