//! [`Limits`]: how much one piece of a trace may hold, so that reading any input, however
//! crafted, takes memory bounded by these limits rather than by the file.

/// The most one event and the header may hold, in bytes of (decompressed) JSON text. A larger
/// one stops the read with [`ReadErrorKind::TooLarge`](super::ReadErrorKind::TooLarge) at the
/// byte offset where it starts; what was read before is kept, as after any error.
///
/// The defaults are far above what PyTorch or omniprof write (an event takes hundreds of
/// bytes, a header some kilobytes):
///
/// ```
/// use omniprof_trace::{Limits, TraceReader};
///
/// assert_eq!(Limits::default(), Limits { event_bytes: 16 << 20, header_bytes: 4 << 20 });
/// let strict = TraceReader::new().limits(Limits { event_bytes: 4096, ..Limits::default() });
/// let long_name = format!(
///     r#"{{"traceEvents": [{{"ph": "i", "cat": "cpu_op", "name": "{}", "pid": 1, "tid": 1, "ts": 0}}]}}"#,
///     "x".repeat(5000)
/// );
/// let err = strict.read(long_name.as_bytes()).into_trace().unwrap_err();
/// assert!(err.to_string().contains("larger than the limit of 4096 bytes"), "{err}");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// One element of `traceEvents`.
    pub event_bytes: usize,
    /// Every top-level key and value but `traceEvents`, together (`deviceProperties`,
    /// `distributedInfo` and other metadata): the header is held whole, as typed values.
    pub header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            event_bytes: 16 << 20,
            header_bytes: 4 << 20,
        }
    }
}
