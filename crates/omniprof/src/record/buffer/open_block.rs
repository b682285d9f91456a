//! The block a thread writes its packed args into without a lock: an op's inputs under
//! `record_shapes` (nearly every op then), and its allocator reports (`profile_memory`).
//!
//! Taking the packed args' lock for each op (an atomic exchange to lock and another to
//! unlock, uncontended until the drain) cost an op with packed args 24 of its 78 ns on an
//! Intel Xeon (criterion `record/op_packed_autograd`), where a locked instruction also waits
//! for the op's earlier stores to reach the cache. So the owner writes each op's words past
//! the block's published length and then publishes the new length, as
//! [`staged`](super::staged) does with its arrays, and the block itself moves only under the
//! lock of the thread's sealed blocks ([`PackedArgs`]):
//!
//! - the owner writes an op's header and words past `published`, then stores the new
//!   `published` (Release); a drainer, holding the lock, reads `published` (Acquire) and
//!   copies only the words below it, which no longer change;
//! - the owner replaces the block (sealing a full one into the sealed blocks, or starting a
//!   new session) only while holding the lock;
//! - a drain at `stop` marks what it took, so that a later seal leaves those words out.
//!
//! The words are copied once, into the block, as they were under the lock: the drain copies
//! them again, once a session.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::prefetch;
use crate::lock;
use crate::record::packed_args::{
    header, unpacker_index, PackedArgs, UnpackArgs, MAX_WORDS, SPARE_BLOCKS,
};

/// One thread's open block of packed args (see the module docs).
pub(crate) struct OpenBlock {
    /// Only the owner changes the block, and only with the sealed blocks' lock held.
    block: UnsafeCell<Block>,
    /// Words written: stored by the owner only.
    published: AtomicUsize,
    /// The leading words a drain already took (written with the lock held).
    taken: AtomicUsize,
}

/// The block's memory, and where it is: words are written and read through `base` (no
/// reference to the vector is made while other threads may use it).
struct Block {
    /// Its length stays 0: `published` counts the words written.
    vec: Vec<u64>,
    base: *mut u64,
    capacity: usize,
}

impl Block {
    fn new(mut vec: Vec<u64>) -> Self {
        Self {
            base: vec.as_mut_ptr(),
            capacity: vec.capacity(),
            vec,
        }
    }
}

impl Default for OpenBlock {
    fn default() -> Self {
        Self {
            block: UnsafeCell::new(Block::new(Vec::new())),
            published: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
        }
    }
}

// SAFETY: the owner writes only words past `published` without the lock, and changes the
// block only with the lock held; any other thread reads the block, and only the words below
// `published`, only with the lock held (the module docs). The block's memory is a vector's,
// which any thread may free.
unsafe impl Sync for OpenBlock {}
// SAFETY: as above.
unsafe impl Send for OpenBlock {}

impl OpenBlock {
    /// Keeps `words` for record `seq`, to be unpacked by `unpack`, sealing the block into
    /// `sealed` first when they do not fit. An op of more than 16M words, or with a 257th
    /// distinct unpacker, keeps nothing. Owner only.
    #[inline]
    pub(super) fn push(
        &self,
        seq: u32,
        words: &[u64],
        unpack: UnpackArgs,
        sealed: &Mutex<PackedArgs>,
    ) {
        let Some(index) = unpacker_index(unpack) else {
            return;
        };
        if words.len() > MAX_WORDS {
            return;
        }
        let seal = |need| self.seal(need, &mut lock(sealed));
        self.append(words.len() + 1, seal, |at| {
            // SAFETY: `at` has room for the header and the words (`append`).
            unsafe {
                at.write(header(seq, index, words.len()));
                std::ptr::copy_nonoverlapping(words.as_ptr(), at.add(1), words.len());
            }
        });
    }

    /// Has `write` write `need` words at the pointer it is given, past the published ones,
    /// then publishes them; `seal` first when they do not fit (a new block then has room).
    /// Owner only.
    #[inline(always)]
    fn append(&self, need: usize, seal: impl FnOnce(usize), write: impl FnOnce(*mut u64)) {
        let mut len = self.published.load(Ordering::Relaxed);
        // SAFETY: the owner reads the block, which only it changes.
        if unsafe { (*self.block.get()).capacity } - len < need {
            seal(need);
            len = 0;
        }
        // SAFETY: the owner; the `need` words past `len` are within the block's capacity,
        // and no other thread reads past `published`.
        let at = unsafe { (*self.block.get()).base.add(len) };
        prefetch::ahead_of(at.wrapping_add(need));
        write(at);
        // Publishes the words written to a drainer that reads this length.
        self.published.store(len + need, Ordering::Release);
    }

    /// Moves the words written into `sealed` (but those a drain took) and starts a block
    /// with room for `need`. Owner only, with the lock held.
    #[cold]
    #[inline(never)]
    fn seal(&self, need: usize, sealed: &mut PackedArgs) {
        let fresh = Block::new(SPARE_BLOCKS.take(need));
        // SAFETY: the owner, with the lock held: no other thread reads the block now.
        let mut full = std::mem::replace(unsafe { &mut *self.block.get() }, fresh).vec;
        let len = self.published.load(Ordering::Relaxed);
        let taken = self.taken.load(Ordering::Relaxed);
        // SAFETY: the first `len` words were each written (and published) by `push`.
        unsafe { full.set_len(len) };
        full.drain(..taken);
        sealed.keep_block(full);
        self.forget();
    }

    /// Appends a copy of the words written that a drain did not take to `out`, leaving them
    /// in place (a ring session's snapshot). Any thread, with the lock held.
    pub(super) fn copy_into(&self, out: &mut PackedArgs) {
        self.copy_below(self.published.load(Ordering::Acquire), out);
    }

