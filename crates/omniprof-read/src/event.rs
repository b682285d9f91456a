//! One element of `traceEvents` as serde sees it, borrowing from the event's text, and the
//! exact conversion of `ts` / `dur` to nanoseconds.
//!
//! An event is parsed one of two ways. The one-pass parser
//! ([`read_event`](super::one_pass::read_event)) is the fast one: it reads the `args` the
//! mapper will use as it meets them, skipping the others unconverted, and gives up (rather
//! than fail) on anything unusual. The caller then parses the event with the derived
//! [`RawEvent`] deserializer, the reference: it keeps `args` as text for the mapper to read
//! later and reports errors as the reader always has. Both give the same event whenever the
//! fast one succeeds.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::ops::Deref;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use smallvec::SmallVec;

use omniprof_trace::keys::arg;
use omniprof_trace::ActivityType;
use omniprof_trace::{BoundedValue, Value};

/// The args read into fields ([`Activity::correlation`](omniprof_trace::Activity::correlation),
/// [`Activity::linked_correlation`](omniprof_trace::Activity::linked_correlation)) whatever the
/// [`ArgFilter`].
pub(super) const LIFTED_ARGS: [&str; 2] = [arg::EXTERNAL_ID, arg::CORRELATION];

/// The fields of an event the reader uses; others (`s`, `tts`, ...) are ignored.
#[derive(Default, Deserialize)]
#[serde(expecting = "an event object")]
pub(super) struct RawEvent<'a> {
    #[serde(borrow)]
    pub ph: Option<Str<'a>>,
    #[serde(borrow)]
    pub cat: Option<Str<'a>>,
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
    #[serde(borrow)]
    pub pid: Option<Id<'a>>,
    #[serde(borrow)]
    pub tid: Option<Id<'a>>,
    /// Kept as text so that the conversion to nanoseconds is exact.
    #[serde(borrow)]
    pub ts: Option<Micros<'a>>,
    #[serde(borrow)]
    pub dur: Option<Micros<'a>>,
    /// The flow id of `s` / `f` events.
    #[serde(borrow)]
    pub id: Option<Id<'a>>,
    /// The binding point of an `f` event: `"e"` binds it to the slice enclosing it, anything
    /// else to the next slice.
    #[serde(borrow)]
    pub bp: Option<Str<'a>>,
    /// Kept as text and converted on demand ([`RawEvent::args`]), so that the args a
    /// consumer does not want are only skipped over, never converted.
    #[serde(borrow)]
    pub args: Option<Raw<'a>>,
    /// The args the one-pass parser already read (those of [`ArgKeys::of`] the event), in place
    /// of `args`.
    #[serde(skip)]
    pub read_args: Option<Args<'a>>,
    /// The activity type of `cat`, when the one-pass parser found it (for its args).
    #[serde(skip)]
    pub kind: Option<ActivityType>,
}

impl<'a> RawEvent<'a> {
    /// The activity type of `cat`: the one the one-pass parser found, else looked up.
    pub(super) fn activity_type(&self) -> Option<ActivityType> {
        self.kind
            .or_else(|| self.cat.as_deref().and_then(activity_type))
    }

    /// Reads the `args` the mapper uses into [`RawEvent::read_args`] (as [`Self::args`]
    /// gives them) unless the one-pass parser already did.
    pub(super) fn keep_args(&mut self, filter: &ArgFilter) -> Result<(), String> {
        if self.read_args.is_none() {
            self.read_args = Some(self.args(filter)?);
        }
        Ok(())
    }

    /// The `args` the mapper uses ([`ArgKeys::of`] the event, with `filter`), in file order.
    pub(super) fn args(&mut self, filter: &ArgFilter) -> Result<Args<'a>, String> {
        if let Some(args) = self.read_args.take() {
            return Ok(args);
        }
        let Some(raw) = self.args else {
            return Ok(Args::default());
        };
        let keys = ArgKeys::of(self.ph.as_deref(), self.cat.as_deref());
        let mut de = serde_json::Deserializer::from_str(raw.0);
        ArgsSeed {
            keep: |key: &str| keys.keeps(key, filter),
        }
        .deserialize(&mut de)
        .map_err(|e| format!("`args`: {e}"))
    }
}

