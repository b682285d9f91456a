//! Why a plugin library was not loaded ([`PluginError`], which also documents plugins as a
//! whole).

use std::path::{Path, PathBuf};

/// Why a plugin library was not loaded. Each message names the file.
///
/// Dynamic plugins: shared libraries built against Kineto's plugin C ABI
/// (`docs/plugin-abi.md`, mirrored in the `omniprof-plugin-sys` crate with its header
/// `omniprof_plugin.h`).
///
/// A plugin exports `KinetoPlugin_register` and registers one or more profilers with it. The
/// [loader](super::load_plugin) opens each library once, validates and queries every profiler, and
/// hands the usable ones to the backend registry, where an adapter drives them through the
/// same [`ActivityProfiler`](crate::backend::ActivityProfiler) trait as a static backend.
/// Their events go through a host-owned trace builder that validates every call.
///
/// Plugins are found in the directories named by `KINETO_PLUGIN_LIB_DIR_PATH` and
/// `OMNIPROF_PLUGIN_DIR` (every regular `*.so` in them, not recursive, in file-name order),
/// loaded when the first session is prepared, or explicitly with [`load_plugin`](super::load_plugin). A library
/// that cannot be used is rejected with a one-line reason naming the file; the host goes on.
/// A library that was loaded is never unloaded (a thread it started may still run its code).
///
/// What the host cannot be hurt by: a call that blocks (each call into a plugin has a
/// deadline, past which the profiler is abandoned), handles used from another thread or
/// after their call (refused and counted), bad arguments (refused or repaired and counted).
/// What it cannot prevent: a plugin runs in-process, so `exit()`, `abort()` or a crash in
/// its code ends the process; check a plugin with `omniprof plugins check` in CI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginError {
    /// The library could not be opened.
    Open {
        /// The library.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// The library has no registration entry point.
    MissingSymbol {
        /// The library.
        path: PathBuf,
    },
    /// The entry point returned an error.
    Register {
        /// The library.
        path: PathBuf,
        /// The code it returned.
        code: i32,
        /// What the host refused during registration, if anything.
        detail: String,
    },
    /// A plugin directory could not be listed.
    Directory {
        /// The directory.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self {
            Self::Directory { .. } => "plugin directory",
            _ => "plugin",
        };
        write!(f, "{what} {}: {}", self.subject().display(), self.reason())
    }
}

impl std::error::Error for PluginError {}

impl PluginError {
    /// The library (or, for [`PluginError::Directory`], the directory) the error is about.
    pub fn subject(&self) -> &Path {
        match self {
            Self::Open { path, .. }
            | Self::MissingSymbol { path }
            | Self::Register { path, .. } => path,
            Self::Directory { dir, .. } => dir,
        }
    }

    /// The message without the file name [`subject`](Self::subject) gives.
    pub fn reason(&self) -> String {
        match self {
            Self::Open { reason, .. } => format!("cannot open: {reason}"),
            Self::MissingSymbol { .. } => {
                "no KinetoPlugin_register symbol; not a profiler plugin".to_owned()
            }
            Self::Register { code, detail, .. } => {
                format!("KinetoPlugin_register returned {code}{detail}")
            }
            Self::Directory { reason, .. } => format!("cannot list: {reason}"),
        }
    }
}
