//! The wire format, shared by the server and the client so that both sides read the same
//! constants.
//!
//! Every message, either way, is one frame: an ASCII header line
//! `omniprof-trigger/<version> <kind> <length>\n` of at most [`MAX_HEADER`] bytes, then
//! `<length>` bytes of UTF-8 body, at most [`TRIGGER_MAX_BODY`]. One request and one reply per
//! connection.
//!
//! An `ok` reply's body is the trace's path, then one line per note about the trace (an
//! iteration-based request that fell back to a time-based one): the path cannot hold a
//! newline, since the config line that named it could not.

use std::io::{self, BufRead, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Instant;

use crate::prefix_within;

/// The name every header starts with.
pub(crate) const TRIGGER_PROTOCOL: &str = "omniprof-trigger";
/// The protocol version this build speaks; a header with another one is refused.
pub(crate) const TRIGGER_PROTOCOL_VERSION: u32 = 1;
/// The largest body either side accepts, in bytes (a config text or a reason).
pub const TRIGGER_MAX_BODY: usize = 64 * 1024;
/// The longest header line, newline included.
pub(super) const MAX_HEADER: usize = 64;

/// Request kind: run the config text in the body as an on-demand trace.
const KIND_TRACE: &str = "trace";
/// Request kind (empty body) and its reply (command line, newline, state line).
const KIND_STATE: &str = "state";
/// Request kind (empty body): cancel the pending or running request.
const KIND_CANCEL: &str = "cancel";
/// Request kind: write the flight recorder's window now (empty body).
const KIND_DUMP: &str = "dump";
/// Reply kind: a request was cancelled (the body says which).
const KIND_CANCELLED: &str = "cancelled";
/// Reply kind: the trace was written to the path in the body.
const KIND_OK: &str = "ok";
/// Reply kind: the request was understood and declined (the body says why).
const KIND_REFUSED: &str = "refused";
/// Reply kind: the message could not be read or was not allowed (the body says why).
const KIND_ERROR: &str = "error";

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// Run one on-demand trace with this Kineto config text.
    Trace(String),
    /// Report the command line and state (for `omniprof trigger --list`).
    State,
    /// Cancel the pending or running request (for `omniprof trigger --cancel`).
    Cancel,
    /// Write the flight recorder's window (for `omniprof trigger --dump`).
    Dump,
}

/// What the server answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    /// The trace's path, and notes about it, one line each.
    Written {
        path: PathBuf,
        notes: Vec<String>,
    },
    /// What was cancelled.
    Cancelled(String),
    Refused(String),
    Error(String),
    State {
        command: String,
        state: String,
    },
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The peer closed the connection before sending anything.
    #[error("the connection was closed before a message arrived")]
    Empty,
    #[error("no complete message within the time limit ({got} bytes arrived)")]
    TimedOut { got: usize },
    #[error("the message was cut off: {got} of {expected} body bytes arrived")]
    Truncated { got: usize, expected: usize },
    #[error("the message was cut off inside its header")]
    HeaderCut,
    #[error("the header line is longer than {MAX_HEADER} bytes or unterminated")]
    HeaderTooLong,
    #[error("malformed header {0:?} (expected \"{TRIGGER_PROTOCOL}/{TRIGGER_PROTOCOL_VERSION} KIND LENGTH\")")]
    Malformed(String),
    #[error("unsupported protocol version {0:?} (this process speaks {TRIGGER_PROTOCOL_VERSION})")]
    Version(String),
    #[error("unknown message kind {0:?}")]
    Kind(String),
    #[error("a body of {len} bytes exceeds the limit of {TRIGGER_MAX_BODY} bytes")]
    TooLarge { len: u64 },
    #[error("the body is not UTF-8 (invalid byte at offset {0})")]
    NotUtf8(usize),
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl Request {
    pub(crate) fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        match self {
            Self::Trace(text) => write_frame(out, KIND_TRACE, text),
            Self::State => write_frame(out, KIND_STATE, ""),
            Self::Cancel => write_frame(out, KIND_CANCEL, ""),
            Self::Dump => write_frame(out, KIND_DUMP, ""),
        }
    }

    pub(crate) fn read_from(input: &mut impl BufRead) -> Result<Self, FrameError> {
        let (kind, body) = read_frame(input)?;
        match kind.as_str() {
            KIND_TRACE => Ok(Self::Trace(body)),
            KIND_STATE => Ok(Self::State),
            KIND_CANCEL => Ok(Self::Cancel),
            KIND_DUMP => Ok(Self::Dump),
            _ => Err(FrameError::Kind(kind)),
        }
    }
}