/// Which `args` the reader keeps in [`Activity::args`](omniprof_trace::Activity::args). `External id`
/// and `correlation` are always read (into
/// [`Activity::correlation`](omniprof_trace::Activity::correlation) and
/// [`Activity::linked_correlation`](omniprof_trace::Activity::linked_correlation)), and counter
/// events keep every arg (their numbers are the samples).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ArgFilter {
    /// Every arg.
    #[default]
    All,
    /// Only these keys; the values of the others are skipped without being converted.
    Only(Vec<String>),
}

impl ArgFilter {
    /// No arg: times, rows, ids and flows are still read. A read that needs no arg (the
    /// streamed Perfetto writer's survey, a rank's step times) is several times faster.
    pub fn none() -> Self {
        Self::Only(Vec::new())
    }

    /// Whether an arg with this key is kept.
    pub fn keeps(&self, key: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(keys) => keys.iter().any(|k| k == key),
        }
    }
}

/// An [`ArgFilter`] and the lengths of the keys an activity keeps with it (the
/// [lifted](LIFTED_ARGS) ones included), which turn most other keys away without comparing
/// them: a trace's args are mostly keys the summary does not read.
#[derive(Clone, Debug)]
pub(super) struct KeptArgs {
    pub filter: ArgFilter,
    /// Bit `n` set when a kept key may be `n` bytes long (all bits for [`ArgFilter::All`];
    /// keys of 64 bytes and more are always compared).
    lengths: u64,
}

impl KeptArgs {
    pub(super) fn new(filter: ArgFilter) -> Self {
        let lengths = match &filter {
            ArgFilter::All => u64::MAX,
            ArgFilter::Only(keys) => LIFTED_ARGS
                .iter()
                .copied()
                .chain(keys.iter().map(String::as_str))
                .filter(|key| key.len() < 64)
                .fold(0, |lengths, key| lengths | 1 << key.len()),
        };
        Self { filter, lengths }
    }

    /// The keys kept of an event whose args are `keys`, decided once for all its args.
    #[inline]
    pub(super) fn of(&self, keys: ArgKeys) -> KeptKeys<'_> {
        let filtered = matches!(keys, ArgKeys::Activity(kind) if !kind.is_counter());
        KeptKeys {
            keys,
            filter: &self.filter,
            lengths: if filtered { self.lengths } else { u64::MAX },
        }
    }
}

/// [`KeptArgs`] for the args of one event ([`KeptArgs::of`]).
#[derive(Clone, Copy)]
pub(super) struct KeptKeys<'f> {
    keys: ArgKeys,
    filter: &'f ArgFilter,
    /// [`KeptArgs`]'s lengths when the keys are filtered by them, else all bits.
    lengths: u64,
}

impl KeptKeys<'_> {
    /// [`ArgKeys::keeps`] with the filter.
    #[inline]
    pub(super) fn keeps(self, key: &str) -> bool {
        if key.len() < 64 && self.lengths >> key.len() & 1 == 0 {
            return false;
        }
        self.keys.keeps(key, self.filter)
    }
}

/// The type of a `cat`: an exact name without allocating (compared only with the names of
/// its length), else [`ActivityType::parse`] (case folding, generic names).
pub(super) fn activity_type(cat: &str) -> Option<ActivityType> {
    let exact = match BY_LENGTH.starts.get(cat.len()..cat.len() + 2) {
        Some(&[start, end]) => BY_LENGTH.types[usize::from(start)..usize::from(end)]
            .iter()
            .copied()
            .find(|t| t.name() == cat),
        _ => None,
    };
    exact.or_else(|| ActivityType::parse(cat).ok())
}

