//! Where a file format has no place for one of the model's notions, how writers lay it out
//! and readers fold it back: the one encoding both use, so that neither depends on the other.
//!
//! - Overlapping events of a row go to sibling rows (lanes) in a Chrome JSON trace:
//!   [`lane_tid`] numbers them, [`lane_row`] folds them back.
//! - A Perfetto protobuf trace numbers device processes from [`DEVICE_PID_BASE`], gives the
//!   extra ends of a flow ids from [`OWN_FLOW_IDS`], and carries the JSON header's values as
//!   the window end marker's annotations, named by [`header`].

/// Sibling rows for overlapping events get `tid + lane × LANE_STRIDE`: above any OS thread
/// id (Linux caps them at 2^22) or stream id, and below 2^31, because Perfetto folds larger
/// tids into the process's main thread.
pub const LANE_STRIDE: i64 = 1 << 24;
/// Lanes past this share the last one (their events may then overlap).
pub const MAX_LANE: usize = 127;

/// The tid that lane `lane` of row `tid` is written with (lane 0 is the row itself).
#[inline]
pub fn lane_tid(tid: i64, lane: i64) -> i64 {
    tid + lane * LANE_STRIDE
}

/// The row an event belongs to, for events the writer moved to a sibling row
/// (`tid + lane × LANE_STRIDE`, lanes 1 to `MAX_LANE`). A foreign trace whose own tids fall
/// in that range would be folded too; Linux thread ids and stream ids never do.
pub fn lane_row(tid: i64) -> i64 {
    let lane = tid / LANE_STRIDE;
    if (1..=MAX_LANE as i64).contains(&lane) {
        tid % LANE_STRIDE
    } else {
        tid
    }
}

/// Device `d` is written as the process `DEVICE_PID_BASE + d` in a `.pftrace`: above any OS
/// pid (Linux caps them at 2^22) and inside `int32`.
pub const DEVICE_PID_BASE: i64 = 1 << 30;

/// Perfetto flow ids of a flow's ends after the first (a `.pftrace` end closes its id for
/// good): top bits `11`, above every id a flow of the model's kinds is written with (those
/// kinds take the values 1 and 2 of the top two bits).
pub const OWN_FLOW_IDS: u64 = 3 << 62;

/// The JSON header's values, as a `.pftrace` names them among the window end marker's
/// annotations.
pub mod header {
    /// The JSON's `baseTimeNanoseconds`.
    pub const BASE_TIME: &str = "baseTimeNanoseconds";
    /// The JSON's `traceName`.
    pub const TRACE_NAME: &str = "traceName";
    /// The JSON's `deviceProperties`.
    pub const DEVICE_PROPERTIES: &str = "deviceProperties";
    /// The capture window's start (the JSON says it with its row events' `ts`).
    pub const WINDOW_START: &str = "windowStartNanoseconds";
    /// The keys above: a metadata key among them (or one that starts with
    /// [`METADATA_ESCAPE`]) is written with [`METADATA_ESCAPE`] before it, so that it neither
    /// takes their place nor is lost.
    pub const OWN: [&str; 4] = [BASE_TIME, TRACE_NAME, DEVICE_PROPERTIES, WINDOW_START];
    /// Before a metadata key that is one of [`OWN`] (or starts with this), in a `.pftrace`;
    /// the reader takes it off.
    pub const METADATA_ESCAPE: &str = "metadata:";
    /// The JSON's own top-level keys, which no metadata entry may take (the JSON written
    /// from it would hold them twice): a `.pftrace` header annotation named so (once
    /// unescaped) is skipped and counted, not taken as metadata.
    pub const JSON_KEYS: [&str; 6] = [
        "traceEvents",
        "schemaVersion",
        "displayTimeUnit",
        BASE_TIME,
        TRACE_NAME,
        DEVICE_PROPERTIES,
    ];

    /// The key a metadata entry named `key` is written under in a `.pftrace`.
    pub fn escaped(key: &str) -> std::borrow::Cow<'_, str> {
        if OWN.contains(&key) || key.starts_with(METADATA_ESCAPE) {
            format!("{METADATA_ESCAPE}{key}").into()
        } else {
            key.into()
        }
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
