//! The rules for a request that may come from the daemon: where its trace may be written,
//! and how far from now its start may lie. The key table's `on_set` hooks of
//! `ACTIVITIES_LOG_FILE` and `PROFILE_START_TIME` apply them.

use std::path::{Path, PathBuf};

/// The environment variable naming the directory on-demand traces may be written to.
const ON_DEMAND_TRACE_DIR_ENV: &str = "KINETO_ONDEMAND_TRACE_DIR";
/// Opts a process in to on-demand tracing (the engine and its trigger socket) when set to
/// `1`, `true` or `yes`.
pub const ONDEMAND_ENV: &str = "OMNIPROF_ONDEMAND";
/// How far in the past `PROFILE_START_TIME` may lie: older requests are stale.
pub(super) const MAX_REQUEST_AGE_MS: i64 = 10_000;
/// The horizon of an on-demand request's start in time: `PROFILE_START_TIME` (or a warm-up)
/// at most one hour ahead. The engine holds one request at a time and refuses every other
/// while it waits, so a start in the year 5138 would wedge on-demand tracing for the life of
/// the process.
pub const MAX_START_AHEAD_MS: i64 = 3_600_000;
/// The horizon of an on-demand request's start in iterations: `PROFILE_START_ITERATION` at
/// most this many iterations after the current one, for the reason of [`MAX_START_AHEAD_MS`].
pub const MAX_START_AHEAD_ITERATIONS: i64 = 1_000_000;

/// The directory on-demand traces may be written to: `$KINETO_ONDEMAND_TRACE_DIR` when set
/// and non-empty, else the system temp dir ([`std::env::temp_dir`]: `$TMPDIR`, else `/tmp`,
/// where Kineto always uses `/tmp/`), always with a trailing `/`.
///
/// ```
/// let dir = omniprof::on_demand::on_demand_trace_dir();
/// assert!(dir.ends_with('/'));
/// ```
pub fn on_demand_trace_dir() -> String {
    let dir = match std::env::var(ON_DEMAND_TRACE_DIR_ENV) {
        Ok(dir) if !dir.is_empty() => dir,
        _ => std::env::temp_dir().to_string_lossy().into_owned(),
    };
    with_trailing_slash(dir)
}

fn with_trailing_slash(dir: String) -> String {
    if dir.ends_with('/') {
        dir
    } else {
        dir + "/"
    }
}

/// Checks an on-demand `ACTIVITIES_LOG_FILE` against the allowed directory `dir` (see
/// [`on_demand_trace_dir`]): it must start with `dir`, contain no `..`, and its directory
/// must not resolve outside `dir` through a symlink. The error says which rule it broke.
/// This is the check at request time, by name; the on-demand writer checks again when it
/// writes, on directory handles (`crates/omniprof/src/ondemand/write.rs`), since the path
/// may change in between.
///
/// ```
/// use omniprof::on_demand::{check_on_demand_log_file, LogFileRefused};
///
/// assert!(check_on_demand_log_file("/tmp/t.json", "/tmp").is_ok());
/// let err = check_on_demand_log_file("/etc/t.json", "/tmp").unwrap_err();
/// assert_eq!(err, LogFileRefused::Outside { dir: "/tmp/".to_owned() });
/// assert_eq!(err.to_string(), r#"outside the allowed directory "/tmp/""#);
/// assert!(check_on_demand_log_file("/tmp/../etc/t.json", "/tmp").is_err());
/// ```
pub fn check_on_demand_log_file(path: &str, dir: &str) -> Result<(), LogFileRefused> {
    let dir = with_trailing_slash(dir.to_owned());
    if !path.starts_with(&dir) {
        return Err(LogFileRefused::Outside { dir });
    }
    if path.contains("..") {
        return Err(LogFileRefused::DotDot { dir });
    }
    if !resolves_inside(Path::new(path), Path::new(&dir)) {
        return Err(LogFileRefused::ThroughSymlink { dir });
    }
    Ok(())
}

/// Why [`check_on_demand_log_file`] refuses an on-demand log file. Each variant holds the
/// allowed directory, with its trailing `/`, which the message names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogFileRefused {
    /// The path does not start with the allowed directory.
    #[error("outside the allowed directory {dir:?}")]
    Outside {
        /// The allowed directory.
        dir: String,
    },
    /// The path contains `..`, which could climb out of the allowed directory.
    #[error("contains \"..\" (must stay inside the allowed directory {dir:?})")]
    DotDot {
        /// The allowed directory.
        dir: String,
    },
    /// The path's directory, with symlinks resolved, lies outside the allowed directory.
    #[error("its directory resolves (through a symlink) outside {dir:?}")]
    ThroughSymlink {
        /// The allowed directory.
        dir: String,
    },
}

/// Whether the directory of `path`, with symlinks resolved, lies inside `dir`. Missing
/// directories are resolved from their nearest existing ancestor, since that is where a
/// writer creating them would put them.
fn resolves_inside(path: &Path, dir: &Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let Some(parent) = path.parent() else {
        return false;
    };
    let mut missing = Vec::new();
    let mut ancestor = parent;
    loop {
        if let Ok(real) = std::fs::canonicalize(ancestor) {
            let resolved: PathBuf = real.join(missing.iter().rev().collect::<PathBuf>());
            return resolved.starts_with(&dir);
        }
        match (ancestor.file_name(), ancestor.parent()) {
            (Some(name), Some(up)) => {
                missing.push(name);
                ancestor = up;
            }
            _ => return false,
        }
    }
}
