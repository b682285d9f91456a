//! PyTorch's profiler schedule (`torch.profiler.schedule`, `docs/lifecycle.md` §4): which
//! [`ProfilerAction`] each step takes, and which engine calls each change of action makes.
//!
//! ```
//! use omniprof::{ProfilerAction, Schedule, ScheduleArgs};
//!
//! let schedule = Schedule::new(ScheduleArgs { wait: 1, warmup: 1, active: 2, repeat: 1, ..Default::default() })
//!     .unwrap();
//! let actions: Vec<_> = (0..6).map(|step| schedule.action(step).unwrap()).collect();
//! use ProfilerAction::*;
//! assert_eq!(actions, [None, Warmup, Record, RecordAndSave, None, None]);
//! ```

use std::fmt;
use std::sync::Arc;

/// What the profiler does during a step (PyTorch's `ProfilerAction`, same discriminants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ProfilerAction {
    /// Not profiling.
    None = 0,
    /// Backends configured and started; what they record is discarded.
    Warmup = 1,
    /// Recording.
    Record = 2,
    /// Recording the cycle's last step: when it ends, the trace goes to `on_trace_ready`.
    RecordAndSave = 3,
}

impl ProfilerAction {
    /// The action PyTorch's `ProfilerAction` numbers `number` (its discriminant); `None` for
    /// another number.
    ///
    /// ```
    /// use omniprof::ProfilerAction;
    ///
    /// assert_eq!(ProfilerAction::from_number(3), Some(ProfilerAction::RecordAndSave));
    /// assert_eq!(ProfilerAction::from_number(4), None);
    /// ```
    pub fn from_number(number: i64) -> Option<Self> {
        [Self::None, Self::Warmup, Self::Record, Self::RecordAndSave]
            .into_iter()
            .find(|&action| action as i64 == number)
    }

    /// PyTorch's spelling (`NONE`, `WARMUP`, `RECORD`, `RECORD_AND_SAVE`).
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "NONE",
            Self::Warmup => "WARMUP",
            Self::Record => "RECORD",
            Self::RecordAndSave => "RECORD_AND_SAVE",
        }
    }
}

/// The arguments of [`Schedule::new`], as PyTorch's `schedule()` takes them: signed, so that a
/// negative value can be expressed and refused. `repeat`, `skip_first` and `skip_first_wait`
/// default to 0 / false; `active` must be set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScheduleArgs {
    /// Steps with no profiling at the start of every cycle.
    pub wait: i64,
    /// Steps of warm-up after the wait.
    pub warmup: i64,
    /// Steps recorded; the last one saves the trace.
    pub active: i64,
    /// Cycles to run; 0 cycles until the profiler finishes.
    pub repeat: i64,
    /// Steps skipped before the first cycle.
    pub skip_first: i64,
    /// Skip the wait phase of the first cycle only (PyTorch's `skip_first_wait != 0`).
    pub skip_first_wait: bool,
}

/// A schedule argument out of range, or a negative step.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// PyTorch's "Invalid profiler schedule arguments", with every value.
    #[error(
        "invalid profiler schedule arguments: wait={}, warmup={}, active={}, repeat={}, \
         skip_first={}, skip_first_wait={} (need wait >= 0, warmup >= 0, active > 0, \
         repeat >= 0, skip_first >= 0)",
        .0.wait, .0.warmup, .0.active, .0.repeat, .0.skip_first, .0.skip_first_wait
    )]
    InvalidArguments(ScheduleArgs),
    #[error("invalid profiler step {0}: steps count from 0")]
    /// A step before 0.
    NegativeStep(i64),
    /// Text that is not `wait,warmup,active[,repeat]` ([`Schedule`]'s `FromStr`).
    #[error("invalid schedule {text:?}: {reason}")]
    Syntax {
        /// The text given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A validated schedule: maps a step number to a [`ProfilerAction`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    wait: u64,
    warmup: u64,
    active: u64,
    repeat: u64,
    skip_first: u64,
    skip_first_wait: bool,
}

