//! Interned range names. The hot path stores a 24-bit id instead of a string; the id is
//! resolved back to the name only when buffers are drained.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::hash::FastMap;

/// Ids are 24 bits wide in a record; the last one stands for every name past the limit.
const MAX_ID: u32 = (1 << 24) - 1;
const OVERFLOW_NAME: &str = "<name table full>";

/// An interned name. Creating one takes a global lock once; copying and recording it is free.
///
/// ```
/// use omniprof::Name;
///
/// let a = Name::new("forward");
/// assert_eq!(a, Name::new("forward"));
/// assert_eq!(&*a.resolve(), "forward");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Name(u32);

#[derive(Default)]
struct Table {
    ids: Mutex<HashMap<Arc<str>, u32>>,
    names: RwLock<Vec<Arc<str>>>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(Table::default)
}

impl Name {
    /// Interns `name`.
    pub fn new(name: &str) -> Self {
        let table = table();
        let mut ids = table.ids.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = ids.get(name) {
            return Self(id);
        }
        let mut names = table.names.write().unwrap_or_else(|e| e.into_inner());
        let next = names.len() as u32;
        if next >= MAX_ID {
            return Self(MAX_ID);
        }
        let name: Arc<str> = name.into();
        names.push(name.clone());
        ids.insert(name, next);
        Self(next)
    }

    /// The name as a string.
    pub fn resolve(self) -> Arc<str> {
        let names = table().names.read().unwrap_or_else(|e| e.into_inner());
        names
            .get(self.0 as usize)
            .cloned()
            .unwrap_or_else(|| OVERFLOW_NAME.into())
    }

    pub(crate) const fn id(self) -> u32 {
        self.0
    }

    /// The name's id, for a caller across an FFI boundary that caches it (the PyTorch
    /// observer caches one per op name pointer instead of hashing the name per op).
    pub const fn to_raw(self) -> u32 {
        self.0
    }

    /// The name with id `id`, as [`to_raw`](Self::to_raw) returned it. An id that was never
    /// handed out names `<name table full>`.
    pub const fn from_raw(id: u32) -> Self {
        Self(id)
    }
}

/// Resolves many ids at once under one lock (used when draining).
pub(crate) fn resolver() -> impl Fn(u32) -> Arc<str> {
    let names = table()
        .names
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    move |id| {
        names
            .get(id as usize)
            .cloned()
            .unwrap_or_else(|| OVERFLOW_NAME.into())
    }
}

/// A name fixed at a call site, interned on first use (what [`scope!`](crate::scope) uses).
pub struct StaticName {
    text: &'static str,
    /// `id + 1`, or 0 before first use.
    cached: AtomicU32,
}

impl StaticName {
    pub const fn new(text: &'static str) -> Self {
        Self {
            text,
            cached: AtomicU32::new(0),
        }
    }

    #[inline]
    pub fn get(&self) -> Name {
        match self.cached.load(Ordering::Relaxed) {
            0 => {
                let name = Name::new(self.text);
                self.cached.store(name.0 + 1, Ordering::Relaxed);
                name
            }
            id => Name(id - 1),
        }
    }
}

/// Anything a range can be named with.
pub trait IntoName {
    fn into_name(self) -> Name;
}

impl IntoName for Name {
    #[inline(always)]
    fn into_name(self) -> Name {
        self
    }
}

impl IntoName for &StaticName {
    #[inline(always)]
    fn into_name(self) -> Name {
        self.get()
    }
}

thread_local! {
    /// Per-thread cache of names given as strings, so only a thread's first use of a name
    /// takes the global lock.
    static LOCAL_NAMES: RefCell<FastMap<Box<str>, Name>> = RefCell::new(FastMap::default());
}

impl IntoName for &str {
    #[inline]
    fn into_name(self) -> Name {
        LOCAL_NAMES
            .try_with(|cache| {
                if let Some(&name) = cache.borrow().get(self) {
                    return name;
                }
                let name = Name::new(self);
                cache.borrow_mut().insert(self.into(), name);
                name
            })
            .unwrap_or_else(|_| Name::new(self))
    }
}

impl IntoName for &String {
    #[inline]
    fn into_name(self) -> Name {
        self.as_str().into_name()
    }
}

impl IntoName for String {
    #[inline]
    fn into_name(self) -> Name {
        self.as_str().into_name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable_across_threads() {
        let a = Name::new("interning_is_stable");
        let b = std::thread::spawn(|| "interning_is_stable".into_name())
            .join()
            .unwrap();
        assert_eq!(a, b);
        static S: StaticName = StaticName::new("interning_is_stable");
        assert_eq!(S.get(), a);
        assert_eq!(S.get(), a);
        assert_eq!(&*resolver()(a.id()), "interning_is_stable");
    }
}
