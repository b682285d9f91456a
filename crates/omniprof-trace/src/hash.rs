//! A fast, non-cryptographic hasher for the small keys of internal tables (names, row ids),
//! shared with the profiler crate.
//! None of these tables holds attacker-chosen keys in a way that matters, and SipHash costs
//! more than the work around it on the paths that use them.

use std::hash::{BuildHasherDefault, Hasher};

/// FxHash-style multiply-rotate hashing.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8-byte chunk")));
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(tail) ^ ((rest.len() as u64) << 56));
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    #[inline]
    fn write_i64(&mut self, v: i64) {
        self.add(v as u64);
    }

    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.add(v.into());
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// The slot of `key` in a direct-mapped cache of `SLOTS` (a power of two) entries: the top
/// bits of the key times 2^64 / φ (Fibonacci hashing), which spread keys whose low bits
/// agree (aligned addresses, small ids).
#[inline]
pub fn cache_slot<const SLOTS: usize>(key: u64) -> usize {
    const { assert!(SLOTS.is_power_of_two() && SLOTS > 1) };
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOTS.trailing_zeros())) as usize
}
