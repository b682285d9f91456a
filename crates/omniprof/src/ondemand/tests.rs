//! The state machine's rules (`docs/lifecycle.md` §1, §3), driven by an injected clock
//! and iteration counter: no thread, no sleep.

use super::machine::{utc, Action, Machine, OnDemandState, OnDemandTrigger};
use super::{Refused, TraceFailed};
use crate::Config;

const ID: u64 = 1;
/// The parse time of the time-based scenarios, in ms since the epoch.
const T: i64 = 1_700_000_000_000;

fn iterations(start: i64, warmup: i64, iterations: i64, roundup: Option<i64>) -> OnDemandTrigger {
    OnDemandTrigger::Iteration {
        start,
        warmup,
        iterations,
        roundup,
    }
}

/// Kineto's default schedule for a request at `T`: S = T + W + 2 s.
fn time(warmup_ms: i64, duration_ms: i64) -> OnDemandTrigger {
    OnDemandTrigger::Time {
        start_ms: T + warmup_ms + 2_000,
        warmup_ms,
        duration_ms,
    }
}

/// A machine holding `trigger`, submitted at iteration `current` and time `T`.
fn submitted(trigger: OnDemandTrigger, current: i64) -> Machine {
    let mut machine = Machine::default();
    machine.submit(ID, trigger, T, current, false).unwrap();
    machine
}

/// Steps `machine` through `steps`; returns the steps that did something, with what.
fn run(machine: &mut Machine, steps: std::ops::RangeInclusive<i64>) -> Vec<(i64, Vec<Action>)> {
    steps
        .filter_map(|i| {
            let actions = machine.step(i);
            (!actions.is_empty()).then_some((i, actions))
        })
        .collect()
}

fn start() -> Action {
    Action::Start {
        id: ID,
        late_ms: None,
    }
}

/// Collection runs exactly over `[first, first + n)`, after warm-up from `warmup_at`.
fn assert_run(trace: &[(i64, Vec<Action>)], warmup_at: i64, first: i64, n: i64) {
    let mut expected = Vec::new();
    if warmup_at == first {
        expected.push((first, vec![Action::Prepare(ID), start()]));
    } else {
        expected.push((warmup_at, vec![Action::Prepare(ID)]));
        expected.push((first, vec![start()]));
    }
    expected.push((first + n, vec![Action::End(ID)]));
    assert_eq!(trace, expected);
}

#[test]
fn iteration_run_50_5_10() {
    let mut machine = submitted(iterations(50, 5, 10, None), 10);
    assert_eq!(machine.next_iteration(), 45);
    let trace = run(&mut machine, 11..=80);
    assert_run(&trace, 45, 50, 10);
    assert_eq!(machine.state(), OnDemandState::ProcessTrace);
    machine.processed();
    assert_eq!(machine.state(), OnDemandState::WaitForRequest);
    assert_eq!(machine.request(), None);
}

#[test]
fn iteration_run_0_0_2_starts_at_the_next_step() {
    // Requested while the application is at iteration 7: late, so it starts now.
    let mut machine = submitted(iterations(0, 0, 2, None), 7);
    let trace = run(&mut machine, 8..=20);
    assert_run(&trace, 8, 8, 2);
}

#[test]
fn iteration_run_0_5_5_warms_up_from_the_next_step() {
    // Warm-up would have begun at −5: late, so warm up 5 steps from now.
    let mut machine = submitted(iterations(0, 5, 5, None), 3);
    let trace = run(&mut machine, 4..=30);
    assert_run(&trace, 4, 9, 5);
}

#[test]
fn roundup_current_9_start_8_warmup_5_roundup_100() {
    let mut machine = submitted(iterations(8, 5, 10, Some(100)), 8);
    assert_eq!(machine.step(9), vec![], "nothing happens at 9");
    assert_eq!(machine.next_iteration(), 95);
    assert_eq!(machine.state(), OnDemandState::WaitForRequest);
    let trace = run(&mut machine, 10..=200);
    assert_run(&trace, 95, 100, 10);
}

#[test]
fn roundup_current_9_start_8_warmup_5_no_roundup() {
    let mut machine = submitted(iterations(8, 5, 10, None), 8);
    let trace = run(&mut machine, 9..=40);
    assert_run(&trace, 9, 14, 10);
}

#[test]
fn roundup_current_2010_unset_start_roundup_1000() {
    // The start iteration is unset; validation sets it to 0 because a roundup is given.
    let config =
        Config::parse("PROFILE_START_ITERATION_ROUNDUP=1000\nACTIVITIES_ITERATIONS=3").unwrap();
    let trigger = OnDemandTrigger::from_config(&config, 2009).unwrap();
    assert_eq!(trigger, iterations(0, 0, 3, Some(1000)));
    let mut machine = submitted(trigger, 2009);
    assert_eq!(machine.step(2010), vec![]);
    assert_eq!(machine.next_iteration(), 3000);
    let trace = run(&mut machine, 2011..=3010);
    assert_run(&trace, 3000, 3000, 3);
}

