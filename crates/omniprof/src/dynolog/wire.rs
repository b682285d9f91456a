//! The bytes of one datagram of dynolog's IPC fabric, as Kineto's daemon client and dynolog
//! lay them out (plain C structs copied into the datagram, in the host's byte order):
//!
//! - every message starts with a 40-byte header: the body's length as a `size_t` (8 bytes),
//!   then its kind, a NUL-padded `char[32]` (`"req"` or `"ctxt"`);
//! - a `"req"` body (a process asking for its on-demand config) is `int type` (the config
//!   kinds it can take now: [`CONFIG_EVENTS`] | [`CONFIG_ACTIVITIES`], 0 while its profiler is
//!   busy), `int n`, `int64 jobid`, then `n` × `int32` pids: the process itself, then each of
//!   its ancestors. The reply is a `"req"` message whose body is the config text, empty when
//!   there is nothing to run;
//! - a `"ctxt"` body (a process registering a GPU context) is `int32 gpu`, `int32 pid`,
//!   `int64 jobid`; the reply's body is one `int32`, the number of processes on that GPU.

use std::fmt;

/// The length of the header before each body.
pub const FABRIC_HEADER_LEN: usize = 8 + KIND_LEN;
/// The bytes of the kind field, NUL padding included.
const KIND_LEN: usize = 32;
/// The largest datagram either side accepts: a config text of at most 64 KiB and its header.
pub const FABRIC_MAX_DATAGRAM: usize = FABRIC_HEADER_LEN + 64 * 1024;
/// The most pids a poll may carry (a process and its ancestors: a few dozen at most).
const MAX_PIDS: usize = 1024;
/// The fixed part of a `"req"` body, before its pids.
const POLL_FIXED_LEN: usize = 16;
/// The length of a `"ctxt"` body.
const CONTEXT_LEN: usize = 16;

/// The kind of a config poll and of its reply.
pub const KIND_POLL: &str = "req";
/// The kind of a GPU context registration and of its reply.
pub const KIND_CONTEXT: &str = "ctxt";
/// A poll's config type bit: the process can start an event-profiler config.
pub const CONFIG_EVENTS: i32 = 1;
/// A poll's config type bit: the process can start an activity trace (its profiler is idle).
pub const CONFIG_ACTIVITIES: i32 = 2;

/// Why a datagram is not a message of the fabric. The text is what the daemon logs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FabricError {
    /// Shorter than the header.
    #[error("{0} bytes, shorter than the {FABRIC_HEADER_LEN}-byte header")]
    Short(usize),
    /// Longer than [`FABRIC_MAX_DATAGRAM`] (the rest was cut off by the receive).
    #[error("longer than {FABRIC_MAX_DATAGRAM} bytes")]
    Oversized,
    /// The header's length is not the body's.
    #[error("the header says {said} body bytes, {got} arrived")]
    Length {
        /// What the header says.
        said: u64,
        /// What arrived.
        got: usize,
    },
    /// The kind is not NUL-terminated ASCII.
    #[error("the kind field is not a NUL-terminated name")]
    BadKind,
    /// A kind this side does not serve.
    #[error("unknown message kind {0:?}")]
    UnknownKind(String),
    /// A body of the wrong shape for its kind.
    #[error("a {kind:?} body of {len} bytes: {why}")]
    Body {
        /// The message's kind.
        kind: &'static str,
        /// The body's length.
        len: usize,
        /// What is wrong with it.
        why: String,
    },
}

/// One message: its kind and its body.
///
/// ```
/// use omniprof::on_demand::FabricMessage;
///
/// let reply = FabricMessage::new("req", b"ACTIVITIES_DURATION_MSECS=500".to_vec());
/// let bytes = reply.encode();
/// assert_eq!(bytes.len(), 40 + 29);
/// assert_eq!(FabricMessage::decode(&bytes)?, reply);
/// # Ok::<(), omniprof::on_demand::FabricError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FabricMessage {
    /// `"req"` or `"ctxt"`.
    pub kind: String,
    /// The kind's struct or text.
    pub body: Vec<u8>,
}

impl FabricMessage {
    /// A message of `kind` (at most 31 bytes) with `body`.
    pub fn new(kind: &str, body: Vec<u8>) -> Self {
        Self {
            kind: kind.to_owned(),
            body,
        }
    }

