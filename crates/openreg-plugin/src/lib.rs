//! OpenReg as a dynamic profiler plugin: `libopenreg_plugin.so`, which omniprof (or Kineto
//! with PR 1148) loads from `KINETO_PLUGIN_LIB_DIR_PATH` and drives through the plugin C ABI.
//!
//! It is the same integration as OpenReg's static backend (`openreg::OpenRegProfiler`), written
//! against the plugin SDK of [`omniprof_plugin_sys`] instead of omniprof's backend traits,
//! and it depends on nothing of omniprof. It registers one profiler, `OpenRegPlugin`:
//!
//! | OpenReg | plugin ABI |
//! |---|---|
//! | trace start / stop | `profilerStart`: [`openreg::enable_recording`] with the enabled kinds; `profilerStop`: `disable`, synchronize every device, [`openreg::drain_records`] |
//! | correlation push / pop from the host | [`openreg::push_external_correlation`] / `pop` (`Default` and `User` stacks) on the calling thread |
//! | [`RuntimeRecord`](openreg::RuntimeRecord) | `PRIVATEUSE1_RUNTIME` event on (pid, tid) |
//! | kernel / memcpy / memset [`DeviceRecord`] | `CONCURRENT_KERNEL` / `GPU_MEMCPY` / `GPU_MEMSET` on (device, stream), metadata `device`, `stream`, and `grid`, `block`, `est. achieved occupancy %` or `bytes`, `memory bandwidth (GB/s)` |
//! | the host op a record was made under (pushed by the host) | `eventId`: the host links the event to that op (`External id`); without one, the record's own correlation id |
//! | the record's own correlation id | metadata `correlation` |
//! | a launch and the work it queued (same correlation id) | an `ac2g` flow, id = the low 32 bits of the correlation id, from the runtime event to the device event |
//! | the user range a record was made under | metadata `user_correlation` |
//! | devices and streams with work | device infos (`OpenReg <n>`, label `GPU <n>`) and resource infos (`stream <id> `) |
//!
//! Event-record and synchronization records are not emitted (the ABI has no type for them).
//!
//! # One OpenReg per library
//!
//! The plugin links its own copy of OpenReg, with its own devices, streams and recording
//! state: work a host program submits through *its* copy of the `openreg` crate is invisible
//! to the plugin. (A real vendor runtime is one shared library that the application and the
//! plugin share.) So that a host, its tests or a demo can produce OpenReg work the plugin
//! records, the library also exports a C function outside the ABI, [`OpenRegPlugin_runWorkload`].

use std::collections::{BTreeSet, HashSet};
use std::ffi::c_int;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use omniprof_plugin_sys::{
    CorrelationListener, DeviceInfo, Event, Flow, HostTrace, PluginError, PluginProfiler,
    PluginSession, ProfileEventFlowType, ProfileEventType, ResourceInfo,
};
use openreg::{DeviceActivity, DeviceRecord, ExternalKind, Kinds, Records};
use openreg::{HostBuffer, Kernel, Stream};

/// The profiler's name, as the host's query gets it.
pub const NAME: &str = "OpenRegPlugin";

/// Device rows sort after the host's, as Kineto's do (and as the static backend's).
const DEVICE_SORT_OFFSET: i64 = 5_000_000;

/// What the plugin records, as ABI types and as OpenReg kinds.
const SUPPORTED: [(ProfileEventType, Kinds); 4] = [
    (ProfileEventType::PRIVATEUSE1_RUNTIME, Kinds::RUNTIME),
    (ProfileEventType::CONCURRENT_KERNEL, Kinds::KERNEL),
    (ProfileEventType::GPU_MEMCPY, Kinds::MEMCPY),
    (ProfileEventType::GPU_MEMSET, Kinds::MEMSET),
];

/// [`SUPPORTED`]'s ABI types, for the query.
const SUPPORTED_TYPES: [ProfileEventType; 4] = {
    let mut types = [ProfileEventType::INVALID; 4];
    let mut i = 0;
    while i < SUPPORTED.len() {
        types[i] = SUPPORTED[i].0;
        i += 1;
    }
    types
};

/// The profiler: stateless, one per process.
#[derive(Default)]
pub struct OpenRegPlugin;