/// PyTorch's warning for a schedule without warm-up.
const NO_WARMUP_WARNING: &str = "Profiler won't be using warmup, this can skew profiler results";

impl Schedule {
    /// Validates `args` as PyTorch does: an error listing every value when any is out of
    /// range; a warning when `warmup` is 0.
    pub fn new(args: ScheduleArgs) -> Result<Self, ScheduleError> {
        let unsigned = |v: i64| u64::try_from(v).ok();
        let (Some(wait), Some(warmup), Some(repeat), Some(skip_first)) = (
            unsigned(args.wait),
            unsigned(args.warmup),
            unsigned(args.repeat),
            unsigned(args.skip_first),
        ) else {
            return Err(ScheduleError::InvalidArguments(args));
        };
        let active = unsigned(args.active)
            .filter(|&a| a > 0)
            .ok_or(ScheduleError::InvalidArguments(args))?;
        if warmup == 0 {
            log::warn!("{NO_WARMUP_WARNING}");
        }
        Ok(Self {
            wait,
            warmup,
            active,
            repeat,
            skip_first,
            skip_first_wait: args.skip_first_wait,
        })
    }

    /// The action of `step` (PyTorch's `schedule_fn`); a negative step is an error.
    pub fn action(&self, step: i64) -> Result<ProfilerAction, ScheduleError> {
        let step = u64::try_from(step).map_err(|_| ScheduleError::NegativeStep(step))?;
        Ok(self.action_of(step))
    }

    pub(crate) fn action_of(&self, step: u64) -> ProfilerAction {
        if step < self.skip_first {
            return ProfilerAction::None;
        }
        // u128: `+ wait` and `repeat * n` cannot overflow.
        let mut s = u128::from(step - self.skip_first);
        if self.skip_first_wait {
            s += u128::from(self.wait);
        }
        let n = u128::from(self.wait) + u128::from(self.warmup) + u128::from(self.active);
        // PyTorch compares the real quotient `s / n >= repeat`; for integers that is exactly
        // `s >= repeat * n`, without a float's rounding.
        if self.repeat > 0 && s >= u128::from(self.repeat) * n {
            return ProfilerAction::None;
        }
        let m = s % n;
        if m < u128::from(self.wait) {
            ProfilerAction::None
        } else if m < u128::from(self.wait) + u128::from(self.warmup) {
            ProfilerAction::Warmup
        } else if m < n - 1 {
            ProfilerAction::Record
        } else {
            ProfilerAction::RecordAndSave
        }
    }

    /// Steps waited at the start of each cycle.
    pub fn wait(&self) -> u64 {
        self.wait
    }
    /// Steps warmed up after the wait.
    pub fn warmup(&self) -> u64 {
        self.warmup
    }
    /// Steps recorded after the warm-up.
    pub fn active(&self) -> u64 {
        self.active
    }
    /// Cycles (0: repeat forever).
    pub fn repeat(&self) -> u64 {
        self.repeat
    }
    /// Steps skipped before the first cycle.
    pub fn skip_first(&self) -> u64 {
        self.skip_first
    }
    /// Whether the first cycle skips its wait.
    pub fn skip_first_wait(&self) -> bool {
        self.skip_first_wait
    }
}

/// What decides a scheduled profiler's actions: a [`Schedule`]'s cycle, or the caller's
/// function of the step (PyTorch takes any callable returning a `ProfilerAction` as
/// `schedule`).
#[derive(Clone)]
pub(crate) enum Plan {
    Cycle(Schedule),
    Custom(Arc<ScheduleFn>),
}

/// The function of a custom schedule ([`ProfilerBuilder::schedule_fn`](super::ProfilerBuilder::schedule_fn)).
pub(crate) type ScheduleFn = dyn Fn(u64) -> ProfilerAction + Send + Sync;

