//! A thread's stack of pushed ops and its cache of op names (by address, then by text): the data
//! behind the push/pop API ([`super::push_op`], [`super::pop_op`]), kept with the thread's buffer
//! and used by that thread only.

use std::cell::Cell;
use std::ffi::{c_char, CStr};
use std::ptr::null;

use super::name::Name;
use crate::{cache_slot, FastMap};

/// Ops a thread can have pushed and not yet popped; deeper ones are not recorded, but their
/// pushes and pops still pair up.
pub(crate) const MAX_DEPTH: usize = 256;
/// Names a thread caches by address in its direct-mapped table (64 KiB of slots, of which a
/// thread touches one line per name it uses): with 256, a small MLP's 40-odd op names
/// collided in a few slots, and each collision cost a lookup by text on every other use.
const NAME_SLOTS: usize = 1024;
/// Names a thread caches by text in its second direct-mapped table: those seen at a new
/// address each time (a training step's backward pass has a few dozen).
const TEXT_SLOTS: usize = 128;
/// Names a thread remembers behind that table before it starts over.
const SEEN_MAX: usize = 4096;

/// A pushed op: the key it is popped with, and the session and sequence number of its
/// beginning (`state` 0: nothing was recorded).
#[derive(Clone, Copy)]
struct Entry {
    key: usize,
    state: u64,
    seq: u32,
}

/// Bytes of a name a slot of the direct-mapped table holds itself, its NUL included: a hit
/// on a name this short compares it there, with no other line read.
const HEAD: usize = 40;

/// A slot of the direct-mapped table: the address a name was seen at (0: none), its id, its
/// length and text (the key of the thread's map of seen names), and, for a name shorter than
/// [`HEAD`], that text again in the slot. One cache line: between two ops of a training step
/// the model's own work evicts the table, and a hit then reads one line where a text kept
/// apart cost two.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct CachedName {
    at: usize,
    text: *const c_char,
    id: u32,
    len: u32,
    head: [u8; HEAD],
}

impl CachedName {
    const EMPTY: Self = Self {
        at: 0,
        text: null(),
        id: 0,
        len: 0,
        head: [0; HEAD],
    };

    /// The slot of name `id` seen at `at`, whose `len`-byte text is held at `text`.
    ///
    /// # Safety
    /// `text` is NUL-terminated after its `len` bytes.
    unsafe fn new(at: usize, id: u32, text: *const c_char, len: usize) -> Self {
        let mut head = [0; HEAD];
        if len < HEAD {
            // SAFETY: the `len` bytes and the NUL (the contract), within `head` (len < HEAD).
            unsafe { std::ptr::copy_nonoverlapping(text.cast(), head.as_mut_ptr(), len + 1) };
        }
        Self {
            at,
            text,
            id,
            len: len.min(u32::MAX as usize) as u32,
            head,
        }
    }

    /// Whether the NUL-terminated `name` has this slot's text.
    ///
    /// # Safety
    /// `name` points to a NUL-terminated string; the slot is filled.
    #[inline(always)]
    unsafe fn holds(&self, name: *const c_char) -> bool {
        // The head where it holds the whole text: the slot's own line, already read.
        let text = if (self.len as usize) < HEAD {
            self.head.as_ptr().cast()
        } else {
            self.text
        };
        // strcmp stops at the first difference or NUL, so neither string is read past its
        // end (a byte loop here cost more instructions than the miss it saves).
        // SAFETY: both are NUL-terminated (the contract; the head holds a NUL after its
        // text, and a filled slot's `text` is a key of the map of seen names, whose box stays
        // put until the map is cleared with the table).
        unsafe { libc::strcmp(text, name) == 0 }
    }
}

/// A slot of the table by text: a name's length (`usize::MAX`: none, so that no name, the
/// empty one included, matches an empty slot), its text and what the thread keeps of it,
/// both owned by the map of seen names.
#[derive(Clone, Copy)]
struct TextSlot {
    len: usize,
    text: *const c_char,
    seen: *const Seen,
}

impl TextSlot {
    const EMPTY: Self = Self {
        len: usize::MAX,
        text: null(),
        seen: null(),
    };
}

/// A name the thread has seen: its id, and the address it was last seen at. Boxed in the
/// map, so that the table by text can point at it.
struct Seen {
    id: u32,
    at: Cell<usize>,
}

