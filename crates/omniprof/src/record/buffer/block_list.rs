//! An append-only list kept in fixed blocks, for what a record carries beside it: a vector
//! that doubles as it fills copies everything so far and faults in fresh pages each time, on
//! the recording thread, mid-session (11 reallocations cost 11 % of a 10,000-op PyTorch
//! session's callbacks, in instructions alone). A block is allocated once and never grown.

use crate::record::spare_blocks::SpareBlocks;

/// The bytes of a block.
const BLOCK_BYTES: usize = 64 << 10;

/// Items appended in order, read back in order, in blocks of [`BLOCK_BYTES`].
#[derive(Clone)]
pub(crate) struct BlockList<T> {
    blocks: Vec<Vec<T>>,
}

impl<T> Default for BlockList<T> {
    fn default() -> Self {
        Self { blocks: Vec::new() }
    }
}

impl<T> BlockList<T> {
    /// The items a block holds.
    pub(crate) const PER_BLOCK: usize = {
        let size = std::mem::size_of::<T>();
        if size == 0 || size >= BLOCK_BYTES {
            1
        } else {
            BLOCK_BYTES / size
        }
    };

    pub(crate) fn push(&mut self, item: T) {
        self.push_into(item, || Vec::with_capacity(Self::PER_BLOCK));
    }

    /// [`push`](Self::push), taking a new block from `spares` (blocks of [`Self::PER_BLOCK`]
    /// items) when the last one is full.
    pub(crate) fn push_from(&mut self, item: T, spares: &SpareBlocks<T>) {
        self.push_into(item, || spares.take(Self::PER_BLOCK));
    }

    #[inline]
    fn push_into(&mut self, item: T, new_block: impl FnOnce() -> Vec<T>) {
        match self.blocks.last_mut() {
            Some(block) if block.len() < block.capacity() => block.push(item),
            _ => {
                let mut block = new_block();
                block.push(item);
                self.blocks.push(block);
            }
        }
    }

    /// The blocks, each holding its items in order.
    pub(crate) fn into_blocks(self) -> Vec<Vec<T>> {
        self.blocks
    }

    /// Forgets the oldest blocks, whole, while `gone` holds for a block's last item; the
    /// newest block stays (a ring's side tables, trimmed as its chunks are reused). Returns
    /// the blocks forgotten, for a pool to keep (they are freed when it is dropped).
    pub(crate) fn forget_front_while(
        &mut self,
        mut gone: impl FnMut(&T) -> bool,
    ) -> std::vec::Drain<'_, Vec<T>> {
        let whole = self.blocks.len().saturating_sub(1);
        let done = self.blocks[..whole]
            .iter()
            .take_while(|b| b.last().is_some_and(&mut gone))
            .count();
        self.blocks.drain(..done)
    }

    /// Forgets every item, keeping the first block's memory. Returns the other blocks, as
    /// [`forget_front_while`](Self::forget_front_while) does.
    pub(crate) fn clear(&mut self) -> std::vec::Drain<'_, Vec<T>> {
        if let Some(block) = self.blocks.first_mut() {
            block.clear();
        }
        let first = self.blocks.len().min(1);
        self.blocks.drain(first..)
    }
}

impl<T> IntoIterator for BlockList<T> {
    type Item = T;
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Vec<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.blocks.into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_past_many_blocks_come_back_in_order() {
        let mut list = BlockList::default();
        let count = BlockList::<u64>::PER_BLOCK * 3 + 5;
        (0..count as u64).for_each(|i| list.push(i));
        assert_eq!(list.blocks.len(), 4);
        assert!(list
            .blocks
            .iter()
            .all(|b| b.capacity() == BlockList::<u64>::PER_BLOCK));
        assert!(list.into_iter().eq(0..count as u64));
    }

    #[test]
    fn forgetting_the_front_hands_back_whole_old_blocks_and_keeps_the_newest() {
        let mut list = BlockList::default();
        let per = BlockList::<u64>::PER_BLOCK as u64;
        (0..per * 3).for_each(|i| list.push(i));
        let forgotten: Vec<Vec<u64>> = list.forget_front_while(|&last| last < per * 2).collect();
        assert_eq!(forgotten.len(), 2, "handed back whole, for a pool");
        assert!(forgotten[1].iter().copied().eq(per..per * 2));
        assert!(list.clone().into_iter().eq(per * 2..per * 3));
        list.forget_front_while(|_| true);
        assert_eq!(list.blocks.len(), 1);
    }

    #[test]
    fn a_cleared_list_keeps_one_block_and_none_of_its_items() {
        let mut list = BlockList::default();
        (0..BlockList::<u32>::PER_BLOCK as u32 + 1).for_each(|i| list.push(i));
        assert_eq!(list.clear().count(), 1, "the second block is handed back");
        list.push(7);
        assert_eq!(list.blocks.len(), 1);
        assert_eq!(list.into_iter().collect::<Vec<_>>(), [7]);
    }
}
