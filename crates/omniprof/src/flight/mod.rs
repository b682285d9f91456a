//! The flight recorder: the recorder left on, keeping the last seconds of every host op,
//! user range and step in bounded memory, and written out as a normal trace when a step is
//! slow, the job hangs or fails, or someone asks.
//!
//! It is the same recording as a profiling session's, on the same hot path: the recorder's
//! one session runs for the recorder's life, its per-thread chunks reused oldest first
//! (rings) once they hold only records older than the window or once the process's rings
//! reach their memory bound. Records overwritten while still inside the window are counted
//! and reported in each dump. A dump copies the window out while recording goes on. Device
//! work comes from the backends that can record continuously in bounded memory of their own
//! (OpenReg); the others sit the recorder out, named.
//!
//! ```
//! use std::time::Duration;
//! use omniprof::FlightRecorder;
//!
//! let recorder = FlightRecorder::builder()
//!     .window(Duration::from_secs(30))
//!     .max_bytes(64 << 20)
//!     .start()
//!     .unwrap();
//! for _ in 0..3 {
//!     omniprof::scope!("train_step");
//!     omniprof::step();
//! }
//! # let dir = tempfile::tempdir().unwrap();
//! let dump = recorder.dump(dir.path().join("window.pt.trace.json")).unwrap();
//! assert!(dump.events >= 3);
//! recorder.stop();
//! ```
//!
//! Inside: [`recorder`] holds the running recorder, writes dumps and installs its hooks in
//! the lower layers (the step count, the session's claim, the trigger socket), so none of
//! them depends on it; [`steps`] times the steps and sees a slow one or a hang;
//! [`dump_dir`] names the dumps, keeps the last few, and writes only into a directory that
//! is the user's own, never through a link; [`reason`] says why a dump was written.

mod dump_dir;
mod reason;
mod recorder;
mod steps;

pub use reason::DumpReason;
pub use recorder::{Dump, FlightError, FlightRecorder, FlightRecorderBuilder, FlightStats};
