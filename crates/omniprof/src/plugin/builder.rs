//! The host-owned trace builder a plugin fills during `profilerProcessEvents`
//! (`docs/plugin-abi.md`, section 5).
//!
//! Every call is validated and answered with 0 or −1; nothing a plugin passes is trusted (the
//! defects cited are those of `docs/plugin-abi.md`, section 9): struct sizes are checked
//! before reading (defects 1 and 4), unknown or `INVALID` types are rejected (defect 5),
//! strings are copied at once (their pointers die with the call), invalid UTF-8 is replaced,
//! event ids keep 64 bits (defect 2), an end before the start is clamped and counted (defect
//! 11), metadata must be JSON that every reader reads (`1e400` or a lone surrogate is kept as
//! a string and counted; a value nested deeper than [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH) is
//! refused and counted), counter values must be numbers (defect 15), and every device and
//! resource info is kept (defect 7). Each rejection is counted by reason and reported as a
//! session error.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, CStr};
use std::ptr::NonNull;
use std::sync::Arc;

use omniprof_plugin_sys::{
    read_versioned, ProfileDeviceInfo, ProfileEvent, ProfileEventFlow, ProfileEventFlowType,
    ProfileResourceInfo, TraceBuilder, TraceBuilderHandle,
};

use super::lend::{self, REFUSED};
use super::problem::{LastCall, Problem, ProblemKind};
use super::types::activity_type;
use crate::backend::{DeviceInfo, ResourceInfo};
use crate::prefix_within;
use crate::FastMap;
use crate::{Activity, ActivityType, Flow, FlowKind};
use crate::{FromJsonError, Value};

/// Longest event name kept; longer ones are cut (at a character boundary) and counted.
pub(crate) const MAX_NAME_BYTES: usize = 4096;

const OK: c_int = 0;

/// The host side of the trace builder: what one `profilerProcessEvents` call produced.
///
/// The engine makes one per call; it is public so a plugin can be exercised in-process (in
/// a vendor's tests or a benchmark) through the same C function table the engine hands out.
///
/// ```
/// use omniprof::plugins::HostTraceBuilder;
///
/// let mut builder = HostTraceBuilder::default();
/// let (rc, kept) = builder.lend(|table| {
///     // SAFETY: a call through the table lent right now; a NULL event is rejected, not read.
///     let rc = unsafe { table.add_event.unwrap()(table.trace_builder_handle, std::ptr::null()) };
///     (rc, *table)
/// });
/// assert_eq!(rc, -1);
/// // After the loan, the same call is refused without reaching the builder.
/// // SAFETY: a complete table; its handle is checked before anything is read.
/// let late = unsafe { kept.add_event.unwrap()(kept.trace_builder_handle, std::ptr::null()) };
/// assert_eq!(late, -1);
/// assert_eq!(builder.problems().values().map(|p| p.count).sum::<u64>(), 1);
/// assert_eq!(builder.problem_report(), ["1 × addEvent with a NULL event"]);
///
/// // A budget of one event: the second is refused and counted.
/// let mut small = HostTraceBuilder::with_max_events(1);
/// let event = omniprof_plugin_sys::ProfileEvent {
///     event_type: omniprof_plugin_sys::ProfileEventType::CONCURRENT_KERNEL,
///     ..Default::default()
/// };
/// let codes = small.lend(|table| {
///     // SAFETY: calls through the table lent right now, with a complete event.
///     [0, 1].map(|_| unsafe { table.add_event.unwrap()(table.trace_builder_handle, &event) })
/// });
/// assert_eq!((codes, small.activities().len()), ([0, -1], 1));
/// ```
pub struct HostTraceBuilder {
    pub(crate) events: Vec<Activity>,
    pub(crate) devices: Vec<DeviceInfo>,
    pub(crate) resources: Vec<ResourceInfo>,
    /// Problems, by kind, with their counts and first examples.
    pub(crate) problems: BTreeMap<ProblemKind, Problem>,
    /// Events kept at most; the rest are dropped and counted.
    max_events: usize,
    /// What the most recent `addEvent` did: only an accepted event may be named, flowed and
    /// annotated (a rejected event's calls must not land on the one before it).
    last: LastEvent,
    /// Names seen so far (as cut to [`MAX_NAME_BYTES`]), as kept, with the repair each
    /// needed.
    names: FastMap<Box<[u8]>, KeptName>,
    /// Bytes of the keys of `names`; past [`MAX_CACHED_NAME_BYTES`] new names are not cached.
    cached_name_bytes: usize,
    /// The name an event has until `setLastEventName` (shared, so adding allocates nothing).
    unnamed: Arc<str>,
}

