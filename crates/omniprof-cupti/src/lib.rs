//! omniprof's NVIDIA backend: kernels, copies, sets, runtime and driver calls,
//! synchronization and CUPTI's own overhead, recorded through CUPTI's activity API.
//!
//! It is one more backend on omniprof's platform, registered statically like any vendor's
//! ([`omniprof::register_profiler!`]): a program that links this crate (the Python package
//! does) records CUDA work in every session that selects a device type, with no setup.
//!
//! It is a static Rust backend, not a Kineto-ABI plugin built with the CUDA SDK, so that
//! nothing of CUDA is needed to build it: `libcupti` and the driver are loaded at run time
//! (see [`LIBRARY_ENV`] and [`SEARCH_PATH_ENV`] for where they are looked for), and where
//! they are missing the backend offers no activity types and [`unavailable_reason`] says
//! why in one line. CUPTI's records are read by field offsets checked against CUPTI's own
//! headers for every version it accepts ([`KNOWN_VERSIONS`]); another version is refused with
//! its number named.
//!
//! Every kernel, copy and set links to the host op and user range that launched it: by
//! default to the innermost ones open on its launching call's thread at the call's time,
//! which the recorder knows, at no CUPTI call per op; through CUPTI's external correlation
//! (each op's correlation id pushed to CUPTI around it, as Kineto does) where the session
//! records no runtime or driver calls or `OMNIPROF_CUPTI_EXTERNAL_CORRELATION` asks. The
//! links are the same either way; `links.rs` says when a call's would be ambiguous.
//!
//! ```
//! use omniprof::backends::ActivityProfiler;
//!
//! let backend = omniprof_cupti::CuptiProfiler;
//! match omniprof_cupti::unavailable_reason() {
//!     // Where CUDA is absent the backend offers nothing, and says why.
//!     Some(reason) => {
//!         assert!(reason.starts_with("CUPTI sits out: "));
//!         assert!(backend.available_activities().is_empty());
//!     }
//!     None => assert!(!backend.available_activities().is_empty()),
//! }
//! ```

mod args;
mod backend;
mod buffers;
mod clock;
mod library;
mod links;
mod names;
mod records;
mod syncs;
mod threads;

pub use backend::{keys, unavailable_reason, CuptiProfiler, DEVICE_TYPE};
pub use clock::{ClockMap, Pair};
pub use library::{LIBRARY_ENV, SEARCH_PATH_ENV};
pub use records::{
    bytes_read, decode, external, is_known_version, kind, Api, CudaEvent, ExternalCorrelation,
    Field, Kernel, Memcpy, Memset, Overhead, Record, Sync, Truncated, FIELDS, KNOWN_VERSIONS,
};
