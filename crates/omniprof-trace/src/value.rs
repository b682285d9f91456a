//! Typed values for activity `args` and trace metadata: the values of JSON.
//!
//! ```
//! use omniprof_trace::Value;
//!
//! let shapes = Value::from(vec![Value::from(vec![64i64, 64]), Value::from(vec![64i64, 64])]);
//! assert_eq!(shapes.to_json(), "[[64, 64], [64, 64]]");
//! let info: Value = [("rank", Value::from(0i64)), ("backend", Value::from("nccl"))].into_iter().collect();
//! assert_eq!(info.to_json(), r#"{"rank": 0, "backend": "nccl"}"#);
//! assert_eq!(info.get("rank"), Some(&Value::Int(0)));
//!
//! // JSON text parses to the same typed value, objects in the order they are written.
//! let parsed: Value = serde_json::from_str(r#"{"rank": 0, "backend": "nccl"}"#)?;
//! assert_eq!(parsed, info);
//! // JSON has one kind of number: numbers are equal by value, whatever their variant.
//! assert_eq!(Value::UInt(3), Value::Int(3));
//! assert_eq!(Value::Float(3.0), Value::Int(3));
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};

/// One `args` or metadata value.
///
/// Equality is JSON's, so that a value equals what reading it back from a written trace
/// gives: numbers compare by value across [`Int`](Value::Int), [`UInt`](Value::UInt) and
/// [`Float`](Value::Float) (`UInt(3)` is written `3` and reads back as `Int(3)`; `Float(3.0)`
/// is written `3.0` and reads back as itself). Map entries compare in order. A non-finite `Float` is written as `null` (JSON has no such
/// number) and so reads back as [`Null`](Value::Null).
#[derive(Clone, Debug)]
pub enum Value {
    /// JSON `null`.
    Null,
    /// A signed integer.
    Int(i64),
    /// An unsigned integer (above `i64::MAX` too).
    UInt(u64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(Arc<str>),
    /// A JSON array.
    List(Vec<Value>),
    /// A JSON object, its entries in the order they are written (duplicate keys kept).
    Map(Vec<(String, Value)>),
}

impl Value {
    /// The value as an `i64`, when it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Self::Int(v) => Some(v),
            Self::UInt(v) => i64::try_from(v).ok(),
            Self::Bool(v) => Some(v as i64),
            _ => None,
        }
    }

    /// The value as an `f64`, when it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::Int(v) => Some(v as f64),
            Self::UInt(v) => Some(v as f64),
            Self::Float(v) => Some(v),
            _ => None,
        }
    }

    /// The text, when it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value of `key` in a [`Value::Map`].
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Self::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Self::Int(v.into())
    }
}
impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Self::UInt(v)
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Self::UInt(v.into())
    }
}
impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Self::UInt(v as u64)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Self::Float(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Self::Bool(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Self::Str(v.into())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Self::Str(v.into())
    }
}
impl<K: Into<String>, V: Into<Value>> FromIterator<(K, V)> for Value {
    /// A [`Value::Map`] of the entries, in iteration order.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        Self::Map(
            entries
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Self {
        Self::List(v.into_iter().map(Into::into).collect())
    }
}

impl From<&serde_json::Value> for Value {
    /// The typed value; an object's entries come in the order of `serde_json`'s map (sorted
    /// by key unless its `preserve_order` feature is on): deserialize a [`Value`] from the
    /// text instead to keep the text's order.
    fn from(v: &serde_json::Value) -> Self {
        use serde_json::Value as J;
        match v {
            J::Null => Self::Null,
            J::Bool(b) => Self::Bool(*b),
            J::Number(n) => n
                .as_i64()
                .map(Self::Int)
                .or_else(|| n.as_u64().map(Self::UInt))
                .unwrap_or_else(|| Self::Float(n.as_f64().unwrap_or(f64::NAN))),
            J::String(s) => Self::Str(s.as_str().into()),
            J::Array(items) => Self::List(items.iter().map(Self::from).collect()),
            J::Object(entries) => Self::Map(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), Self::from(v)))
                    .collect(),
            ),
        }
    }
}