impl Default for HostTraceBuilder {
    fn default() -> Self {
        Self::with_max_events(usize::MAX)
    }
}

impl HostTraceBuilder {
    /// A builder that keeps at most `max_events` events: past them `addEvent` returns −1 and
    /// each dropped event is counted (the engine's budget is
    /// [`max_events_per_backend`](crate::Config::max_events_per_backend)).
    pub fn with_max_events(max_events: usize) -> Self {
        Self {
            events: Vec::new(),
            devices: Vec::new(),
            resources: Vec::new(),
            problems: BTreeMap::new(),
            max_events,
            last: LastEvent::None,
            names: FastMap::default(),
            cached_name_bytes: 0,
            unnamed: Arc::default(),
        }
    }

    /// The events built so far.
    pub fn activities(&self) -> &[Activity] {
        &self.events
    }

    /// Rejected or repaired calls, by kind of problem.
    pub fn problems(&self) -> &BTreeMap<ProblemKind, Problem> {
        &self.problems
    }

    /// One line per kind of problem: its count, what it is, and its first examples.
    pub fn problem_report(&self) -> Vec<String> {
        self.problems
            .iter()
            .map(|(kind, p)| match p.examples.is_empty() {
                true => format!("{} × {kind}", p.count),
                false => {
                    let more = if p.count > p.examples.len() as u64 {
                        ", …"
                    } else {
                        ""
                    };
                    format!("{} × {kind}: {}{more}", p.count, p.examples.join(", "))
                }
            })
            .collect()
    }

    /// Forgets the events built so far (keeps the problem counts).
    pub fn clear_activities(&mut self) {
        self.events.clear();
        self.last = LastEvent::None;
    }

    /// Lends the builder to a plugin for the length of `f`, which gets the C function table
    /// to hand over. Calls through the table are served only on this thread while `f` runs;
    /// a call from another thread, or after `f` returned, is refused (−1) and counted, and
    /// never reaches the builder.
    pub fn lend<R>(&mut self, f: impl FnOnce(&TraceBuilder) -> R) -> R {
        let (result, refused) = lend::lend(self, |handle| {
            f(&TraceBuilder {
                trace_builder_handle: handle.cast::<TraceBuilderHandle>(),
                add_event: Some(add_event),
                set_last_event_name: Some(set_last_event_name),
                set_last_event_flow: Some(set_last_event_flow),
                add_last_event_metadata: Some(add_last_event_metadata),
                add_device_info: Some(add_device_info),
                add_resource_info: Some(add_resource_info),
                ..TraceBuilder::default()
            })
        });
        if refused > 0 {
            self.problems
                .entry(ProblemKind::RefusedCall)
                .or_default()
                .count += refused;
        }
        result
    }

    /// Counts one problem of `kind`; returns −1 for the call that had it.
    fn problem(&mut self, kind: ProblemKind) -> c_int {
        self.problems.entry(kind).or_default().count += 1;
        REFUSED
    }