    /// The datagram: header, then body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FABRIC_HEADER_LEN + self.body.len());
        out.extend_from_slice(&(self.body.len() as u64).to_ne_bytes());
        let mut kind = [0u8; KIND_LEN];
        let name = &self.kind.as_bytes()[..self.kind.len().min(KIND_LEN - 1)];
        kind[..name.len()].copy_from_slice(name);
        out.extend_from_slice(&kind);
        out.extend_from_slice(&self.body);
        out
    }

    /// Reads a datagram; the header's length must be exactly the body's.
    pub fn decode(bytes: &[u8]) -> Result<Self, FabricError> {
        if bytes.len() < FABRIC_HEADER_LEN {
            return Err(FabricError::Short(bytes.len()));
        }
        if bytes.len() > FABRIC_MAX_DATAGRAM {
            return Err(FabricError::Oversized);
        }
        let said = u64::from_ne_bytes(bytes[..8].try_into().unwrap_or_default());
        let body = &bytes[FABRIC_HEADER_LEN..];
        if said != body.len() as u64 {
            return Err(FabricError::Length {
                said,
                got: body.len(),
            });
        }
        let kind = &bytes[8..FABRIC_HEADER_LEN];
        let end = kind
            .iter()
            .position(|&b| b == 0)
            .ok_or(FabricError::BadKind)?;
        let kind = std::str::from_utf8(&kind[..end])
            .ok()
            .filter(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or(FabricError::BadKind)?;
        Ok(Self::new(kind, body.to_vec()))
    }
}

/// A process's poll for its on-demand config (a `"req"` body).
///
/// ```
/// use omniprof::on_demand::{ConfigPoll, CONFIG_ACTIVITIES};
///
/// let poll = ConfigPoll { config_type: CONFIG_ACTIVITIES, job_id: 0, pids: vec![4242, 1] };
/// assert_eq!(poll.encode().len(), 16 + 2 * 4);
/// assert_eq!(ConfigPoll::decode(&poll.encode())?, poll);
/// # Ok::<(), omniprof::on_demand::FabricError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigPoll {
    /// The config kinds the process can start now ([`CONFIG_ACTIVITIES`] while its profiler
    /// is idle).
    pub config_type: i32,
    /// The job's id (`SLURM_JOB_ID`, else 0).
    pub job_id: i64,
    /// The process, then its ancestors.
    pub pids: Vec<i32>,
}

impl ConfigPoll {
    /// The body's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(POLL_FIXED_LEN + 4 * self.pids.len());
        out.extend_from_slice(&self.config_type.to_ne_bytes());
        let n = i32::try_from(self.pids.len()).unwrap_or(i32::MAX);
        out.extend_from_slice(&n.to_ne_bytes());
        out.extend_from_slice(&self.job_id.to_ne_bytes());
        for pid in &self.pids {
            out.extend_from_slice(&pid.to_ne_bytes());
        }
        out
    }

    /// Reads a body: at least one pid, at most 1024, and exactly as many as it says.
    pub fn decode(body: &[u8]) -> Result<Self, FabricError> {
        let bad = |why: String| FabricError::Body {
            kind: KIND_POLL,
            len: body.len(),
            why,
        };
        if body.len() < POLL_FIXED_LEN {
            return Err(bad(format!("shorter than {POLL_FIXED_LEN} bytes")));
        }
        let config_type = i32_at(body, 0);
        let n = i32_at(body, 4);
        let job_id = i64::from_ne_bytes(body[8..16].try_into().unwrap_or_default());
        let n = usize::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_PIDS).contains(n))
            .ok_or_else(|| bad(format!("{n} pids (1 to {MAX_PIDS} expected)")))?;
        if body.len() != POLL_FIXED_LEN + 4 * n {
            return Err(bad(format!("{n} pids do not fill it")));
        }
        let pids = (0..n)
            .map(|i| i32_at(body, POLL_FIXED_LEN + 4 * i))
            .collect();
        Ok(Self {
            config_type,
            job_id,
            pids,
        })
    }
}

/// A process registering a GPU context (a `"ctxt"` body).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuContext {
    /// The device.
    pub gpu: i32,
    /// The process.
    pub pid: i32,
    /// The job's id.
    pub job_id: i64,
}

