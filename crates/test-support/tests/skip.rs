//! A skipped check is visible in a plain test run (its line survives the harness's output
//! capture) and says how to enable it, and with `OMNIPROF_REQUIRE_ALL_CHECKS` it fails the test instead.

use std::process::Command;

use omniprof_test_support::skip::{self, Needs};

/// Set by the test below for the run of this binary it starts.
const DEMO_ENV: &str = "OMNIPROF_SKIP_DEMO";

/// Skips, when asked to: the check the test below runs in a child test process.
#[test]
fn skips_when_asked() {
    if std::env::var_os(DEMO_ENV).is_some() {
        skip::skip("demo check", Needs::CCompiler, "asked to skip");
    }
}

#[test]
fn a_skip_shows_in_a_captured_run_and_fails_when_all_checks_are_required() {
    let run = |require: bool| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "skips_when_asked"])
            .env(DEMO_ENV, "1")
            .env_remove(skip::REQUIRE_ALL_ENV);
        if require {
            cmd.env(skip::REQUIRE_ALL_ENV, "1");
        }
        cmd.output().unwrap()
    };
    let out = run(false);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{all}");
    // The reason, then how to enable the check, from the one table of them.
    let line = format!(
        "SKIPPED demo check: asked to skip. To run it: {}.",
        Needs::CCompiler.how_to_enable()
    );
    assert!(all.contains(&line), "{all}");

    let out = run(true);
    assert!(
        !out.status.success(),
        "a required check that cannot run fails"
    );
}
