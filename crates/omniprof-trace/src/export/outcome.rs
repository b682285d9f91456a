//! What a write produced ([`WriteStats`]), and why a streamed write must give way to a
//! whole one ([`NeedsWholeTrace`]): the outcomes every writer shares.

use std::fmt;

/// What a write produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Events written: entries of `traceEvents` (JSON), track events (Perfetto).
    pub events: u64,
    /// Bytes written (before compression).
    pub bytes: u64,
    /// X events moved to a sibling row because they partly overlapped another.
    pub spilled: u64,
}

/// Why a streamed trace cannot be written as it comes: an activity came before one that
/// starts later on its row (the lanes need each row in order), or the base time came after
/// the events. The caller writes the trace whole instead.
#[derive(Debug)]
pub struct NeedsWholeTrace(&'static str);

impl NeedsWholeTrace {
    /// Why, said as the end of a sentence.
    pub(crate) fn new(why: &'static str) -> Self {
        Self(why)
    }
}

impl fmt::Display for NeedsWholeTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the trace cannot be written as it is read: {}", self.0)
    }
}

impl std::error::Error for NeedsWholeTrace {}