impl Plan {
    pub(crate) fn action_of(&self, step: u64) -> ProfilerAction {
        match self {
            Self::Cycle(schedule) => schedule.action_of(step),
            Self::Custom(f) => f(step),
        }
    }
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cycle(schedule) => schedule.fmt(f),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// Parses `wait,warmup,active[,repeat]` (the CLI's `--schedule`), then validates it.
///
/// ```
/// let schedule: omniprof::Schedule = "1,1,2,3".parse().unwrap();
/// assert_eq!((schedule.active(), schedule.repeat()), (2, 3));
/// assert!("1,1".parse::<omniprof::Schedule>().is_err());
/// ```
impl std::str::FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, ScheduleError> {
        let syntax = |reason: String| ScheduleError::Syntax {
            text: text.to_owned(),
            reason,
        };
        let numbers = text
            .split(',')
            .map(|part| part.trim().parse::<i64>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                syntax(format!(
                    "expected wait,warmup,active[,repeat] as integers: {e}"
                ))
            })?;
        let (wait, warmup, active, repeat) = match numbers[..] {
            [wait, warmup, active] => (wait, warmup, active, 0),
            [wait, warmup, active, repeat] => (wait, warmup, active, repeat),
            _ => {
                return Err(syntax(format!(
                    "expected 3 or 4 numbers (wait,warmup,active[,repeat]), got {}",
                    numbers.len()
                )))
            }
        };
        Self::new(ScheduleArgs {
            wait,
            warmup,
            active,
            repeat,
            ..Default::default()
        })
    }
}

impl TryFrom<ScheduleArgs> for Schedule {
    type Error = ScheduleError;

    fn try_from(args: ScheduleArgs) -> Result<Self, ScheduleError> {
        Self::new(args)
    }
}

/// One engine call of a transition (PyTorch's action map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// Configure and start the backends: warm-up begins.
    Prepare,
    /// Open the capture window and record.
    Start,
    /// Close the window; the trace is kept until `TraceReady` or dropped.
    Stop,
    /// Hand the trace to `on_trace_ready`.
    TraceReady,
    /// Log PyTorch's warning for an incorrect schedule.
    Warn(&'static str),
}

/// "Incorrect schedule: …" (PyTorch's wording).
const WARMUP_THEN_NONE: &str = "Incorrect schedule: WARMUP followed by NONE";
const RECORD_THEN_NONE: &str = "Incorrect schedule: RECORD followed by NONE";
const RECORD_THEN_WARMUP: &str = "Incorrect schedule: RECORD followed by WARMUP";