/// A number as the one kind JSON has: integers (and integral floats) exactly, other floats
/// as themselves.
#[derive(PartialEq)]
enum Number {
    Integer(i128),
    Float(f64),
}

impl Value {
    fn number(&self) -> Option<Number> {
        match *self {
            Self::Int(v) => Some(Number::Integer(v.into())),
            Self::UInt(v) => Some(Number::Integer(v.into())),
            // Integral floats below 2^127 convert to `i128` exactly (and `fract` of a
            // non-finite float is NaN).
            Self::Float(v) if v.fract() == 0.0 && v.abs() < 1e38 => {
                Some(Number::Integer(v as i128))
            }
            Self::Float(v) => Some(Number::Float(v)),
            _ => None,
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Null, Self::Null) => true,
            (Self::Bool(a), Self::Bool(b)) => a == b,
            (Self::Str(a), Self::Str(b)) => a == b,
            (Self::List(a), Self::List(b)) => a == b,
            (Self::Map(a), Self::Map(b)) => a == b,
            (a, b) => a.number().is_some_and(|n| Some(n) == b.number()),
        }
    }
}

/// The deepest nesting of lists and maps a [`Value`] may have when read from JSON: every
/// reader of the traces omniprof writes reads that much (serde_json stops at 128 levels,
/// counting what encloses the value; Perfetto aborts far deeper), so the reader and the
/// plugin trace builder accept no more.
///
/// ```
/// use omniprof_trace::{Value, MAX_VALUE_DEPTH};
///
/// let deep = |n| format!("{}{}", "[".repeat(n), "]".repeat(n));
/// assert!(serde_json::from_str::<Value>(&deep(MAX_VALUE_DEPTH)).is_ok());
/// let err = serde_json::from_str::<Value>(&deep(MAX_VALUE_DEPTH + 1)).unwrap_err();
/// assert!(err.to_string().contains("nested deeper than 32 levels"), "{err}");
/// ```
pub const MAX_VALUE_DEPTH: usize = 32;

/// Any JSON value, typed: an integer as [`Value::Int`] when it fits `i64`, else
/// [`Value::UInt`]; any other number as the nearest [`Value::Float`] (a number beyond `f64`'s
/// range is an error); an object as a [`Value::Map`] in the text's order. A value nested
/// deeper than [`MAX_VALUE_DEPTH`] is an error.
impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let too_deep = Cell::new(false);
        let value = BoundedValue::new(&too_deep).deserialize(d)?;
        match too_deep.get() {
            false => Ok(value),
            true => Err(de::Error::custom(format!(
                "nested deeper than {MAX_VALUE_DEPTH} levels"
            ))),
        }
    }
}

/// Why JSON text is not a [`Value`].
#[derive(Debug, thiserror::Error)]
pub enum FromJsonError {
    /// Lists and maps nest deeper than [`MAX_VALUE_DEPTH`].
    #[error("nested deeper than {MAX_VALUE_DEPTH} levels")]
    TooDeep,
    /// Not JSON, or a number beyond `f64`'s range.
    #[error("{0}")]
    Invalid(#[from] serde_json::Error),
}

impl Value {
    /// Parses JSON text, telling a value nested too deep from text that is not JSON.
    ///
    /// ```
    /// use omniprof_trace::{FromJsonError, Value};
    ///
    /// assert_eq!(Value::from_json("[1, 2]").unwrap(), Value::from(vec![1i64, 2]));
    /// assert!(matches!(Value::from_json("1e400"), Err(FromJsonError::Invalid(_))));
    /// let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    /// assert!(matches!(Value::from_json(&deep), Err(FromJsonError::TooDeep)));
    /// ```
    pub fn from_json(text: &str) -> Result<Value, FromJsonError> {
        let too_deep = Cell::new(false);
        let mut de = serde_json::Deserializer::from_str(text);
        let value = BoundedValue::new(&too_deep).deserialize(&mut de)?;
        de.end()?;
        match too_deep.get() {
            false => Ok(value),
            true => Err(FromJsonError::TooDeep),
        }
    }
}

/// Reads a [`Value`] to at most [`MAX_VALUE_DEPTH`] levels: what lies deeper is skipped without
/// being converted (and without recursion, so any depth is safe) and `too_deep` is set, so
/// that a caller can drop the value and go on reading.
pub struct BoundedValue<'a> {
    depth: usize,
    too_deep: &'a Cell<bool>,
}

