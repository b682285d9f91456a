//! The CUPTI backend: CUPTI's activity API behind omniprof's [`ActivityProfiler`].
//!
//! | omniprof | CUPTI |
//! |---|---|
//! | session start | buffers readied, callbacks registered, activity kinds enabled, clocks paired |
//! | window opened after a warm-up | buffers flushed and their records dropped (Kineto's `flushWarmupBuffers`) |
//! | host op / user range begun | its thread noted once; with the external correlation ([`Linking`]), `cuptiActivityPushExternalCorrelationId` (`CUSTOM0` / `CUSTOM1`) |
//! | session stop | kinds disabled, buffers flushed (`FLUSH_FORCED`), clocks paired again |
//! | `kernel`, `gpu_memcpy`, `gpu_memset` | on (device, stream), linked to the op their launch ran in ([`links`]) |
//! | `cuda_runtime`, `cuda_driver` | on the launching host thread, with `cbid` |
//! | `cuda_sync` | synchronization waits, on their rows and with what they waited for ([`syncs`]) |
//! | `overhead` | CUPTI's own costs, on Kineto's `CUPTI Overhead` row (pid −1) |
//! | `deviceProperties` | from the driver, with Kineto's keys |

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use omniprof::backends::{
    ActivityProfiler, ActivitySink, BackendError, CorrelationListener, DeviceInfo, HostOps,
    ProfilerSession, ResourceInfo,
};
use omniprof::trace::keys::metadata;
use omniprof::trace::{Activity, ActivitySet, ActivityType, Value, Window};
use omniprof::Config;

use crate::args::{kernel_args, properties_value, transfer_args};
use crate::buffers::{self, Completed};
use crate::clock::{ClockMap, Pair};
use crate::library::{self, DeviceProperties, Loaded};
use crate::links::{self, Linking, Links};
use crate::names::{self, ApiNames};
use crate::records::{self, kind, Record};
use crate::syncs::{self, EventRecords};
use crate::threads;

/// The device type traces name (`device_type`), as PyTorch's.
pub const DEVICE_TYPE: &str = "CUDA";
/// Metadata keys this backend writes.
pub mod keys {
    /// CUPTI's API version.
    pub const CUPTI_VERSION: &str = "cupti_version";
    /// Where CUPTI was loaded from.
    pub const CUPTI_LIBRARY: &str = "cupti_library";
    /// The driver's CUDA version.
    pub const CUDA_DRIVER_VERSION: &str = "cuda_driver_version";
    /// Wall time minus CUPTI time at session start, in nanoseconds.
    pub const CLOCK_OFFSET_NS: &str = "cupti_clock_offset_ns";
    /// How much that offset changed by the stop, in nanoseconds.
    pub const CLOCK_DRIFT_NS: &str = "cupti_clock_drift_ns";
    /// Wall nanoseconds per CUPTI clock unit over the session: 1 give or take the drift, or
    /// another rate where a profiler that ran before (torch.profiler) gave CUPTI its own
    /// clock.
    pub const CLOCK_SCALE: &str = "cupti_clock_scale";
}

/// What this backend records, as omniprof types and CUPTI activity kinds.
const SUPPORTED: [(ActivityType, u32); 7] = [
    (ActivityType::ConcurrentKernel, kind::CONCURRENT_KERNEL),
    (ActivityType::GpuMemcpy, kind::MEMCPY),
    (ActivityType::GpuMemset, kind::MEMSET),
    (ActivityType::CudaRuntime, kind::RUNTIME),
    (ActivityType::CudaDriver, kind::DRIVER),
    (ActivityType::CudaSync, kind::SYNCHRONIZATION),
    (ActivityType::Overhead, kind::OVERHEAD),
];

/// The `pid` Kineto writes CUPTI's overhead under, a process row of its own.
const OVERHEAD_PID: i64 = -1;

/// The `CUPTI Overhead` process row, as Kineto writes it: no label, sorted after the devices
/// (its sort index is 0x100000); and its one thread row (Kineto writes none, and the viewer
/// names it by its `tid`, 0).
fn overhead_rows() -> (DeviceInfo, ResourceInfo) {
    let name = "CUPTI Overhead";
    let process = DeviceInfo {
        id: OVERHEAD_PID,
        sort_index: 0x10_0000,
        name: name.to_owned(),
        label: String::new(),
    };
    let thread = ResourceInfo {
        device_id: OVERHEAD_PID,
        id: 0,
        sort_index: 0,
        name: name.to_owned(),
    };
    (process, thread)
}