/// The longest name of an [`ActivityType`] that [`BY_LENGTH`] files (a longer `cat` is
/// left to [`ActivityType::parse`], which a test checks no type needs).
const MAX_NAME: usize = 40;

/// [`ActivityType::ALL`] ordered by the length of their names, and where the names of each
/// length start (`types[starts[n]..starts[n + 1]]` are those `n` bytes long).
struct ByLength {
    types: [ActivityType; ActivityType::ALL.len()],
    starts: [u8; MAX_NAME + 2],
}

const BY_LENGTH: ByLength = {
    let mut types = ActivityType::ALL;
    let mut starts = [0u8; MAX_NAME + 2];
    // Insertion sort by name length (a const context has no sort).
    let mut i = 1;
    while i < types.len() {
        let mut j = i;
        while j > 0 && types[j - 1].name().len() > types[j].name().len() {
            let t = types[j];
            types[j] = types[j - 1];
            types[j - 1] = t;
            j -= 1;
        }
        i += 1;
    }
    // starts[n]: the first type whose name is at least n bytes long.
    let mut n = 0;
    let mut at = 0;
    while n < starts.len() {
        while at < types.len() && types[at].name().len() < n {
            at += 1;
        }
        starts[n] = at as u8;
        n += 1;
    }
    ByLength { types, starts }
};

/// Which `args` the mapper reads from an event, as told by its `ph` and `cat`: everything
/// else in `args` is skipped without being converted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ArgKeys {
    /// None: flows, skipped events.
    None,
    /// A span's `Op count`.
    Span,
    /// A process or thread row's value.
    Row,
    /// An activity's, of this type: the [lifted](LIFTED_ARGS) ones and those the
    /// [`ArgFilter`] keeps; all of a counter's (its numbers are the samples).
    Activity(ActivityType),
}

impl ArgKeys {
    /// The keys the mapper reads from an event with this `ph` and `cat`: it maps an `X` of
    /// `cat` `Trace` to a span, an `X`, `i` or `C` of an activity type to an activity, and
    /// every `M` to a row; it reads no other `args`.
    pub(super) fn of(ph: Option<&str>, cat: Option<&str>) -> Self {
        match ph {
            Some("X") if cat == Some("Trace") => Self::Span,
            Some("X" | "i" | "C") => cat
                .and_then(activity_type)
                .map_or(Self::None, Self::Activity),
            Some("M") => Self::Row,
            _ => Self::None,
        }
    }

    /// Whether [`of`](Self::of) depends on `cat` for this `ph`.
    pub(super) fn need_cat(ph: Option<&str>) -> bool {
        matches!(ph, Some("X" | "i" | "C"))
    }

    pub(super) fn keeps(self, key: &str, filter: &ArgFilter) -> bool {
        match self {
            Self::None => false,
            Self::Span => key == arg::OP_COUNT,
            Self::Row => matches!(key, "name" | "labels" | "sort_index"),
            Self::Activity(kind) => {
                kind.is_counter() || LIFTED_ARGS.contains(&key) || filter.keeps(key)
            }
        }
    }
}

/// A string that borrows from the input unless it contained escapes. (`Option<Cow<str>>`
/// would always allocate: serde only borrows a `Cow` that is the field's whole type.)
pub(super) struct Str<'a>(pub(super) Cow<'a, str>);

impl Deref for Str<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct StrVisitor;

        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Str<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
        }

        d.deserialize_str(StrVisitor)
    }
}

/// The text of a JSON value, as it stands in the event (a number's digits, a string with
/// its quotes).
#[derive(Clone, Copy)]
pub(super) struct Raw<'a>(pub(super) &'a str);

impl<'de: 'a, 'a> Deserialize<'de> for Raw<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(|raw| Raw(raw.get()))
    }
}