    /// Counts one problem of `kind`, keeping `example` (made only while few are kept).
    fn problem_with(&mut self, kind: ProblemKind, example: impl FnOnce() -> String) -> c_int {
        let problem = self.problems.entry(kind).or_default();
        problem.count += 1;
        if problem.examples.len() < MAX_EXAMPLES {
            let mut example = example();
            if example.len() > MAX_EXAMPLE_BYTES {
                example.truncate(prefix_within(&example, MAX_EXAMPLE_BYTES).len());
                example.push('…');
            }
            problem.examples.push(example);
        }
        REFUSED
    }

    /// The last accepted event for `call`, or the problem of a call before any `addEvent` or
    /// after a rejected one (whose rejection is the example).
    fn last(&mut self, call: LastCall) -> Result<&mut Activity, c_int> {
        match self.last {
            LastEvent::Accepted if !self.events.is_empty() => {
                Ok(self.events.last_mut().expect("checked above"))
            }
            LastEvent::Rejected(why) => {
                Err(self.problem_with(ProblemKind::AfterRejectedEvent(call), || why.to_string()))
            }
            _ => Err(self.problem(ProblemKind::BeforeAnyEvent(call))),
        }
    }

    /// Counts a rejected `addEvent` as `kind`; the calls that follow it are refused naming it.
    fn reject_event(&mut self, kind: ProblemKind) -> c_int {
        self.last = LastEvent::Rejected(kind);
        self.problem(kind)
    }

    /// [`reject_event`](Self::reject_event), keeping `example`.
    fn reject_event_with(&mut self, kind: ProblemKind, example: impl FnOnce() -> String) -> c_int {
        self.last = LastEvent::Rejected(kind);
        self.problem_with(kind, example)
    }

    fn add_event(&mut self, event: Option<NonNull<ProfileEvent>>) -> c_int {
        let Some(event) = event else {
            return self.reject_event(ProblemKind::NullEvent);
        };
        // SAFETY: the plugin passes a pointer to its event struct, readable for the size it
        // declares in the struct's first field (the ABI contract `read_versioned` relies on).
        let event = match unsafe { read_versioned(event) } {
            Ok(event) => event,
            Err(e) => return self.reject_event_with(ProblemKind::EventTooSmall, || e.to_string()),
        };
        let Some(kind) = activity_type(event.event_type) else {
            return self.reject_event_with(ProblemKind::InvalidEventType, || {
                event.event_type.0.to_string()
            });
        };
        if self.events.len() >= self.max_events {
            return self.reject_event(ProblemKind::EventBudgetReached);
        }
        let start = event.start_time_utc_ns;
        let mut end = event.end_time_utc_ns;
        if end < start {
            self.problem(ProblemKind::EndBeforeStart);
            end = start;
        }
        let mut a = Activity::new(
            kind,
            self.unnamed.clone(),
            event.device_id.into(),
            event.resource_id.into(),
            start,
            end,
        );
        a.correlation = event.event_id as u64;
        self.events.push(a);
        self.last = LastEvent::Accepted;
        OK
    }

    fn set_last_event_name(&mut self, name: *const c_char) -> c_int {
        if name.is_null() {
            return self.problem(ProblemKind::NullName);
        }
        // SAFETY: non-null, and the ABI says strings are NUL-terminated and live for the call.
        let whole = unsafe { CStr::from_ptr(name) }.to_bytes();
        // Only what is kept is looked up and cached, so a huge name costs its kept part.
        let bytes = cut_name(whole);
        // Plugins repeat a few names many times: each distinct one is checked and copied once.
        let (text, mut problem) = match self.names.get(bytes) {
            Some(known) => known.clone(),
            None => {
                let known = checked_name(bytes);
                if self.cached_name_bytes + bytes.len() <= MAX_CACHED_NAME_BYTES {
                    self.cached_name_bytes += bytes.len();
                    self.names.insert(bytes.into(), known.clone());
                }
                known
            }
        };
        if bytes.len() < whole.len() {
            problem = Some(ProblemKind::NameCut);
        }
        if let Some(problem) = problem {
            self.problem(problem);
        }
        match self.last(LastCall::Name) {
            Ok(last) => {
                last.name = text;
                OK
            }
            Err(code) => code,
        }
    }

