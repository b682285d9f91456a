//! The safe face of the host's trace builder (`docs/plugin-abi.md`, section 5).

use core::ffi::{c_char, c_int};
use core::marker::PhantomData;
use core::ptr::{self, NonNull};
use std::fmt;

use crate::abi::{
    ProfileDeviceInfo, ProfileEvent, ProfileEventFlow, ProfileEventFlowType, ProfileEventType,
    ProfileResourceInfo,
};
use crate::version::{read_versioned, SizeError};

/// An event to add: a duration (or, for [`ProfileEventType::GPU_PM_COUNTER`], a counter
/// sample at `start_ns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event<'a> {
    /// The event's name.
    pub name: &'a str,
    /// Its type; `INVALID` and unknown values are refused before reaching the host.
    pub event_type: ProfileEventType,
    /// Start, nanoseconds since the Unix epoch.
    pub start_ns: i64,
    /// End, nanoseconds since the Unix epoch.
    pub end_ns: i64,
    /// The correlation id, all 64 bits of it.
    pub id: i64,
    /// The device index; for host events the process id.
    pub device_id: i32,
    /// The stream or queue; for host events the thread id.
    pub resource_id: i32,
}

/// One end of a flow between two events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    /// The kind of link; `INVALID` and unknown values are refused before reaching the host.
    pub flow_type: ProfileEventFlowType,
    /// The same non-zero id on both ends links them.
    pub id: u32,
    /// True on the source end, false on the target.
    pub is_start: bool,
}

/// A device's process row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo<'a> {
    /// The row's `pid`.
    pub id: i64,
    /// The row's position.
    pub sort_index: i64,
    /// The process name; `None` lets the host use the decimal id.
    pub name: Option<&'a str>,
    /// The label, e.g. `GPU 0`; `None` means empty.
    pub label: Option<&'a str>,
}

/// A stream's (or other resource's) thread row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceInfo<'a> {
    /// The owning device row's `pid`.
    pub device_id: i32,
    /// The row's `tid`.
    pub id: i32,
    /// Sort index; lower is nearer the top.
    pub display_order: i32,
    /// The row name; `None` lets the host use the decimal id.
    pub name: Option<&'a str>,
}

/// Why a trace builder call did not go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceError {
    /// The host's function returned this non-zero code.
    Rejected {
        /// The C name of the host's function, e.g. `"addEvent"`.
        function: &'static str,
        /// What it returned.
        code: c_int,
    },
    /// The host's builder has NULL for this function.
    Missing {
        /// The C name of the function.
        function: &'static str,
    },
    /// A string held a NUL byte, which C cannot carry; nothing was sent.
    InteriorNul {
        /// The C name of the function.
        function: &'static str,
    },
    /// An `INVALID` or unknown event or flow type; nothing was sent, because some hosts
    /// silently turn such an event into a kernel.
    InvalidType {
        /// The C name of the function.
        function: &'static str,
        /// The value.
        value: c_int,
    },
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Rejected { function, code } => {
                write!(f, "the host's {function} returned {code}")
            }
            Self::Missing { function } => write!(f, "the host's trace builder has no {function}"),
            Self::InteriorNul { function } => {
                write!(f, "a string for {function} contains a NUL byte")
            }
            Self::InvalidType { function, value } => {
                write!(f, "{function}: {value} is not a valid type")
            }
        }
    }
}

impl std::error::Error for TraceError {}

/// The host's trace, as a plugin adds to it through the host's builder
/// ([`crate::TraceBuilder`]), for the duration of one `process_events` call (the lifetime
/// `'host`). Not `Send`: the ABI allows calls only from the thread running
/// `profilerProcessEvents`.
pub struct HostTrace<'host> {
    /// The known prefix of the host's function table.
    raw: crate::TraceBuilder,
    /// NUL-terminated copies of the strings of the call in progress, reused so that adding
    /// events allocates only while the longest string grows.
    scratch: Vec<u8>,
    _host: PhantomData<&'host crate::TraceBuilder>,
}

impl<'host> HostTrace<'host> {
    /// Wraps the host's function table after checking its size.
    ///
    /// The SDK calls this with the builder of `profilerProcessEvents`; it is public so that
    /// a plugin's tests can drive [`PluginSession::process_events`](super::PluginSession::process_events)
    /// with a builder of their own.
    ///
    /// # Safety
    ///
    /// `raw` must satisfy [`read_versioned`], and its handle and functions must be callable
    /// as the ABI describes, from this thread, for as long as the returned value lives.
    pub unsafe fn from_raw(raw: NonNull<crate::TraceBuilder>) -> Result<Self, SizeError> {
        Ok(Self {
            // SAFETY: the caller's contract.
            raw: unsafe { read_versioned(raw) }?,
            scratch: Vec::new(),
            _host: PhantomData,
        })
    }