/// A `ts` or `dur`: its text (as [`Raw`]'s), and its nanoseconds when the one-pass parser
/// converted them as it read the text (a plain decimal, [`plain_micros_at`]); the
/// reference leaves them to [`Micros::ns`].
#[derive(Clone, Copy)]
pub(super) struct Micros<'a>(pub(super) &'a str, pub(super) Option<i64>);

impl Micros<'_> {
    /// The value in nanoseconds ([`micros_to_ns`] of the text).
    #[inline]
    pub(super) fn ns(self) -> Option<i64> {
        self.1.or_else(|| micros_to_ns(self.0))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Micros<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Raw::deserialize(d).map(|raw| Micros(raw.0, None))
    }
}

/// A `pid`, `tid` or flow `id`: an integer, or a string in synthetic rows (`"Spans"`).
pub(super) enum Id<'a> {
    Int(i64),
    Str(Str<'a>),
}

impl Id<'_> {
    /// The integer, also from an integer-valued string (`"12"`).
    #[inline]
    pub(super) fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(v) => Some(*v),
            Self::Str(s) => s.parse().ok(),
        }
    }

    /// The id as text (a span's `tid` is its name).
    pub(super) fn to_text(&self) -> String {
        match self {
            Self::Int(v) => v.to_string(),
            Self::Str(s) => s.to_string(),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Id<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct IdVisitor;

        impl<'de> Visitor<'de> for IdVisitor {
            type Value = Id<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer or a string")
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Id::Int(v))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                i64::try_from(v)
                    .map(Id::Int)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }

            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Id::Str(Str(Cow::Borrowed(v))))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Id::Str(Str(Cow::Owned(v.to_owned()))))
            }
        }

        d.deserialize_any(IdVisitor)
    }
}

/// `args` in file order (a map would lose the order). Most events keep one or two (their
/// `External id`, `correlation`): those are held inline, sparing an allocation per event.
#[derive(Default)]
pub(super) struct Args<'a> {
    pub kept: SmallVec<[(Str<'a>, Value); 2]>,
    /// Values of kept keys skipped because they nest deeper than
    /// [`MAX_VALUE_DEPTH`](omniprof_trace::MAX_VALUE_DEPTH).
    pub too_deep: u64,
}

impl Args<'_> {
    /// The first value of `key`.
    pub(super) fn get(&self, key: &str) -> Option<&Value> {
        self.kept.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
    }
}

/// Reads `args`, converting only the values of the keys `keep` accepts.
struct ArgsSeed<F> {
    keep: F,
}

impl<'de, F: Fn(&str) -> bool> DeserializeSeed<'de> for ArgsSeed<F> {
    type Value = Args<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Args<'de>, D::Error> {
        struct ArgsVisitor<F>(F);

        impl<'de, F: Fn(&str) -> bool> Visitor<'de> for ArgsVisitor<F> {
            type Value = Args<'de>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }

            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Args::default())
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut args = Args::default();
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    if (self.0)(&key) {
                        // A value too deep for other readers is skipped and counted: one
                        // such arg does not make the whole trace unreadable.
                        let too_deep = Cell::new(false);
                        let value = map.next_value_seed(BoundedValue::new(&too_deep))?;
                        match too_deep.get() {
                            false => args.kept.push((key, value)),
                            true => args.too_deep += 1,
                        }
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(args)
            }
        }

        d.deserialize_any(ArgsVisitor(self.keep))
    }
}

/// Microseconds, as the text of a JSON number, to nanoseconds.
///
/// Plain decimals are converted digit by digit, so `4385904291872.315` is exactly
/// 4385904291872315 ns (a round trip through `f64` is not guaranteed to be); digits past the
/// third decimal round half away from zero. Exponents fall back to `f64`. `None` when the
/// text is not a number or the result does not fit in `i64`.
pub(super) fn micros_to_ns(text: &str) -> Option<i64> {
    plain_micros_to_ns(text).or_else(|| any_micros_to_ns(text))
}

