//! OpenReg's omniprof backend: the part a vendor writes to put a device on omniprof's
//! timeline. It is registered statically with [`omniprof::register_profiler!`], so a program
//! that uses OpenReg gets its device rows without any setup.
//!
//! The mapping, from the activity API ([`activity_api`](crate::activity_api)) to omniprof:
//!
//! | OpenReg | omniprof |
//! |---|---|
//! | trace start / stop | [`enable_recording`], then at stop [`finish_recording`]: `disable` → synchronize every device → `drain` |
//! | window opened after a warm-up | [`enable_recording`] again: the warm-up's records are dropped, the budget holds the window |
//! | a flight recorder asks it to record continuously | [`enable_ring_recording`]: the store keeps its newest records (the ring's budget, default 2^16); each dump copies the window out with [`copy_records_since`] |
//! | host op / user range pushed by the engine | [`push_external_correlation`] (`Default` / `User`) |
//! | [`RuntimeRecord`](crate::activity_records::RuntimeRecord) | a `privateuse1_runtime` event on the calling thread, linked to the host op |
//! | [`DeviceRecord`] kernel / memcpy / memset | a `kernel` / `gpu_memcpy` / `gpu_memset` event on (device, stream), linked to the host op and handed over inside its user range |
//! | records' correlation id | the activities' `correlation`: the engine draws the `ac2g` flow from launch to work |
//! | [`DeviceProperties::kineto_entries`] | `deviceProperties` |
//! | [`PmSampler`] (`gpu_pm_counter`, every `OMNIPROF_PM_SAMPLING_PERIOD_USECS`) | one `OpenReg PM` counter series per device: busy fraction, copied bytes, memory in use |
//! | [`KernelMetrics`] (`scope_profiler`) | per-kernel metrics ([`SCOPE_METRICS`]) the engine writes into the kernel's `args` and draws as counters |
//!
//! ```
//! use omniprof::{record_function, record_op, Profiler};
//! use omniprof::trace::ActivityType;
//!
//! let stream = openreg::Stream::new(0).unwrap();
//! let mut profiler = Profiler::builder().build().unwrap();
//! profiler.start().unwrap();
//! {
//!     let _step = record_function("step");
//!     let _op = record_op("fill");
//!     let out = openreg::malloc(0, 1024).unwrap();
//!     openreg::launch_kernel(openreg::Kernel::Fill { out, value: 1.0 }, &stream).unwrap();
//! }
//! // Work still running at stop ends outside the capture window and is dropped (and counted
//! // in `out_of_window_events`), as in Kineto: synchronize first.
//! stream.synchronize();
//! let trace = profiler.stop().unwrap();
//! let kernel = trace.activities.iter().find(|a| a.kind == ActivityType::ConcurrentKernel).unwrap();
//! assert_eq!(&*kernel.name, "fill_f32");
//! assert!(trace.activities.iter().any(|a| a.kind == ActivityType::GpuUserAnnotation));
//! ```

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use omniprof::backends::CorrelationListener;
use omniprof::backends::{
    ActivityProfiler, ActivitySink, BackendError, DeviceInfo, HostOps, ProfilerSession,
    ResourceInfo, ScopeMetric,
};
use omniprof::trace::keys::metadata;
use omniprof::trace::{Activity, ActivitySet, ActivityType, CounterTrack, Value, Window};
use omniprof::Config;

use crate::activity_api::{
    copy_records_since, enable_recording, enable_ring_recording, pop_external_correlation,
    push_external_correlation,
};
use crate::activity_finish::finish_recording;
use crate::activity_records::{DeviceActivity, DeviceRecord, ExternalKind, Kinds, Records};
use crate::device::{device_count, device_properties, DeviceProperties, Property};
use crate::hardware::KernelMetrics;
use crate::pm_sampler::{PmSample, PmSampler};

/// The name devices get in traces and summaries (`Self OpenReg`).
pub const DEVICE_TYPE: &str = "OpenReg";

/// The backend: stateless, one per process.
#[derive(Default)]
pub struct OpenRegProfiler;

