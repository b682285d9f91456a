//! Side entries staged without a lock: a thread's newest allocator reports, autograd
//! numbers and packed args, each kind kept in a small array of words of its
//! [`ThreadBuffer`](super::registry::ThreadBuffer) and moved into its side table (under
//! that table's lock) a batch at a time.
//!
//! With `profile_memory` every allocation and every free is a report, as many as the ops
//! or more; in a training step every op autograd records has its numbers, and with
//! `record_shapes` every op its packed inputs. Taking the side table's lock for each (an atomic exchange to lock and another to unlock,
//! uncontended until the drain) cost an entry more than the rest of its work. Only the
//! owning thread stages and moves entries; a drainer copies the staged ones under the side
//! table's lock, which also orders it with every move:
//!
//! - the owner writes an entry's words past the count, then publishes the new count
//!   (Release); a drainer reads the count (Acquire), then only the words below it, which no
//!   longer change;
//! - the owner empties the array (a move, or a new session) only while holding the lock;
//! - a drain at `stop` marks what it took, so that a later move leaves those entries out.
//!
//! A batch moves in after what was added to the table since its first entry: side tables
//! need not be in record order (the drain finds each record's entries by sequence number,
//! and a ring forgets a block only once every record in it is gone). Moving the staged
//! reports in ahead of each op's packed args cost an op with shapes under `profile_memory`
//! a move per op, not per 32 reports.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One thread's staged entries of one kind, `WORDS` words of them in all (see the module
/// docs): each entry a header word (its record's sequence number in bits 0..32, its word
/// count in bits 32..64), then its words.
pub(crate) struct Staged<const WORDS: usize> {
    words: [UnsafeCell<u64>; WORDS],
    /// Words staged: written by the owner only.
    len: AtomicUsize,
    /// The leading words a drain already took (written under the side table's lock).
    taken: AtomicUsize,
}

// SAFETY: the words are shared by the protocol of the module docs: the owner writes only
// past `len` and publishes them by storing `len` with Release; other threads read only below
// a `len` they loaded with Acquire, under the side table's lock, which the owner holds
// whenever it empties the array (the only time it writes below `len` again).
unsafe impl<const WORDS: usize> Sync for Staged<WORDS> {}

impl<const WORDS: usize> Default for Staged<WORDS> {
    fn default() -> Self {
        Self {
            words: std::array::from_fn(|_| UnsafeCell::new(0)),
            len: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
        }
    }
}

impl<const WORDS: usize> Staged<WORDS> {
    /// Stages `words` for record `seq`; false when they do not fit (nothing staged:
    /// [`move_into`](Self::move_into) first, or keep them in the side table directly
    /// when they are more than the array holds). Owner only.
    #[inline]
    pub(super) fn push(&self, seq: u32, words: &[u64]) -> bool {
        let len = self.len.load(Ordering::Relaxed);
        let Some(room) = self.words.get(len..len + 1 + words.len()) else {
            return false;
        };
        let header = u64::from(seq) | (words.len() as u64) << 32;
        for (to, &word) in room.iter().zip(std::iter::once(&header).chain(words)) {
            // SAFETY: past `len`, no other thread reads these words (the `Sync` impl), and
            // only this thread, the owner, writes.
            unsafe { *to.get() = word };
        }
        // Publishes the words above to a drainer that reads this count.
        self.len.store(len + room.len(), Ordering::Release);
        true
    }

    /// Hands every staged entry a drain did not take to `table` (its record's sequence
    /// number and words), which keeps them in the side table whose lock the caller holds,
    /// and empties the array. Owner only.
    pub(super) fn move_into(&self, table: impl FnMut(u32, &[u64])) {
        self.copy_into(table);
        self.forget();
    }

    /// Hands the staged entries a drain did not take to `table`, leaving them staged (a
    /// ring session's snapshot). Any thread, with the side table's lock held.
    pub(super) fn copy_into(&self, table: impl FnMut(u32, &[u64])) {
        self.each_below(self.len.load(Ordering::Acquire), table);
    }

    /// [`copy_into`](Self::copy_into), marking the entries taken: a drain at `stop`, which
    /// takes the side table away with them. Any thread, with the side table's lock held.
    pub(super) fn take_into(&self, table: impl FnMut(u32, &[u64])) {
        // One read of the count for both: the owner may stage more meanwhile, and an entry
        // copied here but not marked taken would be moved in again later.
        let len = self.len.load(Ordering::Acquire);
        self.each_below(len, table);
        self.taken.store(len, Ordering::Relaxed);
    }