/// [`micros_to_ns`] for what every writer writes, in one pass over the text: an optional
/// minus, at most 15 integer digits (so that nothing can overflow) and a fraction; `None`
/// for anything else, which [`any_micros_to_ns`] judges.
fn plain_micros_to_ns(text: &str) -> Option<i64> {
    plain_micros_at(text.as_bytes(), 0)
        .filter(|&(end, _)| end == text.len())
        .map(|(_, ns)| ns)
}

/// The plain decimal of [`plain_micros_to_ns`] that starts at `at` and runs as far as its
/// digits do: where it ends (its text read by [`plain_micros_to_ns`] is the nanoseconds
/// given), or `None` when there is none there. The one-pass parser converts `ts` and `dur`
/// with it as it reads them.
#[inline(always)]
pub(super) fn plain_micros_at(bytes: &[u8], mut at: usize) -> Option<(usize, i64)> {
    let negative = bytes.get(at) == Some(&b'-');
    at += usize::from(negative);
    let int_start = at;
    let mut ns: i64 = 0;
    while let Some(d) = digit_at(bytes, at) {
        // Wrapping: more than 15 digits are refused below, whatever the value came to.
        ns = ns.wrapping_mul(10).wrapping_add(i64::from(d));
        at += 1;
    }
    let int_digits = at - int_start;
    if int_digits == 0 || int_digits > 15 {
        return None;
    }
    let mut decimals = 0;
    let mut round_up = false;
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        while let Some(d) = digit_at(bytes, at) {
            match decimals {
                0..=2 => ns = ns * 10 + i64::from(d),
                3 => round_up = d >= 5,
                _ => {}
            }
            decimals += 1;
            at += 1;
        }
    }
    // Scaled by a table rather than a loop: one multiplication.
    const SCALE: [i64; 4] = [1000, 100, 10, 1];
    ns = ns * SCALE[decimals.min(3)] + i64::from(round_up);
    Some((at, if negative { -ns } else { ns }))
}

/// The value of the ASCII digit at `at`, if there is one.
#[inline(always)]
pub(super) fn digit_at(bytes: &[u8], at: usize) -> Option<u8> {
    bytes
        .get(at)
        .and_then(|b| b.checked_sub(b'0'))
        .filter(|d| *d < 10)
}

