//! Reading a config text: lines into `KEY=VALUE` pairs, and values by Kineto's grammars.

use std::collections::HashMap;

use super::{
    log_warnings, Applied, ApplyContext, Config, ConfigError, ConfigErrorReason, ConfigWarning,
};
use crate::activity::ActivitySet;

/// Largest value of the int32 grammar.
const INT32_MAX: u64 = i32::MAX as u64;
/// Largest value of the int64 grammar.
pub(super) const INT64_MAX: u64 = i64::MAX as u64;

impl Config {
    pub(super) fn apply_with(
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
            let applied = next.set(key, value, ctx).map_err(|reason| ConfigError {
                line,
                key: Some(key.to_owned()),
                reason,
            })?;
            let message = match applied {
                Applied::Set => {
                    key_lines.insert(key, line);
                    continue;
                }
                Applied::UnknownKey => "unrecognized config key; line ignored".to_owned(),
                Applied::Ignored(message) => message,
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
        log_warnings(&warnings);
        Ok(warnings)
    }
}

/// Trims what the config grammar counts as whitespace. `\r` is deliberately not included.
pub(super) fn trim(s: &str) -> &str {
    s.trim_matches([' ', '\t', '\n'])
}

/// The integer grammar: base 10, optional sign, in `[0, max]` (`-0` is 0).
pub(super) fn parse_int(value: &str, max: u64) -> Result<u64, ConfigErrorReason> {
    let invalid = || ConfigErrorReason::Integer {
        value: value.to_owned(),
        max,
    };
    let (negative, digits) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    // Beyond u64 is a parse error, so huge values are rejected rather than saturated.
    let n: u64 = digits.parse().map_err(|_| invalid())?;
    if (negative && n != 0) || n > max {
        return Err(invalid());
    }
    Ok(n)
}

/// The int32 grammar, for a value that is a count or a size.
pub(super) fn parse_u32(value: &str) -> Result<u32, ConfigErrorReason> {
    // Bounded by INT32_MAX, so the conversion is exact.
    parse_int(value, INT32_MAX).map(|n| n as u32)
}

/// The int32 grammar, for a value whose default is negative.
pub(super) fn parse_i32(value: &str) -> Result<i32, ConfigErrorReason> {
    // Bounded by INT32_MAX, so the conversion is exact.
    parse_int(value, INT32_MAX).map(|n| n as i32)
}

pub(super) fn parse_bool(value: &str) -> Result<bool, ConfigErrorReason> {
    const FALSE: [&str; 5] = ["n", "no", "f", "false", "0"];
    const TRUE: [&str; 5] = ["y", "yes", "t", "true", "1"];
    let is = |spellings: [&str; 5]| spellings.iter().any(|s| s.eq_ignore_ascii_case(value));
    if is(TRUE) {
        Ok(true)
    } else if is(FALSE) {
        Ok(false)
    } else {
        Err(ConfigErrorReason::Bool(value.to_owned()))
    }
}

/// A list: split on `,`, items trimmed, empty items dropped.
pub(super) fn parse_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// An activity list. Kineto lower-cases the value first; [`ActivityType::parse`] folds ASCII
/// case itself, so skipping that step accepts the same names and lets the error quote the
/// item as it was written.
pub(super) fn parse_activity_list(value: &str) -> Result<ActivitySet, ConfigErrorReason> {
    ActivitySet::parse_list(value).map_err(|e| ConfigErrorReason::ActivityType(e.name))
}
