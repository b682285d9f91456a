//! Reading a config text: lines into `KEY=VALUE` pairs, and values by Kineto's grammars.
//!
//! A grammar is a type, so that each entry of the key table (`keys.rs`) names one and the
//! field it fills, what its accessor returns and how [`Config::to_json`] shows it all follow.
//!
//! [`Config::to_json`]: super::Config::to_json

use std::time::Duration;

use super::error::ConfigErrorReason;
use super::log_file::LogFile;
use crate::ActivitySet;

/// The warning of a line whose key is unknown.
pub(super) const UNRECOGNIZED: &str = "unrecognized config key; line ignored";

/// Largest value of the int32 grammar.
const INT32_MAX: u64 = i32::MAX as u64;
/// Largest value of the int64 grammar.
const INT64_MAX: u64 = i64::MAX as u64;

/// What a parse needs from the outside world, passed in so tests can fix it.
pub(super) struct ApplyContext<'a> {
    /// The parse time, in ms since the Unix epoch.
    pub(super) now_ms: i64,
    /// `Some(allowed directory)` for an on-demand (daemon) config.
    pub(super) on_demand_dir: Option<&'a str>,
    /// Refuse an on-demand log file outside the allowed directory instead of ignoring it.
    pub(super) refuse_log_file: bool,
}

/// What setting a known key did.
pub(super) enum Applied {
    Set,
    /// Stored, but omniprof has nothing it drives, for this reason.
    Unsupported(&'static str),
    /// Accepted but ignored, with the reason (an on-demand log file that is not allowed).
    Ignored(String),
}

/// Trims what the config grammar counts as whitespace. `\r` is deliberately not included.
pub(super) fn trim(s: &str) -> &str {
    s.trim_matches([' ', '\t', '\n'])
}

/// How a key's value is written, stored, read and shown. The key table names one grammar per
/// key (and per other spelling); the compiler checks that the spellings of a key agree on
/// [`Grammar::Value`] and that its accessor returns [`Grammar::Out`].
pub(super) trait Grammar {
    /// What the config stores.
    type Value;
    /// What the key's accessor returns.
    type Out<'a>;
    fn parse(text: &str) -> Result<Self::Value, ConfigErrorReason>;
    fn get(value: &Self::Value) -> Self::Out<'_>;
    /// The value under the key's name in [`Config::to_json`]; `None` for a key shown there
    /// in its own way.
    ///
    /// [`Config::to_json`]: super::Config::to_json
    fn json(value: &Self::Value) -> Option<serde_json::Value>;
}

/// Grammars whose value is `Copy`: the accessor returns it as stored. An entry reads
/// `Grammar: Value = |text| parse, |value| shown;` where `shown` is what JSON shows.
macro_rules! copy_grammars {
    ($(
        $(#[$doc:meta])*
        $grammar:ident: $value:ty = |$text:ident| $parse:expr, |$shown:ident| $json:expr;
    )*) => {$(
        $(#[$doc])*
        pub(super) struct $grammar;

        impl Grammar for $grammar {
            type Value = $value;
            type Out<'a> = $value;

            fn parse($text: &str) -> Result<$value, ConfigErrorReason> {
                $parse
            }

            fn get(value: &$value) -> $value {
                *value
            }

            fn json(&$shown: &$value) -> Option<serde_json::Value> {
                Some($json.into())
            }
        }
    )*};
}

// The casts after `parse_int` are exact: it bounds the value by the grammar's maximum.
copy_grammars! {
    /// `n y no yes f t false true 0 1`, in any ASCII case.
    Bool: bool = |text| parse_bool(text), |on| on;
    /// The int32 grammar, for a count or a size.
    U32: u32 = |text| parse_int(text, INT32_MAX).map(|n| n as u32), |n| n;
    /// The int32 grammar, for a value whose default is negative.
    I32: i32 = |text| parse_int(text, INT32_MAX).map(|n| n as i32), |n| n;
    /// The int64 grammar.
    U64: u64 = |text| parse_int(text, INT64_MAX), |n| n;
    /// The int64 grammar, for a time in ms since the Unix epoch.
    I64: i64 = |text| parse_int(text, INT64_MAX).map(|n| n as i64), |n| n;
    /// The int32 grammar, for a setting that is unset by default; unset is shown as −1.
    OptionalU32: Option<u32> = |text| U32::parse(text).map(Some), |n| n.map_or(-1, i64::from);
    /// Whole seconds (the int32 grammar), shown in seconds.
    Secs: Duration = |text| U32::parse(text).map(|secs| Duration::from_secs(secs.into())),
        |duration| duration.as_secs();
    /// Whole milliseconds (the int32 grammar), shown in milliseconds.
    Msecs: Duration = |text| U32::parse(text).map(|ms| Duration::from_millis(ms.into())),
        |duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
}

/// Any text, as written (trimmed).
pub(super) struct Text;

impl Grammar for Text {
    type Value = String;
    type Out<'a> = &'a str;

    fn parse(text: &str) -> Result<String, ConfigErrorReason> {
        Ok(text.to_owned())
    }

    fn get(value: &String) -> &str {
        value
    }

    fn json(value: &String) -> Option<serde_json::Value> {
        Some(value.as_str().into())
    }
}

/// A list: split on `,`, items trimmed, empty items dropped.
pub(super) struct List;

impl Grammar for List {
    type Value = Vec<String>;
    type Out<'a> = &'a [String];

    fn parse(text: &str) -> Result<Vec<String>, ConfigErrorReason> {
        Ok(text
            .split(',')
            .map(trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect())
    }

    fn get(value: &Vec<String>) -> &[String] {
        value
    }

    fn json(value: &Vec<String>) -> Option<serde_json::Value> {
        Some(value.as_slice().into())
    }
}

/// An activity list. Kineto lower-cases the value first; [`ActivityType::parse`] folds ASCII
/// case itself, so skipping that step accepts the same names and lets the error quote the
/// item as it was written.
///
/// [`ActivityType::parse`]: crate::ActivityType::parse
pub(super) struct Activities;

impl Grammar for Activities {
    type Value = ActivitySet;
    type Out<'a> = ActivitySet;

    fn parse(text: &str) -> Result<ActivitySet, ConfigErrorReason> {
        ActivitySet::parse_list(text).map_err(|e| ConfigErrorReason::ActivityType(e.name))
    }

    fn get(value: &ActivitySet) -> ActivitySet {
        *value
    }

    /// Shown as `activity_types` and `enabled` instead (see [`Config::to_json`](super::Config::to_json)).
    fn json(_: &ActivitySet) -> Option<serde_json::Value> {
        None
    }
}

/// A trace output path or URL, as given.
pub(super) struct LogPath;

impl Grammar for LogPath {
    type Value = LogFile;
    type Out<'a> = &'a str;

    fn parse(text: &str) -> Result<LogFile, ConfigErrorReason> {
        Ok(LogFile::Given(text.to_owned()))
    }

    fn get(value: &LogFile) -> &str {
        value.path()
    }

    fn json(value: &LogFile) -> Option<serde_json::Value> {
        Some(value.path().into())
    }
}

/// The integer grammar: base 10, optional sign, in `[0, max]` (`-0` is 0).
fn parse_int(value: &str, max: u64) -> Result<u64, ConfigErrorReason> {
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

fn parse_bool(value: &str) -> Result<bool, ConfigErrorReason> {
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