omniprof_plugin_sys::export_plugin!(OpenRegPlugin);

impl PluginProfiler for OpenRegPlugin {
    type Session = OpenRegSession;

    fn name(&self) -> &str {
        NAME
    }

    fn supported_activity_types(&self) -> &[ProfileEventType] {
        &SUPPORTED_TYPES
    }

    fn create_session(&self, enabled: &[ProfileEventType]) -> Result<OpenRegSession, PluginError> {
        let kinds = SUPPORTED
            .iter()
            .filter(|(t, _)| enabled.contains(t))
            .fold(Kinds::NONE, |acc, &(_, k)| acc | k);
        if kinds.is_empty() {
            return Err(PluginError::new(format!(
                "none of the enabled types {enabled:?} is supported"
            )));
        }
        Ok(OpenRegSession {
            kinds,
            records: Records::default(),
        })
    }
}

/// One trace's worth of OpenReg recording.
pub struct OpenRegSession {
    kinds: Kinds,
    records: Records,
}

/// Feeds the host's correlation pushes into OpenReg's per-thread external correlation
/// stacks (CUPTI's `cuptiActivityPushExternalCorrelationId`).
struct ExternalCorrelation;

impl CorrelationListener for ExternalCorrelation {
    fn push_correlation_id(&self, id: u64) {
        openreg::push_external_correlation(ExternalKind::Default, id);
    }
    fn pop_correlation_id(&self) {
        openreg::pop_external_correlation(ExternalKind::Default);
    }
    fn push_user_correlation_id(&self, id: u64) {
        openreg::push_external_correlation(ExternalKind::User, id);
    }
    fn pop_user_correlation_id(&self) {
        openreg::pop_external_correlation(ExternalKind::User);
    }
}

impl PluginSession for OpenRegSession {
    fn start(&mut self) -> Result<(), PluginError> {
        openreg::enable_recording(self.kinds);
        Ok(())
    }

    fn stop(&mut self) -> Result<(), PluginError> {
        self.records = openreg::finish_recording().map_err(|e| PluginError::new(e.to_string()))?;
        if self.records.dropped > 0 {
            log::warn!(
                "{NAME}: {} records dropped: the record budget was full",
                self.records.dropped
            );
        }
        Ok(())
    }

    fn process_events(&mut self, trace: &mut HostTrace<'_>) -> Result<(), PluginError> {
        let records = std::mem::take(&mut self.records);
        emit(&records, trace)
    }

    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        Some(Arc::new(ExternalCorrelation))
    }
}