omniprof::register_profiler!(OpenRegProfiler);

/// Whether the backend takes part in this process's sessions ([`take_part_in_sessions`]).
static TAKES_PART: AtomicBool = AtomicBool::new(true);

/// Lets OpenReg's backend take part in the sessions this process starts from now on, or
/// not (it does unless told otherwise). A program that carries OpenReg but profiles another
/// backend (`omniprof plugins check`) leaves it out, so that OpenReg's device 0 does not
/// share a device row with that backend's.
///
/// ```
/// use omniprof::Profiler;
///
/// openreg::take_part_in_sessions(false);
/// let mut profiler = Profiler::builder().build().unwrap();
/// profiler.start().unwrap();
/// let trace = profiler.stop().unwrap();
/// assert!(trace.health.backends.iter().all(|b| b.name != "openreg"));
/// openreg::take_part_in_sessions(true);
/// ```
pub fn take_part_in_sessions(yes: bool) {
    TAKES_PART.store(yes, Ordering::Relaxed);
}

/// What OpenReg records, as omniprof types and as OpenReg's own kinds.
const SUPPORTED: [(ActivityType, Kinds); 4] = [
    (ActivityType::PrivateUse1Runtime, Kinds::RUNTIME),
    (ActivityType::ConcurrentKernel, Kinds::KERNEL),
    (ActivityType::GpuMemcpy, Kinds::MEMCPY),
    (ActivityType::GpuMemset, Kinds::MEMSET),
];

/// The name of each device's PM counter series.
pub const PM_SERIES: &str = "OpenReg PM";

/// Reads one metric of a kernel.
pub(crate) type ReadMetric = fn(&KernelMetrics) -> u64;

/// The per-kernel metrics OpenReg's scope profiler offers, with their group, and how each is
/// read from a kernel's [`KernelMetrics`].
pub const SCOPE_METRICS: [(&str, &str, ReadMetric); 5] = [
    ("elements", "work", |m| m.elements),
    ("flops", "work", |m| m.flops),
    ("bytes_read", "memory", |m| m.bytes_read),
    ("bytes_written", "memory", |m| m.bytes_written),
    ("occupancy", "occupancy", |m| m.occupancy_pct.into()),
];

impl ActivityProfiler for OpenRegProfiler {
    fn name(&self) -> &str {
        "openreg"
    }

    fn available_activities(&self) -> ActivitySet {
        SUPPORTED
            .iter()
            .map(|&(t, _)| t)
            .chain([ActivityType::GpuPmCounter, ActivityType::XpuScopeProfiler])
            .collect()
    }

    fn configure(
        &self,
        activities: ActivitySet,
        config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        if !TAKES_PART.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let mut kinds = SUPPORTED
            .iter()
            .filter(|(t, _)| activities.contains(*t))
            .fold(Kinds::NONE, |acc, &(_, k)| acc | k);
        let scope = activities.contains(ActivityType::XpuScopeProfiler);
        if scope {
            // Metrics come with kernel records.
            kinds = kinds | Kinds::KERNEL;
        }
        let pm_period = activities
            .contains(ActivityType::GpuPmCounter)
            .then(|| Duration::from_micros(config.pm_sampling_period_us()));
        Ok(Some(Box::new(OpenRegSession {
            kinds,
            scope,
            pm_period,
            sampler: None,
            pm_samples: Vec::new(),
            records: Records::default(),
            continuous: false,
            rows: Rows::default(),
            window_warnings: Vec::new(),
        })))
    }

    fn scope_metrics(&self) -> Vec<ScopeMetric> {
        SCOPE_METRICS
            .iter()
            .map(|&(name, group, _)| ScopeMetric::new(name, group))
            .collect()
    }
}

