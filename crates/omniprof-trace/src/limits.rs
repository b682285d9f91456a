//! [`Limits`]: how much one piece of a trace may hold, so that reading any input, however
//! crafted, takes memory bounded by these limits rather than by the file.

/// The most one event and the header may hold, in bytes of (decompressed) JSON text. A larger
/// one stops a read (`omniprof-read`'s `TraceReader::limits`) with an error at the byte offset
/// where it starts; what was read before is kept, as after any error. The JSON writers keep
/// under the defaults, so that what they write reads back.
///
/// The defaults are far above what PyTorch or omniprof write (an event takes hundreds of
/// bytes, a header some kilobytes):
///
/// ```
/// use omniprof_trace::Limits;
///
/// assert_eq!(Limits::default(), Limits { event_bytes: 16 << 20, header_bytes: 4 << 20 });
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
