//! [`Strings`]: one file's distinct strings, each given a small id, so that a row stores a
//! `u32` per string value, and a column chunk's dictionary is built from ids
//! (`column_chunk.rs`) without hashing a string again.
//!
//! Most string values are names the reader and the summary share as `Arc<str>` (interned
//! per reader thread) and activity types, which are `'static`: both are found by address,
//! first in a small direct-mapped cache (a multiply and a compare), then in a map by
//! address, and only then by hashing the text.

use std::sync::Arc;

use omniprof_trace::FastMap;

/// Entries kept by address at most (names are interned per reader thread, so a few per
/// name); past it the table and the cache start again, which bounds them whatever the
/// input.
const MAX_BY_ADDRESS: usize = 1 << 16;

/// Slots of the direct-mapped cache of addresses: more than a trace's usual distinct names
/// per reader thread and activity types together, small enough to stay in L1.
const CACHE_SLOTS: usize = 256;

/// An address and length (a string's identity while its owner lives) and its id.
#[derive(Clone, Copy)]
struct Slot {
    address: usize,
    len: usize,
    id: u32,
}

/// A free slot: no string lives at address 0.
const EMPTY: Slot = Slot {
    address: 0,
    len: 0,
    id: 0,
};

/// The distinct strings of one file, by id.
pub(crate) struct Strings {
    /// Each id's value.
    values: Vec<Box<str>>,
    by_text: FastMap<Box<str>, u32>,
    /// By address, for shared names. Each entry holds its `Arc`, so that its address
    /// cannot be reused for another string while the entry (or a cache slot, cleared with
    /// it) stands.
    by_address: FastMap<usize, (Arc<str>, u32)>,
    /// By address and length, for `'static` names, which never move or end.
    by_static: FastMap<(usize, usize), u32>,
    /// The last address seen in each slot: of an entry of `by_address` or `by_static`.
    cache: Box<[Slot; CACHE_SLOTS]>,
}

impl Default for Strings {
    fn default() -> Self {
        Self {
            values: Vec::new(),
            by_text: FastMap::default(),
            by_address: FastMap::default(),
            by_static: FastMap::default(),
            cache: Box::new([EMPTY; CACHE_SLOTS]),
        }
    }
}

/// The cache slot of an address: its top bits times 2^64 / φ (Fibonacci hashing), which
/// spreads addresses whose low bits agree (aligned allocations).
#[inline]
fn slot(address: usize) -> usize {
    ((address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CACHE_SLOTS.trailing_zeros()))
        as usize
}

impl Strings {
    /// The id of `s`, found by its text; `None` once the file holds 2^32 distinct strings
    /// (which the ids cannot number).
    pub(crate) fn text(&mut self, s: &str) -> Option<u32> {
        if let Some(&id) = self.by_text.get(s) {
            return Some(id);
        }
        let id = u32::try_from(self.values.len()).ok()?;
        self.values.push(s.into());
        self.by_text.insert(Box::from(s), id);
        Some(id)
    }

    /// [`Self::text`] for a shared name.
    #[inline]
    pub(crate) fn shared(&mut self, s: &Arc<str>) -> Option<u32> {
        let address = Arc::as_ptr(s) as *const u8 as usize;
        let slot = &self.cache[slot(address)];
        if slot.address == address && slot.len == s.len() {
            return Some(slot.id);
        }
        self.shared_slow(s, address)
    }

    #[cold]
    fn shared_slow(&mut self, s: &Arc<str>, address: usize) -> Option<u32> {
        let id = match self.by_address.get(&address) {
            Some(&(_, id)) => id,
            None => {
                let id = self.text(s)?;
                if self.by_address.len() >= MAX_BY_ADDRESS {
                    self.by_address.clear();
                    *self.cache = [EMPTY; CACHE_SLOTS];
                }
                self.by_address.insert(address, (Arc::clone(s), id));
                id
            }
        };
        self.cache[slot(address)] = Slot {
            address,
            len: s.len(),
            id,
        };
        Some(id)
    }

    /// [`Self::text`] for a name that lives as long as the program.
    #[inline]
    pub(crate) fn fixed(&mut self, s: &'static str) -> Option<u32> {
        let address = s.as_ptr() as usize;
        let slot = &self.cache[slot(address)];
        if slot.address == address && slot.len == s.len() {
            return Some(slot.id);
        }
        self.fixed_slow(s, address)
    }

    #[cold]
    fn fixed_slow(&mut self, s: &'static str, address: usize) -> Option<u32> {
        let id = match self.by_static.get(&(address, s.len())) {
            Some(&id) => id,
            None => {
                let id = self.text(s)?;
                self.by_static.insert((address, s.len()), id);
                id
            }
        };
        self.cache[slot(address)] = Slot {
            address,
            len: s.len(),
            id,
        };
        Some(id)
    }

    /// How many strings the file holds.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// The bytes of string `id`.
    pub(crate) fn bytes(&self, id: u32) -> &[u8] {
        self.values[id as usize].as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_keeps_its_id_whichever_way_it_is_found() {
        let mut strings = Strings::default();
        let name: Arc<str> = Arc::from("aten::mm");
        let copy: Arc<str> = Arc::from("aten::mm");
        let id = strings.text("aten::mm").unwrap();
        assert_eq!(strings.shared(&name), Some(id));
        assert_eq!(strings.shared(&name), Some(id));
        assert_eq!(strings.shared(&copy), Some(id));
        assert_eq!(strings.fixed("aten::mm"), Some(id));
        assert_eq!(strings.text("cpu_op"), Some(id + 1));
        assert_eq!(strings.fixed("cpu_op"), Some(id + 1));
        assert_eq!(strings.len(), 2);
        assert_eq!(strings.bytes(id), b"aten::mm");
        assert_eq!(strings.bytes(id + 1), b"cpu_op");
    }

    #[test]
    fn names_past_the_address_table_s_bound_keep_their_ids() {
        let mut strings = Strings::default();
        let names: Vec<Arc<str>> = (0..MAX_BY_ADDRESS + 10)
            .map(|i| Arc::from(format!("op{}", i % 100).as_str()))
            .collect();
        for (i, name) in names.iter().enumerate() {
            assert_eq!(strings.shared(name), Some((i % 100) as u32));
        }
        assert!(strings.by_address.len() <= MAX_BY_ADDRESS);
        for (i, name) in names.iter().enumerate() {
            assert_eq!(strings.shared(name), Some((i % 100) as u32));
        }
    }
}
