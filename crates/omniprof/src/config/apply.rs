//! Applying config text onto a [`Config`]: a line at a time by the key table, all or
//! nothing, then validated; for a process's own config and for on-demand requests (with the
//! rules of `on_demand`), and the warnings logged in a bounded number of lines.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use super::error::{ConfigError, ConfigErrorReason, ConfigWarning};
use super::keys::{self, Config};
use super::on_demand::on_demand_trace_dir;
use super::parse::{self, trim, Applied, ApplyContext, UNRECOGNIZED};
use crate::ActivitySet;

/// Kineto's run-loop tick; an unset start time gets two of them as slack.
pub(crate) const CONTROLLER_TICK_MS: i64 = 1_000;

impl Config {
    /// Parses `text` onto the defaults and validates. Warnings are logged; use
    /// [`Config::apply`] on [`Config::default`] to receive them.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        config.apply(text)?;
        Ok(config)
    }

    /// Applies `text` on top of this config (nothing is reset), then validates. On error the
    /// config is unchanged. Returns the warnings, which are also logged.
    pub fn apply(&mut self, text: &str) -> Result<Vec<ConfigWarning>, ConfigError> {
        self.apply_with(
            text,
            &ApplyContext {
                now_ms: now_ms(),
                on_demand_dir: None,
                refuse_log_file: false,
            },
        )
    }

    /// Fills in what an unset or inconsistent config leaves open (`docs/config.md` section 4).
    /// Parsing already does this; call it after changing a [`Config::default`] by other means.
    pub fn validate(&mut self) -> Vec<ConfigWarning> {
        let warnings = self.validate_at(now_ms());
        log_warnings(&warnings);
        warnings
    }

    /// Section 4 of `docs/config.md`, against the parse time `now_ms`. Warnings carry line 0; the
    /// caller attributes them to lines.
    pub(super) fn validate_at(&mut self, now_ms: i64) -> Vec<ConfigWarning> {
        let mut warnings = Vec::new();
        if !self.start_time_given {
            let warmup_ms = i64::try_from(self.warmup_duration().as_millis()).unwrap_or(i64::MAX);
            self.values.start_time_ms = now_ms
                .saturating_add(warmup_ms)
                .saturating_add(2 * CONTROLLER_TICK_MS);
        }
        if self.start_iteration_roundup() == Some(0) {
            // A roundup of 0 would divide by zero when the start step is computed.
            warnings.push(ConfigWarning {
                line: 0,
                key: keys::PROFILE_START_ITERATION_ROUNDUP.to_owned(),
                message: "must be at least 1; ignored".to_owned(),
            });
            self.values.start_iteration_roundup = None;
        }
        if self.start_iteration_roundup().is_some() && !self.has_start_iteration() {
            // A roundup alone means "start on the next multiple", i.e. iteration-based.
            self.values.start_iteration = Some(0);
        }
        if self.activity_types().is_empty() {
            self.values.activity_types = ActivitySet::default_set();
        }
        warnings
    }

    /// [`Config::apply`] and [`Config::apply_on_demand`], against `ctx`; the warnings are
    /// logged (summarised: see [`log_warnings`]).
    pub(super) fn apply_with(
        &mut self,
        text: &str,
        ctx: &ApplyContext<'_>,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        let warnings = self.apply_unlogged(text, ctx)?;
        log_warnings(&warnings);
        Ok(warnings)
    }

    /// [`Config::apply_with`] without logging the warnings.
    pub(super) fn apply_unlogged(
        &mut self,
        text: &str,
        ctx: &ApplyContext<'_>,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        // All-or-nothing: work on a copy and commit only when every line was accepted.
        let mut next = self.clone();
        let mut warnings = Vec::new();
        // The last line that set each key, so validation warnings can point at it.
        let mut key_lines: HashMap<&str, usize> = HashMap::new();
        for (index, raw) in text.split('\n').enumerate() {
            let line = index + 1;
            let setting = raw.find('#').map_or(raw, |hash| &raw[..hash]);
            if trim(setting).is_empty() {
                continue;
            }
            let mut parts = setting.split('=');
            let (Some(key), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(ConfigError {
                    line,
                    key: None,
                    reason: ConfigErrorReason::Syntax(trim(setting).to_owned()),
                });
            };
            let (key, value) = (trim(key), trim(value));
            let applied = next
                .set_key(key, value, ctx)
                .map_err(|reason| ConfigError {
                    line,
                    key: Some(key.to_owned()),
                    reason,
                })?;
            let message = match applied {
                Some(Applied::Set) => {
                    key_lines.insert(key, line);
                    continue;
                }
                Some(Applied::Unsupported(why)) => {
                    key_lines.insert(key, line);
                    format!("accepted, not supported by omniprof: {why}")
                }
                Some(Applied::Ignored(message)) => message,
                None => UNRECOGNIZED.to_owned(),
            };
            warnings.push(ConfigWarning {
                line,
                key: key.to_owned(),
                message,
            });
        }
        for mut warning in next.validate_at(ctx.now_ms) {
            warning.line = key_lines.get(warning.key.as_str()).copied().unwrap_or(0);
            warnings.push(warning);
        }
        *self = next;
        Ok(warnings)
    }

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

/// The current time in ms since the Unix epoch (0 if the clock is before it).
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

/// How many warnings other than unknown keys one text logs one by one; the rest are counted.
const LOGGED_WARNINGS: usize = 5;
/// How many unknown keys the summary line of one text names.
const NAMED_UNKNOWN_KEYS: usize = 3;

/// Logs the warnings of one text in a bounded number of lines, whatever its size: unknown
/// keys as one summary line (how many, and the first few with their lines), the others one
/// per line up to [`LOGGED_WARNINGS`], then a count. A trigger message of 64 KiB of unknown
/// keys printed thousands of lines on the traced process's stderr before.
fn log_warnings(warnings: &[ConfigWarning]) {
    for line in warning_lines(warnings) {
        log::warn!("{line}");
    }
}

/// The lines [`log_warnings`] logs.
fn warning_lines(warnings: &[ConfigWarning]) -> Vec<String> {
    let (unknown, other): (Vec<_>, Vec<_>) = warnings
        .iter()
        .partition(|w| w.message == parse::UNRECOGNIZED);
    let mut lines: Vec<String> = other
        .iter()
        .take(LOGGED_WARNINGS)
        .map(|w| format!("config: {w}"))
        .collect();
    if other.len() > LOGGED_WARNINGS {
        lines.push(format!(
            "config: {} more warnings not shown",
            other.len() - LOGGED_WARNINGS
        ));
    }
    if !unknown.is_empty() {
        let named: Vec<String> = unknown
            .iter()
            .take(NAMED_UNKNOWN_KEYS)
            .map(|w| format!("{:?} (line {})", w.key, w.line))
            .collect();
        let more = if unknown.len() > NAMED_UNKNOWN_KEYS {
            ", ..."
        } else {
            ""
        };
        let plural = if unknown.len() == 1 { "" } else { "s" };
        lines.push(format!(
            "config: {} unrecognized key{plural} ignored: {}{more}",
            unknown.len(),
            named.join(", ")
        ));
    }
    lines
}