    /// Adds an event and names it (the ABI's `addEvent` then `setLastEventName`). The
    /// returned [`LastEvent`] adds metadata and a flow to it; adding the next event ends it.
    ///
    /// When naming fails, the host keeps the event unnamed.
    pub fn add_event(&mut self, event: &Event<'_>) -> Result<LastEvent<'_, 'host>, TraceError> {
        let function = "addEvent";
        if !event.event_type.is_valid() {
            return Err(TraceError::InvalidType {
                function,
                value: event.event_type.0,
            });
        }
        let raw = ProfileEvent {
            event_type: event.event_type,
            start_time_utc_ns: event.start_ns,
            end_time_utc_ns: event.end_ns,
            event_id: event.id,
            device_id: event.device_id,
            resource_id: event.resource_id,
            ..Default::default()
        };
        let add = self.raw.add_event.ok_or(TraceError::Missing { function })?;
        // SAFETY: the host's function and handle are valid for the life of `self`
        // (`from_raw`); `raw` is a complete event that outlives the call.
        let code = unsafe { add(self.raw.trace_builder_handle, &raw) };
        check(function, code)?;

        let function = "setLastEventName";
        let [name] = self.c_strings(function, [CText::Verbatim(event.name)])?;
        let set_name = self
            .raw
            .set_last_event_name
            .ok_or(TraceError::Missing { function })?;
        // SAFETY: as above; `name` points into `self.scratch`, NUL-terminated and unchanged
        // until the next string is copied.
        let code = unsafe { set_name(self.raw.trace_builder_handle, name) };
        check(function, code)?;
        Ok(LastEvent { builder: self })
    }

    /// Adds a device's process row (the ABI's `addDeviceInfo`).
    pub fn add_device_info(&mut self, info: &DeviceInfo<'_>) -> Result<(), TraceError> {
        let function = "addDeviceInfo";
        let [name, label] = self.c_strings(function, [info.name.into(), info.label.into()])?;
        let raw = ProfileDeviceInfo {
            device_id: info.id,
            sort_index: info.sort_index,
            name,
            label,
            ..Default::default()
        };
        let add = self
            .raw
            .add_device_info
            .ok_or(TraceError::Missing { function })?;
        // SAFETY: the host's function and handle are valid for the life of `self`; `raw` and
        // the strings in `self.scratch` outlive the call.
        let code = unsafe { add(self.raw.trace_builder_handle, &raw) };
        check(function, code)
    }

    /// Adds a resource's thread row (the ABI's `addResourceInfo`).
    pub fn add_resource_info(&mut self, info: &ResourceInfo<'_>) -> Result<(), TraceError> {
        let function = "addResourceInfo";
        let [name] = self.c_strings(function, [info.name.into()])?;
        let raw = ProfileResourceInfo {
            device_id: info.device_id,
            resource_id: info.id,
            display_order: info.display_order,
            name,
            ..Default::default()
        };
        let add = self
            .raw
            .add_resource_info
            .ok_or(TraceError::Missing { function })?;
        // SAFETY: the host's function and handle are valid for the life of `self`; `raw` and
        // the string in `self.scratch` outlive the call.
        let code = unsafe { add(self.raw.trace_builder_handle, &raw) };
        check(function, code)
    }

