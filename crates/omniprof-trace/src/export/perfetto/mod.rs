//! The native Perfetto writer: the [`Trace`](crate::Trace) as a protobuf trace (`.pftrace`) that the
//! Perfetto UI and trace processor open directly, several times smaller than the same
//! trace's JSON and faster to load (`docs/perfetto.md`).
//!
//! ```
//! use omniprof_trace::{Activity, ActivityType, Trace};
//! use omniprof_trace::write_perfetto;
//!
//! let mut trace = Trace::new(1_000_000, 2_000_000);
//! trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 7, 7, 1_100_000, 1_500_000));
//! let mut pftrace = Vec::new();
//! let stats = write_perfetto(&trace, &mut pftrace).unwrap();
//! assert_eq!(stats.events, 3); // the op's begin and end, and the window's end marker
//! assert_eq!(pftrace[0], 0x0a); // `Trace.packet`
//! ```
//!
//! How the model maps (one packet sequence, every track declared before its first event):
//!
//! - a host process row → a process track (`pid`, name, label, sort index); a host thread row
//!   → a thread track (`pid`, `tid`, name), a root track as Perfetto requires;
//! - a device (a pid that device activities use) → a process track with the pid
//!   `DEVICE_PID_BASE + device`, so that device indices never pose as OS processes; its
//!   streams → tracks named like their rows, under the device's process track;
//! - an activity → a slice (`SLICE_BEGIN` and `SLICE_END`) on its row's track, with its type
//!   as the category and its args as debug annotations (`External id` first, as in the
//!   JSON); the `correlation` arg of device work and runtime calls is `correlation_id`; an
//!   activity that would partly overlap another of its row goes to a sibling track of the
//!   same name, as the Chrome writer moves it to a sibling row;
//! - an instant → an instant event; counter samples → counter tracks under the device's
//!   process, one per series: a `hardware_counters` metric is named by the metric, any other
//!   counter's key `"<name> <key>"`, as Perfetto names the series of a JSON `C` event;
//! - a flow → its id in `flow_ids` on the start's slice and in `terminating_flow_ids` on the
//!   end's, namespaced by kind (`ac2g`, `fwdbwd`) so the two never collide; a start with
//!   several ends lists an id per end (the `flows` module);
//! - spans → slices on a `Spans` track (one child track per span name), and the window's end
//!   → an instant there;
//! - names, categories and arg names are interned; times are the model's nanoseconds, which
//!   trace processor reads as its trace clock.
//!
//! Events are written in time order: a slice's end is held back until no later-starting
//! event precedes it, so no track's timestamps ever go backwards, and each packet's
//! timestamp is the difference from the one before (a sequence-scoped incremental clock),
//! which takes a byte or two where an absolute time takes nine. The spans, which overlap
//! everything, are written last on a second sequence, with absolute times.
//!
//! What the writer must know before its first event (the rows and their lanes, the devices,
//! the flows' ends, the counter tracks) is its layout, found in a first pass: over the
//! trace's activities here, over a first read of a trace file in the stream module
//! ([`PerfettoSurvey`], [`PerfettoStream`]), which then writes each activity as it is read
//! again, in bounded memory, with the same code. Activities that come in written order only
//! on each row (as Kineto writes device work after the host's) are written there on a
//! sequence per row, each with its own clock, interned names and held-back ends.

mod counter_tracks;
mod ends;
mod flows;
mod proto;
mod stream;
mod writer;

pub use stream::{PerfettoLayout, PerfettoStream, PerfettoSurvey};
pub use writer::write_perfetto;
