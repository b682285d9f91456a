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

/// Bytes of interned strings held, all live sequences together, each string counted as
/// its length plus [`INTERNED_ENTRY_BYTES`] (a few long strings and many short ones both
/// fill it); more are dropped and counted ([`ReadStats::dropped_interned`](crate::ReadStats)),
/// and an event naming one gets no name or category from it. A sequence's `incremental
/// state cleared` frees its own. 100,000 names of 40 bytes take a third of it.
pub const INTERNED_BYTES_HELD: usize = 32 << 20;

/// What one interned string counts for beyond its bytes: about what its table entry and
/// its shared string's header take.
pub const INTERNED_ENTRY_BYTES: usize = 64;

/// Track uuids described; descriptors of further uuids are dropped and counted
/// ([`ReadStats::dropped_tracks`](crate::ReadStats)), and events on them skipped as on any
/// undescribed track. Describing a uuid again replaces its track and adds no row.
pub const TRACKS_HELD: usize = 1 << 18;

/// Ended activities held back while a slice that began before them is still open. Past
/// this many, that slice is cut ([`OPEN_HELD`] says how) and what it held back delivered.
pub const ENDED_HELD: usize = 1 << 18;

/// Slices (and spans) open at once, all tracks together. Past this many, or past
/// [`ENDED_HELD`] activities waiting for it, the oldest open slice is *cut*: delivered at
/// once as unfinished (`"finished": false`, as Kineto marks an op open at its stop), ending
/// at the latest time read, and the end that would close it closes nothing; counted in
/// [`ReadStats::cut_slices`](crate::ReadStats). Nesting is shallow and threads are
/// thousands, so traces hold far fewer.
pub const OPEN_HELD: usize = 1 << 16;

/// The writer's extra flow ids (the second and later ends of a flow) waiting for their
/// end; more are not kept and their ends count as unmatched
/// ([`ReadStats::unmatched_flow`](crate::ReadStats)).
pub const FLOWS_HELD: usize = 1 << 18;
