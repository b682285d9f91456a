//! The caps on what the Perfetto reader holds from one packet to the next, so that its
//! memory is bounded by them (each thing held coming from one packet, itself at most
//! [`Limits::event_bytes`](omniprof_trace::Limits)) rather than by the file: a few bytes
//! per packet otherwise cost a few hundred bytes each, without end.
//!
//! Each cap is far above what traces use. omniprof's writer puts its events on at most
//! three sequences and one per row (a thread or device stream: tens to thousands), interns
//! each distinct name, category and arg name once per sequence (thousands of kernel and op
//! names), describes one track per row lane and counter series, and holds back what ended
//! inside the slice that began before it and is still open (the ops of one profiler step).
//! Perfetto's own traces have a sequence per writer thread and data source and re-describe
//! their tracks on the same uuids.

/// Sequences holding state (interned strings, clocks, defaults). Once this many are held,
/// packets of any other sequence are skipped and counted
/// ([`ReadStats::sequence_overflow`](crate::ReadStats)); a sequence with no state takes no
/// room.
pub const SEQUENCES_HELD: usize = 1 << 16;

/// Interned strings, all live sequences together; more are dropped and counted
/// ([`ReadStats::dropped_interned`](crate::ReadStats)), and an event naming one gets no
/// name or category from it. A sequence's `incremental state cleared` frees its own.
pub const INTERNED_HELD: usize = 1 << 20;

/// Track uuids described; descriptors of further uuids are dropped and counted
/// ([`ReadStats::dropped_tracks`](crate::ReadStats)), and events on them skipped as on any
/// undescribed track. Describing a uuid again replaces its track and adds no row.
pub const TRACKS_HELD: usize = 1 << 18;

/// Ended activities held back while a slice that began before them is still open; past
/// this many the oldest is delivered ahead of that slice, and counted
/// ([`ReadStats::reordered`](crate::ReadStats)): nothing is lost, the begin order is.
pub const ENDED_HELD: usize = 1 << 18;
