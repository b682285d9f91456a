//! How sibling lanes of a row are numbered in a Chrome JSON trace: the one encoding the
//! writer uses to move an overlapping event to a sibling row and the reader uses to fold it
//! back, so that neither depends on the other.

/// Sibling rows for overlapping events get `tid + lane × LANE_STRIDE`: above any OS thread
/// id (Linux caps them at 2^22) or stream id, and below 2^31, because Perfetto folds larger
/// tids into the process's main thread.
pub(crate) const LANE_STRIDE: i64 = 1 << 24;
/// Lanes past this share the last one (their events may then overlap).
pub(crate) const MAX_LANE: usize = 127;

/// The tid that lane `lane` of row `tid` is written with (lane 0 is the row itself).
#[inline]
pub(crate) fn lane_tid(tid: i64, lane: i64) -> i64 {
    tid + lane * LANE_STRIDE
}

/// The row an event belongs to, for events the writer moved to a sibling row
/// (`tid + lane × LANE_STRIDE`, lanes 1 to `MAX_LANE`). A foreign trace whose own tids fall
/// in that range would be folded too; Linux thread ids and stream ids never do.
pub(crate) fn lane_row(tid: i64) -> i64 {
    let lane = tid / LANE_STRIDE;
    if (1..=MAX_LANE as i64).contains(&lane) {
        tid % LANE_STRIDE
    } else {
        tid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lane_of_a_row_folds_back_to_the_row() {
        for lane in 0..=MAX_LANE as i64 {
            assert_eq!(lane_row(lane_tid(4_000_000, lane)), 4_000_000);
        }
        // Past the last lane, a tid is taken as it is.
        let beyond = lane_tid(7, MAX_LANE as i64 + 1);
        assert_eq!(lane_row(beyond), beyond);
    }
}
