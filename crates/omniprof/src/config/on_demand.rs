//! The rules for a request that may come from the daemon: where its trace may be written,
//! and how old its start may be. They are the `on_set` hooks of `ACTIVITIES_LOG_FILE` and
//! `PROFILE_START_TIME` in the key table.

use std::path::{Path, PathBuf};

use super::parse::{Applied, ApplyContext};
use super::{now_ms, Config, ConfigError, ConfigErrorReason, ConfigWarning, LogFile};

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

impl Config {
    /// Like [`Config::apply`] for a config that came from the daemon: `ACTIVITIES_LOG_FILE`
    /// must lie inside [`on_demand_trace_dir`] (default the system temp dir), contain no
    /// `..`, and not escape that directory through a symlink. A path that fails is ignored
    /// with a warning; the parse still succeeds.
    pub fn apply_on_demand(&mut self, text: &str) -> Result<Vec<ConfigWarning>, ConfigError> {
        self.apply_on_demand_with(text, false)
    }

    /// Like [`Config::apply_on_demand`], but a log file outside the allowed directory is an
    /// error ([`ConfigErrorReason::LogFileNotAllowed`]) instead of a warning: a trigger that
    /// names a path it may not write must learn so, not get a trace somewhere else.
    ///
    /// ```
    /// let err = omniprof::Config::default()
    ///     .apply_on_demand_strict("ACTIVITIES_LOG_FILE=/etc/x.json")
    ///     .unwrap_err();
    /// assert!(err.to_string().contains("/etc/x.json"), "{err}");
    /// ```
    pub fn apply_on_demand_strict(
        &mut self,
        text: &str,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        self.apply_on_demand_with(text, true)
    }

    /// [`Config::apply_on_demand`] without logging the warnings: for a check of a text that
    /// is parsed again, and logged, where it is used (the trigger server's check before the
    /// engine's parse), so that one message logs its warnings once.
    pub(crate) fn check_on_demand(
        &mut self,
        text: &str,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        let dir = on_demand_trace_dir();
        self.apply_unlogged(
            text,
            &ApplyContext {
                now_ms: now_ms(),
                on_demand_dir: Some(&dir),
                refuse_log_file: false,
            },
        )
    }

    /// [`Config::apply`] without logging the warnings.
    pub(crate) fn apply_quietly(&mut self, text: &str) -> Result<Vec<ConfigWarning>, ConfigError> {
        self.apply_unlogged(
            text,
            &ApplyContext {
                now_ms: now_ms(),
                on_demand_dir: None,
                refuse_log_file: false,
            },
        )
    }

    fn apply_on_demand_with(
        &mut self,
        text: &str,
        refuse_log_file: bool,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        let dir = on_demand_trace_dir();
        self.apply_with(
            text,
            &ApplyContext {
                now_ms: now_ms(),
                on_demand_dir: Some(&dir),
                refuse_log_file,
            },
        )
    }
}

/// Marks a trace request: the duration, iteration and log-file keys ask for a trace.
pub(super) fn request_trace<T>(
    config: &mut Config,
    _: &T,
    _: &ApplyContext<'_>,
) -> Result<Applied, ConfigErrorReason> {
    config.trace_request = true;
    Ok(Applied::Set)
}

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

/// Refuses a `PROFILE_START_TIME` more than [`MAX_REQUEST_AGE_MS`] before the parse (a stale
/// request) and, in an on-demand config, one more than [`MAX_START_AHEAD_MS`] after it; 0
/// means unset (validation fills it in).
pub(super) fn check_start_time(
    config: &mut Config,
    &start_ms: &i64,
    ctx: &ApplyContext<'_>,
) -> Result<Applied, ConfigErrorReason> {
    let now_ms = ctx.now_ms;
    if start_ms != 0 && now_ms.saturating_sub(start_ms) > MAX_REQUEST_AGE_MS {
        return Err(ConfigErrorReason::StartTimeInPast { start_ms, now_ms });
    }
    if ctx.on_demand_dir.is_some() && start_ms.saturating_sub(now_ms) > MAX_START_AHEAD_MS {
        return Err(ConfigErrorReason::StartTimeBeyondHorizon { start_ms, now_ms });
    }
    config.start_time_given = start_ms != 0;
    Ok(Applied::Set)
}

/// `ACTIVITIES_LOG_FILE` asks for a trace, even when an on-demand path is refused (as in
/// Kineto); an on-demand path outside the allowed directory is ignored with a warning, or
/// refused when the context says so.
pub(super) fn check_log_file(
    config: &mut Config,
    log_file: &LogFile,
    ctx: &ApplyContext<'_>,
) -> Result<Applied, ConfigErrorReason> {
    request_trace(config, log_file, ctx)?;
    let Some(dir) = ctx.on_demand_dir else {
        return Ok(Applied::Set);
    };
    let path = log_file.path();
    Ok(match check_on_demand_log_file(path, dir) {
        Ok(()) => Applied::Set,
        Err(why) if ctx.refuse_log_file => {
            return Err(ConfigErrorReason::LogFileNotAllowed {
                path: path.to_owned(),
                why,
            })
        }
        Err(why) => Applied::Ignored(format!(
            "ignoring on-demand log file {path:?}: {why}; keeping {:?}",
            config.log_file()
        )),
    })
}

/// Checks an on-demand `ACTIVITIES_LOG_FILE` against the allowed directory `dir` (see
/// [`on_demand_trace_dir`]): it must start with `dir`, contain no `..`, and its directory
/// must not resolve outside `dir` through a symlink. The error says why it is refused.
/// This is the check at request time, by name; the on-demand writer checks again when it
/// writes, on directory handles (`crates/omniprof/src/ondemand/write.rs`), since the path
/// may change in between.
///
/// ```
/// use omniprof::on_demand::check_on_demand_log_file;
///
/// assert!(check_on_demand_log_file("/tmp/t.json", "/tmp").is_ok());
/// assert!(check_on_demand_log_file("/etc/t.json", "/tmp").is_err());
/// assert!(check_on_demand_log_file("/tmp/../etc/t.json", "/tmp").is_err());
/// ```
pub fn check_on_demand_log_file(path: &str, dir: &str) -> Result<(), String> {
    let dir = with_trailing_slash(dir.to_owned());
    if !path.starts_with(&dir) {
        return Err(format!("outside the allowed directory {dir:?}"));
    }
    if path.contains("..") {
        return Err(format!(
            "contains \"..\" (must stay inside the allowed directory {dir:?})"
        ));
    }
    if !resolves_inside(Path::new(path), Path::new(&dir)) {
        return Err(format!(
            "its directory resolves (through a symlink) outside {dir:?}"
        ));
    }
    Ok(())
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
