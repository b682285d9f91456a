//! Why a dump is written: its reason, the first word of its file name.

/// Why a dump was written: the first word of its file name.
///
/// ```
/// use omniprof::DumpReason;
///
/// assert_eq!(DumpReason::SlowStep.as_str(), "slow_step");
/// assert!(DumpReason::Hang.is_automatic() && !DumpReason::Failure.is_automatic());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DumpReason {
    /// A step took more than the slow factor times the median of the steps before it.
    SlowStep,
    /// No step ended for the hang timeout.
    Hang,
    /// The program failed (an exception escaped, or it exited with an error).
    Failure,
    /// Someone asked (`omniprof trigger --dump`, or
    /// [`FlightRecorder::trigger`](crate::FlightRecorder::trigger)).
    Request,
}

impl DumpReason {
    /// Whether the recorder noticed it itself (a slow step, a hang): such dumps are
    /// rate-limited
    /// ([`FlightRecorderBuilder::min_interval`](crate::FlightRecorderBuilder::min_interval)).
    pub fn is_automatic(self) -> bool {
        matches!(self, Self::SlowStep | Self::Hang)
    }

    /// The reason as file names and the trace's metadata spell it (`slow_step`, `hang`,
    /// `failure`, `request`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SlowStep => "slow_step",
            Self::Hang => "hang",
            Self::Failure => "failure",
            Self::Request => "request",
        }
    }
}