/// A thread's pushed ops and cached names. Behind the table, the thread keeps every name it
/// has seen by its text: two hot names sharing a slot (a model has hundreds), and names that
/// PyTorch builds at a new address for each op (every autograd node's), cost a hash of the
/// text instead of the name table's lock. A name seen again at another address will go on
/// costing that hash, so it stays out of the table, where it would evict the names whose
/// address stays put (in a training step, a fifth of the ops' names were looked up past the
/// table when it did not). Such a name is first looked for in a second table, by its length
/// and last bytes, which costs a `strlen` and a `memcmp` where the map costs a hash of the
/// whole text and a probe (a third of the instructions).
pub(crate) struct OpStack {
    depth: usize,
    entries: [Entry; MAX_DEPTH],
    /// Boxed apart: built in place, where the whole stack's box is first built on the
    /// calling thread's stack, which may be small.
    names: Box<[CachedName; NAME_SLOTS]>,
    texts: [TextSlot; TEXT_SLOTS],
    seen: FastMap<Box<CStr>, Box<Seen>>,
}

impl OpStack {
    pub(crate) fn new() -> Box<Self> {
        Box::new(Self {
            depth: 0,
            entries: [Entry {
                key: 0,
                state: 0,
                seq: 0,
            }; MAX_DEPTH],
            names: vec![CachedName::EMPTY; NAME_SLOTS]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!("NAME_SLOTS slots")),
            texts: [TextSlot::EMPTY; TEXT_SLOTS],
            seen: FastMap::default(),
        })
    }

    /// Takes the next slot for an op being pushed, to be [filled](Self::fill); `None` past
    /// [`MAX_DEPTH`] (the push still counts, so that its pop pairs with it).
    #[inline(always)]
    pub(crate) fn reserve(&mut self) -> Option<usize> {
        let slot = self.depth;
        self.depth += 1;
        (slot < MAX_DEPTH).then_some(slot)
    }

    /// Fills a [reserved](Self::reserve) slot: the op pushed under `key`, begun as `seq` in
    /// session `state` (0: not recorded).
    #[inline(always)]
    pub(crate) fn fill(&mut self, slot: usize, key: usize, state: u64, seq: u32) {
        self.entries[slot] = Entry { key, state, seq };
    }

    /// Pops the op pushed under `key`: its session and sequence number, `None` when this
    /// thread has no such op. A key below the top pops the ops above it too (their pops will
    /// find nothing); a pop past [`MAX_DEPTH`] pairs with a push that took no slot.
    #[inline(always)]
    pub(crate) fn pop(&mut self, key: usize) -> Option<(u64, u32)> {
        if self.depth > MAX_DEPTH {
            self.depth -= 1;
            return None;
        }
        let at = self.entries[..self.depth]
            .iter()
            .rposition(|e| e.key == key)?;
        self.depth = at;
        let entry = self.entries[at];
        Some((entry.state, entry.seq))
    }

    /// The id of the NUL-terminated name at `name`. The text is compared even when the
    /// address matches, as a name built at run time may reuse another's address. Names are
    /// pinned (an op's name is one of a fixed set), so a cached id never goes stale.
    ///
    /// # Safety
    /// `name` points to a NUL-terminated string.
    #[inline(always)]
    pub(crate) unsafe fn name(&mut self, name: *const c_char) -> Name {
        let slot = &self.names[slot_of(name)];
        // SAFETY: `name` is NUL-terminated (the contract), and a slot whose address matches
        // is filled (no name is at 0).
        if slot.at == name as usize && unsafe { slot.holds(name) } {
            return Name::from_id(slot.id);
        }
        // SAFETY: as above.
        unsafe { self.name_not_in_table(name) }
    }

    /// [`name`](Self::name) past its table: from the table by text, the names seen, or
    /// interned.
    ///
    /// # Safety
    /// `name` points to a NUL-terminated string.
    #[cold]
    #[inline(never)]
    unsafe fn name_not_in_table(&mut self, name: *const c_char) -> Name {
        // SAFETY: forwarded contract.
        let len = unsafe { libc::strlen(name) };
        // SAFETY: `name` has `len` bytes before its NUL.
        let by_text = unsafe { text_slot_of(name, len) };
        let at = name as usize;
        let slot = self.texts[by_text];
        // SAFETY: both texts have `len` bytes before their NUL (the contract; a filled slot's
        // text is boxed in the map of seen names, which keeps it until it is cleared with the
        // tables).
        let same =
            slot.len == len && unsafe { libc::memcmp(slot.text.cast(), name.cast(), len) } == 0;
        let (text, seen) = if same {
            // SAFETY: a filled slot's `Seen` is boxed in the map, as its text is.
            (slot.text, unsafe { &*slot.seen })
        } else {
            // SAFETY: forwarded contract.
            let text = unsafe { CStr::from_ptr(name) };
            let Some((held, seen)) = self.seen.get_key_value(text) else {
                return self.intern(text, by_text);
            };
            self.texts[by_text] = TextSlot {
                len,
                text: held.as_ptr(),
                seen: &**seen,
            };
            (held.as_ptr(), &**seen)
        };
        let (id, moved) = (seen.id, seen.at.replace(at) != at);
        // SAFETY: `text` is held in the map, `len` bytes and a NUL (compared above).
        unsafe { self.cache_by_address(at, id, text, len, moved) };
        Name::from_id(id)
    }

    /// Caches name `id`, seen at `at`, by its address, unless it `moved` (seen at another
    /// address last time: it would evict a name that stays put) or the slot holds another text
    /// seen at this very address: names take turns at it (a backward node's, kept in its
    /// `RecordFunction` on the stack), and caching each in turn would only rewrite the slot;
    /// the table by text serves them (and a name that took another's address for good, a
    /// little more slowly).
    ///
    /// # Safety
    /// `text` is held in the map of seen names, `len` bytes and a NUL.
    unsafe fn cache_by_address(
        &mut self,
        at: usize,
        id: u32,
        text: *const c_char,
        len: usize,
        moved: bool,
    ) {
        let cached = &mut self.names[slot_of(at as *const c_char)];
        let turns = cached.at == at;
        if cached.at == 0 || !(moved || turns) {
            // SAFETY: forwarded contract.
            *cached = unsafe { CachedName::new(at, id, text, len) };
        }
    }

    /// Interns a name the thread has not seen, caching it in both tables (`by_text` its slot
    /// in the table by text).
    #[cold]
    fn intern(&mut self, text: &CStr, by_text: usize) -> Name {
        if self.seen.len() >= SEEN_MAX {
            // The tables' slots point at the texts about to go.
            self.names.fill(CachedName::EMPTY);
            self.texts = [TextSlot::EMPTY; TEXT_SLOTS];
            self.seen.clear();
        }
        let id = Name::new(&text.to_string_lossy()).id();
        let held: Box<CStr> = text.into();
        let (at, len) = (text.as_ptr() as usize, text.to_bytes().len());
        let seen = Box::new(Seen {
            id,
            at: Cell::new(at),
        });
        // SAFETY: `held` is a `CStr` of `len` bytes, kept in the map below.
        unsafe { self.cache_by_address(at, id, held.as_ptr(), len, false) };
        self.texts[by_text] = TextSlot {
            len,
            text: held.as_ptr(),
            seen: &*seen,
        };
        self.seen.insert(held, seen);
        Name::from_id(id)
    }
}