/// Whether a CUPTI session is recording: CUPTI's activity state is one per process.
static RECORDING: AtomicBool = AtomicBool::new(false);

/// Why CUDA activity cannot be recorded in this process (no driver, no `libcupti`, a CUPTI
/// version of unknown layout), or `None` when it can. One line, for the user.
pub fn unavailable_reason() -> Option<String> {
    library::loaded()
        .err()
        .map(|reason| format!("CUPTI sits out: {reason}"))
}

/// The backend: stateless, one per process, registered statically.
#[derive(Default)]
pub struct CuptiProfiler;

omniprof::register_profiler!(CuptiProfiler);

impl ActivityProfiler for CuptiProfiler {
    fn name(&self) -> &str {
        "cupti"
    }

    /// Nothing where CUPTI cannot run ([`unavailable_reason`] says why), so no session asks.
    fn available_activities(&self) -> ActivitySet {
        match library::loaded() {
            Ok(_) => SUPPORTED.iter().map(|&(t, _)| t).collect(),
            Err(_) => ActivitySet::empty(),
        }
    }

    fn configure(
        &self,
        activities: ActivitySet,
        config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        let loaded = library::loaded().map_err(BackendError::new)?;
        let mut kinds: Vec<u32> = SUPPORTED
            .iter()
            .filter(|(t, _)| activities.contains(*t))
            .map(|&(_, k)| k)
            .collect();
        // The events' records name the `cudaEventRecord` a wait on an event waited for.
        if kinds.contains(&kind::SYNCHRONIZATION) {
            kinds.push(kind::CUDA_EVENT);
        }
        // Runtime calls and overhead alone are no reason to start CUPTI.
        if !kinds
            .iter()
            .any(|k| [kind::CONCURRENT_KERNEL, kind::MEMCPY, kind::MEMSET].contains(k))
        {
            return Ok(None);
        }
        let devices = loaded
            .driver
            .device_count()
            .map_err(|e| BackendError::new(format!("CUPTI sits out: {e}")))?;
        if devices == 0 {
            return Err(BackendError::new(
                "CUPTI sits out: the CUDA driver sees no device",
            ));
        }
        let recorded = SUPPORTED
            .iter()
            .map(|&(t, _)| t)
            .filter(|&t| activities.contains(t))
            .collect();
        Ok(Some(Box::new(CuptiSession {
            loaded,
            recorded,
            paused: false,
            linking: Linking::choose(activities, config),
            stream_wait_events: config.display_cuda_sync_wait_events(),
            kinds,
            enabled: Vec::new(),
            start: None,
            clock: None,
            completed: Vec::new(),
            losses: (0, 0),
            errors: Vec::new(),
            ambiguous_calls: (0, 0),
            devices: BTreeSet::new(),
            streams: BTreeSet::new(),
            sync_rows: BTreeSet::new(),
            overhead: false,
            properties: BTreeMap::new(),
        })))
    }
}

/// One trace's worth of CUPTI recording.
struct CuptiSession {
    loaded: &'static Loaded,
    /// The activity types this session records.
    recorded: ActivitySet,
    /// Whether its kinds are disabled while every one of those types is switched off.
    paused: bool,
    linking: Linking,
    /// Whether streams' waits on events are written (`ACTIVITIES_DISPLAY_CUDA_SYNC_WAIT_EVENTS`).
    stream_wait_events: bool,
    /// The kinds to enable (external correlation comes with them where it links).
    kinds: Vec<u32>,
    /// The kinds enabled now, to disable at stop.
    enabled: Vec<u32>,
    start: Option<Pair>,
    clock: Option<ClockMap>,
    completed: Vec<Completed>,
    /// Records CUPTI dropped, and buffer requests refused.
    losses: (u64, u64),
    errors: Vec<String>,
    /// API calls too close to an op's edge to link by thread and time, and how close that
    /// was (ns).
    ambiguous_calls: (u64, i64),
    devices: BTreeSet<u32>,
    streams: BTreeSet<(u32, u32)>,
    /// The (device, stream) pairs whose `Stream Sync` rows hold events.
    sync_rows: BTreeSet<(u32, u32)>,
    /// Whether an overhead event was made (and its row is due).
    overhead: bool,
    /// The devices' properties, read from the driver with the trace.
    properties: BTreeMap<u32, DeviceProperties>,
}