    /// Hands `table` the staged entries from the first a drain did not take up to `len` (a
    /// count read with Acquire).
    fn each_below(&self, len: usize, mut table: impl FnMut(u32, &[u64])) {
        let cells = &self.words[self.taken.load(Ordering::Relaxed)..len];
        // SAFETY: below `len` the words were published before `len` was (Release, read with
        // Acquire) and do not change while the caller holds the side table's lock (the
        // `Sync` impl); `UnsafeCell<u64>` has the layout of `u64`.
        let mut words: &[u64] =
            unsafe { std::slice::from_raw_parts(cells.as_ptr().cast(), cells.len()) };
        while let Some((&header, rest)) = words.split_first() {
            let (entry, next) = rest.split_at((header >> 32) as usize);
            table(header as u32, entry);
            words = next;
        }
    }

    /// Forgets every staged entry (a move, or a new session). Owner only, with the side
    /// table's lock held.
    pub(super) fn forget(&self) {
        self.taken.store(0, Ordering::Relaxed);
        self.len.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// 16 entries of 2 words each fit.
    type Small = Staged<48>;

    fn seqs(into: &mut Vec<u32>) -> impl FnMut(u32, &[u64]) + '_ {
        |seq, _| into.push(seq)
    }

    /// [`seqs`], checking that each entry kept its own words.
    fn keep(held: &mut Vec<u32>) -> impl FnMut(u32, &[u64]) + '_ {
        |seq, words| {
            assert_eq!(words, [u64::from(seq), !u64::from(seq)]);
            held.push(seq);
        }
    }

    #[test]
    fn a_full_array_refuses_until_its_entries_are_moved() {
        let staged = Small::default();
        for seq in 0..16 {
            assert!(staged.push(seq, &[u64::from(seq), 1]));
        }
        assert!(!staged.push(99, &[99, 1]));
        assert!(!Small::default().push(1, &[0; 48]), "more than it holds");
        let mut table = Vec::new();
        staged.move_into(seqs(&mut table));
        assert_eq!(staged.len.load(Ordering::Relaxed), 0);
        assert!(staged.push(99, &[99, 1]));
        staged.move_into(seqs(&mut table));
        let mut expected: Vec<u32> = (0..16).collect();
        expected.push(99);
        assert_eq!(table, expected);
    }

    #[test]
    fn entries_of_any_length_come_out_as_they_went_in() {
        let staged = Small::default();
        staged.push(1, &[10]);
        staged.push(2, &[]);
        staged.push(3, &[30, 31, 32]);
        let mut all = Vec::new();
        staged.copy_into(|seq, words| all.push((seq, words.to_vec())));
        assert_eq!(all, [(1, vec![10]), (2, vec![]), (3, vec![30, 31, 32])]);
    }

    #[test]
    fn a_drain_takes_the_staged_entries_once_and_a_snapshot_leaves_them() {
        let staged = Small::default();
        staged.push(1, &[10]);
        staged.push(2, &[20]);
        let mut snapshot = Vec::new();
        staged.copy_into(seqs(&mut snapshot));
        assert_eq!(snapshot, [1, 2]);
        let mut drained = Vec::new();
        staged.take_into(seqs(&mut drained));
        assert_eq!(drained, [1, 2]);
        staged.push(3, &[30]);
        let mut later = Vec::new();
        staged.move_into(seqs(&mut later));
        assert_eq!(later, [3]);
    }

    #[test]
    fn entries_staged_while_drains_take_them_are_recorded_once_each() {
        // The owner stages and moves while another thread drains as often as it can, as a
        // session's stop may while the owner still records: every entry must come out
        // exactly once, whichever side took it, with its own words.
        const ENTRIES: u32 = 200_000;
        let staged = Small::default();
        let table = Mutex::new(Vec::new());
        let done = std::sync::atomic::AtomicBool::new(false);
        let mut all = std::thread::scope(|s| {
            let drainer = s.spawn(|| {
                let mut taken = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    let mut held = table.lock().unwrap();
                    staged.take_into(keep(&mut held));
                    taken.append(&mut held);
                }
                taken
            });
            for seq in 0..ENTRIES {
                let words = [u64::from(seq), !u64::from(seq)];
                if !staged.push(seq, &words) {
                    // The lock is held through the move, its forgetting included.
                    let mut held = table.lock().unwrap();
                    staged.move_into(keep(&mut held));
                    drop(held);
                    assert!(staged.push(seq, &words));
                }
            }
            let mut held = table.lock().unwrap();
            staged.move_into(keep(&mut held));
            drop(held);
            done.store(true, Ordering::Relaxed);
            drainer.join().unwrap()
        });
        all.append(&mut table.lock().unwrap());
        all.sort_unstable();
        assert_eq!(all.len(), ENTRIES as usize, "each entry once");
        assert!(all.iter().copied().eq(0..ENTRIES));
    }
}