/// One trace's worth of OpenReg recording.
struct OpenRegSession {
    kinds: Kinds,
    /// Whether kernels report their scope-profiler metrics.
    scope: bool,
    /// The PM sampling period, when `gpu_pm_counter` is on.
    pm_period: Option<Duration>,
    sampler: Option<PmSampler>,
    pm_samples: Vec<PmSample>,
    /// What the trace recorded, taken at stop.
    records: Records,
    /// Recording for a flight recorder, in the store's ring.
    continuous: bool,
    /// The devices and streams of what was last handed over.
    rows: Rows,
    /// What the last window lost to the ring.
    window_warnings: Vec<String>,
}

/// The devices with work and the (device, stream) rows of what a session handed over.
#[derive(Default)]
struct Rows {
    devices: BTreeSet<usize>,
    streams: BTreeSet<(u32, u32)>,
}

/// Feeds the engine's correlation pushes into OpenReg's per-thread external correlation
/// stacks, the way a CUDA backend calls `cuptiActivityPushExternalCorrelationId`.
struct ExternalCorrelation;

impl CorrelationListener for ExternalCorrelation {
    fn push_correlation_id(&self, id: u64) {
        push_external_correlation(ExternalKind::Default, id);
    }
    fn pop_correlation_id(&self) {
        pop_external_correlation(ExternalKind::Default);
    }
    fn push_user_correlation_id(&self, id: u64) {
        push_external_correlation(ExternalKind::User, id);
    }
    fn pop_user_correlation_id(&self) {
        pop_external_correlation(ExternalKind::User);
    }
}

impl ProfilerSession for OpenRegSession {
    fn start(&mut self) -> Result<(), BackendError> {
        if let Some(period) = self.pm_period {
            let devices: Vec<usize> = (0..device_count()).collect();
            let sampler = PmSampler::start(&devices, period)
                .map_err(|e| BackendError::new(format!("PM sampler: {e}")))?;
            self.sampler = Some(sampler);
        }
        self.enable();
        Ok(())
    }

    /// Drops the warm-up's records and resets the store's budget and dropped count: a
    /// fresh `enable`, as Kineto's `flushWarmupBuffers` clears CUPTI's buffers. Work
    /// launched during the warm-up and finishing later is not recorded.
    fn window_opened(&mut self) -> Result<(), BackendError> {
        self.enable();
        Ok(())
    }

    /// Records in the store's ring, which holds the newest records whatever the window:
    /// each dump takes the window from it. The PM sampler, which keeps every sample, stays
    /// off (a flight recorder selects only the default types, which leave it out).
    fn record_continuously(&mut self, _window: Duration) -> bool {
        self.continuous = true;
        self.pm_period = None;
        true
    }

    fn process_window(
        &mut self,
        sink: &mut dyn ActivitySink,
        _host_ops: &dyn HostOps,
        window: Window,
    ) -> Result<(), BackendError> {
        let mut records = copy_records_since(window.start_ns);
        let inside = |start: i64, end: i64| start >= window.start_ns && end <= window.end_ns;
        records.runtime.retain(|r| inside(r.start_ns, r.end_ns));
        records.device.retain(|r| inside(r.start_ns, r.end_ns));
        self.window_warnings.clear();
        if let Some(lost) = records
            .overwritten_up_to_ns
            .filter(|&t| t >= window.start_ns)
        {
            let held = records
                .runtime
                .iter()
                .map(|r| r.start_ns)
                .chain(records.device.iter().map(|r| r.start_ns))
                .min()
                .unwrap_or(lost);
            self.window_warnings.push(format!(
                "the ring of {} records held only the last {:.3} s of the {:.3} s window \
                 ({} records overwritten since the recorder started; \
                 openreg::set_ring_record_budget raises it)",
                records.runtime.len() + records.device.len(),
                (window.end_ns - held) as f64 / 1e9,
                (window.end_ns - window.start_ns) as f64 / 1e9,
                records.dropped
            ));
        }
        self.hand_over(&records, sink);
        Ok(())
    }

    fn stop(&mut self) -> Result<(), BackendError> {
        // Before the devices are synchronized: what runs after the window closed is not
        // the trace's.
        if let Some(sampler) = self.sampler.take() {
            self.pm_samples = sampler.stop();
        }
        self.records = finish_recording().map_err(|e| BackendError::new(e.to_string()))?;
        Ok(())
    }