impl CuptiSession {
    /// Enables the session's kinds. Where CUPTI can pick API calls, the calls Kineto leaves
    /// out of traces are turned off at the source after their kind is enabled (the way
    /// CUPTI's documentation gives): all driver calls but kernel launches (each runtime call
    /// makes driver calls of its own), and the runtime's queries. Elsewhere all are recorded
    /// and the same ones left out when the trace is made.
    fn enable_kinds(&mut self) -> Result<(), String> {
        let cupti = &self.loaded.cupti;
        let pick = cupti.can_pick_api_calls();
        let external =
            (self.linking == Linking::ExternalCorrelation).then_some(&kind::EXTERNAL_CORRELATION);
        for &k in external.into_iter().chain(&self.kinds) {
            cupti.enable(k)?;
            self.enabled.push(k);
            if !pick {
                continue;
            }
            if k == kind::RUNTIME {
                for (_, cbids) in names::LEFT_OUT_RUNTIME {
                    for &cbid in cbids {
                        cupti.pick_api(false, cbid, false)?;
                    }
                }
            } else if k == kind::DRIVER {
                for &cbid in driver_calls_left_out(cupti) {
                    cupti.pick_api(true, cbid, false)?;
                }
            }
        }
        Ok(())
    }

    fn disable_all(&mut self) {
        let cupti = &self.loaded.cupti;
        for k in self.enabled.drain(..).rev() {
            if let Err(e) = cupti.disable(k) {
                self.errors.push(e);
            }
        }
    }

    /// Stops recording if it still runs (a stop that never came).
    fn finish(&mut self) {
        if !self.enabled.is_empty() {
            self.disable_all();
            if let Err(e) = self.loaded.cupti.flush_all() {
                self.errors.push(e);
            }
        }
        if self.start.is_some() && self.clock.is_none() {
            RECORDING.store(false, Ordering::Release);
        }
    }
}

impl Drop for CuptiSession {
    fn drop(&mut self) {
        self.finish();
        buffers::give_back(buffers::take_completed().into_iter().map(|c| c.buffer));
        buffers::give_back(self.completed.drain(..).map(|c| c.buffer));
    }
}

impl ProfilerSession for CuptiSession {
    fn start(&mut self) -> Result<(), BackendError> {
        if RECORDING.swap(true, Ordering::AcqRel) {
            return Err(BackendError::new(
                "another omniprof session is recording CUDA activity in this process; CUPTI \
                 serves one at a time",
            ));
        }
        let cupti = &self.loaded.cupti;
        buffers::prepare(cupti);
        threads::new_session();
        let started = cupti
            .register_callbacks(buffers::request, buffers::complete)
            .and_then(|()| self.enable_kinds());
        if let Err(e) = started {
            self.disable_all();
            RECORDING.store(false, Ordering::Release);
            return Err(BackendError::new(format!("CUPTI could not start: {e}")));
        }
        self.start = Some(Pair::take(5, || cupti.timestamp()));
        Ok(())
    }

    /// While every type the session records is switched off (PyTorch's toggle of `CUDA`),
    /// its kinds are disabled, as Kineto disables CUPTI's activities then, so the device
    /// work and API calls of that time cost no records; they are enabled again after.
    fn collection_switched(&mut self, off: ActivitySet) -> Result<(), BackendError> {
        let all_off = self.recorded.iter().all(|t| off.contains(t));
        if all_off && !self.paused && self.start.is_some() && self.clock.is_none() {
            self.disable_all();
            self.paused = true;
        } else if !all_off && self.paused {
            self.paused = false;
            self.enable_kinds().map_err(|e| {
                self.disable_all();
                BackendError::new(format!("CUPTI could not enable its activities again: {e}"))
            })?;
        }
        Ok(())
    }

    fn window_opened(&mut self) -> Result<(), BackendError> {
        self.loaded.cupti.flush_all().map_err(BackendError::new)?;
        buffers::give_back(buffers::take_completed().into_iter().map(|c| c.buffer));
        buffers::reset_losses();
        Ok(())
    }

    fn stop(&mut self) -> Result<(), BackendError> {
        let cupti = &self.loaded.cupti;
        self.disable_all();
        let flushed = cupti.flush_all();
        let stop = Pair::take(5, || cupti.timestamp());
        self.clock = self.start.map(|start| ClockMap::new(start, stop));
        self.completed = buffers::take_completed();
        self.losses = buffers::losses();
        RECORDING.store(false, Ordering::Release);
        flushed.map_err(BackendError::new)
    }

