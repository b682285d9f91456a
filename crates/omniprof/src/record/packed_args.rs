//! Args packed as words: what an op carries that would cost text and allocations to build
//! while it runs (PyTorch's input shapes, dtypes and scalar values, its FLOPs, its module
//! hierarchy), kept as the numbers they are on the recording thread and turned into `args`
//! entries at the drain, off the op's path.
//!
//! The caller packs the words its own way and names the function that unpacks them
//! ([`UnpackArgs`]); the recorder only stores them beside the op's record (a copy of the
//! words into a block of the thread's that never grows, without a lock) and calls that
//! function at `stop`. The allocator reports of
//! [`record_memory`](super::record_memory) are kept the same way.
//!
//! ```
//! use std::sync::Arc;
//! use omniprof::recording::push_op_packed;
//! use omniprof::trace::Value;
//! use omniprof::Profiler;
//!
//! // Unpacks one word as the op's `Batch` arg.
//! fn batch(words: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
//!     args.push((Arc::from("Batch"), Value::UInt(words[0])));
//! }
//!
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! // SAFETY: the name is NUL-terminated.
//! unsafe { push_op_packed(c"aten::mm".as_ptr(), 1, &[32], batch) };
//! omniprof::recording::pop_op(1);
//! let trace = profiler.stop().unwrap();
//! let mm = trace.activities.iter().find(|a| &*a.name == "aten::mm").unwrap();
//! assert_eq!(mm.arg("Batch"), Some(&Value::UInt(32)));
//! ```

use std::sync::{Arc, Mutex, OnceLock};

use super::spare_blocks::SpareBlocks;
use crate::{lock, Value};

/// Turns the words an op's packer wrote into its `args` entries, appended to `args`: called
/// once per op at the drain, on the thread that stops the session. It must not panic on
/// words its own packer wrote; a panic loses that op's packed args, not the trace.
pub type UnpackArgs = fn(words: &[u64], args: &mut Vec<(Arc<str>, Value)>);

/// An op's args, as an unpacker leaves them.
type OpArgs = Vec<(Arc<str>, Value)>;

/// Words per block of packed args (512 KiB). An op's words lie in one block, which is never
/// grown: a vector that doubled as it filled would copy everything recorded so far, again
/// and again, on the ops' threads.
pub(crate) const BLOCK_WORDS: usize = 1 << 16;

/// An op's words, at most (the length field of its header word).
pub(crate) const MAX_WORDS: usize = (1 << 24) - 1;

/// Blocks of packed args faulted in ahead of need ([`SpareBlocks`]): a pool of 4 MiB,
/// topped up below two spare blocks. Without it, 3,000 page faults cost a first
/// `record_shapes` session of 100,000 ops a fifth of its added time.
pub(crate) static SPARE_BLOCKS: SpareBlocks<u64> = SpareBlocks::new(BLOCK_WORDS, 2, 8, top_up);

fn top_up() {
    SPARE_BLOCKS.fill();
}

/// Frees spare blocks past the pool's high mark (a ring session's start).
pub(crate) fn trim_spare_blocks() {
    SPARE_BLOCKS.trim();
}

/// One thread's packed args of the current session. Each op is a header word (its record's
/// sequence number in bits 0..32, its unpacker's index in the process's [`UNPACKERS`] in bits
/// 32..40, its word count in bits 40..64) followed by its words.
#[derive(Clone, Default)]
pub(crate) struct PackedArgs {
    blocks: Vec<Vec<u64>>,
}

/// The distinct unpackers of the process, in the order first seen (a process has one or
/// two), named in each op's header by index: registered once, read without a lock by every
/// thread that packs args.
static UNPACKERS: [OnceLock<UnpackArgs>; 256] = [const { OnceLock::new() }; 256];

/// Held while an unpacker is registered, so that two threads never set two slots for one.
static REGISTERING: Mutex<()> = Mutex::new(());

/// The index of `unpack` in [`UNPACKERS`], registering it when new; `None` for a 257th.
pub(crate) fn unpacker_index(unpack: UnpackArgs) -> Option<u64> {
    known_unpacker(unpack).or_else(|| register_unpacker(unpack))
}