/// A device record the plugin emits: its type and its type-specific metadata (raw JSON).
fn device_event(record: &DeviceRecord) -> Option<(ProfileEventType, Vec<(&'static str, String)>)> {
    let bandwidth = |bytes: u64| {
        let ns = (record.end_ns - record.start_ns).max(1) as f64;
        json_number(bytes as f64 / ns)
    };
    let emitted = match &record.activity {
        DeviceActivity::Kernel { launch, metrics } => (
            ProfileEventType::CONCURRENT_KERNEL,
            vec![
                ("grid", json_list(launch.grid)),
                ("block", json_list(launch.block)),
                (
                    "est. achieved occupancy %",
                    metrics.occupancy_pct.to_string(),
                ),
            ],
        ),
        DeviceActivity::Memcpy { bytes, .. } => (
            ProfileEventType::GPU_MEMCPY,
            vec![
                ("bytes", bytes.to_string()),
                ("memory bandwidth (GB/s)", bandwidth(*bytes)),
            ],
        ),
        DeviceActivity::Memset { bytes, .. } => (
            ProfileEventType::GPU_MEMSET,
            vec![
                ("bytes", bytes.to_string()),
                ("memory bandwidth (GB/s)", bandwidth(*bytes)),
            ],
        ),
        DeviceActivity::EventRecord | DeviceActivity::Sync { .. } => return None,
    };
    // Device-wide synchronization has no stream; everything emitted has one.
    record.stream.map(|_| emitted)
}

/// Hands `records` to the host: runtime events, device events, the flows between them,
/// and the rows of the devices and streams that have work.
fn emit(records: &Records, trace: &mut HostTrace<'_>) -> Result<(), PluginError> {
    let pid = i32::try_from(std::process::id())
        .map_err(|_| PluginError::new("the process id does not fit the ABI's 32 bits"))?;
    // A flow is drawn only when both of its ends are emitted.
    let launches: HashSet<u64> = records.runtime.iter().map(|r| r.correlation_id).collect();
    let work: HashSet<u64> = records
        .device
        .iter()
        .filter(|r| device_event(r).is_some())
        .map(|r| r.correlation_id)
        .collect();

    for r in &records.runtime {
        let mut event = trace.add_event(&Event {
            name: r.api.name(),
            event_type: ProfileEventType::PRIVATEUSE1_RUNTIME,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            id: event_id(r.external, r.correlation_id)?,
            device_id: pid,
            resource_id: i32::try_from(r.thread_id)
                .map_err(|_| PluginError::new(format!("thread id {} too large", r.thread_id)))?,
        })?;
        add_external_ids(&mut event, r.correlation_id, r.external)?;
        if let Some(flow) =
            flow(r.correlation_id, true).filter(|_| work.contains(&r.correlation_id))
        {
            event.set_flow(flow)?;
        }
    }

    let mut streams = BTreeSet::new();
    for r in &records.device {
        let (Some((event_type, extra)), Some(stream)) = (device_event(r), r.stream) else {
            continue;
        };
        let (device_id, resource_id) = (row_id(r.device)?, row_id(stream)?);
        streams.insert((device_id, resource_id));
        let mut event = trace.add_event(&Event {
            name: &r.name,
            event_type,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            id: event_id(r.external, r.correlation_id)?,
            device_id,
            resource_id,
        })?;
        event.add_metadata_json("device", &r.device.to_string())?;
        event.add_metadata_json("stream", &stream.to_string())?;
        for (key, json) in &extra {
            event.add_metadata_json(key, json)?;
        }
        add_external_ids(&mut event, r.correlation_id, r.external)?;
        if let Some(flow) =
            flow(r.correlation_id, false).filter(|_| launches.contains(&r.correlation_id))
        {
            event.set_flow(flow)?;
        }
    }

    let devices: BTreeSet<i32> = streams.iter().map(|&(device, _)| device).collect();
    for device in devices {
        trace.add_device_info(&DeviceInfo {
            id: device.into(),
            sort_index: i64::from(device) + DEVICE_SORT_OFFSET,
            name: Some(&format!("OpenReg {device}")),
            label: Some(&format!("GPU {device}")),
        })?;
    }
    for (device_id, stream) in streams {
        trace.add_resource_info(&ResourceInfo {
            device_id,
            id: stream,
            display_order: stream,
            name: Some(&format!("stream {stream} ")),
        })?;
    }
    Ok(())
}

/// The record's own correlation id and the user range it was made under, as metadata.
fn add_external_ids(
    event: &mut omniprof_plugin_sys::LastEvent<'_, '_>,
    correlation_id: u64,
    external: openreg::ExternalIds,
) -> Result<(), PluginError> {
    event.add_metadata_json("correlation", &correlation_id.to_string())?;
    if let Some(id) = external.user {
        event.add_metadata_json("user_correlation", &id.to_string())?;
    }
    Ok(())
}

/// The event id: the host op the record was made under, which the host links the event to,
/// or the record's own correlation id when there is none.
fn event_id(external: openreg::ExternalIds, correlation_id: u64) -> Result<i64, PluginError> {
    let id = external.default.unwrap_or(correlation_id);
    i64::try_from(id).map_err(|_| PluginError::new(format!("event id {id} exceeds i64")))
}

/// A device or stream index as the ABI's 32-bit row id.
fn row_id(index: u32) -> Result<i32, PluginError> {
    i32::try_from(index).map_err(|_| PluginError::new(format!("row id {index} exceeds i32")))
}

/// The `ac2g` flow end for a correlation id: the ABI's flow ids are 32 bits, so the low 32
/// bits of the correlation id (unique among the 2^32 launches around it). `None` when those
/// bits are 0, which means "no flow".
pub fn flow(correlation_id: u64, is_start: bool) -> Option<Flow> {
    let id = (correlation_id & u64::from(u32::MAX)) as u32;
    (id != 0).then_some(Flow {
        flow_type: ProfileEventFlowType::ASYNC_CPU_GPU,
        id,
        is_start,
    })
}

/// `[a, b, c]`.
fn json_list(values: [u32; 3]) -> String {
    let [a, b, c] = values;
    format!("[{a}, {b}, {c}]")
}

/// A finite number as JSON (Rust's `Display` of an `f64` is valid JSON when finite); JSON has
/// no NaN or infinity, so those become `null`.
fn json_number(value: f64) -> String {
    if value.is_finite() {
        value.to_string()
    } else {
        "null".to_owned()
    }
}

/// Runs a small workload on the plugin's own OpenReg (see the crate docs: the host's copy of
/// OpenReg, if any, is a different one), on the calling thread, so that the plugin has
/// something to record. Not part of the plugin ABI: a host's tests and demos find it with
/// `dlsym(handle, "OpenRegPlugin_runWorkload")`, C prototype
/// `int OpenRegPlugin_runWorkload(uint32_t device, uint32_t iterations)`.
///
/// On pooled stream 1 of `device`, each iteration queues a 4 KiB copy host → device, a
/// 4 KiB memset, a `fill_f32` kernel, a 32 × 32 matmul and a copy device → host; then the
/// stream is synchronized, so all the work has finished (and, while recording, has been
/// recorded) when the function returns. Correlation ids the host pushed on this thread tag
/// every record.
///
/// Returns 0, or −1 when OpenReg refuses (an invalid device) or panics.
#[unsafe(no_mangle)]
pub extern "C" fn OpenRegPlugin_runWorkload(device: u32, iterations: u32) -> c_int {
    let run = || -> openreg::Result<()> {
        const N: usize = 32;
        const BYTES: usize = N * N * 4;
        let device = device as usize;
        let stream = Stream::pooled(device, 1)?;
        let host = HostBuffer::from_f32s(&[1.0; N * N]);
        let (a, out) = (
            openreg::malloc(device, BYTES)?,
            openreg::malloc(device, BYTES)?,
        );
        for i in 0..iterations {
            openreg::memcpy_async(&a, &host, BYTES, &stream)?;
            openreg::memset_async(&out, 0, BYTES, &stream)?;
            let fill = Kernel::Fill {
                out: out.clone(),
                value: i as f32,
            };
            openreg::launch_kernel(fill, &stream)?;
            let matmul = Kernel::Matmul {
                a: a.clone(),
                b: a.clone(),
                out: out.clone(),
                n: N,
            };
            openreg::launch_kernel(matmul, &stream)?;
            openreg::memcpy_async(&host, &out, BYTES, &stream)?;
        }
        stream.synchronize();
        Ok(())
    };
    match panic::catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(())) => 0,
        Ok(Err(error)) => {
            log::error!("{NAME}: workload failed: {error}");
            -1
        }
        Err(_) => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_ids_are_the_low_32_bits_and_never_zero() {
        let end = |id| flow(id, false).map(|f| f.id);
        assert_eq!(end(7), Some(7));
        assert_eq!(end((5 << 32) | 9), Some(9));
        assert_eq!(end(1 << 32), None);
        let start = flow(3, true).unwrap();
        assert!(start.is_start);
        assert_eq!(start.flow_type, ProfileEventFlowType::ASYNC_CPU_GPU);
    }

    #[test]
    fn numbers_are_json() {
        assert_eq!(json_number(1.5), "1.5");
        assert_eq!(json_number(2.0), "2");
        assert_eq!(json_number(f64::NAN), "null");
        assert_eq!(json_list([4, 1, 1]), "[4, 1, 1]");
    }

    #[test]
    fn sessions_need_a_supported_type() {
        let profiler = OpenRegPlugin;
        assert!(profiler
            .create_session(&[ProfileEventType::CPU_OP])
            .is_err());
        let session = profiler
            .create_session(&[
                ProfileEventType::CPU_OP,
                ProfileEventType::CONCURRENT_KERNEL,
                ProfileEventType::GPU_MEMSET,
            ])
            .unwrap();
        assert_eq!(session.kinds, Kinds::KERNEL | Kinds::MEMSET);
        assert_eq!(profiler.supported_activity_types(), SUPPORTED_TYPES);
    }
}
