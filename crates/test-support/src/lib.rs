//! What the workspace's tests share, as a dev-dependency of every crate with tests:
//!
//! - [`crafted_pftrace`]: Perfetto traces encoded by hand, hostile ones included;
//! - [`cli`]: running a command-line binary (the `omniprof` CLI) and checking how it ended;
//! - [`checker`]: the offline Perfetto checker, which loads a trace into Perfetto's trace
//!   processor and reports what it counted and rejected;
//! - [`decoder`]: the independent decoder of `.pftrace` files (Perfetto's own schema), which
//!   also compares one with the JSON of the same trace;
//! - [`lock`]: the one lock for tests that must not overlap (sessions and plugins are
//!   process-wide);
//! - [`session`]: one realistic recorded session, with names JSON writers get wrong;
//! - [`plugins`]: building the C and Rust test plugins of the dynamic plugin ABI;
//! - [`data`]: PyTorch's reference trace and table, and the rows of the example of
//!   `docs/trace-format.md` §14;
//! - `fork` (Unix): waiting for a forked child with a deadline;
//! - `memory` (Unix): the peak memory of a child process;
//! - `shared_dirs` (Unix): FIFOs, sticky directories and another user's files and links,
//!   for the tests of writes in shared directories;
//! - [`skip`]: checks that cannot run here say so visibly, and fail where all must run;
//! - `trigger` (Unix): a trigger handler that records and saves a real session.
//!
//! It depends on `omniprof`, which is fine for integration tests (they link the same
//! `omniprof`). The unit tests of `omniprof` use it too, through a dev-dependency cycle:
//! their test build is a second copy of the crate, whose types do not mix with the ones seen
//! here, so they take only [`lock::serial`]. `omniprof-trace` does not use it at all, so that
//! its dependency tree stays free of the recorder and the plugin loader.

pub mod checker;
pub mod cli;
pub mod crafted_pftrace;
pub mod cupti;
pub mod data;
pub mod decoder;
#[cfg(unix)]
pub mod fork;
pub mod lock;
#[cfg(unix)]
pub mod memory;
pub mod plugins;
pub mod session;
#[cfg(unix)]
pub mod shared_dirs;
pub mod skip;
#[cfg(unix)]
pub mod trigger;
