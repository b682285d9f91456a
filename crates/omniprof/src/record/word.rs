//! The record word: the 64 bits of a record that say what happened (its tick says when).
//! Its whole layout is here, for the writers (ranges, instants, Python frames, memory
//! events), the buffer (which stamps and checks the session tag) and the decoder.
//!
//! Bits 0..=31 hold the range's sequence number (the one an end record closes), 32..=33 the
//! kind, 34..=39 the session tag, 40..=63 the interned name. An end record written by another
//! thread than the range's own (a foreign end, see [`OwnedRange`](super::OwnedRange)) holds
//! the owning thread's index + 1 where a name would be; a local end holds 0 there.

use super::name::Name;

const KIND_SHIFT: u32 = 32;
const KIND_MASK: u64 = 0x3;
/// A host op's beginning (`cpu_op`).
pub(super) const KIND_OP: u64 = 0;
/// A user range's beginning (`user_annotation`), or a Python frame's.
pub(super) const KIND_USER: u64 = 1;
/// A range's end.
pub(super) const KIND_END: u64 = 2;
/// A point event.
pub(super) const KIND_INSTANT: u64 = 3;
const NAME_SHIFT: u32 = 40;
const TAG_SHIFT: u32 = 34;
const TAG_MASK: u64 = 0x3f << TAG_SHIFT;

/// The word of a record of `kind` beginning something named `name`.
#[inline(always)]
pub(super) fn word(kind: u64, name: Name) -> u64 {
    (kind << KIND_SHIFT) | ((name.id() as u64) << NAME_SHIFT)
}

/// The word of the record that ends range `seq`.
#[inline(always)]
pub(super) fn end_word(seq: u32) -> u64 {
    (KIND_END << KIND_SHIFT) | seq as u64
}

/// The largest thread index a foreign end record can name.
pub(super) const MAX_FOREIGN_OWNER: u32 = (1 << (64 - NAME_SHIFT)) - 2;

/// The word of the record that ends range `seq` of thread `owner`, written by another thread.
pub(super) fn foreign_end_word(owner: u32, seq: u32) -> u64 {
    end_word(seq) | ((owner as u64 + 1) << NAME_SHIFT)
}

/// The tag that marks session `state`'s records: the low bits of its generation. Two
/// sessions with the same tag are 64 apart, and a record of the older one also fails the
/// drainer's tick test.
pub(super) fn session_tag(state: u64) -> u64 {
    ((state >> 1) << TAG_SHIFT) & TAG_MASK
}

/// The session tag `w` carries.
#[inline]
pub(super) fn tag_of(w: u64) -> u64 {
    w & TAG_MASK
}

/// `w` without its session tag, as the drain hands records to the decoder.
#[inline]
pub(super) fn untagged(w: u64) -> u64 {
    w & !TAG_MASK
}

/// The kind of record `w` (one of the `KIND_*`).
#[inline]
pub(super) fn kind(w: u64) -> u64 {
    (w >> KIND_SHIFT) & KIND_MASK
}

/// The sequence number in `w`: the record's own, or for an end record the range's it closes.
#[inline]
pub(super) fn seq(w: u64) -> u32 {
    w as u32
}

/// The interned name id of a beginning or an instant.
#[inline]
pub(super) fn name_id(w: u64) -> u32 {
    (w >> NAME_SHIFT) as u32
}

/// For an end record: the owning thread's index when another thread wrote it, `None` for a
/// local end.
#[inline]
pub(super) fn foreign_owner(w: u64) -> Option<u32> {
    name_id(w).checked_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_reads_back_as_written_and_the_tag_never_overlaps_them() {
        let w = end_word(0xdead_beef);
        assert_eq!(
            (kind(w), seq(w), foreign_owner(w)),
            (KIND_END, 0xdead_beef, None)
        );
        let w = foreign_end_word(MAX_FOREIGN_OWNER, 7);
        assert_eq!((kind(w), seq(w)), (KIND_END, 7));
        assert_eq!(foreign_owner(w), Some(MAX_FOREIGN_OWNER));
        let tag = session_tag(u64::MAX);
        assert_eq!(tag & w, 0);
        assert_eq!(tag_of(w | tag), tag);
        assert_eq!(untagged(w | tag), w);
    }
}
