//! One element of `traceEvents` as serde sees it, borrowing from the event's text, and the
//! exact conversion of `ts` / `dur` to nanoseconds.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::value::Value;

/// The fields of an event the reader uses; others (`s`, `bp`, ...) are ignored.
#[derive(Deserialize)]
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
    pub ts: Option<&'a RawValue>,
    #[serde(borrow)]
    pub dur: Option<&'a RawValue>,
    /// The flow id of `s` / `f` events.
    #[serde(borrow)]
    pub id: Option<Id<'a>>,
    /// Kept as text and converted on demand ([`RawEvent::args`]), so that the args a
    /// consumer does not want are only skipped over, never converted.
    #[serde(borrow)]
    pub args: Option<&'a RawValue>,
}

impl<'a> RawEvent<'a> {
    /// The `args` whose keys `keep` accepts, in file order.
    pub fn args(&self, keep: impl Fn(&str) -> bool) -> Result<Args<'a>, String> {
        let Some(raw) = self.args else {
            return Ok(Args::default());
        };
        let mut de = serde_json::Deserializer::from_str(raw.get());
        ArgsSeed { keep }
            .deserialize(&mut de)
            .map_err(|e| format!("`args`: {e}"))
    }
}

/// A string that borrows from the input unless it contained escapes. (`Option<Cow<str>>`
/// would always allocate: serde only borrows a `Cow` that is the field's whole type.)
pub(super) struct Str<'a>(Cow<'a, str>);

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

/// A `pid`, `tid` or flow `id`: an integer, or a string in synthetic rows (`"Spans"`).
pub(super) enum Id<'a> {
    Int(i64),
    Str(Str<'a>),
}

impl Id<'_> {
    /// The integer, also from an integer-valued string (`"12"`).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(v) => Some(*v),
            Self::Str(s) => s.parse().ok(),
        }
    }

    /// The id as text (a span's `tid` is its name).
    pub fn to_text(&self) -> String {
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

/// `args` in file order (a map would lose the order).
#[derive(Default)]
pub(super) struct Args<'a>(pub Vec<(Str<'a>, Value)>);

impl Args<'_> {
    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
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
                let mut args = Vec::new();
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    if (self.0)(&key) {
                        let ArgValue(value) = map.next_value()?;
                        args.push((key, value));
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Args(args))
            }
        }

        d.deserialize_any(ArgsVisitor(self.keep))
    }
}

/// An `args` value, converted as `Value::from(&serde_json::Value)` would, without building
/// the intermediate `serde_json::Value` except for nested objects.
struct ArgValue(Value);

impl<'de> Deserialize<'de> for ArgValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ValueVisitor;

        impl<'de> Visitor<'de> for ValueVisitor {
            type Value = ArgValue;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ArgValue, E> {
                Ok(ArgValue(Value::Bool(v)))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ArgValue, E> {
                Ok(ArgValue(Value::Int(v)))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ArgValue, E> {
                Ok(ArgValue(
                    i64::try_from(v).map_or(Value::UInt(v), Value::Int),
                ))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ArgValue, E> {
                Ok(ArgValue(Value::Float(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ArgValue, E> {
                Ok(ArgValue(Value::Str(Arc::from(v))))
            }

            fn visit_unit<E: de::Error>(self) -> Result<ArgValue, E> {
                Ok(ArgValue(Value::from(&serde_json::Value::Null)))
            }

            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<ArgValue, S::Error> {
                // No capacity up front: empty lists (`"Input Strides": [[], []]`) are common.
                let mut items = Vec::new();
                while let Some(ArgValue(item)) = seq.next_element()? {
                    items.push(item);
                }
                Ok(ArgValue(Value::List(items)))
            }

            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<ArgValue, M::Error> {
                let object =
                    serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(ArgValue(Value::from(&object)))
            }
        }

        d.deserialize_any(ValueVisitor)
    }
}

/// Microseconds, as the text of a JSON number, to nanoseconds.
///
/// Plain decimals are converted digit by digit, so `4385904291872.315` is exactly
/// 4385904291872315 ns (a round trip through `f64` is not guaranteed to be); digits past the
/// third decimal round half away from zero. Exponents fall back to `f64`. `None` when the
/// text is not a number or the result does not fit in `i64`.
pub(super) fn micros_to_ns(text: &str) -> Option<i64> {
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
    fn events_borrow_and_keep_arg_order() {
        let text = r#"{"ph": "X", "name": "a\"b", "pid": "Spans", "tid": 7, "ts": 1.5,
            "args": {"z": 1, "a": [true, null, "s"], "m": {"y": 1, "x": 2.5}, "u": 18446744073709551615}}"#;
        let ev: RawEvent = serde_json::from_str(text).unwrap();
        assert!(matches!(ev.ph.as_ref().unwrap().0, Cow::Borrowed("X")));
        assert_eq!(ev.name.as_deref(), Some("a\"b"));
        assert!(matches!(ev.pid, Some(Id::Str(ref s)) if &**s == "Spans"));
        assert!(matches!(ev.tid, Some(Id::Int(7))));
        assert_eq!(ev.ts.unwrap().get(), "1.5");
        assert!(ev.dur.is_none());
        let args = ev.args(|_| true).unwrap();
        let keys: Vec<&str> = args.0.iter().map(|(k, _)| &**k).collect();
        assert_eq!(keys, ["z", "a", "m", "u"]);
        assert_eq!(args.get("z"), Some(&Value::Int(1)));
        assert_eq!(
            args.get("a"),
            Some(&Value::List(vec![
                Value::Bool(true),
                Value::json("null"),
                Value::from("s")
            ]))
        );
        assert_eq!(args.get("m"), Some(&Value::json(r#"{"x":2.5,"y":1}"#)));
        assert_eq!(args.get("u"), Some(&Value::UInt(u64::MAX)));
        let some = ev.args(|k| k == "u").unwrap();
        assert_eq!(some.0.len(), 1);
    }

    #[test]
    fn args_must_be_an_object_or_null() {
        let ev: RawEvent = serde_json::from_str(r#"{"args": null}"#).unwrap();
        assert!(ev.args(|_| true).unwrap().0.is_empty());
        let ev: RawEvent = serde_json::from_str(r#"{"args": [1]}"#).unwrap();
        let Err(err) = ev.args(|_| true) else {
            panic!("a list is not args");
        };
        assert!(err.starts_with("`args`: invalid type: sequence"), "{err}");
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