    fn process_trace(
        &mut self,
        sink: &mut dyn ActivitySink,
        host_ops: &dyn HostOps,
        _window: Window,
    ) -> Result<(), BackendError> {
        let Some(clock) = self.clock else {
            return Err(BackendError::new(
                "CUPTI's trace was asked for before its stop",
            ));
        };
        let records = self.decode_all();
        let events = EventRecords::of(records.iter().map(|(r, _)| r));
        let threads = threads::seen();
        let links = match self.linking {
            Linking::ExternalCorrelation => links::from_external_correlation(&records),
            Linking::ThreadAndTime => {
                let (links, ambiguous) =
                    links::by_thread_and_time(&records, host_ops, &threads, &clock);
                self.ambiguous_calls = (ambiguous, links::margin_ns(&clock));
                links
            }
        };
        let mut context_device: HashMap<u32, u32> = HashMap::new();
        // The (device, stream) pairs that ran work: Kineto writes a stream's waits on an
        // event only if the stream has some (they are many, and say little otherwise).
        let mut worked: HashSet<(u32, u32)> = HashSet::new();
        for r in &records {
            let (context, device, stream) = match r {
                (Record::Kernel(k), _) => (k.context, k.device, k.stream),
                (Record::Memcpy(m), _) => (m.context, m.device, m.stream),
                (Record::Memset(m), _) => (m.context, m.device, m.stream),
                _ => continue,
            };
            context_device.insert(context, device);
            worked.insert((device, stream));
        }
        // Asked of the driver once per device: for the kernels' occupancy here, and for
        // `deviceProperties` after.
        let driver = &self.loaded.driver;
        let properties: BTreeMap<u32, DeviceProperties> = context_device
            .values()
            .filter_map(|&d| Some((d, driver.properties(d)?)))
            .collect();
        let pid = i64::from(std::process::id());
        let time = |ns: u64| clock.to_unix_ns(ns);
        let mut api_names = ApiNames::default();
        for (record, name) in records {
            // Inside a user range, so that the engine projects the range onto the device.
            let add_device_work =
                |a: Activity, correlation: u32, sink: &mut dyn ActivitySink| match links
                    .get(&correlation)
                    .and_then(|l| l.1)
                {
                    Some(user) => sink.add_in_user_range(a, user),
                    None => sink.add(a),
                };
            match record {
                Record::Kernel(k) => {
                    let mut a = self.device_work(
                        ActivityType::ConcurrentKernel,
                        name.unwrap_or_else(|| "<unnamed kernel>".into()),
                        (k.device, k.stream, k.correlation),
                        (time(k.start), time(k.end)),
                        &links,
                    );
                    a.args = kernel_args(&k, properties.get(&k.device));
                    add_device_work(a, k.correlation, sink);
                }
                Record::Memcpy(m) => {
                    let mut a = self.device_work(
                        ActivityType::GpuMemcpy,
                        names::memcpy(m.copy_kind, m.src_kind, m.dst_kind).into(),
                        (m.device, m.stream, m.correlation),
                        (time(m.start), time(m.end)),
                        &links,
                    );
                    a.args = transfer_args(&a, m.device, m.context, m.stream, m.bytes);
                    add_device_work(a, m.correlation, sink);
                }
                Record::Memset(m) => {
                    let mut a = self.device_work(
                        ActivityType::GpuMemset,
                        names::memset(m.memory_kind).into(),
                        (m.device, m.stream, m.correlation),
                        (time(m.start), time(m.end)),
                        &links,
                    );
                    a.args = transfer_args(&a, m.device, m.context, m.stream, m.bytes);
                    add_device_work(a, m.correlation, sink);
                }
                Record::Api(api) => {
                    let name = api_names.get(&self.loaded.cupti, api.driver, api.cbid);
                    if names::is_left_out(api.driver, &name) {
                        continue;
                    }
                    let linked = links.get(&api.correlation).and_then(|l| l.0);
                    // On the row of the op that made the call, which carries the thread id
                    // the host recorder wrote.
                    let thread = match linked.and_then(|id| host_ops.get(id)) {
                        Some(op) => op.resource,
                        None => threads.system_tid(api.thread),
                    };
                    let kind = if api.driver {
                        ActivityType::CudaDriver
                    } else {
                        ActivityType::CudaRuntime
                    };
                    let mut a =
                        Activity::new(kind, name, pid, thread, time(api.start), time(api.end));
                    a.correlation = api.correlation.into();
                    a.linked_correlation = linked;
                    a.args.push(("cbid".into(), Value::from(api.cbid)));
                    sink.add(a);
                }
                Record::Sync(s) => {
                    let device = context_device.get(&s.context).copied().unwrap_or(0);
                    let shown = self.stream_wait_events && worked.contains(&(device, s.stream));
                    if syncs::is_stream_wait(&s) && !shown {
                        continue;
                    }
                    let resource = syncs::row(&s);
                    let mut a = Activity::new(
                        ActivityType::CudaSync,
                        names::sync(s.sync_type),
                        device.into(),
                        resource,
                        time(s.start),
                        time(s.end),
                    );
                    a.correlation = s.correlation.into();
                    a.linked_correlation = links.get(&s.correlation).and_then(|l| l.0);
                    a.args = syncs::args(&s, device, &events);
                    if s.stream == u32::MAX {
                        self.devices.insert(device);
                    } else {
                        self.note_stream(device, s.stream);
                        if resource != i64::from(s.stream) {
                            self.sync_rows.insert((device, s.stream));
                        }
                    }
                    sink.add(a);
                }
                Record::Overhead(o) => {
                    // Kineto writes every overhead on one row, whatever object CUPTI names.
                    self.overhead = true;
                    let a = Activity::new(
                        ActivityType::Overhead,
                        names::overhead(o.kind),
                        OVERHEAD_PID,
                        0,
                        time(o.start),
                        time(o.end),
                    );
                    sink.add(a);
                }
                Record::CudaEvent(_) | Record::ExternalCorrelation(_) | Record::Other(_) => {}
            }
        }
        self.properties = properties;
        Ok(())
    }