/// The slot of the table that caches the name at `name`.
#[inline(always)]
fn slot_of(name: *const c_char) -> usize {
    cache_slot::<NAME_SLOTS>(name as u64)
}

/// The slot of the table by text for the `len`-byte name at `name`: by its length and its
/// last 8 bytes, where names that share a prefix (`autograd::engine::evaluate_function: `)
/// differ.
///
/// # Safety
/// `name` is readable for `len` bytes.
#[inline(always)]
unsafe fn text_slot_of(name: *const c_char, len: usize) -> usize {
    let tail = if len >= 8 {
        // SAFETY: the last 8 of the `len` readable bytes.
        unsafe { name.add(len - 8).cast::<u64>().read_unaligned() }
    } else {
        // SAFETY: the `len` readable bytes, one at a time.
        (0..len).fold(0, |tail, i| {
            (tail << 8) | u64::from(unsafe { *name.add(i) } as u8)
        })
    };
    cache_slot::<TEXT_SLOTS>(tail ^ len as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(stack: &mut OpStack, text: &CStr) -> Name {
        // SAFETY: a `CStr` is NUL-terminated.
        unsafe { stack.name(text.as_ptr()) }
    }

    #[test]
    fn a_long_name_is_cached_whole_and_a_name_rebuilt_at_its_address_is_told_apart() {
        let mut stack = OpStack::new();
        let long = c"autograd::engine::evaluate_function: ConvolutionBackward0 (a long name)";
        let id = name(&mut stack, long);
        let slot = stack.names[slot_of(long.as_ptr())];
        assert_eq!((slot.at, slot.id), (long.as_ptr() as usize, id.id()));
        // SAFETY: a filled slot's text is a `CStr` the map of seen names holds.
        assert_eq!(unsafe { CStr::from_ptr(slot.text) }, long);
        assert_eq!(name(&mut stack, long), id);
        assert_eq!(&*id.resolve(), long.to_str().unwrap());

        let mut buf = *b"op_stack_first\0";
        let first = name(&mut stack, CStr::from_bytes_with_nul(&buf).unwrap());
        buf[9..14].copy_from_slice(b"other");
        let other = name(&mut stack, CStr::from_bytes_with_nul(&buf).unwrap());
        assert_ne!(first, other);
        assert_eq!(&*other.resolve(), "op_stack_other");
    }

    #[test]
    fn a_short_name_rebuilt_longer_or_shorter_at_its_address_is_told_apart() {
        let mut stack = OpStack::new();
        let mut buf = *b"aten::add\0\0";
        let add = name(&mut stack, CStr::from_bytes_until_nul(&buf).unwrap());
        assert_eq!(stack.names[slot_of(buf.as_ptr().cast())].len, 9);
        buf[9] = b'_';
        let add_ = name(&mut stack, CStr::from_bytes_until_nul(&buf).unwrap());
        buf[8] = 0;
        let ad = name(&mut stack, CStr::from_bytes_until_nul(&buf).unwrap());
        let texts = [add, add_, ad].map(|n| n.resolve().to_string());
        assert_eq!(texts, ["aten::add", "aten::add_", "aten::ad"]);
        buf[8] = b'd';
        buf[9] = 0;
        assert_eq!(
            name(&mut stack, CStr::from_bytes_until_nul(&buf).unwrap()),
            add
        );
    }

    /// `count` 8-byte-aligned offsets into `arena`, at least 16 bytes apart, whose
    /// addresses take the same slot of the table by address.
    fn offsets_sharing_a_slot(arena: &[u8], count: usize) -> Vec<usize> {
        let base = arena.as_ptr() as usize;
        let first = (8 - base % 8) % 8;
        let mut by_slot: Vec<Vec<usize>> = vec![Vec::new(); NAME_SLOTS];
        for at in (first..arena.len() - 16).step_by(16) {
            let offsets = &mut by_slot[slot_of(arena[at..].as_ptr().cast())];
            offsets.push(at);
            if offsets.len() == count {
                return offsets.clone();
            }
        }
        panic!("no slot taken by {count} offsets of {} bytes", arena.len());
    }

    #[test]
    fn a_name_that_moves_keeps_out_of_the_slot_of_one_that_stays_put() {
        let mut stack = OpStack::new();
        // Three texts at addresses of one slot.
        let mut arena = vec![0u8; 1 << 16];
        let at = offsets_sharing_a_slot(&arena, 3);
        arena[at[0]..at[0] + 7].copy_from_slice(b"stays\0\0");
        for &i in &at[1..] {
            arena[i..i + 7].copy_from_slice(b"moves\0\0");
        }
        let text = |i: usize| CStr::from_bytes_until_nul(&arena[at[i]..]).unwrap();
        let stays = name(&mut stack, text(0));
        let moves = name(&mut stack, text(1));
        assert_eq!(name(&mut stack, text(0)), stays);
        // Seen again at another address: looked up by its text, the slot left as it was.
        assert_eq!(name(&mut stack, text(2)), moves);
        let slot = stack.names[slot_of(text(0).as_ptr())];
        assert_eq!((slot.at, slot.id), (text(0).as_ptr() as usize, stays.id()));
    }

    #[test]
    fn names_taking_turns_at_one_address_leave_its_slot_to_the_first() {
        let mut stack = OpStack::new();
        let mut buf = [0u8; 24];
        let mut at_buf = |stack: &mut OpStack, text: &[u8]| {
            buf.fill(0);
            buf[..text.len()].copy_from_slice(text);
            name(stack, CStr::from_bytes_until_nul(&buf).unwrap())
        };
        let t = at_buf(&mut stack, b"TBackward0");
        let addmm = at_buf(&mut stack, b"AddmmBackward0");
        assert_ne!(t, addmm);
        for _ in 0..3 {
            assert_eq!(at_buf(&mut stack, b"AddmmBackward0"), addmm);
            assert_eq!(at_buf(&mut stack, b"TBackward0"), t);
        }
        let slot = stack.names[slot_of(buf.as_ptr().cast())];
        assert_eq!((slot.id, slot.len), (t.id(), 10));
    }

    #[test]
    fn two_names_sharing_a_slot_are_found_among_the_names_seen() {
        let mut stack = OpStack::new();
        let mut buf = vec![0u8; 1 << 16];
        let at = offsets_sharing_a_slot(&buf, 2);
        buf[at[0]..at[0] + 12].copy_from_slice(b"op_stack_a1\0");
        buf[at[1]..at[1] + 12].copy_from_slice(b"op_stack_b2\0");
        let a = CStr::from_bytes_until_nul(&buf[at[0]..]).unwrap();
        let b = CStr::from_bytes_until_nul(&buf[at[1]..]).unwrap();
        assert_eq!(slot_of(a.as_ptr()), slot_of(b.as_ptr()));
        let ids = (name(&mut stack, a), name(&mut stack, b));
        for _ in 0..3 {
            assert_eq!((name(&mut stack, a), name(&mut stack, b)), ids);
        }
        assert_eq!(stack.seen.len(), 2, "both names are kept behind the table");
        assert_eq!(stack.names[slot_of(b.as_ptr())].at, b.as_ptr() as usize);
        assert_eq!(&*ids.0.resolve(), "op_stack_a1");
        assert_eq!(&*ids.1.resolve(), "op_stack_b2");
    }

    #[test]
    fn a_name_built_at_a_new_address_each_time_is_found_by_its_text() {
        let mut stack = OpStack::new();
        let copies: Vec<Box<CStr>> = (0..8).map(|_| c"op_stack_rebuilt".into()).collect();
        let id = name(&mut stack, &copies[0]);
        assert!(copies.iter().all(|copy| name(&mut stack, copy) == id));
        assert_eq!(stack.seen.len(), 1, "one text, however many addresses");
    }

    #[test]
    fn names_built_anew_are_found_by_their_text_even_when_they_share_its_slot() {
        let mut stack = OpStack::new();
        // Same length and last 8 bytes: one slot of the table by text, told apart by the
        // compare and found among the names seen.
        let texts = [c"first: AddBackward0", c"other: AddBackward0", c"mm", c""];
        let ids: Vec<Name> = texts.iter().map(|t| name(&mut stack, t)).collect();
        // SAFETY: a `CStr` is readable for its length.
        let slot = |t: &CStr| unsafe { text_slot_of(t.as_ptr(), t.to_bytes().len()) };
        assert_eq!(slot(texts[0]), slot(texts[1]));
        // Each copy at an address of its own (all kept alive): looked up past the table by
        // address, so the table by text holds the last name looked up.
        let copies: Vec<Box<CStr>> = (0..3).flat_map(|_| texts.map(Box::from)).collect();
        for (copy, (text, &id)) in copies.iter().zip(texts.iter().zip(&ids).cycle()) {
            assert_eq!(name(&mut stack, copy), id, "{text:?}");
            let cached = stack.texts[slot(text)];
            // SAFETY: a filled slot's `Seen` is boxed in the map of seen names.
            let kept = unsafe { &*cached.seen };
            assert_eq!((cached.len, kept.id), (text.to_bytes().len(), id.id()));
            assert_eq!(kept.at.get(), copy.as_ptr() as usize);
        }
        assert_eq!(stack.seen.len(), 4);
        assert_ne!(ids[0], ids[1]);
        assert_eq!(&*ids[1].resolve(), "other: AddBackward0");
        assert_eq!(&*ids[2].resolve(), "mm");
    }

    #[test]
    fn pops_find_their_key_below_the_top_and_pair_past_the_depth_limit() {
        let mut stack = OpStack::new();
        for key in 1..=3 {
            let slot = stack.reserve().unwrap();
            stack.fill(slot, key, 7, key as u32);
        }
        assert_eq!(stack.pop(9), None, "never pushed");
        assert_eq!(stack.pop(2), Some((7, 2)), "below the top");
        assert_eq!(stack.pop(3), None, "popped with 2");
        assert_eq!(stack.pop(1), Some((7, 1)));
        for _ in 0..MAX_DEPTH {
            assert!(stack.reserve().is_some());
        }
        assert_eq!(stack.reserve(), None);
        assert_eq!(stack.pop(0), None, "pairs with the push that took no slot");
        assert_eq!(stack.depth, MAX_DEPTH);
    }
}