impl GpuContext {
    /// Reads a body of exactly 16 bytes.
    pub fn decode(body: &[u8]) -> Result<Self, FabricError> {
        if body.len() != CONTEXT_LEN {
            return Err(FabricError::Body {
                kind: KIND_CONTEXT,
                len: body.len(),
                why: format!("{CONTEXT_LEN} bytes expected"),
            });
        }
        Ok(Self {
            gpu: i32_at(body, 0),
            pid: i32_at(body, 4),
            job_id: i64::from_ne_bytes(body[8..16].try_into().unwrap_or_default()),
        })
    }
}

fn i32_at(bytes: &[u8], at: usize) -> i32 {
    i32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap_or_default())
}

impl fmt::Display for ConfigPoll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "type {} job {} pids {:?}",
            self.config_type, self.job_id, self.pids
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A poll as torch 2.15's built-in client sent it (captured from a real process):
    /// header, then type 2, six pids, job 0.
    const CAPTURED_POLL: &str = "2800000000000000726571000000000000000000000000000000000000000000\
                                 0000000000000000020000000600000000000000000000005f1700005c170000\
                                 4217000041170000f4070000f3070000";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn a_poll_captured_from_torch_decodes_to_its_pid_chain() {
        let message = FabricMessage::decode(&unhex(CAPTURED_POLL)).unwrap();
        assert_eq!(message.kind, KIND_POLL);
        let poll = ConfigPoll::decode(&message.body).unwrap();
        assert_eq!(
            poll,
            ConfigPoll {
                config_type: CONFIG_ACTIVITIES,
                job_id: 0,
                pids: vec![5983, 5980, 5954, 5953, 2036, 2035],
            }
        );
        let again = FabricMessage::new(KIND_POLL, poll.encode()).encode();
        assert_eq!(again, unhex(CAPTURED_POLL));
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        let poll = |body: Vec<u8>| FabricMessage::new(KIND_POLL, body).encode();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![1, 2, 3], "3 bytes, shorter than the 40-byte header"),
            (vec![0; FABRIC_MAX_DATAGRAM + 1], "longer than"),
            (
                {
                    let mut b = poll(vec![0; 20]);
                    b[0] = 99;
                    b
                },
                "says 99 body bytes, 20 arrived",
            ),
            (vec![0; 40], "not a NUL-terminated name"),
            (
                [&[0u8; 8][..], &[b'x'; 32][..]].concat(),
                "not a NUL-terminated",
            ),
        ];
        for (bytes, want) in cases {
            let err = FabricMessage::decode(&bytes).unwrap_err().to_string();
            assert!(err.contains(want), "{err} (wanted {want})");
        }
        let bodies: Vec<(Vec<u8>, &str)> = vec![
            (vec![0; 8], "shorter than 16"),
            (
                ConfigPoll {
                    config_type: 2,
                    job_id: 0,
                    pids: vec![],
                }
                .encode(),
                "0 pids",
            ),
            (
                {
                    let mut b = ConfigPoll {
                        config_type: 2,
                        job_id: 0,
                        pids: vec![7],
                    }
                    .encode();
                    b[4] = 3;
                    b
                },
                "3 pids do not fill it",
            ),
            (
                {
                    let mut b = ConfigPoll {
                        config_type: 2,
                        job_id: 0,
                        pids: vec![7],
                    }
                    .encode();
                    b[4..8].copy_from_slice(&(-1i32).to_ne_bytes());
                    b
                },
                "-1 pids",
            ),
        ];
        for (body, want) in bodies {
            let err = ConfigPoll::decode(&body).unwrap_err().to_string();
            assert!(err.contains(want), "{err} (wanted {want})");
        }
        let err = GpuContext::decode(&[0; 3]).unwrap_err().to_string();
        assert_eq!(err, "a \"ctxt\" body of 3 bytes: 16 bytes expected");
    }

    #[test]
    fn a_context_registration_decodes() {
        let mut body = Vec::new();
        body.extend_from_slice(&3i32.to_ne_bytes());
        body.extend_from_slice(&4242i32.to_ne_bytes());
        body.extend_from_slice(&77i64.to_ne_bytes());
        assert_eq!(
            GpuContext::decode(&body).unwrap(),
            GpuContext {
                gpu: 3,
                pid: 4242,
                job_id: 77
            }
        );
    }
}