    fn device_info(&self) -> Vec<DeviceInfo> {
        let devices = self.devices.iter();
        let devices =
            devices.map(|&d| DeviceInfo::new(d.into(), format!("GPU {d}"), format!("GPU {d}")));
        let overhead = self.overhead.then(|| overhead_rows().0);
        devices.chain(overhead).collect()
    }

    fn resource_infos(&self) -> Vec<ResourceInfo> {
        let streams = self.streams.iter();
        let streams =
            streams.map(|&(device, stream)| ResourceInfo::stream(device.into(), stream.into()));
        let sync_rows = self.sync_rows.iter();
        let sync_rows = sync_rows.map(|&(device, stream)| syncs::sync_row(device, stream));
        let overhead = self.overhead.then(|| overhead_rows().1);
        streams.chain(sync_rows).chain(overhead).collect()
    }

    fn errors(&self) -> Vec<String> {
        let mut errors = self.errors.clone();
        let (dropped, refused) = self.losses;
        if dropped > 0 {
            errors.push(format!(
                "CUPTI dropped {dropped} CUDA activity records: its buffers were full"
            ));
        }
        if refused > 0 {
            errors.push(format!(
                "{refused} CUPTI buffer requests were refused: all {} buffers of {} MiB were \
                 in use, and the records they would have held were dropped",
                buffers::MAX_BUFFERS,
                buffers::BUFFER_BYTES >> 20
            ));
        }
        errors
    }

    fn warnings(&self) -> Vec<String> {
        let (calls, margin) = self.ambiguous_calls;
        if calls == 0 {
            return Vec::new();
        }
        vec![format!(
            "{calls} CUDA API calls (and the device work they launched) are not linked to a \
             host op: each lay within {margin} ns of the begin or end of an op or user \
             range of its thread, closer than CUPTI's clock is known to agree with the \
             recorder's, or on a thread id two threads share; \
             OMNIPROF_CUPTI_EXTERNAL_CORRELATION=1 links them through CUPTI's external \
             correlation, at two CUPTI calls per op"
        )]
    }

    fn metadata(&self) -> Vec<(String, Value)> {
        let cupti = &self.loaded.cupti;
        let mut entries = vec![
            (metadata::DEVICE_TYPE.to_owned(), Value::from(DEVICE_TYPE)),
            (keys::CUPTI_VERSION.to_owned(), Value::from(cupti.version)),
            (
                keys::CUPTI_LIBRARY.to_owned(),
                Value::from(cupti.path.as_str()),
            ),
        ];
        if let Some(v) = self.loaded.driver.version() {
            entries.push((keys::CUDA_DRIVER_VERSION.to_owned(), Value::from(v)));
        }
        if let Some(clock) = self.clock {
            entries.push((
                keys::CLOCK_OFFSET_NS.to_owned(),
                Value::from(clock.offset_ns()),
            ));
            entries.push((
                keys::CLOCK_DRIFT_NS.to_owned(),
                Value::from(clock.drift_ns()),
            ));
            entries.push((keys::CLOCK_SCALE.to_owned(), Value::from(clock.scale())));
        }
        entries
    }