impl<'a> BoundedValue<'a> {
    /// A reader at the top level that sets `too_deep` when it skips what lies deeper.
    pub fn new(too_deep: &'a Cell<bool>) -> Self {
        Self { depth: 0, too_deep }
    }

    fn inner(&self) -> Self {
        Self {
            depth: self.depth + 1,
            too_deep: self.too_deep,
        }
    }
}

impl<'de> DeserializeSeed<'de> for BoundedValue<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for BoundedValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::UInt(v), Value::Int))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.into()))
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Value, S::Error> {
        if self.depth == MAX_VALUE_DEPTH {
            self.too_deep.set(true);
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        }
        // No capacity up front: empty lists (`"Input Strides": [[], []]`) are common.
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.inner())? {
            items.push(item);
        }
        Ok(Value::List(items))
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Value, M::Error> {
        if self.depth == MAX_VALUE_DEPTH {
            self.too_deep.set(true);
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        }
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            entries.push((key, map.next_value_seed(self.inner())?));
        }
        Ok(Value::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn json_text_parses_to_typed_values_in_order() {
        let v = parse(
            r#"{"z": null, "a": [true, -1, 18446744073709551615, 2.5, "s"], "m": {"y": 1, "x": {}}}"#,
        );
        let Value::Map(entries) = &v else {
            panic!("{v:?}");
        };
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["z", "a", "m"]);
        // Variants, not only equality (which is by value).
        assert!(matches!(entries[0].1, Value::Null));
        let Value::List(items) = &entries[1].1 else {
            panic!("{v:?}");
        };
        assert!(matches!(
            items[..],
            [
                Value::Bool(true),
                Value::Int(-1),
                Value::UInt(u64::MAX),
                Value::Float(2.5),
                Value::Str(_)
            ]
        ));
        let nested = v.get("m").unwrap();
        assert!(matches!(nested.get("y"), Some(Value::Int(1))));
        assert!(matches!(nested.get("x"), Some(Value::Map(e)) if e.is_empty()));
        // Beyond u64 is the nearest float; beyond f64 is an error.
        assert!(matches!(parse("1e20"), Value::Float(f) if f == 1e20));
        assert!(matches!(parse("123456789012345678901"), Value::Float(_)));
        assert!(serde_json::from_str::<Value>("1e400").is_err());
    }

    #[test]
    fn numbers_are_equal_by_value() {
        assert_eq!(Value::UInt(7), Value::Int(7));
        assert_eq!(Value::Float(-0.0), Value::Int(0));
        assert_eq!(Value::Float(1e15), Value::UInt(1_000_000_000_000_000));
        assert_eq!(Value::Float(2f64.powi(64)), Value::Float(2f64.powi(64)));
        assert_ne!(Value::Float(2f64.powi(64)), Value::UInt(u64::MAX));
        assert_ne!(Value::Float(9.5), Value::Int(9));
        assert_ne!(Value::Int(-1), Value::UInt(u64::MAX));
        assert_ne!(Value::Float(f64::NAN), Value::Float(f64::NAN));
        assert_eq!(Value::Float(f64::INFINITY), Value::Float(f64::INFINITY));
        assert_ne!(Value::Int(1), Value::Bool(true));
        assert_ne!(Value::Int(1), Value::from("1"));
        assert_ne!(Value::Null, Value::from(vec![0i64; 0]));
    }
}
