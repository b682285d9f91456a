//! [`ReadError`]: what went wrong while reading a trace, and where.

use std::fmt;
use std::path::PathBuf;

/// A place in the JSON text. For a gzip file the offset counts decompressed bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// Bytes before the place.
    pub offset: u64,
    /// 1-based line.
    pub line: u64,
    /// 1-based column, in bytes.
    pub column: u64,
}

/// Where an error happened: as much of it as is known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// The file, when reading from a path.
    pub path: Option<PathBuf>,
    /// The line, column and byte offset.
    pub position: Option<Position>,
    /// The top-level key whose value was being read.
    pub key: Option<String>,
    /// The index of the event within `traceEvents`.
    pub event: Option<u64>,
    /// In a Perfetto trace: the index of the packet and the byte it starts at.
    pub packet: Option<(u64, u64)>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}: ", path.display())?;
        }
        if let Some(p) = &self.position {
            write!(
                f,
                "line {}, column {} (byte {}): ",
                p.line, p.column, p.offset
            )?;
        }
        if let Some((index, offset)) = self.packet {
            write!(f, "packet {index} (byte {offset}): ")?;
        }
        match (&self.key, self.event) {
            (_, Some(index)) => write!(f, "traceEvents[{index}]: "),
            (Some(key), None) => write!(f, "in {key:?}: "),
            (None, None) => Ok(()),
        }
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum ReadErrorKind {
    /// The file could not be opened or read (this includes a corrupt gzip stream).
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
    /// The input ended before the document did.
    #[error("unexpected end of input, expected {expected}")]
    Truncated {
        /// What the reader expected next.
        expected: String,
    },
    /// The text is not JSON.
    #[error("invalid JSON: {0}")]
    Syntax(String),
    /// Valid JSON that is not a trace: a field with the wrong type or a missing field.
    #[error("{0}")]
    Invalid(String),
    /// An event or the header is larger than the reader's [`Limits`](omniprof_trace::Limits).
    #[error("{what} larger than the limit of {limit} bytes for {of}")]
    TooLarge {
        /// What was being read (`an event`, `a value`).
        what: String,
        /// The limit, in bytes.
        limit: usize,
        /// Which limit: `one event` or `the header`.
        of: &'static str,
    },
}

/// The error of every reader function: the [location](Location) and the [kind](ReadErrorKind).
///
/// Displayed as `trace.json: line 12, column 5 (byte 301): traceEvents[7]: <what>`.
#[derive(Debug, thiserror::Error)]
#[error("{location}{kind}")]
pub struct ReadError {
    /// Boxed to keep `Result<_, ReadError>` small on the reader's hot paths.
    pub location: Box<Location>,
    #[source]
    /// What went wrong.
    pub kind: ReadErrorKind,
}

impl ReadError {
    pub(super) fn new(kind: ReadErrorKind) -> Self {
        Self {
            location: Box::default(),
            kind,
        }
    }

    pub(super) fn at(position: Position, kind: ReadErrorKind) -> Self {
        Self {
            location: Box::new(Location {
                position: Some(position),
                ..Location::default()
            }),
            kind,
        }
    }

    pub(super) fn truncated(position: Position, expected: impl Into<String>) -> Self {
        Self::at(
            position,
            ReadErrorKind::Truncated {
                expected: expected.into(),
            },
        )
    }
}