/// The engine calls of the change from `prev` to `next` (`None`: the profiler exits).
pub(crate) fn transition(prev: ProfilerAction, next: Option<ProfilerAction>) -> &'static [Call] {
    use Call::*;
    use ProfilerAction as A;
    match (prev, next) {
        (A::None, Some(A::None)) | (A::None, None) => &[],
        (A::None, Some(A::Warmup)) => &[Prepare],
        (A::None, Some(A::Record | A::RecordAndSave)) => &[Prepare, Start],
        (A::Warmup, Some(A::None)) => &[Warn(WARMUP_THEN_NONE), Start, Stop],
        (A::Warmup, Some(A::Warmup)) => &[],
        (A::Warmup, Some(A::Record | A::RecordAndSave)) => &[Start],
        (A::Warmup, None) => &[Start, Stop],
        (A::Record, Some(A::None)) => &[Warn(RECORD_THEN_NONE), Stop],
        (A::Record, Some(A::Warmup)) => &[Warn(RECORD_THEN_WARMUP), Stop],
        (A::Record, Some(A::Record | A::RecordAndSave)) => &[],
        (A::Record, None) => &[Stop, TraceReady],
        (A::RecordAndSave, Some(A::None)) => &[Stop, TraceReady],
        (A::RecordAndSave, Some(A::Warmup)) => &[Stop, TraceReady, Prepare],
        (A::RecordAndSave, Some(A::Record | A::RecordAndSave)) => {
            &[Stop, TraceReady, Prepare, Start]
        }
        (A::RecordAndSave, None) => &[Stop, TraceReady],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProfilerAction::{None as N, Record as R, RecordAndSave as S, Warmup as W};

    fn args(wait: i64, warmup: i64, active: i64, repeat: i64, skip_first: i64) -> ScheduleArgs {
        ScheduleArgs {
            wait,
            warmup,
            active,
            repeat,
            skip_first,
            skip_first_wait: false,
        }
    }

    fn actions(args: ScheduleArgs, steps: i64) -> Vec<ProfilerAction> {
        let s = Schedule::new(args).unwrap();
        (0..steps).map(|i| s.action(i).unwrap()).collect()
    }

    #[test]
    fn pytorchs_observed_vector() {
        // wait=1, warmup=1, active=2, repeat=1 over 6 steps (PyTorch 2.15).
        assert_eq!(actions(args(1, 1, 2, 1, 0), 6), [N, W, R, S, N, N]);
    }

    #[test]
    fn three_cycles_of_each_reference_vector() {
        // (args, cycle) with cycle repeated three times, then NONE when repeat bounds it.
        let cases = [
            (args(1, 1, 2, 3, 0), vec![N, W, R, S]),
            (args(0, 1, 1, 3, 0), vec![W, S]),
            (args(2, 0, 1, 3, 0), vec![N, N, S]),
            (args(0, 0, 3, 3, 0), vec![R, R, S]),
            (args(1, 2, 1, 0, 0), vec![N, W, W, S]),
        ];
        for (a, cycle) in cases {
            let n = cycle.len() as i64;
            let mut expected: Vec<_> = cycle.iter().copied().cycle().take(3 * n as usize).collect();
            if a.repeat > 0 {
                expected.extend([N; 4]);
            } else {
                expected.extend(cycle.iter().copied().take(4.min(n as usize)));
            }
            assert_eq!(actions(a, expected.len() as i64), expected, "{a:?}");
        }
    }

    #[test]
    fn repeat_zero_cycles_forever() {
        let s = Schedule::new(args(1, 1, 1, 0, 0)).unwrap();
        for cycle in [0, 1, 2, 1_000_000] {
            let base = cycle * 3;
            let got: Vec<_> = (base..base + 3).map(|i| s.action(i).unwrap()).collect();
            assert_eq!(got, [N, W, S], "cycle {cycle}");
        }
    }

    #[test]
    fn skip_first_delays_the_first_cycle() {
        // skip_first=10, wait=20, warmup=1, active=1: first WARMUP at step 30.
        let s = Schedule::new(args(20, 1, 1, 0, 10)).unwrap();
        assert!((0..30).all(|i| s.action(i).unwrap() == N));
        assert_eq!(s.action(30).unwrap(), W);
        assert_eq!(s.action(31).unwrap(), S);
        assert_eq!(s.action(32).unwrap(), N);
        assert_eq!(s.action(52).unwrap(), W);
        assert_eq!(s.action(53).unwrap(), S);
        assert_eq!(s.action(74).unwrap(), W);
    }

    #[test]
    fn skip_first_wait_skips_only_the_first_wait() {
        // The same with skip_first_wait=1: WARMUP at 10, RECORD_AND_SAVE at 11, next WARMUP
        // at 32.
        let s = Schedule::new(ScheduleArgs {
            skip_first_wait: true,
            ..args(20, 1, 1, 0, 10)
        })
        .unwrap();
        assert!((0..10).all(|i| s.action(i).unwrap() == N));
        assert_eq!(s.action(10).unwrap(), W);
        assert_eq!(s.action(11).unwrap(), S);
        assert!((12..32).all(|i| s.action(i).unwrap() == N));
        assert_eq!(s.action(32).unwrap(), W);
        assert_eq!(s.action(33).unwrap(), S);
        assert_eq!(s.action(54).unwrap(), W);
    }

    #[test]
    fn repeat_counts_from_the_shifted_step() {
        // With skip_first_wait the shifted step reaches repeat * n a wait earlier: two cycles
        // of (wait 2, warmup 1, active 1) starting with a warm-up end at step 5.
        let s = Schedule::new(ScheduleArgs {
            skip_first_wait: true,
            ..args(2, 1, 1, 2, 0)
        })
        .unwrap();
        let got: Vec<_> = (0..8).map(|i| s.action(i).unwrap()).collect();
        assert_eq!(got, [W, S, N, N, W, S, N, N]);
    }

    #[test]
    fn out_of_range_arguments_are_refused_with_every_value() {
        for bad in [
            args(-1, 1, 1, 0, 0),
            args(0, -2, 1, 0, 0),
            args(0, 1, 0, 0, 0),
            args(0, 1, -1, 0, 0),
            args(0, 1, 1, -3, 0),
            args(0, 1, 1, 0, -4),
        ] {
            let e = Schedule::new(bad).unwrap_err();
            assert_eq!(e, ScheduleError::InvalidArguments(bad));
            let text = e.to_string();
            for part in [
                format!("wait={}", bad.wait),
                format!("warmup={}", bad.warmup),
                format!("active={}", bad.active),
                format!("repeat={}", bad.repeat),
                format!("skip_first={}", bad.skip_first),
                "skip_first_wait=false".to_owned(),
            ] {
                assert!(text.contains(&part), "{text} lacks {part}");
            }
        }
    }

    #[test]
    fn warmup_zero_is_allowed() {
        assert_eq!(actions(args(0, 0, 1, 2, 0), 3), [S, S, N]);
    }

    #[test]
    fn a_negative_step_is_an_error() {
        let s = Schedule::new(args(0, 1, 1, 0, 0)).unwrap();
        assert_eq!(s.action(-1), Err(ScheduleError::NegativeStep(-1)));
        assert!(s.action(-1).unwrap_err().to_string().contains("-1"));
    }

    #[test]
    fn the_transition_table_is_pytorchs() {
        use Call::*;
        let all = [N, W, R, S];
        let expect: [(ProfilerAction, Option<ProfilerAction>, &[Call]); 20] = [
            (N, Some(N), &[]),
            (N, Some(W), &[Prepare]),
            (N, Some(R), &[Prepare, Start]),
            (N, Some(S), &[Prepare, Start]),
            (N, None, &[]),
            (W, Some(N), &[Warn(WARMUP_THEN_NONE), Start, Stop]),
            (W, Some(W), &[]),
            (W, Some(R), &[Start]),
            (W, Some(S), &[Start]),
            (W, None, &[Start, Stop]),
            (R, Some(N), &[Warn(RECORD_THEN_NONE), Stop]),
            (R, Some(W), &[Warn(RECORD_THEN_WARMUP), Stop]),
            (R, Some(R), &[]),
            (R, Some(S), &[]),
            (R, None, &[Stop, TraceReady]),
            (S, Some(N), &[Stop, TraceReady]),
            (S, Some(W), &[Stop, TraceReady, Prepare]),
            (S, Some(R), &[Stop, TraceReady, Prepare, Start]),
            (S, Some(S), &[Stop, TraceReady, Prepare, Start]),
            (S, None, &[Stop, TraceReady]),
        ];
        for (prev, next, calls) in expect {
            assert_eq!(transition(prev, next), calls, "{prev:?} -> {next:?}");
        }
        // Every pair is covered above.
        assert_eq!(expect.len(), all.len() * (all.len() + 1));
        assert_eq!(
            WARMUP_THEN_NONE,
            "Incorrect schedule: WARMUP followed by NONE"
        );
    }
}