#[test]
fn roundup_current_2_start_3_warmup_1() {
    let mut machine = submitted(iterations(3, 1, 4, None), 1);
    let trace = run(&mut machine, 2..=10);
    assert_run(&trace, 2, 3, 4);
}

#[test]
fn iteration_request_before_any_step_falls_back_or_is_declined() {
    let config = Config::parse("PROFILE_START_ITERATION=5\nACTIVITIES_ITERATIONS=2").unwrap();
    assert!(matches!(
        OnDemandTrigger::from_config(&config, -1).unwrap(),
        OnDemandTrigger::Time {
            duration_ms: 500,
            ..
        }
    ));
    let config = Config::parse(
        "PROFILE_START_ITERATION=5\nACTIVITIES_ITERATIONS=2\nACTIVITIES_DURATION_MSECS=0",
    )
    .unwrap();
    let err = OnDemandTrigger::from_config(&config, -1).unwrap_err();
    assert!(
        err.to_string()
            .contains("application is not updating iteration count"),
        "{err}"
    );
    assert!(matches!(
        OnDemandTrigger::from_config(&config, 0).unwrap(),
        OnDemandTrigger::Iteration { start: 5, .. }
    ));
}

#[test]
fn time_based_default_schedule() {
    // W = 5 s, D = 500 ms: S = T + 7 s; activated at the first tick with now ≥ T + 1 s.
    let mut machine = submitted(time(5_000, 500), -1);
    assert_eq!(
        machine.step(0),
        vec![],
        "steps do not drive a time-based request"
    );
    assert_eq!(machine.next_iteration(), i64::MAX);
    assert_eq!(machine.next_deadline(), Some(T + 1_000));
    assert_eq!(machine.tick(T + 999), vec![]);
    assert_eq!(machine.tick(T + 1_000), vec![Action::Prepare(ID)]);
    assert_eq!(machine.state(), OnDemandState::Warmup);
    assert_eq!(machine.next_deadline(), Some(T + 7_000));
    assert_eq!(machine.tick(T + 6_999), vec![]);
    assert_eq!(machine.tick(T + 7_000), vec![start()]);
    assert_eq!(machine.next_deadline(), Some(T + 7_500));
    assert_eq!(machine.tick(T + 7_499), vec![]);
    assert_eq!(machine.tick(T + 7_500), vec![Action::End(ID)]);
    assert_eq!(machine.state(), OnDemandState::ProcessTrace);
    assert_eq!(machine.tick(T + 9_000), vec![]);
    machine.processed();
    assert_eq!(machine.state(), OnDemandState::WaitForRequest);
}

#[test]
fn time_based_late_start_is_reported() {
    let mut machine = submitted(time(5_000, 500), -1);
    machine.tick(T + 1_000);
    assert_eq!(
        machine.tick(T + 7_010),
        vec![start()],
        "10 ms late is on time"
    );
    let mut machine = submitted(time(5_000, 500), -1);
    machine.tick(T + 1_000);
    assert_eq!(
        machine.tick(T + 7_050),
        vec![Action::Start {
            id: ID,
            late_ms: Some(50)
        }]
    );
}

#[test]
fn start_time_in_the_past_is_refused() {
    let mut machine = Machine::default();
    let past = OnDemandTrigger::Time {
        start_ms: T - 1_000,
        warmup_ms: 0,
        duration_ms: 500,
    };
    let err = machine.submit(ID, past, T, -1, false).unwrap_err();
    assert!(matches!(err, Refused::Declined(_)));
    assert!(
        err.to_string()
            .contains("could not start at the scheduled time"),
        "{err}"
    );
    assert!(err.to_string().contains("1000 ms in the past"), "{err}");

    let short = OnDemandTrigger::Time {
        start_ms: T + 3_000,
        warmup_ms: 5_000,
        duration_ms: 500,
    };
    let err = machine.submit(ID, short, T, -1, false).unwrap_err();
    assert!(
        err.to_string().contains("the warm-up needs 5000 ms"),
        "{err}"
    );
    assert_eq!(machine.request(), None);
}

#[test]
fn start_missed_by_the_run_loop_fails_at_activation() {
    let mut machine = submitted(time(5_000, 500), -1);
    // The run loop was held up past the start.
    let actions = machine.tick(T + 8_000);
    let [Action::Fail {
        id: ID,
        why: TraceFailed::CouldNotStart(why),
    }] = actions.as_slice()
    else {
        panic!("{actions:?}");
    };
    assert!(why.contains("1000 ms in the past"), "{why}");
    assert_eq!(machine.state(), OnDemandState::WaitForRequest);
    assert_eq!(machine.request(), None);
}