/// The index of `unpack` among the unpackers registered so far (set in order, from the first).
fn known_unpacker(unpack: UnpackArgs) -> Option<u64> {
    let index = UNPACKERS
        .iter()
        .map_while(OnceLock::get)
        .position(|&known| std::ptr::fn_addr_eq(known, unpack))?;
    Some(index as u64)
}

#[cold]
#[inline(never)]
fn register_unpacker(unpack: UnpackArgs) -> Option<u64> {
    let _registering = lock(&REGISTERING);
    // Another thread may have registered it since the lookup.
    if let Some(index) = known_unpacker(unpack) {
        return Some(index);
    }
    let index = UNPACKERS.iter().position(|slot| slot.get().is_none())?;
    UNPACKERS[index].set(unpack).ok()?;
    Some(index as u64)
}

/// A record's header word, laid out as [`PackedArgs`] says.
pub(crate) fn header(seq: u32, index: u64, words: usize) -> u64 {
    u64::from(seq) | (index << 32) | ((words as u64) << 40)
}

impl PackedArgs {
    /// Keeps `block`, whole ops laid out as above (a thread's sealed open block, or a copy
    /// of what it holds), after the blocks kept so far.
    pub(crate) fn keep_block(&mut self, block: Vec<u64>) {
        if block.is_empty() {
            SPARE_BLOCKS.give_back([block]);
        } else {
            self.blocks.push(block);
        }
    }

    /// Forgets the oldest blocks, whole, while `gone` holds for the sequence number of every
    /// op of a block (not only its last: nothing here needs a block's records in order); the
    /// newest block stays (a ring session's, trimmed as it reuses
    /// chunks).
    pub(crate) fn forget_front_while(&mut self, mut gone: impl FnMut(u32) -> bool) {
        let mut all_gone = |block: &Vec<u64>| {
            let mut at = 0;
            while let Some(&header) = block.get(at) {
                if !gone(header as u32) {
                    return false;
                }
                at += 1 + (header >> 40) as usize;
            }
            at > 0
        };
        let whole = self.blocks.len().saturating_sub(1);
        let done = self.blocks[..whole]
            .iter()
            .take_while(|b| all_gone(b))
            .count();
        SPARE_BLOCKS.give_back(self.blocks.drain(..done));
    }

    /// Forgets every op (a new session), keeping one block's memory.
    pub(crate) fn clear(&mut self) {
        if self.blocks.len() > 1 {
            SPARE_BLOCKS.give_back(self.blocks.drain(1..));
        }
        if let Some(block) = self.blocks.first_mut() {
            block.clear();
        }
    }

