//! What can be wrong with a plugin's calls into the trace builder: each kind is one variant,
//! counted and reported by the builder with its first examples, and written into the
//! trace's `backend_errors` as its sentence.

use std::cmp::Ordering;
use std::fmt;

/// A call on the last event (`setLastEventName`, `setLastEventFlow`,
/// `addLastEventMetadata`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LastCall {
    /// `setLastEventName`.
    Name,
    /// `setLastEventFlow`.
    Flow,
    /// `addLastEventMetadata`.
    Metadata,
}

/// One kind of problem a plugin's calls into the trace builder had. Kinds are ordered by
/// their sentence, as the report lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// `addEvent` with a NULL event.
    NullEvent,
    /// `addEvent` with a struct smaller than its fields.
    EventTooSmall,
    /// `addEvent` with an event type the ABI does not have.
    InvalidEventType,
    /// `addEvent` past the trace's event budget.
    EventBudgetReached,
    /// An event whose end is before its start.
    EndBeforeStart,
    /// `setLastEventName` with a NULL name.
    NullName,
    /// A name that is not valid UTF-8.
    NameNotUtf8,
    /// A name longer than the builder keeps.
    NameCut,
    /// `setLastEventFlow` with a NULL flow.
    NullFlow,
    /// `setLastEventFlow` with a struct smaller than its fields.
    FlowTooSmall,
    /// `setLastEventFlow` with a flow type the ABI does not have.
    InvalidFlowType,
    /// `addLastEventMetadata` with a NULL key or value.
    NullMetadata,
    /// A metadata value nested deeper than the trace reader reads.
    MetadataTooDeep,
    /// A counter event's value that is not a JSON number.
    CounterNotANumber,
    /// A metadata value that is not JSON the trace reader reads.
    MetadataNotJson,
    /// `addDeviceInfo` with a NULL info.
    NullDeviceInfo,
    /// `addDeviceInfo` with a struct smaller than its fields.
    DeviceInfoTooSmall,
    /// `addResourceInfo` with a NULL info.
    NullResourceInfo,
    /// `addResourceInfo` with a struct smaller than its fields.
    ResourceInfoTooSmall,
    /// A call on the last event before any `addEvent`.
    BeforeAnyEvent(LastCall),
    /// A call on the last event after a rejected `addEvent`.
    AfterRejectedEvent(LastCall),
    /// A call from another thread than the one the builder was lent to, or after the loan.
    RefusedCall,
}

impl ProblemKind {
    /// The sentence that names the problem in reports.
    pub const fn sentence(self) -> &'static str {
        use LastCall::{Flow, Metadata, Name};
        match self {
            Self::NullEvent => "addEvent with a NULL event",
            Self::EventTooSmall => "addEvent with a struct too small",
            Self::InvalidEventType => "addEvent with an invalid event type",
            Self::EventBudgetReached => {
                "events past the budget of this trace (OMNIPROF_MAX_EVENTS_PER_BACKEND; dropped)"
            }
            Self::EndBeforeStart => "event ends before it starts (end clamped to start)",
            Self::NullName => "setLastEventName with a NULL name",
            Self::NameNotUtf8 => "event name is not valid UTF-8 (replaced with U+FFFD)",
            Self::NameCut => "event name longer than 4096 bytes (cut)",
            Self::NullFlow => "setLastEventFlow with a NULL flow",
            Self::FlowTooSmall => "setLastEventFlow with a struct too small",
            Self::InvalidFlowType => "setLastEventFlow with an invalid flow type",
            Self::NullMetadata => "addLastEventMetadata with a NULL key or value",
            Self::MetadataTooDeep => "metadata value nested deeper than a reader reads (refused)",
            Self::CounterNotANumber => "counter value is not a JSON number (dropped)",
            Self::MetadataNotJson => "metadata value is not JSON a reader reads (kept as a string)",
            Self::NullDeviceInfo => "addDeviceInfo with a NULL info",
            Self::DeviceInfoTooSmall => "addDeviceInfo with a struct too small",
            Self::NullResourceInfo => "addResourceInfo with a NULL info",
            Self::ResourceInfoTooSmall => "addResourceInfo with a struct too small",
            Self::BeforeAnyEvent(Name) => "setLastEventName before any addEvent",
            Self::BeforeAnyEvent(Flow) => "setLastEventFlow before any addEvent",
            Self::BeforeAnyEvent(Metadata) => "addLastEventMetadata before any addEvent",
            Self::AfterRejectedEvent(Name) => {
                "setLastEventName after a rejected addEvent (not applied)"
            }
            Self::AfterRejectedEvent(Flow) => {
                "setLastEventFlow after a rejected addEvent (not applied)"
            }
            Self::AfterRejectedEvent(Metadata) => {
                "addLastEventMetadata after a rejected addEvent (not applied)"
            }
            Self::RefusedCall => {
                "trace builder called from another thread or through a wrong handle (refused)"
            }
        }
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.sentence())
    }
}

impl Ord for ProblemKind {
    fn cmp(&self, other: &Self) -> Ordering {
        self.sentence().cmp(other.sentence())
    }
}

impl PartialOrd for ProblemKind {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// How often one kind of problem happened, with the first examples.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problem {
    /// How many calls had it.
    pub count: u64,
    /// What the first few (at most 3) were, each cut to 64 bytes.
    pub examples: Vec<String>,
}
