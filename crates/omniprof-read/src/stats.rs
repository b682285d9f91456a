//! [`ReadStats`]: what a read read, and what it skipped by reason.

/// What was read, and what was skipped by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Elements of `traceEvents` read.
    pub events: u64,
    /// Synthetic events that writers regenerate from the spans (`Iteration Start` markers,
    /// the `Spans` sort row): dropped by design, not counted as skipped.
    pub regenerated: u64,
    /// Skipped: a `ph` other than `X`, `i`, `C`, `M`, `s`, `f`.
    pub unknown_phase: u64,
    /// Skipped: an `X`, `i` or `C` event whose `cat` is not an activity type.
    pub unknown_category: u64,
    /// Skipped: an `M` event that is not a process or thread row, or whose value has the
    /// wrong type.
    pub unknown_metadata: u64,
    /// Skipped: a `pid` or `tid` that is not an integer where the event needs one.
    pub unsupported_id: u64,
    /// Skipped: a flow event with no activity of its row and time (without a flow already)
    /// within 4,096 events of it, an unknown flow `cat`, or an `id` that is not a
    /// non-negative integer.
    pub unmatched_flow: u64,
    /// Counter values (`args` of a `C` event) that were not finite numbers, dropped; a
    /// sample left with none is not delivered.
    pub dropped_counter_values: u64,
    /// Skipped: packets of a Perfetto trace that are none of track events, track
    /// descriptors, interned data or clock snapshots (ftrace, process trees, ...).
    pub foreign_packets: u64,
    /// Arg values skipped, their events kept: nested deeper than
    /// [`MAX_VALUE_DEPTH`](omniprof_trace::MAX_VALUE_DEPTH), which not every reader reads.
    pub too_deep_args: u64,
    /// Arg values skipped, their events kept: a Perfetto annotation's `legacy_json` text that
    /// is not JSON.
    pub malformed_args: u64,
    /// Header entries of a Perfetto trace skipped: named as a top-level key of the JSON
    /// (`traceEvents`, `schemaVersion`, `displayTimeUnit`, or an escaped
    /// `baseTimeNanoseconds`, `traceName`, `deviceProperties`), which the JSON written from
    /// the trace would then hold twice.
    pub reserved_header_keys: u64,
    /// Skipped: packets of a Perfetto sequence other than the
    /// [`SEQUENCES_HELD`](crate::SEQUENCES_HELD) that hold state (interned strings, clocks),
    /// once that many are held.
    pub sequence_overflow: u64,
    /// Interned strings of a Perfetto trace dropped past the cap on the bytes of those held
    /// ([`INTERNED_BYTES_HELD`](crate::INTERNED_BYTES_HELD)): events naming one are read
    /// without that name or category.
    pub dropped_interned: u64,
    /// Perfetto track descriptors dropped past the cap on tracks held
    /// ([`TRACKS_HELD`](crate::TRACKS_HELD)): events on their tracks are skipped as on an
    /// undescribed track.
    pub dropped_tracks: u64,
    /// Slices (and spans) of a Perfetto trace cut while open: the oldest open one, once
    /// [`OPEN_HELD`](crate::OPEN_HELD) were open or [`ENDED_HELD`](crate::ENDED_HELD)
    /// activities that began after it had ended. Each was delivered then, ending at the
    /// latest time read and marked unfinished (`"finished": false`); the end that would have
    /// closed it closed nothing.
    pub cut_slices: u64,
    /// Complete (`X`) events of the JSON with a negative `dur`, kept: their activity ends
    /// before it starts, so it lasts 0 ([`Activity::duration_ns`](omniprof_trace::Activity::duration_ns)).
    pub negative_durations: u64,
}

impl ReadStats {
    /// Events skipped, all reasons together.
    pub fn skipped(&self) -> u64 {
        self.unknown_phase
            + self.unknown_category
            + self.unknown_metadata
            + self.unsupported_id
            + self.unmatched_flow
            + self.foreign_packets
            + self.sequence_overflow
    }
}
