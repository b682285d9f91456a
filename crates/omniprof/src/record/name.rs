//! Interned range names. The hot path stores a 24-bit id instead of a string; the id is
//! resolved back to the name only when buffers are drained.
//!
//! Two kinds of names, so that memory stays bounded in a long-lived process:
//! - *pinned* names ([`Name::new`], [`StaticName`]): the caller may keep the id for the life
//!   of the process (a thread caches one per op name it pushed), so they are never freed; they
//!   may take [`PINNED_BYTES`] in all.
//! - *transient* names (ranges named with a `&str` or `String`): interned in the current of
//!   two generations, each holding at most [`GENERATION_BYTES`]. When a session starts and
//!   the current generation has grown past [`RETIRE_BYTES`] or [`RETIRE_NAMES`], it becomes
//!   the previous one and the one before is freed: names no session needs any more are
//!   reclaimed, while a record made with an id cached just before the switch still resolves.
//!   Each thread's cache of transient names is dropped when it sees the switch.
//!
//! A range whose name does not fit is recorded as `<name table full>` and counted; the
//! session reports the count in its trace (`dropped_names`) and the log.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::hash::FastMap;

/// Ids are 24 bits wide in a record: bit 23 marks a transient name, bit 22 its generation.
const TRANSIENT: u32 = 1 << 23;
const GENERATION_BIT: u32 = 1 << 22;
const INDEX_MASK: u32 = GENERATION_BIT - 1;
/// The id of every name that did not fit (the last pinned one).
const OVERFLOW: u32 = TRANSIENT - 1;
const OVERFLOW_NAME: &str = "<name table full>";

/// Bytes of pinned names, in all.
pub(crate) const PINNED_BYTES: usize = 64 << 20;
/// Bytes of transient names one generation holds.
pub(crate) const GENERATION_BYTES: usize = 16 << 20;
/// A generation past this many bytes or names is retired when the next session starts.
pub(crate) const RETIRE_BYTES: usize = 4 << 20;
pub(crate) const RETIRE_NAMES: usize = 16_384;
/// What a name costs beyond its text (its `Arc`, its slot and its map entry), so that the
/// byte budgets bound short names too.
const ENTRY_BYTES: usize = 64;
/// Transient names a thread caches (past them it takes the table's lock per new range).
const THREAD_CACHE_NAMES: usize = 4096;

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

/// Names and their ids, up to a byte budget (text and [`ENTRY_BYTES`] per name).
#[derive(Default)]
struct Generation {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
    bytes: usize,
}

impl Generation {
    /// The index of `name`, interned if it fits `budget` bytes and `max` names.
    fn intern(&mut self, name: &str, budget: usize, max: u32) -> Option<u32> {
        if let Some(&index) = self.ids.get(name) {
            return Some(index);
        }
        let index = u32::try_from(self.names.len()).ok().filter(|&i| i < max)?;
        let cost = name.len() + ENTRY_BYTES;
        if self.bytes + cost > budget {
            return None;
        }
        let name: Arc<str> = name.into();
        self.bytes += cost;
        self.names.push(name.clone());
        self.ids.insert(name, index);
        Some(index)
    }
}

#[derive(Default)]
struct Table {
    pinned: Generation,
    transient: [Generation; 2],
    /// The generation new transient names go to.
    current: usize,
}

impl Table {
    fn resolve(&self, id: u32) -> Arc<str> {
        let (generation, index) = match id & TRANSIENT {
            0 => (&self.pinned, id),
            _ => (
                &self.transient[usize::from(id & GENERATION_BIT != 0)],
                id & INDEX_MASK,
            ),
        };
        generation
            .names
            .get(index as usize)
            .cloned()
            .unwrap_or_else(|| OVERFLOW_NAME.into())
    }
}

static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
/// Bumped when a generation is retired: threads drop their caches of transient ids.
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// Ranges whose name did not fit, since the process started.
static DROPPED: AtomicU64 = AtomicU64::new(0);

fn table() -> MutexGuard<'static, Table> {
    TABLE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Counts a name that did not fit and returns the id that stands for it.
fn overflow() -> u32 {
    if DROPPED.fetch_add(1, Ordering::Relaxed) == 0 {
        log::warn!(
            "omniprof: the name table is full; ranges with new names are recorded as \
             {OVERFLOW_NAME:?} and counted in the trace's dropped_names"
        );
    }
    OVERFLOW
}