impl Reply {
    pub(crate) fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        match self {
            Self::Written { path, notes } => {
                let mut body = path.to_string_lossy().replace(['\n', '\r'], " ");
                for note in notes {
                    body.push('\n');
                    body.push_str(&note.replace(['\n', '\r'], " "));
                }
                write_frame(out, KIND_OK, &body)
            }
            Self::Cancelled(what) => write_frame(out, KIND_CANCELLED, what),
            Self::Refused(reason) => write_frame(out, KIND_REFUSED, reason),
            Self::Error(reason) => write_frame(out, KIND_ERROR, reason),
            Self::State { command, state } => {
                // Both are single lines; a newline inside would shift the state line.
                let one_line = |s: &str| s.replace(['\n', '\r'], " ");
                let body = format!("{}\n{}", one_line(command), one_line(state));
                write_frame(out, KIND_STATE, &body)
            }
        }
    }

    pub(crate) fn read_from(input: &mut impl BufRead) -> Result<Self, FrameError> {
        let (kind, body) = read_frame(input)?;
        match kind.as_str() {
            KIND_OK => {
                let mut lines = body.split('\n');
                let path = PathBuf::from(lines.next().unwrap_or_default());
                let notes = lines.map(str::to_owned).collect();
                Ok(Self::Written { path, notes })
            }
            KIND_CANCELLED => Ok(Self::Cancelled(body)),
            KIND_REFUSED => Ok(Self::Refused(body)),
            KIND_ERROR => Ok(Self::Error(body)),
            KIND_STATE => {
                let (command, state) = body.split_once('\n').unwrap_or((&body, ""));
                Ok(Self::State {
                    command: command.to_owned(),
                    state: state.to_owned(),
                })
            }
            _ => Err(FrameError::Kind(kind)),
        }
    }
}

/// Writes one frame; a body over [`TRIGGER_MAX_BODY`] is cut at a character boundary (reasons are
/// the only bodies that could grow, and a cut reason is better than none).
fn write_frame(out: &mut impl Write, kind: &str, body: &str) -> io::Result<()> {
    let body = prefix_within(body, TRIGGER_MAX_BODY);
    let mut frame = format!(
        "{TRIGGER_PROTOCOL}/{TRIGGER_PROTOCOL_VERSION} {kind} {}\n",
        body.len()
    )
    .into_bytes();
    frame.extend_from_slice(body.as_bytes());
    out.write_all(&frame)?;
    out.flush()
}

/// Reads one frame: its kind and its body. Nothing larger than [`MAX_HEADER`] +
/// [`TRIGGER_MAX_BODY`] is ever buffered.
fn read_frame(input: &mut impl BufRead) -> Result<(String, String), FrameError> {
    let mut header = Vec::with_capacity(MAX_HEADER);
    let mut limited = input.take(MAX_HEADER as u64);
    if let Err(e) = limited.read_until(b'\n', &mut header) {
        return Err(timed_out_or(e, header.len()));
    }
    if header.is_empty() {
        return Err(FrameError::Empty);
    }
    if header.last() != Some(&b'\n') {
        return Err(if header.len() == MAX_HEADER {
            FrameError::HeaderTooLong
        } else {
            FrameError::HeaderCut
        });
    }
    let header = String::from_utf8_lossy(&header[..header.len() - 1]).into_owned();
    let (kind, len) = parse_header(&header)?;
    let mut body = vec![0; len];
    let mut got = 0;
    while got < len {
        match input.read(&mut body[got..]) {
            Ok(0) => return Err(FrameError::Truncated { got, expected: len }),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(timed_out_or(e, got)),
        }
    }
    let body =
        String::from_utf8(body).map_err(|e| FrameError::NotUtf8(e.utf8_error().valid_up_to()))?;
    Ok((kind, body))
}

/// Splits `omniprof-trigger/1 KIND LENGTH` into the kind and a length within the limit.
fn parse_header(header: &str) -> Result<(String, usize), FrameError> {
    let malformed = || FrameError::Malformed(header.to_owned());
    let mut parts = header.split(' ');
    let (Some(tag), Some(kind), Some(len), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let version = tag
        .strip_prefix(TRIGGER_PROTOCOL)
        .and_then(|v| v.strip_prefix('/'))
        .ok_or_else(malformed)?;
    if version != TRIGGER_PROTOCOL_VERSION.to_string() {
        return Err(FrameError::Version(version.to_owned()));
    }
    let len: u64 = len
        .parse()
        .ok()
        .filter(|_| len.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(malformed)?;
    if len > TRIGGER_MAX_BODY as u64 {
        return Err(FrameError::TooLarge { len });
    }
    if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_lowercase()) {
        return Err(malformed());
    }
    // The bound above makes the conversion lossless.
    Ok((kind.to_owned(), len as usize))
}

/// A read that stopped on the socket's timeout is a timeout of the whole message.
fn timed_out_or(e: io::Error, got: usize) -> FrameError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => FrameError::TimedOut { got },
        _ => FrameError::Io(e),
    }
}

