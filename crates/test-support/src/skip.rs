//! Checks that cannot run here (a missing tool, not root) say so where the test run's reader
//! sees it, and fail where every check must run.
//!
//! A skipped check writes `SKIPPED <check>: <reason>` straight to the process's standard
//! error, which the test harness does not capture: the line shows in a plain `cargo test`
//! run, beside the test's `ok`, instead of only under `--nocapture`. With
//! [`REQUIRE_ALL_ENV`] set (CI sets it), a check that cannot run fails instead.
//!
//! ```
//! use omniprof_test_support::skip;
//!
//! fn check_with_a_tool(tool: Option<&str>) {
//!     let Some(tool) = tool else {
//!         return skip::skip("the tool check", "the tool is not installed");
//!     };
//!     assert!(!tool.is_empty());
//! }
//! # if std::env::var_os(skip::REQUIRE_ALL_ENV).is_none() { check_with_a_tool(None); }
//! check_with_a_tool(Some("tool"));
//! ```

use std::io::Write;

/// Set (to anything) where no check may be skipped: each skip is then a failure.
pub const REQUIRE_ALL_ENV: &str = "OMNIPROF_REQUIRE_ALL_CHECKS";

/// Skips `check` because of `reason`: a line on the uncaptured standard error, or, with
/// [`REQUIRE_ALL_ENV`] set, a panic naming both.
pub fn skip(check: &str, reason: &str) {
    if std::env::var_os(REQUIRE_ALL_ENV).is_some() {
        panic!("{check} cannot run ({REQUIRE_ALL_ENV} is set): {reason}");
    }
    // `eprintln!` would be captured with the test's output and shown only on failure.
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {check}: {reason}");
}
