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
    /// Another rank of the job wrote a slow-step, hang or failure dump for this step into
    /// the shared dump directory
    /// ([`FlightRecorderBuilder::answer_peers`](crate::FlightRecorderBuilder::answer_peers)).
    Peer,
}

impl DumpReason {
    /// Whether the recorder noticed it itself (a slow step, a hang): such dumps are
    /// rate-limited
    /// ([`FlightRecorderBuilder::min_interval`](crate::FlightRecorderBuilder::min_interval)).
    pub fn is_automatic(self) -> bool {
        matches!(self, Self::SlowStep | Self::Hang | Self::Peer)
    }

    /// The reason as file names and the trace's metadata spell it (`slow_step`, `hang`,
    /// `failure`, `request`, `peer`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SlowStep => "slow_step",
            Self::Hang => "hang",
            Self::Failure => "failure",
            Self::Request => "request",
            Self::Peer => "peer",
        }
    }

    /// Whether another rank's dump for this reason asks this rank for the same step: what
    /// went wrong on its own (not a request, not a peer's answer, which would echo).
    pub(crate) fn asks_peers(self) -> bool {
        matches!(self, Self::SlowStep | Self::Hang | Self::Failure)
    }

    /// The reason, step and rank a dump's file name holds (see the dump directory's naming).
    pub(crate) fn of_file_name(name: &str) -> Option<(Self, i64, u64)> {
        const ALL: [DumpReason; 5] = [
            DumpReason::SlowStep,
            DumpReason::Hang,
            DumpReason::Failure,
            DumpReason::Request,
            DumpReason::Peer,
        ];
        let rest = name.strip_prefix("flight_")?;
        // By the whole reason: `slow_step` holds `_step` itself.
        let (reason, rest) = ALL
            .into_iter()
            .find_map(|r| Some((r, rest.strip_prefix(r.as_str())?.strip_prefix("_step")?)))?;
        let (step, rest) = rest.split_once("_rank")?;
        let (rank, _) = rest.split_once("_pid")?;
        Some((reason, step.parse().ok()?, rank.parse().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_names_its_reason_step_and_rank_and_other_names_nothing() {
        let of = DumpReason::of_file_name;
        assert_eq!(
            of("flight_slow_step_step12_rank1_pid7_1.pt.trace.json"),
            Some((DumpReason::SlowStep, 12, 1))
        );
        assert_eq!(
            of("flight_hang_step-1_rank0_pid7_2.pt.trace.json"),
            Some((DumpReason::Hang, -1, 0))
        );
        assert_eq!(
            of("flight_slow_stepx_step1_rank0_pid7_1.pt.trace.json"),
            None
        );
        assert_eq!(of("flight_failure_step1_rankX_pid7_1.pt.trace.json"), None);
        assert_eq!(of("trace.json"), None);
    }
}