    /// Copies `texts` into the scratch buffer, each NUL-terminated, and returns pointers to
    /// the copies (NULL for [`CText::Null`]). The pointers are valid until the scratch
    /// buffer is next written.
    fn c_strings<const N: usize>(
        &mut self,
        function: &'static str,
        texts: [CText<'_>; N],
    ) -> Result<[*const c_char; N], TraceError> {
        self.scratch.clear();
        let mut starts = [None; N];
        for (start, text) in starts.iter_mut().zip(texts) {
            match text {
                CText::Null => continue,
                CText::Verbatim(text) if text.as_bytes().contains(&0) => {
                    return Err(TraceError::InteriorNul { function });
                }
                CText::Verbatim(text) => {
                    *start = Some(self.scratch.len());
                    self.scratch.extend_from_slice(text.as_bytes());
                }
                CText::JsonString(text) => {
                    *start = Some(self.scratch.len());
                    push_json_string(&mut self.scratch, text);
                }
            }
            self.scratch.push(0);
        }
        // Pointers are taken only now: pushing may have moved the buffer.
        let base = self.scratch.as_ptr().cast::<c_char>();
        // SAFETY: each start is an offset into `self.scratch`, recorded above.
        Ok(starts.map(|start| start.map_or(ptr::null(), |start| unsafe { base.add(start) })))
    }
}

/// A string to pass to the host.
#[derive(Clone, Copy)]
enum CText<'a> {
    /// A NULL pointer.
    Null,
    /// The text as it is; it must not contain NUL.
    Verbatim(&'a str),
    /// The text as a JSON string literal, which never contains NUL.
    JsonString(&'a str),
}

impl<'a> From<Option<&'a str>> for CText<'a> {
    fn from(text: Option<&'a str>) -> Self {
        text.map_or(Self::Null, Self::Verbatim)
    }
}

/// The event most recently added, to which metadata and a flow can be attached.
pub struct LastEvent<'b, 'host> {
    builder: &'b mut HostTrace<'host>,
}

impl LastEvent<'_, '_> {
    /// Adds `key` with a raw JSON value, inserted verbatim into the event's `args` (the
    /// ABI's `addLastEventMetadata`): a string must come quoted (`"\"fp16\""`), a list with
    /// brackets, numbers and `true`/`false` bare. For a counter sample
    /// ([`ProfileEventType::GPU_PM_COUNTER`]) each pair is one series and the value must be a
    /// number.
    pub fn add_metadata_json(&mut self, key: &str, json: &str) -> Result<(), TraceError> {
        let [key, value] = self.builder.c_strings(
            "addLastEventMetadata",
            [CText::Verbatim(key), CText::Verbatim(json)],
        )?;
        self.add_metadata(key, value)
    }

    /// Adds `key` with `text` as a JSON string, quoted and escaped here.
    pub fn add_metadata_str(&mut self, key: &str, text: &str) -> Result<(), TraceError> {
        let [key, value] = self.builder.c_strings(
            "addLastEventMetadata",
            [CText::Verbatim(key), CText::JsonString(text)],
        )?;
        self.add_metadata(key, value)
    }

    /// Calls `addLastEventMetadata` with strings from the builder's scratch buffer.
    fn add_metadata(&mut self, key: *const c_char, value: *const c_char) -> Result<(), TraceError> {
        let function = "addLastEventMetadata";
        let builder = &*self.builder;
        let add = builder
            .raw
            .add_last_event_metadata
            .ok_or(TraceError::Missing { function })?;
        // SAFETY: the host's function and handle are valid for the life of the builder; both
        // strings are NUL-terminated in its scratch buffer, untouched until the call returns.
        let code = unsafe { add(builder.raw.trace_builder_handle, key, value) };
        check(function, code)
    }

    /// Attaches a flow end (the ABI's `setLastEventFlow`). At most one per event, hence
    /// `self` by value.
    pub fn set_flow(self, flow: Flow) -> Result<(), TraceError> {
        let function = "setLastEventFlow";
        if !flow.flow_type.is_valid() {
            return Err(TraceError::InvalidType {
                function,
                value: flow.flow_type.0,
            });
        }
        let raw = ProfileEventFlow {
            flow_type: flow.flow_type,
            flow_id: flow.id,
            is_start_point: flow.is_start.into(),
            ..Default::default()
        };
        let builder = &*self.builder;
        let set = builder
            .raw
            .set_last_event_flow
            .ok_or(TraceError::Missing { function })?;
        // SAFETY: the host's function and handle are valid for the life of the builder; `raw`
        // outlives the call.
        let code = unsafe { set(builder.raw.trace_builder_handle, &raw) };
        check(function, code)
    }
}

/// Maps a host return code.
fn check(function: &'static str, code: c_int) -> Result<(), TraceError> {
    match code {
        0 => Ok(()),
        code => Err(TraceError::Rejected { function, code }),
    }
}

/// Appends `text` as a JSON string literal: quoted, with `"`, `\` and control characters
/// escaped (a NUL becomes `\u0000`, so the result never contains one).
fn push_json_string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    for &byte in text.as_bytes() {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(byte >> 4)]);
                out.push(HEX[usize::from(byte & 0xf)]);
            }
            // Multi-byte UTF-8 sequences pass through unchanged: JSON text is UTF-8.
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::push_json_string;

    #[test]
    fn json_strings_are_quoted_and_escaped() {
        let mut out = Vec::new();
        push_json_string(&mut out, "a\"b\\c\nd\u{1}\0é");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#""a\"b\\c\nd\u0001\u0000é""#
        );
    }
}