    fn set_last_event_flow(&mut self, flow: Option<NonNull<ProfileEventFlow>>) -> c_int {
        let Some(flow) = flow else {
            return self.problem(ProblemKind::NullFlow);
        };
        // SAFETY: as in `add_event`: the plugin's struct, readable for its declared size.
        let flow = match unsafe { read_versioned(flow) } {
            Ok(flow) => flow,
            Err(e) => return self.problem_with(ProblemKind::FlowTooSmall, || e.to_string()),
        };
        let kind = match flow.flow_type {
            ProfileEventFlowType::FWD_BWD => FlowKind::FwdBwd,
            ProfileEventFlowType::ASYNC_CPU_GPU => FlowKind::Ac2g,
            other => {
                return self.problem_with(ProblemKind::InvalidFlowType, || other.0.to_string())
            }
        };
        match self.last(LastCall::Flow) {
            Ok(last) => {
                last.flow = (flow.flow_id != 0).then_some(Flow {
                    id: flow.flow_id.into(),
                    kind,
                    start: flow.is_start_point != 0,
                });
                OK
            }
            Err(code) => code,
        }
    }

    fn add_last_event_metadata(&mut self, key: *const c_char, value: *const c_char) -> c_int {
        if key.is_null() || value.is_null() {
            return self.problem(ProblemKind::NullMetadata);
        }
        // SAFETY: both non-null NUL-terminated strings alive for the call (ABI contract).
        let (key, raw) = unsafe {
            (
                CStr::from_ptr(key).to_string_lossy().into_owned(),
                CStr::from_ptr(value).to_string_lossy().into_owned(),
            )
        };
        let counter = match self.last(LastCall::Metadata) {
            Ok(last) => last.kind == ActivityType::GpuPmCounter,
            Err(code) => return code,
        };
        // Kineto's plugins pass metadata values as JSON text, read by the reader's rules.
        let typed = Value::from_json(&raw);
        if let Err(FromJsonError::TooDeep) = typed {
            return self.problem_with(ProblemKind::MetadataTooDeep, || key);
        }
        if counter {
            // A counter event's values wait in its args until the adapter hands the event
            // to the sink as a counter sample.
            return match typed.as_ref().ok().and_then(Value::as_f64) {
                Some(v) if v.is_finite() => {
                    self.events
                        .last_mut()
                        .expect("checked above")
                        .args
                        .push((key.into(), Value::Float(v)));
                    OK
                }
                _ => self.problem(ProblemKind::CounterNotANumber),
            };
        }
        let value = typed.unwrap_or_else(|_| {
            self.problem(ProblemKind::MetadataNotJson);
            Value::from(raw)
        });
        self.events
            .last_mut()
            .expect("checked above")
            .args
            .push((key.into(), value));
        OK
    }

    fn add_device_info(&mut self, info: Option<NonNull<ProfileDeviceInfo>>) -> c_int {
        let Some(info) = info else {
            return self.problem(ProblemKind::NullDeviceInfo);
        };
        // SAFETY: as in `add_event`.
        let info = match unsafe { read_versioned(info) } {
            Ok(info) => info,
            Err(e) => return self.problem_with(ProblemKind::DeviceInfoTooSmall, || e.to_string()),
        };
        self.devices.push(DeviceInfo {
            id: info.device_id,
            sort_index: info.sort_index,
            name: copy_or(info.name, || info.device_id.to_string()),
            label: copy_or(info.label, String::new),
        });
        OK
    }