#[test]
fn a_second_request_is_refused() {
    // Pending.
    let mut machine = submitted(iterations(50, 5, 10, None), 10);
    let err = machine
        .submit(2, iterations(60, 0, 1, None), T, 10, false)
        .unwrap_err();
    assert!(matches!(err, Refused::Pending(_)));
    assert!(
        err.to_string()
            .starts_with("another profile request is pending: request #1"),
        "{err}"
    );

    // Running, iteration-based: busy until the last iteration.
    run(&mut machine, 11..=52);
    let err = machine.submit(2, time(0, 500), T, 52, false).unwrap_err();
    assert!(matches!(err, Refused::Busy(_)));
    assert_eq!(
        err.to_string(),
        "profiler busy until iteration 60 (now at iteration 52): request #1 is in CollectTrace"
    );

    // Running, time-based: busy until S + D, as a time. The recorder is claimed, by the
    // machine's own session.
    let mut machine = submitted(time(5_000, 500), -1);
    machine.tick(T + 1_000);
    let err = machine
        .submit(2, time(0, 500), T + 2_000, -1, true)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "profiler busy until {} (in 5500 ms): request #1 is in Warmup",
            utc(T + 7_500)
        )
    );

    // Writing the trace.
    machine.tick(T + 7_000);
    machine.tick(T + 7_500);
    let err = machine
        .submit(2, time(0, 500), T + 7_600, -1, false)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "profiler busy: writing the trace of request #1"
    );
    machine.processed();
    machine.submit(2, time(0, 500), T, -1, false).unwrap();
}

#[test]
fn cancel_in_each_state() {
    // WaitForRequest, nothing pending.
    let mut machine = Machine::default();
    assert_eq!(machine.cancel(TraceFailed::Cancelled), vec![]);

    // WaitForRequest, pending.
    let mut machine = submitted(iterations(50, 5, 10, None), 10);
    assert_eq!(
        machine.cancel(TraceFailed::Cancelled),
        vec![Action::Fail {
            id: ID,
            why: TraceFailed::Cancelled
        }]
    );
    assert_eq!(machine.request(), None);
    assert_eq!(machine.next_iteration(), i64::MAX);

    // Warmup and CollectTrace: torn down through Cancelling.
    for (steps, state) in [
        (45, OnDemandState::Warmup),
        (50, OnDemandState::CollectTrace),
    ] {
        let mut machine = submitted(iterations(50, 5, 10, None), 10);
        run(&mut machine, 11..=steps);
        assert_eq!(machine.state(), state);
        assert_eq!(
            machine.cancel(TraceFailed::Cancelled),
            vec![Action::Teardown {
                id: ID,
                why: TraceFailed::Cancelled
            }]
        );
        assert_eq!(machine.state(), OnDemandState::Cancelling);
        assert_eq!(machine.next_iteration(), i64::MAX);
        assert_eq!(machine.step(60), vec![], "a cancelled trace does not end");
        let err = machine.submit(2, time(0, 500), T, 55, false).unwrap_err();
        assert_eq!(err.to_string(), "profiler busy: cancelling request #1");
        assert_eq!(machine.cancel(TraceFailed::Cancelled), vec![]);
        machine.torn_down();
        assert_eq!(machine.state(), OnDemandState::WaitForRequest);
        assert_eq!(machine.request(), None);
    }

    // ProcessTrace: the trace is still written.
    let mut machine = submitted(iterations(50, 5, 10, None), 10);
    run(&mut machine, 11..=60);
    assert_eq!(machine.state(), OnDemandState::ProcessTrace);
    assert_eq!(machine.cancel(TraceFailed::Cancelled), vec![]);
    assert_eq!(machine.state(), OnDemandState::ProcessTrace);
}

#[test]
fn sync_preempts_async() {
    // Pending.
    let mut machine = submitted(time(5_000, 500), -1);
    assert_eq!(
        machine.cancel(TraceFailed::Preempted),
        vec![Action::Fail {
            id: ID,
            why: TraceFailed::Preempted
        }]
    );
    // Running.
    let mut machine = submitted(time(5_000, 500), -1);
    machine.tick(T + 1_000);
    machine.tick(T + 7_000);
    assert_eq!(machine.state(), OnDemandState::CollectTrace);
    assert_eq!(
        machine.cancel(TraceFailed::Preempted),
        vec![Action::Teardown {
            id: ID,
            why: TraceFailed::Preempted
        }]
    );
    machine.torn_down();
    assert_eq!(machine.tick(T + 7_500), vec![], "no file is written");
}

#[test]
fn async_is_refused_while_sync_is_active() {
    let mut machine = Machine::default();
    let err = machine
        .submit(ID, time(5_000, 500), T, -1, true)
        .unwrap_err();
    assert!(matches!(err, Refused::Busy(_)));
    assert_eq!(
        err.to_string(),
        "profiler busy: a synchronous profiling session is active"
    );
    assert_eq!(machine.request(), None);
}

#[test]
fn utc_formats_epoch_milliseconds() {
    assert_eq!(utc(0), "1970-01-01 00:00:00.000 UTC");
    assert_eq!(utc(T + 123), "2023-11-14 22:13:20.123 UTC");
    assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00.000 UTC");
}