    fn device_properties(&self) -> Vec<Value> {
        self.devices
            .iter()
            .filter_map(|d| self.properties.get(d))
            .map(properties_value)
            .collect()
    }

    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        Some(self.linking.listener(self.loaded))
    }
}

impl CuptiSession {
    fn note_stream(&mut self, device: u32, stream: u32) {
        self.devices.insert(device);
        self.streams.insert((device, stream));
    }

    /// A kernel, copy or set on (device, stream), with its launch's correlation id and
    /// linked to the op that launched it.
    fn device_work(
        &mut self,
        kind: ActivityType,
        name: Arc<str>,
        (device, stream, correlation): (u32, u32, u32),
        (start_ns, end_ns): (i64, i64),
        links: &Links,
    ) -> Activity {
        self.note_stream(device, stream);
        let mut a = Activity::new(kind, name, device.into(), stream.into(), start_ns, end_ns);
        a.correlation = correlation.into();
        a.linked_correlation = links.get(&correlation).and_then(|l| l.0);
        a
    }

    /// Every record of the completed buffers, with kernels' names read (demangled once per
    /// name CUPTI holds); the buffers go back to the pool.
    fn decode_all(&mut self) -> Vec<(Record, Option<Arc<str>>)> {
        let cupti = &self.loaded.cupti;
        let mut out = Vec::new();
        let mut kernel_names: HashMap<u64, Arc<str>> = HashMap::new();
        let mut truncated = 0u64;
        for mut buffer in std::mem::take(&mut self.completed) {
            let base = buffer.as_mut_ptr();
            let mut at: *mut u8 = std::ptr::null_mut();
            loop {
                // SAFETY: `base` is a buffer CUPTI completed with `valid` bytes, and `at` null
                // or the record returned for it before.
                let next = unsafe { cupti.next_record(base, buffer.valid, at) };
                let record = match next {
                    Ok(Some(record)) => record,
                    Ok(None) => break,
                    Err(e) => {
                        self.errors.push(e);
                        break;
                    }
                };
                at = record;
                let end = base as usize + buffer.valid;
                // SAFETY: the record's kind is its first 4 bytes, inside the buffer.
                let record_kind = unsafe { record.cast::<u32>().read_unaligned() };
                let len = records::bytes_read(record_kind).min(end - record as usize);
                // SAFETY: `len` bytes from the record lie inside the buffer's valid bytes.
                let bytes = unsafe { std::slice::from_raw_parts(record, len) };
                match records::decode(bytes) {
                    Ok(Record::Kernel(k)) => {
                        let name = kernel_names
                            .entry(k.name_ptr)
                            .or_insert_with(|| kernel_name(k.name_ptr))
                            .clone();
                        out.push((Record::Kernel(k), Some(name)));
                    }
                    Ok(r) => out.push((r, None)),
                    Err(_) => truncated += 1,
                }
            }
            buffers::give_back([buffer.buffer]);
        }
        if truncated > 0 {
            self.errors.push(format!(
                "{truncated} CUPTI records were shorter than their kind's fields and were \
                 not decoded"
            ));
        }
        out
    }
}

/// The driver calls this CUPTI knows (it names them) other than kernel launches, found
/// once per process.
fn driver_calls_left_out(cupti: &library::Cupti) -> &'static [u32] {
    static LEFT_OUT: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    // Driver callback ids stay below 1,000 in every CUPTI checked (cupti_driver_cbid.h);
    // 2,048 leaves room for later ones.
    LEFT_OUT.get_or_init(|| {
        (1..2048)
            .filter(|cbid| !names::DRIVER_LAUNCHES.contains(cbid))
            .filter(|&cbid| cupti.callback_name(true, cbid).is_some())
            .collect()
    })
}

/// The demangled name CUPTI holds at `ptr` (valid while the kernel's module is loaded, which
/// it is between the stop and the trace's processing).
fn kernel_name(ptr: u64) -> Arc<str> {
    if ptr == 0 {
        return "<unnamed kernel>".into();
    }
    // SAFETY: a kernel record's name is CUPTI's NUL-terminated copy of the function name.
    let mangled = unsafe { CStr::from_ptr(ptr as *const std::ffi::c_char) };
    names::demangle(mangled).into()
}