impl Name {
    /// Interns `name` for the life of the process.
    pub fn new(name: &str) -> Self {
        let id = table()
            .pinned
            .intern(name, PINNED_BYTES, OVERFLOW)
            .unwrap_or_else(overflow);
        Self(id)
    }

    /// Interns `name` in the current transient generation (a pinned name keeps its id).
    fn transient(name: &str) -> Self {
        let mut table = table();
        if let Some(&id) = table.pinned.ids.get(name) {
            return Self(id);
        }
        let current = table.current;
        let id = match table.transient[current].intern(name, GENERATION_BYTES, INDEX_MASK + 1) {
            Some(index) => TRANSIENT | (current as u32 * GENERATION_BIT) | index,
            None => overflow(),
        };
        Self(id)
    }

    /// The name as a string.
    pub fn resolve(self) -> Arc<str> {
        table().resolve(self.0)
    }

    pub(crate) const fn id(self) -> u32 {
        self.0
    }

    /// The name with id `id`, as [`id`](Self::id) returned it (for a cache of ids: the
    /// per-thread cache of names by address).
    pub(crate) const fn from_raw(id: u32) -> Self {
        Self(id)
    }
}

/// Resolves many ids at once under one lock (used when draining).
pub(crate) fn resolver() -> impl Fn(u32) -> Arc<str> {
    let table = table();
    let pinned = table.pinned.names.clone();
    let transient = [
        table.transient[0].names.clone(),
        table.transient[1].names.clone(),
    ];
    drop(table);
    move |id| {
        let (names, index) = match id & TRANSIENT {
            0 => (&pinned, id),
            _ => (
                &transient[usize::from(id & GENERATION_BIT != 0)],
                id & INDEX_MASK,
            ),
        };
        names
            .get(index as usize)
            .cloned()
            .unwrap_or_else(|| OVERFLOW_NAME.into())
    }
}

/// Ranges whose name did not fit since the process started (a session reports its
/// difference).
pub(crate) fn dropped_names() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// At a session's start (no session records): retires the current transient generation if
/// it has grown past [`RETIRE_BYTES`] or [`RETIRE_NAMES`], freeing the one before it.
pub(crate) fn reclaim() {
    let mut table = table();
    let current = table.current;
    let grown = &table.transient[current];
    if grown.bytes <= RETIRE_BYTES && grown.names.len() <= RETIRE_NAMES {
        return;
    }
    table.current = 1 - current;
    table.transient[1 - current] = Generation::default();
    EPOCH.fetch_add(1, Ordering::Release);
}

/// Bytes of names the table holds (pinned and both transient generations).
#[cfg(test)]
pub(crate) fn held_bytes() -> usize {
    let table = table();
    table.pinned.bytes + table.transient[0].bytes + table.transient[1].bytes
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

/// Anything a range can be named with. A `&str` or `String` is interned as a transient name
/// (see the module docs): its id serves the sessions that use it, and may name something
/// else once a later session has started; hold a [`Name::new`] to keep an id.
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

/// A thread's cache of the transient names it used, valid for one [`EPOCH`].
#[derive(Default)]
struct ThreadNames {
    epoch: u64,
    names: FastMap<Box<str>, Name>,
}

thread_local! {
    /// Per-thread cache of names given as strings, so only a thread's first use of a name
    /// takes the global lock.
    static LOCAL_NAMES: RefCell<ThreadNames> = RefCell::new(ThreadNames::default());
}

impl IntoName for &str {
    #[inline]
    fn into_name(self) -> Name {
        LOCAL_NAMES
            .try_with(|cache| {
                let mut cache = cache.borrow_mut();
                let epoch = EPOCH.load(Ordering::Acquire);
                if cache.epoch != epoch {
                    cache.names = FastMap::default();
                    cache.epoch = epoch;
                }
                if let Some(&name) = cache.names.get(self) {
                    return name;
                }
                let name = Name::transient(self);
                // A name that did not fit is asked again (and counted) each time.
                if name.0 != OVERFLOW && cache.names.len() < THREAD_CACHE_NAMES {
                    cache.names.insert(self.into(), name);
                }
                name
            })
            .unwrap_or_else(|_| Name::transient(self))
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
        // A name used as a string after it was pinned keeps the pinned id.
        assert_eq!("interning_is_stable".into_name(), a);
    }
}
