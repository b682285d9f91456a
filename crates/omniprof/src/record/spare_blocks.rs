//! Blocks faulted in ahead of need, for the tables a recording thread fills beside its
//! records (the packed args, autograd's numbers). A fresh block allocated by the recording
//! thread mid-session costs it a page fault per 4 KiB at first touch and, from glibc's heap,
//! the consolidation of every small free chunk the arena holds (a fifth of a first
//! `record_shapes` session's added time went to the faults, and `malloc_consolidate` was
//! 1.4 % of a PyTorch loop's time under all flags). So the [`refill`] thread makes the
//! blocks, a recording thread takes one when its table needs it, and each comes back emptied
//! (from the drain, from a ring forgetting its oldest ops, from a thread's reset for a new
//! session); a ring session's start trims the spares.

use std::sync::{Mutex, MutexGuard};

use super::refill;
use crate::lock;

/// Spare blocks of `len` items each: `take` asks for a refill below `low` spares, and a
/// refill or a trim leaves `high`.
pub(crate) struct SpareBlocks<T: 'static> {
    blocks: Mutex<Vec<Vec<T>>>,
    len: usize,
    low: usize,
    high: usize,
    /// Tops this pool up (a function naming its static: the refill thread runs it).
    top_up: fn(),
}

impl<T> SpareBlocks<T> {
    /// A pool of blocks of `len` items, topped up by `top_up` (which calls [`fill`](Self::fill)
    /// on this pool) to `high` when fewer than `low` are left.
    pub(crate) const fn new(len: usize, low: usize, high: usize, top_up: fn()) -> Self {
        Self {
            blocks: Mutex::new(Vec::new()),
            len,
            low,
            high,
            top_up,
        }
    }

    /// A block for at least `need` items: a spare, or a new one (faulted in here) when none
    /// is left; a block of its own when `need` is more than a block holds.
    pub(crate) fn take(&self, need: usize) -> Vec<T> {
        if need > self.len {
            return Vec::with_capacity(need);
        }
        refill::take(&self.blocks, self.low, self.top_up).unwrap_or_else(|| self.new_block())
    }

    /// Keeps `blocks` as spares, emptied; a block of another size (a copy's, sized to its
    /// contents, or one of its own) is freed.
    pub(crate) fn give_back(&self, blocks: impl IntoIterator<Item = Vec<T>>) {
        let mut spares = lock(&self.blocks);
        for mut block in blocks {
            if block.capacity() == self.len {
                block.clear();
                spares.push(block);
            }
        }
    }

    /// Tops the spares up to `high` (the refill thread's work).
    pub(crate) fn fill(&self) {
        refill::fill(&self.blocks, self.high, || self.new_block());
    }

    /// Frees spares past `high` (a ring session's start).
    pub(crate) fn trim(&self) {
        refill::trim(&self.blocks, self.high);
    }

    /// The spares' lock, held across a fork.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<Vec<T>>> {
        lock(&self.blocks)
    }

    /// A block with every page faulted in.
    fn new_block(&self) -> Vec<T> {
        /// The bytes of a page.
        const PAGE: usize = 4096;
        let mut block: Vec<T> = Vec::with_capacity(self.len);
        let bytes = block.as_mut_ptr().cast::<u8>();
        for at in (0..self.len * std::mem::size_of::<T>()).step_by(PAGE) {
            // SAFETY: `at` is within the capacity just allocated, and the block's length
            // stays 0, so the byte is never read as an item. A volatile write is never elided,
            // nor merged with the allocation into a zeroed one that leaves the pages to be
            // faulted in later.
            unsafe { bytes.add(at).write_volatile(0) };
        }
        block
    }

    #[cfg(test)]
    pub(crate) fn spares(&self) -> usize {
        lock(&self.blocks).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static POOL: SpareBlocks<u64> = SpareBlocks::new(1024, 1, 2, top_up);

    fn top_up() {
        POOL.fill();
    }

    #[test]
    fn spare_blocks_keep_only_whole_blocks_emptied() {
        let fresh = POOL.new_block();
        assert_eq!((fresh.len(), fresh.capacity()), (0, 1024));
        let mut used = POOL.new_block();
        used.extend_from_slice(&[1, 2, 3]);
        let copy = used.clone();
        let pool = SpareBlocks::<u64>::new(1024, 0, 4, top_up);
        pool.give_back([used, copy, vec![0; 10]]);
        assert_eq!(
            pool.spares(),
            1,
            "the copy and the small block are not kept"
        );
        assert!(pool.take(1024).is_empty());
    }

    #[test]
    fn a_need_past_a_block_gets_a_block_of_its_own() {
        let pool = SpareBlocks::<u64>::new(1024, 0, 4, top_up);
        pool.give_back([pool.new_block()]);
        assert!(pool.take(5000).capacity() >= 5000);
        assert_eq!(pool.spares(), 1, "the spare stays for a need that fits");
    }

    #[test]
    fn a_trim_leaves_the_high_mark() {
        let pool = SpareBlocks::<u64>::new(16, 0, 2, top_up);
        pool.give_back((0..5).map(|_| pool.new_block()));
        pool.trim();
        assert_eq!(pool.spares(), 2);
    }
}