    /// [`copy_into`](Self::copy_into), marking the words taken: a drain at `stop`. Any
    /// thread, with the lock held.
    pub(super) fn take_into(&self, out: &mut PackedArgs) {
        // One read of the length for both: the owner may write more meanwhile.
        let len = self.published.load(Ordering::Acquire);
        self.copy_below(len, out);
        self.taken.store(len, Ordering::Relaxed);
    }

    fn copy_below(&self, len: usize, out: &mut PackedArgs) {
        let taken = self.taken.load(Ordering::Relaxed);
        if taken < len {
            // SAFETY: with the lock held the block does not change, and the words below
            // `len` (read with Acquire) were written before it was published.
            let words = unsafe {
                std::slice::from_raw_parts((*self.block.get()).base.add(taken), len - taken)
            };
            out.keep_block(words.to_vec());
        }
    }

    /// Forgets every word written (a seal, or a new session). Owner only, with the lock held.
    pub(super) fn forget(&self) {
        self.taken.store(0, Ordering::Relaxed);
        self.published.store(0, Ordering::Relaxed);
    }
}

impl Drop for OpenBlock {
    fn drop(&mut self) {
        SPARE_BLOCKS.give_back([std::mem::take(&mut self.block.get_mut().vec)]);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::record::packed_args::BLOCK_WORDS;
    use crate::Value;

    fn count(words: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
        args.push((Arc::from("count"), Value::UInt(words.len() as u64)));
    }

    /// Each op's sequence number and word count, as its args unpack.
    fn ops(packed: PackedArgs) -> Vec<(u32, u64)> {
        let mut all = Vec::new();
        packed.unpack(|seq, args| match args[..] {
            [(_, Value::UInt(n))] => all.push((seq, n)),
            _ => panic!("op {seq} unpacked as {args:?}"),
        });
        all
    }

    fn taken(open: &OpenBlock, sealed: &Mutex<PackedArgs>) -> Vec<(u32, u64)> {
        let mut out = std::mem::take(&mut *lock(sealed));
        open.take_into(&mut out);
        ops(out)
    }

    #[test]
    fn a_drain_takes_the_ops_written_since_the_last_one() {
        let (open, sealed) = (OpenBlock::default(), Mutex::default());
        open.push(1, &[7, 8], count, &sealed);
        open.push(2, &[], count, &sealed);
        assert_eq!(taken(&open, &sealed), [(1, 2), (2, 0)]);
        open.push(3, &[9], count, &sealed);
        assert_eq!(taken(&open, &sealed), [(3, 1)]);
    }

    #[test]
    fn a_copy_leaves_the_ops_for_the_next() {
        let (open, sealed) = (OpenBlock::default(), Mutex::default());
        open.push(1, &[7], count, &sealed);
        let mut copy = lock(&sealed).clone();
        open.copy_into(&mut copy);
        assert_eq!(ops(copy), [(1, 1)]);
        assert_eq!(taken(&open, &sealed), [(1, 1)]);
    }

    #[test]
    fn ops_past_a_full_block_are_kept_after_the_sealed_ones() {
        let (open, sealed) = (OpenBlock::default(), Mutex::default());
        open.push(1, &vec![0; BLOCK_WORDS - 3], count, &sealed);
        // Two more words do not fit: the block is sealed first.
        open.push(2, &[1], count, &sealed);
        open.push(3, &vec![0; BLOCK_WORDS * 2], count, &sealed);
        let expected = [
            (1, BLOCK_WORDS as u64 - 3),
            (2, 1),
            (3, BLOCK_WORDS as u64 * 2),
        ];
        assert_eq!(taken(&open, &sealed), expected);
    }

    #[test]
    fn a_block_sealed_after_a_drain_leaves_out_what_it_took() {
        let (open, sealed) = (OpenBlock::default(), Mutex::default());
        open.push(1, &[5], count, &sealed);
        assert_eq!(taken(&open, &sealed), [(1, 1)]);
        open.push(2, &[5, 6], count, &sealed);
        open.push(3, &vec![0; BLOCK_WORDS], count, &sealed);
        assert_eq!(taken(&open, &sealed), [(2, 2), (3, BLOCK_WORDS as u64)]);
    }

    #[test]
    fn a_forgotten_block_keeps_only_later_ops() {
        let (open, sealed) = (OpenBlock::default(), Mutex::default());
        open.push(1, &[5], count, &sealed);
        open.forget();
        open.push(2, &[5], count, &sealed);
        assert_eq!(taken(&open, &sealed), [(2, 1)]);
    }

    #[test]
    fn an_op_written_while_another_thread_copies_is_copied_whole_or_not_at_all() {
        let (open, sealed) = (Arc::new(OpenBlock::default()), Arc::new(Mutex::default()));
        let owner = {
            let (open, sealed) = (Arc::clone(&open), Arc::clone(&sealed));
            std::thread::spawn(move || {
                for seq in 0..20_000 {
                    let words = vec![u64::from(seq); seq as usize % 40];
                    open.push(seq, &words, count, &sealed);
                }
            })
        };
        let mut last = 0;
        while !owner.is_finished() {
            let held = lock(&sealed);
            let mut copy = held.clone();
            open.copy_into(&mut copy);
            drop(held);
            let seen = ops(copy);
            // Every op in order from the first, each with its own length.
            assert!(seen
                .iter()
                .enumerate()
                .all(|(i, &(seq, n))| seq == i as u32 && n == u64::from(seq) % 40));
            assert!(seen.len() >= last);
            last = seen.len();
        }
        owner.join().unwrap();
        assert_eq!(taken(&open, &sealed).len(), 20_000);
    }
}