/// [`micros_to_ns`] for any text, exponents and the edges of `i64`'s range included.
fn any_micros_to_ns(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if digits.contains(['e', 'E']) {
        let ns = (text.parse::<f64>().ok()? * 1000.0).round();
        // The cast saturates, so range-check first; 2^63 itself is exactly representable.
        return (ns.is_finite() && ns.abs() < 9_223_372_036_854_775_808.0).then_some(ns as i64);
    }
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut ns: i64 = 0;
    for b in int.bytes() {
        ns = ns.checked_mul(10)?.checked_add(i64::from(b - b'0'))?;
    }
    let frac = frac.as_bytes();
    for i in 0..3 {
        let digit = frac.get(i).map_or(0, |b| i64::from(b - b'0'));
        ns = ns.checked_mul(10)?.checked_add(digit)?;
    }
    if frac.get(3).is_some_and(|&b| b >= b'5') {
        ns = ns.checked_add(1)?;
    }
    Some(if negative { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_convert_exactly() {
        assert_eq!(
            micros_to_ns("4385904291872.315"),
            Some(4_385_904_291_872_315)
        );
        assert_eq!(micros_to_ns("1234.567"), Some(1_234_567));
        assert_eq!(micros_to_ns("0.000"), Some(0));
        assert_eq!(micros_to_ns("12"), Some(12_000));
        assert_eq!(micros_to_ns("12.5"), Some(12_500));
        assert_eq!(micros_to_ns("-3.25"), Some(-3_250));
        assert_eq!(micros_to_ns("1.0004"), Some(1_000));
        assert_eq!(micros_to_ns("1.0005"), Some(1_001));
        assert_eq!(micros_to_ns("-1.0005"), Some(-1_001));
        assert_eq!(micros_to_ns("1.5e3"), Some(1_500_000));
        assert_eq!(micros_to_ns("2E-3"), Some(2));
        assert_eq!(micros_to_ns("9223372036854775.807"), Some(i64::MAX));
        assert_eq!(micros_to_ns("9223372036854775.808"), None);
        assert_eq!(micros_to_ns("1e300"), None);
        assert_eq!(micros_to_ns("\"abc\""), None);
        assert_eq!(micros_to_ns(""), None);
        assert_eq!(micros_to_ns(".5"), None);
    }

    #[test]
    fn the_one_pass_conversion_agrees_with_the_general_one() {
        let texts = [
            "0",
            "-0",
            "7",
            "12.5",
            "1234.567",
            "1.0004",
            "1.0005",
            "-1.0005",
            "0.0009",
            "-0.0005",
            "999999999999999.9995",
            "9999999999999999",
            "1.",
            "-",
            "",
            "1.5e3",
            "2E-3",
            "1.2.3",
            "12a",
            " 1",
            "\"1\"",
            "00.5",
            "123456789012345.123456789",
        ];
        for text in texts {
            let plain = plain_micros_to_ns(text);
            if plain.is_some() {
                assert_eq!(plain, any_micros_to_ns(text), "{text:?}");
            }
            assert_eq!(micros_to_ns(text), any_micros_to_ns(text), "{text:?}");
        }
        assert_eq!(
            plain_micros_to_ns("999999999999999.9995"),
            Some(999_999_999_999_999_999 + 1)
        );
        assert_eq!(plain_micros_to_ns("1.5e3"), None);
        assert_eq!(plain_micros_to_ns("9999999999999999"), None);
    }

    #[test]
    fn events_borrow_and_keep_arg_order() {
        let text = r#"{"ph": "X", "cat": "cpu_op", "name": "a\"b", "pid": "Spans", "tid": 7, "ts": 1.5,
            "args": {"z": 1, "a": [true, null, "s"], "m": {"y": 1, "x": 2.5}, "u": 18446744073709551615}}"#;
        let mut ev: RawEvent = serde_json::from_str(text).unwrap();
        assert!(matches!(ev.ph.as_ref().unwrap().0, Cow::Borrowed("X")));
        assert_eq!(ev.name.as_deref(), Some("a\"b"));
        assert!(matches!(ev.pid, Some(Id::Str(ref s)) if &**s == "Spans"));
        assert!(matches!(ev.tid, Some(Id::Int(7))));
        assert_eq!(ev.ts.unwrap().0, "1.5");
        assert!(ev.dur.is_none());
        let args = ev.args(&ArgFilter::All).unwrap();
        let keys: Vec<&str> = args.kept.iter().map(|(k, _)| &**k).collect();
        assert_eq!(keys, ["z", "a", "m", "u"]);
        assert_eq!(args.get("z"), Some(&Value::Int(1)));
        assert_eq!(
            args.get("a"),
            Some(&Value::List(vec![
                Value::Bool(true),
                Value::Null,
                Value::from("s")
            ]))
        );
        assert_eq!(
            args.get("m"),
            Some(&Value::Map(vec![
                ("y".into(), Value::Int(1)),
                ("x".into(), Value::Float(2.5))
            ]))
        );
        assert_eq!(args.get("u"), Some(&Value::UInt(u64::MAX)));
        let some = ev.args(&ArgFilter::Only(vec!["u".into()])).unwrap();
        assert_eq!(some.kept.len(), 1);
    }

    #[test]
    fn args_must_be_an_object_or_null() {
        let null = r#"{"ph": "X", "cat": "cpu_op", "args": null}"#;
        let mut ev: RawEvent = serde_json::from_str(null).unwrap();
        assert!(ev.args(&ArgFilter::All).unwrap().kept.is_empty());

        let list = r#"{"ph": "X", "cat": "cpu_op", "args": [1]}"#;
        let mut ev: RawEvent = serde_json::from_str(list).unwrap();
        let Err(err) = ev.args(&ArgFilter::All) else {
            panic!("a list is not args");
        };
        assert!(err.starts_with("`args`: invalid type: sequence"), "{err}");
    }

    #[test]
    fn args_keys_follow_what_the_mapper_reads() {
        let of = |ph, cat| ArgKeys::of(Some(ph), cat);
        assert_eq!(of("X", Some("Trace")), ArgKeys::Span);
        assert_eq!(
            of("X", Some("cpu_op")),
            ArgKeys::Activity(ActivityType::CpuOp)
        );
        assert_eq!(
            of("C", Some("gpu_pm_counter")),
            ArgKeys::Activity(ActivityType::GpuPmCounter)
        );
        assert_eq!(of("X", Some("mystery")), ArgKeys::None);
        assert_eq!(of("X", None), ArgKeys::None);
        assert_eq!(of("M", None), ArgKeys::Row);
        assert_eq!(of("f", Some("ac2g")), ArgKeys::None);
        assert_eq!(ArgKeys::of(None, Some("cpu_op")), ArgKeys::None);

        let only = ArgFilter::Only(vec!["Input Dims".into()]);
        let op = ArgKeys::Activity(ActivityType::CpuOp);
        assert!(op.keeps("External id", &only) && op.keeps("Input Dims", &only));
        assert!(!op.keeps("Input type", &only));
        assert!(ArgKeys::Activity(ActivityType::GpuPmCounter).keeps("Input type", &only));
        assert!(ArgKeys::Row.keeps("sort_index", &only) && !ArgKeys::Span.keeps("name", &only));
        let kept = KeptArgs::new(only.clone());
        for key in [
            "External id",
            "correlation",
            "Input Dims",
            "Input type",
            "Input Dimz",
            "x",
        ] {
            for keys in [
                op,
                ArgKeys::Activity(ActivityType::GpuPmCounter),
                ArgKeys::Row,
                ArgKeys::Span,
            ] {
                assert_eq!(
                    kept.of(keys).keeps(key),
                    keys.keeps(key, &only),
                    "{keys:?} {key}"
                );
            }
        }
        let long = "k".repeat(70);
        let all = KeptArgs::new(ArgFilter::All);
        assert!(all.of(op).keeps(&long) && all.of(op).keeps("x"));
        let only_long = KeptArgs::new(ArgFilter::Only(vec![long.clone()]));
        assert!(only_long.of(op).keeps(&long) && !only_long.of(op).keeps("x"));
    }

    #[test]
    fn every_type_is_found_by_its_exact_name() {
        for t in ActivityType::ALL {
            assert!(t.name().len() <= MAX_NAME, "{t:?}");
            assert_eq!(activity_type(t.name()), Some(t));
        }
        assert_eq!(activity_type(&"x".repeat(MAX_NAME + 5)), None);
    }

    #[test]
    fn exact_cat_names_and_generic_names_both_parse() {
        assert_eq!(
            activity_type("kernel"),
            Some(ActivityType::ConcurrentKernel)
        );
        assert_eq!(activity_type("Runtime"), Some(ActivityType::CudaRuntime));
        assert_eq!(activity_type("Trace"), None);
        assert_eq!(activity_type(""), None);
    }

    #[test]
    fn ids_accept_integers_and_strings_only() {
        let id = |t: &str| serde_json::from_str::<Id>(t).map(|id| id.as_int());
        assert_eq!(id("-3").unwrap(), Some(-3));
        assert_eq!(id("\"12\"").unwrap(), Some(12));
        assert_eq!(id("\"GPU 0 Counters\"").unwrap(), None);
        assert!(id("1.5").is_err());
        assert!(id("18446744073709551615").is_err());
    }
}
