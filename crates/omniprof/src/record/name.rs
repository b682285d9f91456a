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
//!
//! A name also says what its ranges are ([`Role`]): a Python frame's name, interned by
//! [`Name::python`], makes its range a `python_function` event at the drain, so the record
//! word needs no kind of its own for frames. Frame names are kept apart from range names of
//! the same text.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::lock;
use crate::FastMap;

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
/// use omniprof::recording::Name;
///
/// let a = Name::new("forward");
/// assert_eq!(a, Name::new("forward"));
/// assert_eq!(&*a.resolve(), "forward");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Name(u32);

/// What the ranges a name is given to are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    /// Whatever the record says (a host op, a user range, an instant).
    #[default]
    Range,
    /// A Python function's frame (`python_function`).
    PythonFunction,
    /// An `nn.Module` call, with the module's id among its class's instances.
    PythonModule(u32),
}

impl Role {
    /// What keeps a frame name apart from a range name of the same text in the table's map.
    fn key_prefix(self) -> &'static str {
        match self {
            Role::Range => "",
            Role::PythonFunction => "\u{1}",
            Role::PythonModule(_) => "\u{2}",
        }
    }
}

/// Names and their ids, up to a byte budget (text and [`ENTRY_BYTES`] per name).
#[derive(Default)]
struct Generation {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<(Arc<str>, Role)>,
    bytes: usize,
}

impl Generation {
    /// The index of `name` in `role`, interned if it fits `budget` bytes and `max` names.
    fn intern(&mut self, name: &str, role: Role, budget: usize, max: u32) -> Option<u32> {
        let prefix = role.key_prefix();
        let keyed;
        let key = if prefix.is_empty() {
            name
        } else {
            keyed = format!("{prefix}{name}");
            &keyed
        };
        if let Some(&index) = self.ids.get(key) {
            return Some(index);
        }
        let index = u32::try_from(self.names.len()).ok().filter(|&i| i < max)?;
        let cost = key.len() + name.len() + ENTRY_BYTES;
        if self.bytes + cost > budget {
            return None;
        }
        let text: Arc<str> = name.into();
        self.bytes += cost;
        self.names.push((text.clone(), role));
        self.ids
            .insert(if prefix.is_empty() { text } else { key.into() }, index);
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
    fn resolve(&self, id: u32) -> (Arc<str>, Role) {
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
            .unwrap_or_else(|| (OVERFLOW_NAME.into(), Role::Range))
    }
}

static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
/// Bumped when a generation is retired: threads drop their caches of transient ids.
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// Ranges whose name did not fit, since the process started.
static DROPPED: AtomicU64 = AtomicU64::new(0);

fn table() -> MutexGuard<'static, Table> {
    lock(TABLE.get_or_init(Mutex::default))
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
            .intern(name, Role::Range, PINNED_BYTES, OVERFLOW)
            .unwrap_or_else(overflow);
        Self(id)
    }

    /// Interns `name` in the current transient generation (a pinned name keeps its id).
    fn transient(name: &str) -> Self {
        Self::transient_in(name, Role::Range)
    }

    /// Interns the name of a Python frame (`python_function`): a function's
    /// (`file.py(12): forward`), or with `module` an `nn.Module` call's (`nn.Module: Linear_0`,
    /// `module` being the `0`). Like a string name it is transient: its id serves the sessions
    /// that use it, so a cache of frame names lives no longer than one session.
    ///
    /// ```
    /// use omniprof::recording::Name;
    /// use omniprof::Profiler;
    ///
    /// let frame = Name::python("model.py(12): forward", None);
    /// assert_ne!(frame, Name::new("model.py(12): forward"));
    /// assert_eq!(&*frame.resolve(), "model.py(12): forward");
    /// ```
    pub fn python(name: &str, module: Option<u32>) -> Self {
        Self::transient_in(
            name,
            module.map_or(Role::PythonFunction, Role::PythonModule),
        )
    }

    fn transient_in(name: &str, role: Role) -> Self {
        let mut table = table();
        if role == Role::Range {
            if let Some(&id) = table.pinned.ids.get(name) {
                return Self(id);
            }
        }
        let current = table.current;
        let id = match table.transient[current].intern(name, role, GENERATION_BYTES, INDEX_MASK + 1)
        {
            Some(index) => TRANSIENT | (current as u32 * GENERATION_BIT) | index,
            None => overflow(),
        };
        Self(id)
    }

    /// The name as a string.
    pub fn resolve(self) -> Arc<str> {
        table().resolve(self.0).0
    }

    /// The name's id, for a caller that keeps names as integers across an FFI boundary (the
    /// Python frame tracer's cache of frame names); [`from_id`](Self::from_id) gives the name
    /// back.
    pub const fn id(self) -> u32 {
        self.0
    }

    /// The name with id `id`, as [`id`](Self::id) returned it. An id that names nothing
    /// resolves to `<name table full>`.
    pub const fn from_id(id: u32) -> Self {
        Self(id)
    }
}

/// Resolves many ids at once under one lock (used when draining), with each name's role.
pub(crate) fn resolver() -> impl Fn(u32) -> (Arc<str>, Role) {
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
            .unwrap_or_else(|| (OVERFLOW_NAME.into(), Role::Range))
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
    /// A name for `text`, interned on first use.
    pub const fn new(text: &'static str) -> Self {
        Self {
            text,
            cached: AtomicU32::new(0),
        }
    }

    #[inline]
    /// The interned name.
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
    /// The interned name.
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
        assert_eq!(&*resolver()(a.id()).0, "interning_is_stable");
        // A name used as a string after it was pinned keeps the pinned id.
        assert_eq!("interning_is_stable".into_name(), a);
    }
}