    fn process_trace(
        &mut self,
        sink: &mut dyn ActivitySink,
        _host_ops: &dyn HostOps,
        _window: Window,
    ) -> Result<(), BackendError> {
        let records = std::mem::take(&mut self.records);
        self.hand_over(&records, sink);
        self.records = records;
        for s in &self.pm_samples {
            let track =
                CounterTrack::new(ActivityType::GpuPmCounter, PM_SERIES, s.device as i64, 0);
            let values = s.values().map(|(name, v)| (name.into(), v)).to_vec();
            sink.add_counter(&track, s.ts_ns, values);
        }
        Ok(())
    }

    fn device_info(&self) -> Vec<DeviceInfo> {
        self.devices()
            .into_iter()
            .map(|d| DeviceInfo::new(d as i64, format!("{DEVICE_TYPE} {d}"), format!("GPU {d}")))
            .collect()
    }

    fn resource_infos(&self) -> Vec<ResourceInfo> {
        self.rows
            .streams
            .iter()
            .map(|&(device, stream)| ResourceInfo::stream(device.into(), stream.into()))
            .collect()
    }

    fn errors(&self) -> Vec<String> {
        // A ring drops its oldest records by design: what a window lost is a warning.
        match self.records.dropped {
            0 => Vec::new(),
            _ if self.continuous => Vec::new(),
            n => vec![format!(
                "{n} records dropped: the record budget was full (openreg::set_record_budget)"
            )],
        }
    }

    fn warnings(&self) -> Vec<String> {
        self.window_warnings.clone()
    }

    fn metadata(&self) -> Vec<(String, Value)> {
        vec![(metadata::DEVICE_TYPE.to_owned(), Value::from(DEVICE_TYPE))]
    }

    fn device_properties(&self) -> Vec<Value> {
        self.devices()
            .into_iter()
            .filter_map(|d| device_properties(d).ok())
            .map(|p| properties_value(&p))
            .collect()
    }

    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        Some(Arc::new(ExternalCorrelation))
    }
}

impl OpenRegSession {
    /// Starts the store afresh: a ring when recording continuously.
    fn enable(&self) {
        if self.continuous {
            enable_ring_recording(self.kinds);
        } else {
            enable_recording(self.kinds);
        }
    }

    /// Hands `records` to `sink` as activities and notes their rows.
    fn hand_over(&mut self, records: &Records, sink: &mut dyn ActivitySink) {
        let pid = std::process::id() as i64;
        for r in &records.runtime {
            let mut a = Activity::new(
                ActivityType::PrivateUse1Runtime,
                r.api.name(),
                pid,
                r.thread_id,
                r.start_ns,
                r.end_ns,
            );
            a.correlation = r.correlation_id;
            a.linked_correlation = r.external.default;
            sink.add(a);
        }
        for r in &records.device {
            let Some(a) = device_activity(r) else {
                continue;
            };
            let metrics = match &r.activity {
                DeviceActivity::Kernel { metrics, .. } if self.scope => Some(metrics),
                _ => None,
            };
            match r.external.user {
                Some(user) => sink.add_in_user_range(a, user),
                None => sink.add(a),
            }
            if let Some(metrics) = metrics {
                let values = SCOPE_METRICS
                    .iter()
                    .map(|&(name, _, read)| (name.into(), read(metrics) as f64))
                    .collect();
                sink.add_kernel_metrics(values);
            }
        }
        self.rows = Rows {
            devices: records.device.iter().map(|r| r.device as usize).collect(),
            streams: records
                .device
                .iter()
                .filter_map(|r| Some((r.device, r.stream?)))
                .collect(),
        };
    }

    /// The devices this trace has work or counters on.
    fn devices(&self) -> Vec<usize> {
        let sampled = self.pm_samples.iter().map(|s| s.device);
        let devices: BTreeSet<usize> = self.rows.devices.iter().copied().chain(sampled).collect();
        devices.into_iter().collect()
    }
}

