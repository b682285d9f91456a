//! Typed values for activity `args` and trace metadata.
//!
//! ```
//! use omniprof_trace::Value;
//!
//! let shapes = Value::from(vec![Value::from(vec![64i64, 64]), Value::from(vec![64i64, 64])]);
//! assert_eq!(shapes.to_json(), "[[64, 64], [64, 64]]");
//! assert_eq!(Value::json(r#"{"rank": 0}"#).to_json(), r#"{"rank": 0}"#);
//! assert_eq!(Value::json("not json").to_json(), r#""not json""#);
//! let info: Value = [("rank", Value::from(0i64)), ("backend", Value::from("nccl"))].into_iter().collect();
//! assert_eq!(info.to_json(), r#"{"rank": 0, "backend": "nccl"}"#);
//! assert_eq!(info.get("rank"), Some(&Value::Int(0)));
//! ```

use std::sync::Arc;

/// One `args` or metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    Str(Arc<str>),
    List(Vec<Value>),
    /// A JSON object, its entries in the order they are written.
    Map(Vec<(String, Value)>),
    /// A raw JSON fragment, written verbatim when it is valid JSON and as a string otherwise.
    Json(Arc<str>),
}

impl Value {
    /// A raw JSON fragment (validated when written).
    pub fn json(fragment: impl Into<Arc<str>>) -> Self {
        Self::Json(fragment.into())
    }

    /// The value as JSON text, exactly as the Chrome writer emits it.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        crate::export::json::write_value(&mut out, self);
        String::from_utf8(out).expect("the JSON writer emits UTF-8")
    }

    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Self::Int(v) => Some(v),
            Self::UInt(v) => i64::try_from(v).ok(),
            Self::Bool(v) => Some(v as i64),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::Int(v) => Some(v as f64),
            Self::UInt(v) => Some(v as f64),
            Self::Float(v) => Some(v),
            _ => None,
        }
    }

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
    fn from(v: &serde_json::Value) -> Self {
        use serde_json::Value as J;
        match v {
            J::Bool(b) => Self::Bool(*b),
            J::Number(n) => n
                .as_i64()
                .map(Self::Int)
                .or_else(|| n.as_u64().map(Self::UInt))
                .unwrap_or_else(|| Self::Float(n.as_f64().unwrap_or(f64::NAN))),
            J::String(s) => Self::Str(s.as_str().into()),
            J::Array(items) => Self::List(items.iter().map(Self::from).collect()),
            J::Null | J::Object(_) => Self::Json(v.to_string().into()),
        }
    }
}