    fn add_resource_info(&mut self, info: Option<NonNull<ProfileResourceInfo>>) -> c_int {
        let Some(info) = info else {
            return self.problem(ProblemKind::NullResourceInfo);
        };
        // SAFETY: as in `add_event`.
        let info = match unsafe { read_versioned(info) } {
            Ok(info) => info,
            Err(e) => {
                return self.problem_with(ProblemKind::ResourceInfoTooSmall, || e.to_string())
            }
        };
        self.resources.push(ResourceInfo {
            device_id: info.device_id.into(),
            id: info.resource_id.into(),
            sort_index: info.display_order.into(),
            name: copy_or(info.name, || info.resource_id.to_string()),
        });
        OK
    }
}

const MAX_EXAMPLES: usize = 3;
const MAX_EXAMPLE_BYTES: usize = 64;
/// Bytes of distinct names cached; a plugin with more distinct names still gets each one
/// checked and kept, only not cached.
const MAX_CACHED_NAME_BYTES: usize = 16 << 20;

/// What the most recent `addEvent` did.
#[derive(Clone, Copy)]
enum LastEvent {
    /// No `addEvent` yet (or the events were cleared).
    None,
    Accepted,
    /// Rejected, as this kind of problem.
    Rejected(ProblemKind),
}

/// A name as kept, and the repair it needed, if any.
type KeptName = (Arc<str>, Option<ProblemKind>);

/// The first [`MAX_NAME_BYTES`] of a name, backed off so that no UTF-8 sequence is split.
fn cut_name(bytes: &[u8]) -> &[u8] {
    if bytes.len() <= MAX_NAME_BYTES {
        return bytes;
    }
    let mut end = MAX_NAME_BYTES;
    // A continuation byte (10xxxxxx) at the cut belongs to a character that starts before.
    while end > MAX_NAME_BYTES - 3 && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    &bytes[..end]
}

/// An event name as kept, and what had to be repaired in it: invalid UTF-8 is replaced and
/// a name past [`MAX_NAME_BYTES`] is cut at a character boundary.
fn checked_name(bytes: &[u8]) -> KeptName {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    let mut problem = std::str::from_utf8(bytes)
        .is_err()
        .then_some(ProblemKind::NameNotUtf8);
    if text.len() > MAX_NAME_BYTES {
        text.truncate(prefix_within(&text, MAX_NAME_BYTES).len());
        problem = Some(ProblemKind::NameCut);
    }
    (text.into(), problem)
}

/// Copies a C string, or makes the default when it is NULL.
fn copy_or(s: *const c_char, default: impl FnOnce() -> String) -> String {
    if s.is_null() {
        default()
    } else {
        // SAFETY: non-null NUL-terminated string alive for the call (ABI contract).
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }
}

/// Runs a plugin's builder call on the lent builder, or refuses it (see [`lend`]).
fn with_builder(
    handle: *mut TraceBuilderHandle,
    f: impl FnOnce(&mut HostTraceBuilder) -> c_int,
) -> c_int {
    lend::with_lent(handle.cast(), f)
}

unsafe extern "C" fn add_event(h: *mut TraceBuilderHandle, event: *const ProfileEvent) -> c_int {
    with_builder(h, |b| b.add_event(NonNull::new(event.cast_mut())))
}

unsafe extern "C" fn set_last_event_name(h: *mut TraceBuilderHandle, name: *const c_char) -> c_int {
    with_builder(h, |b| b.set_last_event_name(name))
}

unsafe extern "C" fn set_last_event_flow(
    h: *mut TraceBuilderHandle,
    flow: *const ProfileEventFlow,
) -> c_int {
    with_builder(h, |b| b.set_last_event_flow(NonNull::new(flow.cast_mut())))
}

unsafe extern "C" fn add_last_event_metadata(
    h: *mut TraceBuilderHandle,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    with_builder(h, |b| b.add_last_event_metadata(key, value))
}

unsafe extern "C" fn add_device_info(
    h: *mut TraceBuilderHandle,
    info: *const ProfileDeviceInfo,
) -> c_int {
    with_builder(h, |b| b.add_device_info(NonNull::new(info.cast_mut())))
}