    /// Hands `each` every op's record sequence number and its args, unpacked, in the order
    /// they were kept. An unpacker that panics costs its op these args.
    pub(crate) fn unpack(self, mut each: impl FnMut(u32, OpArgs)) {
        for block in &self.blocks {
            let mut at = 0;
            while let Some(&header) = block.get(at) {
                let len = (header >> 40) as usize;
                let words = &block[at + 1..at + 1 + len];
                at += 1 + len;
                let unpack = UNPACKERS[((header >> 32) & 0xff) as usize].get();
                let mut args = Vec::new();
                let unpacked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    if let Some(unpack) = unpack {
                        unpack(words, &mut args);
                    }
                }));
                if unpacked.is_err() {
                    args.clear();
                }
                each(header as u32, args);
            }
        }
        SPARE_BLOCKS.give_back(self.blocks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(words: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
        args.push((Arc::from("count"), Value::UInt(words.len() as u64)));
    }

    fn panics(_: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
        args.push((Arc::from("half"), Value::Bool(true)));
        panic!("a broken unpacker");
    }

    impl PackedArgs {
        /// Keeps `words` for record `seq` after those kept so far, in a new block when the
        /// last has no room (a recording thread writes its open block and seals it whole).
        fn push(&mut self, seq: u32, words: &[u64], unpack: UnpackArgs) {
            let index = unpacker_index(unpack).unwrap();
            let need = words.len() + 1;
            if !matches!(self.blocks.last(), Some(b) if b.capacity() - b.len() >= need) {
                self.blocks.push(SPARE_BLOCKS.take(need));
            }
            let block = self.blocks.last_mut().unwrap();
            block.push(header(seq, index, words.len()));
            block.extend_from_slice(words);
        }
    }

    fn unpacked(packed: PackedArgs) -> Vec<(u32, OpArgs)> {
        let mut all = Vec::new();
        packed.unpack(|seq, args| all.push((seq, args)));
        all
    }

    #[test]
    fn each_op_unpacks_its_own_words_in_order() {
        let mut packed = PackedArgs::default();
        packed.push(7, &[1, 2, 3], count);
        packed.push(9, &[], count);
        packed.push(11, &[4], count);
        let unpacked = unpacked(packed);
        let counts: Vec<_> = unpacked
            .iter()
            .map(|(seq, args)| (*seq, args[0].1.clone()))
            .collect();
        assert_eq!(
            counts,
            [
                (7, Value::UInt(3)),
                (9, Value::UInt(0)),
                (11, Value::UInt(1))
            ]
        );
    }

    fn other(_: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
        args.push((Arc::from("other"), Value::Null));
    }

    #[test]
    fn ops_past_a_block_and_another_unpacker_keep_their_words() {
        let mut packed = PackedArgs::default();
        let wide = vec![1; BLOCK_WORDS - 10];
        packed.push(1, &wide, count);
        packed.push(2, &[1; 20], other);
        packed.push(3, &vec![0; BLOCK_WORDS * 2], count);
        packed.push(4, &[1, 2], count);
        // The first two, the wide op's own, and one after it.
        assert_eq!(packed.blocks.len(), 4);
        let unpacked = unpacked(packed);
        let values: Vec<_> = unpacked.iter().map(|(s, a)| (*s, a[0].1.clone())).collect();
        assert_eq!(
            values,
            [
                (1, Value::UInt(BLOCK_WORDS as u64 - 10)),
                (2, Value::Null),
                (3, Value::UInt(BLOCK_WORDS as u64 * 2)),
                (4, Value::UInt(2)),
            ]
        );
    }

    #[test]
    fn a_block_is_forgotten_only_once_every_record_in_it_is_gone() {
        let mut packed = PackedArgs::default();
        // Block 1: op 5, then records 3 and 4 (out of record order).
        packed.push(5, &vec![0; BLOCK_WORDS - 10], count);
        packed.push(3, &[1], count);
        packed.push(4, &[1], count);
        // Block 2 (ops 6 and 7), and block 3, the newest, which always stays.
        packed.push(6, &vec![0; BLOCK_WORDS - 40], count);
        packed.push(7, &[1; 20], count);
        packed.push(8, &vec![0; BLOCK_WORDS], count);
        assert_eq!(packed.blocks.len(), 3);
        // The first block's last record (4) is gone, not its first (5): it stays.
        packed.forget_front_while(|seq| seq <= 4);
        assert_eq!(packed.blocks.len(), 3);
        packed.forget_front_while(|seq| seq <= 6);
        assert_eq!(packed.blocks.len(), 2);
        packed.forget_front_while(|seq| seq <= 100);
        let seqs: Vec<u32> = unpacked(packed).into_iter().map(|(seq, _)| seq).collect();
        assert_eq!(seqs, [8]);
    }

    #[test]
    fn a_cleared_table_unpacks_only_the_new_session() {
        let mut packed = PackedArgs::default();
        packed.push(1, &[1], count);
        packed.clear();
        packed.push(2, &[1, 2, 3], count);
        let unpacked = unpacked(packed);
        assert_eq!(unpacked, [(2, vec![(Arc::from("count"), Value::UInt(3))])]);
    }

    #[test]
    fn a_panicking_unpacker_costs_its_op_its_args_only() {
        let mut packed = PackedArgs::default();
        packed.push(1, &[5], panics);
        packed.push(2, &[5, 6], count);
        let unpacked = unpacked(packed);
        assert_eq!(unpacked[0], (1, vec![]));
        assert_eq!(unpacked[1].1, vec![(Arc::from("count"), Value::UInt(2))]);
    }
}