/// A device's `deviceProperties` entry, typed for the JSON writer.
fn properties_value(p: &DeviceProperties) -> Value {
    p.kineto_entries()
        .into_iter()
        .map(|(key, value)| match value {
            Property::Number(n) => (key, Value::UInt(n)),
            Property::Text(text) => (key, Value::from(text)),
        })
        .collect()
}

/// A device record as an omniprof activity on row (device, stream), with the `args` HTA reads.
fn device_activity(r: &DeviceRecord) -> Option<Activity> {
    let stream = r.stream?;
    let (kind, extra): (ActivityType, Vec<(&str, Value)>) = match &r.activity {
        DeviceActivity::Kernel { launch, metrics } => (
            ActivityType::ConcurrentKernel,
            vec![
                ("grid", Value::from(launch.grid.to_vec())),
                ("block", Value::from(launch.block.to_vec())),
                (
                    "est. achieved occupancy %",
                    Value::from(metrics.occupancy_pct),
                ),
            ],
        ),
        DeviceActivity::Memcpy { bytes, .. } => (
            ActivityType::GpuMemcpy,
            vec![
                ("bytes", Value::from(*bytes)),
                (
                    "memory bandwidth (GB/s)",
                    Value::from(bandwidth_gbps(*bytes, r)),
                ),
            ],
        ),
        DeviceActivity::Memset { bytes, .. } => (
            ActivityType::GpuMemset,
            vec![
                ("bytes", Value::from(*bytes)),
                (
                    "memory bandwidth (GB/s)",
                    Value::from(bandwidth_gbps(*bytes, r)),
                ),
            ],
        ),
        DeviceActivity::EventRecord | DeviceActivity::Sync { .. } => return None,
    };
    let mut a = Activity::new(
        kind,
        r.name.as_ref(),
        r.device.into(),
        stream.into(),
        r.start_ns,
        r.end_ns,
    );
    a.correlation = r.correlation_id;
    a.linked_correlation = r.external.default;
    a.args.push(("device".into(), Value::from(r.device)));
    a.args.push(("stream".into(), Value::from(stream)));
    a.args.extend(extra.into_iter().map(|(k, v)| (k.into(), v)));
    Some(a)
}

fn bandwidth_gbps(bytes: u64, r: &DeviceRecord) -> f64 {
    let ns = (r.end_ns - r.start_ns).max(1) as f64;
    bytes as f64 / ns
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DEVICE_NAME;
    use crate::options::Options;
    use crate::test_support::shared;

    #[test]
    fn properties_json_uses_kineto_keys() {
        let _guard = shared();
        let props = device_properties(1).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&properties_value(&props).to_json()).unwrap();
        assert_eq!(json["id"], 1);
        assert_eq!(json["name"], DEVICE_NAME);
        assert_eq!(json["totalGlobalMem"], Options::default().memory_per_device);
        assert_eq!(json["computeMajor"], 1);
        assert_eq!(json["computeMinor"], 0);
        assert_eq!(json["maxThreadsPerBlock"], 1024);
        assert_eq!(json["numSms"], props.compute_units);
        assert_eq!(json["warpSize"], 32);
        assert_eq!(json.as_object().unwrap().len(), 14);
    }

    #[test]
    fn properties_are_written_in_kinetos_order() {
        let _guard = shared();
        let props = device_properties(0).unwrap();
        let expected = format!(
            concat!(
                "{{\"id\": 0, \"name\": \"{}\", \"totalGlobalMem\": {}, ",
                "\"computeMajor\": 1, \"computeMinor\": 0, ",
                "\"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048, ",
                "\"regsPerBlock\": 65536, \"warpSize\": 32, \"sharedMemPerBlock\": 49152, ",
                "\"numSms\": 8, \"regsPerMultiprocessor\": 65536, ",
                "\"sharedMemPerMultiprocessor\": 98304, \"maxClockFrequency\": 1000}}"
            ),
            DEVICE_NAME,
            Options::default().memory_per_device,
        );
        assert_eq!(properties_value(&props).to_json(), expected);
    }
}