unsafe extern "C" fn add_resource_info(
    h: *mut TraceBuilderHandle,
    info: *const ProfileResourceInfo,
) -> c_int {
    with_builder(h, |b| b.add_resource_info(NonNull::new(info.cast_mut())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use omniprof_plugin_sys::{AbiStruct, ProfileEventType};
    use std::ffi::CString;

    fn event(kind: ProfileEventType, start: i64, end: i64, id: i64) -> ProfileEvent {
        ProfileEvent {
            event_type: kind,
            start_time_utc_ns: start,
            end_time_utc_ns: end,
            event_id: id,
            device_id: 0,
            resource_id: 7,
            ..ProfileEvent::default()
        }
    }

    /// Calls through the C table, as a plugin does.
    struct Plugin(TraceBuilder);

    impl Plugin {
        fn add(&self, e: &ProfileEvent) -> c_int {
            // SAFETY: the table and handle come from a live builder; `e` is a whole event.
            unsafe { self.0.add_event.unwrap()(self.0.trace_builder_handle, e) }
        }
        fn name(&self, name: &[u8]) -> c_int {
            let c = CString::new(name).unwrap();
            // SAFETY: as above; `c` is NUL-terminated.
            unsafe { self.0.set_last_event_name.unwrap()(self.0.trace_builder_handle, c.as_ptr()) }
        }
        fn meta(&self, k: &str, v: &str) -> c_int {
            let (k, v) = (CString::new(k).unwrap(), CString::new(v).unwrap());
            // SAFETY: as above.
            unsafe {
                self.0.add_last_event_metadata.unwrap()(
                    self.0.trace_builder_handle,
                    k.as_ptr(),
                    v.as_ptr(),
                )
            }
        }
        fn flow(&self, f: &ProfileEventFlow) -> c_int {
            // SAFETY: as above.
            unsafe { self.0.set_last_event_flow.unwrap()(self.0.trace_builder_handle, f) }
        }
    }

    #[test]
    fn valid_calls_build_activities() {
        let mut b = HostTraceBuilder::default();
        b.lend(|table| valid_calls(Plugin(*table)));
        let k = &b.events[0];
        assert_eq!(
            (k.kind, &*k.name, k.correlation),
            (ActivityType::ConcurrentKernel, "test_kernel", 1 << 40)
        );
        assert_eq!(k.arg("stream"), Some(&Value::Int(7)));
        assert_eq!(k.arg("note").unwrap().to_json(), "\"quoted\"");
        assert_eq!(
            k.flow,
            Some(Flow {
                id: 3,
                kind: FlowKind::Ac2g,
                start: false
            })
        );
        assert_eq!(
            b.events[1].args,
            vec![("sm_active_pct".into(), Value::Float(87.5))]
        );
        assert!(b.problems.is_empty(), "{:?}", b.problems);
    }

    fn valid_calls(p: Plugin) {
        assert_eq!(
            p.add(&event(ProfileEventType::CONCURRENT_KERNEL, 10, 20, 1 << 40)),
            0
        );
        assert_eq!(p.name(b"test_kernel"), 0);
        assert_eq!(p.meta("stream", "7"), 0);
        assert_eq!(p.meta("note", "\"quoted\""), 0);
        let flow = ProfileEventFlow {
            flow_type: ProfileEventFlowType::ASYNC_CPU_GPU,
            flow_id: 3,
            is_start_point: 0,
            ..ProfileEventFlow::default()
        };
        assert_eq!(p.flow(&flow), 0);
        assert_eq!(
            p.add(&event(ProfileEventType::GPU_PM_COUNTER, 15, 15, 2)),
            0
        );
        assert_eq!(p.name(b"sm"), 0);
        assert_eq!(p.meta("sm_active_pct", "87.5"), 0);
    }

    #[test]
    fn bad_calls_are_rejected_and_counted() {
        let mut b = HostTraceBuilder::default();
        b.lend(|table| {
            let p = Plugin(*table);
            assert_eq!(p.name(b"early"), -1, "name before any event");
            let mut small = event(ProfileEventType::CUDA_RUNTIME, 0, 1, 1);
            small.unpadded_struct_size = 24;
            assert_eq!(p.add(&small), -1);
            for t in [0, 25, 99] {
                assert_eq!(p.add(&event(ProfileEventType(t), 0, 1, 1)), -1, "type {t}");
            }
            assert_eq!(
                p.name(b"orphan"),
                -1,
                "a rejected event has no name to take"
            );
            assert_eq!(p.add(&event(ProfileEventType::CUDA_RUNTIME, 50, 40, 1)), 0);
            assert_eq!(p.name(&[b'a'; MAX_NAME_BYTES + 10]), 0);
            assert_eq!(p.name(b"bad \xff utf8"), 0);
            assert_eq!(p.meta("k", "not json"), 0);
            let flow = ProfileEventFlow {
                unpadded_struct_size: 16,
                ..ProfileEventFlow::default()
            };
            assert_eq!(p.flow(&flow), -1);
            assert_eq!(p.add(&event(ProfileEventType::GPU_PM_COUNTER, 1, 1, 1)), 0);
            assert_eq!(p.meta("v", "\"high\""), -1);
            // SAFETY: a NULL handle is what is being tested.
            let rc = unsafe { add_event(std::ptr::null_mut(), std::ptr::null()) };
            assert_eq!(rc, -1);
        });
        assert_eq!(&*b.events[0].name, "bad \u{fffd} utf8");
        assert_eq!(b.events[0].end_ns, 50);
        assert_eq!(b.events[0].arg("k"), Some(&Value::from("not json")));
        let total: u64 = b.problems.values().map(|p| p.count).sum();
        assert_eq!(total, 12, "{:#?}", b.problems);
        assert_eq!(ProfileEvent::UNPADDED_SIZE, 48);
    }

    #[test]
    fn a_long_name_is_cut_at_the_limit() {
        let mut b = HostTraceBuilder::default();
        b.lend(|table| {
            let p = Plugin(*table);
            assert_eq!(p.add(&event(ProfileEventType::CUDA_RUNTIME, 0, 1, 1)), 0);
            assert_eq!(p.name(&[b'a'; MAX_NAME_BYTES + 10]), 0);
        });
        assert_eq!(b.events[0].name.len(), MAX_NAME_BYTES);
    }

    #[test]
    fn huge_names_are_cut_before_they_are_cached() {
        let names: Vec<Vec<u8>> = (0..64u8)
            .map(|i| {
                let mut name = vec![b'k'; 1 << 20];
                name[..2].copy_from_slice(&[b'a' + i % 8, b'a' + i / 8]);
                name
            })
            .collect();
        // A cut that would split a character backs off to its start (no U+FFFD).
        let mut accented = vec![b'a'; MAX_NAME_BYTES - 1];
        accented.extend_from_slice("é and more".as_bytes());
        let mut b = HostTraceBuilder::default();
        b.lend(|table| {
            let p = Plugin(*table);
            for name in names.iter().chain([&accented]) {
                assert_eq!(p.add(&event(ProfileEventType::CUDA_RUNTIME, 0, 1, 1)), 0);
                assert_eq!(p.name(name), 0);
            }
        });
        let cached: usize = b.names.keys().map(|k| k.len()).sum();
        assert!(cached <= 65 * MAX_NAME_BYTES, "{cached} bytes cached");
        assert_eq!(
            b.problems[&ProblemKind::NameCut].count,
            65,
            "{:#?}",
            b.problems
        );
        assert_eq!(b.problems.len(), 1, "{:#?}", b.problems);
        assert_eq!(b.events[64].name.len(), MAX_NAME_BYTES - 1);
    }
}
