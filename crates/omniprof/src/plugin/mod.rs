//! Dynamic plugins: shared libraries built against Kineto's plugin C ABI
//! (`reference/plugin-abi.md`, mirrored in the `omniprof-plugin-sys` crate with its header
//! `omniprof_plugin.h`).
//!
//! A plugin exports `KinetoPlugin_register` and registers one or more profilers with it. The
//! [loader](load_plugin) opens each library once, validates and queries every profiler, and
//! hands the usable ones to the backend registry, where an adapter drives them through the
//! same [`ActivityProfiler`](crate::backend::ActivityProfiler) trait as a static backend.
//! Their events go through a host-owned trace builder that validates every call.
//!
//! Plugins are found in the directories named by `KINETO_PLUGIN_LIB_DIR_PATH` and
//! `OMNIPROF_PLUGIN_DIR` (every regular `*.so` in them, not recursive, in file-name order),
//! loaded when the first session is prepared, or explicitly with [`load_plugin`]. A library
//! that cannot be used is rejected with a one-line reason naming the file; the host goes on.
//! A library that was loaded is never unloaded (a thread it started may still run its code).
//!
//! What the host cannot be hurt by: a call that blocks (each call into a plugin has a
//! deadline, past which the profiler is abandoned), handles used from another thread or
//! after their call (refused and counted), bad arguments (refused or repaired and counted).
//! What it cannot prevent: a plugin runs in-process, so `exit()`, `abort()` or a crash in
//! its code ends the process; check a plugin with `omniprof plugins check` in CI.

mod adapter;
mod builder;
mod deadline;
mod lend;
mod loader;
mod types;

use std::path::PathBuf;

pub use builder::{HostTraceBuilder, Problem};
pub use lend::late_calls;
pub(crate) use loader::load_env_once;
pub use loader::{
    load_from_env, load_plugin, plugin_dirs, plugin_files, LoadedPlugin, ProfilerReport,
    DIR_VARIABLES,
};

/// Why a plugin library was not loaded. Each message names the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    #[error("plugin {path}: cannot open: {reason}")]
    Open { path: PathBuf, reason: String },
    #[error("plugin {path}: no KinetoPlugin_register symbol; not a profiler plugin")]
    MissingSymbol { path: PathBuf },
    #[error("plugin {path}: KinetoPlugin_register returned {code}{detail}")]
    Register {
        path: PathBuf,
        code: i32,
        /// What the host refused during registration, if anything.
        detail: String,
    },
    #[error("plugin directory {dir}: cannot list: {reason}")]
    Directory { dir: PathBuf, reason: String },
}