/// Reads from a socket until a fixed deadline: each read waits only for the time left, so a
/// peer that trickles bytes cannot stretch one message past the deadline. Until a newline
/// (the end of the header) has arrived, the earlier `header_until` applies, so a peer that
/// connects and says nothing is let go early.
pub(crate) struct Deadline<'a> {
    pub(crate) stream: &'a UnixStream,
    pub(crate) until: Instant,
    pub(crate) header_until: Option<Instant>,
}

impl<'a> Deadline<'a> {
    /// Reads from `stream` until `until`, with no earlier deadline for the header.
    pub(crate) fn new(stream: &'a UnixStream, until: Instant) -> Self {
        Self {
            stream,
            until,
            header_until: None,
        }
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let until = self.header_until.map_or(self.until, |h| h.min(self.until));
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut stream = self.stream;
        let got = stream.read(buf)?;
        if buf[..got].contains(&b'\n') {
            self.header_until = None;
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use super::*;

    fn read_request(bytes: &[u8]) -> Result<Request, FrameError> {
        Request::read_from(&mut BufReader::new(bytes))
    }

    #[test]
    fn requests_and_replies_round_trip() {
        for request in [
            Request::Trace("ACTIVITIES_ITERATIONS=2\n".into()),
            Request::State,
            Request::Cancel,
            Request::Dump,
        ] {
            let mut bytes = Vec::new();
            request.write_to(&mut bytes).unwrap();
            assert_eq!(read_request(&bytes).unwrap(), request);
        }
        let replies = [
            Reply::Written {
                path: "/tmp/t_1.pt.trace.json".into(),
                notes: Vec::new(),
            },
            Reply::Written {
                path: "/tmp/t_2.pt.trace.json".into(),
                notes: vec!["fell back".into(), "second note".into()],
            },
            Reply::Cancelled("request #3".into()),
            Reply::Refused("profiler busy until 12:00:01".into()),
            Reply::Error("malformed".into()),
            Reply::State {
                command: "python train.py".into(),
                state: "idle".into(),
            },
        ];
        for reply in replies {
            let mut bytes = Vec::new();
            reply.write_to(&mut bytes).unwrap();
            assert_eq!(
                Reply::read_from(&mut BufReader::new(&bytes[..])).unwrap(),
                reply
            );
        }
    }

    #[test]
    fn the_header_is_exact() {
        let mut bytes = Vec::new();
        Request::Trace("A=1".into()).write_to(&mut bytes).unwrap();
        assert_eq!(bytes, b"omniprof-trigger/1 trace 3\nA=1");
    }

    #[test]
    fn bad_frames_are_refused_with_a_reason() {
        let cases: [(&[u8], &str); 10] = [
            (b"", "closed before"),
            (b"\x00\xff garbage\n", "malformed header"),
            (b"omniprof-trigger/2 trace 1\nA", "version \"2\""),
            (
                b"omniprof-trigger/1 trace 100000000\n",
                "100000000 bytes exceeds",
            ),
            (b"omniprof-trigger/1 trace 10\nA=1", "3 of 10 body bytes"),
            (b"omniprof-trigger/1 trace +1\nA", "malformed header"),
            (b"omniprof-trigger/1 launch 1\nA", "unknown message kind"),
            (b"omniprof-trigger/1 trace 2\n\xff\xfe", "not UTF-8"),
            (b"omniprof-trigger/1 trace", "cut off"),
            (&[b'x'; 200], "longer than 64"),
        ];
        for (bytes, want) in cases {
            let err = read_request(bytes).unwrap_err().to_string();
            assert!(err.contains(want), "{bytes:?}: {err}");
        }
    }

    #[test]
    fn an_oversized_reason_is_cut_at_a_character_boundary() {
        let reason = "é".repeat(TRIGGER_MAX_BODY);
        let mut bytes = Vec::new();
        Reply::Refused(reason).write_to(&mut bytes).unwrap();
        let Reply::Refused(back) = Reply::read_from(&mut BufReader::new(&bytes[..])).unwrap()
        else {
            panic!("not a refusal");
        };
        assert!(back.len() <= TRIGGER_MAX_BODY && back.chars().all(|c| c == 'é'));
    }
}
