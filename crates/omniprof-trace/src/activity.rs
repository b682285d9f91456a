//! Activity types, their classes, and the [`Activity`] record every source produces.
//!
//! The integers and `cat` names are Kineto main's (`docs/activity-types.md`, section 1);
//! they are what omniprof stores and writes. The accelerator-agnostic names of Kineto PR 1212
//! (`runtime`, `driver`, `kernel`, `gpu_pm_counter`, and omniprof's `scope_profiler`) are
//! accepted when parsing, and gating is by class: selecting any runtime type enables every
//! runtime type.
//!
//! ```
//! use omniprof_trace::{ActivitySet, ActivityType};
//!
//! let selection = ActivitySet::parse_list("runtime, kernel").unwrap();
//! assert!(selection.enabled(ActivityType::PrivateUse1Runtime));
//! assert!(selection.enabled(ActivityType::MtiaCcpEvents));
//! assert!(!selection.enabled(ActivityType::CpuOp));
//! assert_eq!(ActivityType::parse("CUDA_Runtime").unwrap().name(), "cuda_runtime");
//! ```

use std::fmt;
use std::sync::Arc;

use crate::value::Value;

/// One kind of event. The discriminant is the integer Kineto main stores in traces;
/// [`ActivityType::GpuPmCounter`] and [`ActivityType::HostCounters`] are omniprof's
/// extensions and live in a reserved range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum ActivityType {
    CpuOp = 0,
    UserAnnotation = 1,
    GpuUserAnnotation = 2,
    GpuMemcpy = 3,
    GpuMemset = 4,
    ConcurrentKernel = 5,
    ExternalCorrelation = 6,
    CudaRuntime = 7,
    CudaDriver = 8,
    CpuInstantEvent = 9,
    PythonFunction = 10,
    Overhead = 11,
    MtiaRuntime = 12,
    MtiaCcpEvents = 13,
    MtiaInsight = 14,
    CudaSync = 15,
    CudaEvent = 16,
    MtiaCounters = 17,
    GlowRuntime = 18,
    CudaProfilerRange = 19,
    HpuOp = 20,
    XpuRuntime = 21,
    XpuDriver = 22,
    CollectiveComm = 23,
    PrivateUse1Runtime = 24,
    PrivateUse1Driver = 25,
    XpuScopeProfiler = 26,
    XpuSync = 27,
    HardwareCounters = 28,
    /// Device performance-monitor counter samples (Kineto PR 1148/1212). omniprof extension:
    /// it has no Kineto integer, so its value is outside the range Kineto uses.
    GpuPmCounter = 1000,
    /// The host's own counters (Linux perf events, `PERF_EVENTS`) on the host thread rows.
    /// omniprof extension, selected whenever `PERF_EVENTS` names an event.
    HostCounters = 1001,
}

/// The accelerator-agnostic class a type belongs to (PR 1212's alias map, plus omniprof's
/// `scope_profiler` and the placement of `hardware_counters`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActivityClass {
    Runtime,
    Driver,
    Kernel,
    GpuPmCounter,
    ScopeProfiler,
}

/// The error for a name that is not an activity type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid activity type: {name:?}")]
pub struct UnknownActivityType {
    /// The item as it was given (after trimming).
    pub name: String,
}

impl ActivityType {
    /// Every type, in integer order (the extensions last).
    pub const ALL: [ActivityType; 31] = [
        Self::CpuOp,
        Self::UserAnnotation,
        Self::GpuUserAnnotation,
        Self::GpuMemcpy,
        Self::GpuMemset,
        Self::ConcurrentKernel,
        Self::ExternalCorrelation,
        Self::CudaRuntime,
        Self::CudaDriver,
        Self::CpuInstantEvent,
        Self::PythonFunction,
        Self::Overhead,
        Self::MtiaRuntime,
        Self::MtiaCcpEvents,
        Self::MtiaInsight,
        Self::CudaSync,
        Self::CudaEvent,
        Self::MtiaCounters,
        Self::GlowRuntime,
        Self::CudaProfilerRange,
        Self::HpuOp,
        Self::XpuRuntime,
        Self::XpuDriver,
        Self::CollectiveComm,
        Self::PrivateUse1Runtime,
        Self::PrivateUse1Driver,
        Self::XpuScopeProfiler,
        Self::XpuSync,
        Self::HardwareCounters,
        Self::GpuPmCounter,
        Self::HostCounters,
    ];

    /// The name used in config and written as the trace `cat`.
    #[inline]
    pub const fn name(self) -> &'static str {
        match self {
            Self::CpuOp => "cpu_op",
            Self::UserAnnotation => "user_annotation",
            Self::GpuUserAnnotation => "gpu_user_annotation",
            Self::GpuMemcpy => "gpu_memcpy",
            Self::GpuMemset => "gpu_memset",
            Self::ConcurrentKernel => "kernel",
            Self::ExternalCorrelation => "external_correlation",
            Self::CudaRuntime => "cuda_runtime",
            Self::CudaDriver => "cuda_driver",
            Self::CpuInstantEvent => "cpu_instant_event",
            Self::PythonFunction => "python_function",
            Self::Overhead => "overhead",
            Self::MtiaRuntime => "mtia_runtime",
            Self::MtiaCcpEvents => "mtia_ccp_events",
            Self::MtiaInsight => "mtia_insight",
            Self::CudaSync => "cuda_sync",
            Self::CudaEvent => "cuda_event",
            Self::MtiaCounters => "mtia_counters",
            Self::GlowRuntime => "glow_runtime",
            Self::CudaProfilerRange => "cuda_profiler_range",
            Self::HpuOp => "hpu_op",
            Self::XpuRuntime => "xpu_runtime",
            Self::XpuDriver => "xpu_driver",
            Self::CollectiveComm => "collective_comm",
            Self::PrivateUse1Runtime => "privateuse1_runtime",
            Self::PrivateUse1Driver => "privateuse1_driver",
            Self::XpuScopeProfiler => "xpu_scope_profiler",
            Self::XpuSync => "xpu_sync",
            Self::HardwareCounters => "hardware_counters",
            Self::GpuPmCounter => "gpu_pm_counter",
            Self::HostCounters => "host_counters",
        }
    }

    /// The integer stored in traces (Kineto main's; 1000 and up for the extension types).
    pub const fn as_i32(self) -> i32 {
        self as i32
    }

    /// The type with this integer, if any.
    pub fn from_i32(value: i32) -> Option<Self> {
        Self::ALL.iter().copied().find(|t| t.as_i32() == value)
    }

    /// On when no types are named (Kineto main: every value below `GLOW_RUNTIME`).
    pub const fn is_default(self) -> bool {
        (self as i32) < Self::GlowRuntime as i32
    }

    /// The generic class, or `None` for a type that stands alone.
    pub const fn class(self) -> Option<ActivityClass> {
        match self {
            Self::CudaRuntime
            | Self::MtiaRuntime
            | Self::GlowRuntime
            | Self::HpuOp
            | Self::XpuRuntime
            | Self::PrivateUse1Runtime => Some(ActivityClass::Runtime),
            Self::CudaDriver | Self::XpuDriver | Self::PrivateUse1Driver => {
                Some(ActivityClass::Driver)
            }
            Self::ConcurrentKernel | Self::MtiaCcpEvents => Some(ActivityClass::Kernel),
            Self::MtiaCounters | Self::HardwareCounters | Self::GpuPmCounter => {
                Some(ActivityClass::GpuPmCounter)
            }
            Self::XpuScopeProfiler => Some(ActivityClass::ScopeProfiler),
            _ => None,
        }
    }

    /// False for the types that never get their own correlation id as `External id`
    /// (device work, runtime and driver calls, counters): they carry the id of the host op
    /// they are linked to, and their own id is written as `correlation`.
    #[inline]
    pub const fn has_own_external_id(self) -> bool {
        !matches!(
            self,
            Self::GpuMemcpy
                | Self::GpuMemset
                | Self::ConcurrentKernel
                | Self::MtiaCcpEvents
                | Self::CudaRuntime
                | Self::CudaDriver
                | Self::MtiaRuntime
                | Self::GlowRuntime
                | Self::XpuRuntime
                | Self::XpuDriver
                | Self::PrivateUse1Runtime
                | Self::PrivateUse1Driver
                | Self::GpuPmCounter
        )
    }

    /// True for types written as counter (`C`) events.
    pub const fn is_counter(self) -> bool {
        matches!(
            self,
            Self::MtiaCounters
                | Self::XpuScopeProfiler
                | Self::HardwareCounters
                | Self::GpuPmCounter
                | Self::HostCounters
        )
    }

    /// True for types that happen on a device rather than a host thread.
    #[inline]
    pub const fn is_device(self) -> bool {
        matches!(
            self,
            Self::GpuUserAnnotation
                | Self::GpuMemcpy
                | Self::GpuMemset
                | Self::ConcurrentKernel
                | Self::MtiaCcpEvents
                | Self::MtiaCounters
                | Self::XpuScopeProfiler
                | Self::HardwareCounters
                | Self::GpuPmCounter
        )
    }

    /// Parses one name: a Kineto main name or a generic name, ASCII case folded.
    ///
    /// Generic names map to their representative (`runtime` → `cuda_runtime`, `driver` →
    /// `cuda_driver`, `scope_profiler` → `xpu_scope_profiler`); gating by class makes the
    /// representative stand for the whole class.
    pub fn parse(name: &str) -> Result<Self, UnknownActivityType> {
        let item = name.trim_matches([' ', '\t', '\n']);
        let lower = item.to_ascii_lowercase();
        let generic = match lower.as_str() {
            "runtime" => Some(Self::CudaRuntime),
            "driver" => Some(Self::CudaDriver),
            "scope_profiler" => Some(Self::XpuScopeProfiler),
            _ => None,
        };
        generic
            .or_else(|| Self::ALL.iter().copied().find(|t| t.name() == lower))
            .ok_or_else(|| UnknownActivityType {
                name: item.to_string(),
            })
    }

    /// A dense number for the type, below [`ActivityType::ALL`]`.len()`: Kineto's integer,
    /// and the next ones for omniprof's extensions.
    #[inline]
    pub(crate) const fn index(self) -> usize {
        match self {
            Self::GpuPmCounter => 29,
            Self::HostCounters => 30,
            other => other as usize,
        }
    }

    const fn bit(self) -> u32 {
        1 << self.index()
    }
}

impl fmt::Display for ActivityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A selection of activity types: exactly the types named, answered by class when asked
/// whether a type is [enabled](ActivitySet::enabled).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ActivitySet {
    bits: u32,
}

impl ActivitySet {
    /// The empty selection.
    pub const fn empty() -> Self {
        Self { bits: 0 }
    }

    /// The default selection (18 types).
    pub fn default_set() -> Self {
        ActivityType::ALL
            .iter()
            .copied()
            .filter(|t| t.is_default())
            .collect()
    }

    /// Every type.
    pub fn all() -> Self {
        ActivityType::ALL.iter().copied().collect()
    }

    /// Parses a comma-separated list of names (case-insensitive; empty items skipped).
    pub fn parse_list(list: &str) -> Result<Self, UnknownActivityType> {
        list.split(',')
            .map(|item| item.trim_matches([' ', '\t', '\n']))
            .filter(|item| !item.is_empty())
            .map(ActivityType::parse)
            .collect()
    }

    pub fn insert(&mut self, t: ActivityType) {
        self.bits |= t.bit();
    }

    pub fn remove(&mut self, t: ActivityType) {
        self.bits &= !t.bit();
    }

    /// True when `t` itself was selected.
    pub const fn contains(self, t: ActivityType) -> bool {
        self.bits & t.bit() != 0
    }

    pub const fn is_empty(self) -> bool {
        self.bits == 0
    }

    pub fn len(self) -> usize {
        self.bits.count_ones() as usize
    }

    /// Is `t` enabled? Yes when `t` or any member of its class was selected.
    pub fn enabled(self, t: ActivityType) -> bool {
        match t.class() {
            None => self.contains(t),
            Some(class) => self.iter().any(|s| s.class() == Some(class)),
        }
    }

    /// Every type that is on after class gating.
    pub fn enabled_types(self) -> Self {
        ActivityType::ALL
            .iter()
            .copied()
            .filter(|&t| self.enabled(t))
            .collect()
    }

    /// The selected types, in integer order.
    pub fn iter(self) -> impl Iterator<Item = ActivityType> {
        ActivityType::ALL
            .into_iter()
            .filter(move |&t| self.contains(t))
    }

    /// The types of `supported` that this selection enables (a backend's share of a trace).
    pub fn intersect_enabled(self, supported: ActivitySet) -> ActivitySet {
        supported.iter().filter(|&t| self.enabled(t)).collect()
    }
}

impl FromIterator<ActivityType> for ActivitySet {
    fn from_iter<I: IntoIterator<Item = ActivityType>>(iter: I) -> Self {
        let mut set = Self::empty();
        for t in iter {
            set.insert(t);
        }
        set
    }
}

impl fmt::Debug for ActivitySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(|t| t.name()))
            .finish()
    }
}

/// How a flow links two activities.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowKind {
    /// Forward op → its backward op (`fwdbwd`, link type 1).
    FwdBwd = 1,
    /// Host launch → device activity (`ac2g`, link type 2).
    Ac2g = 2,
}

impl FlowKind {
    /// The `cat` and `name` of the flow events.
    pub const fn name(self) -> &'static str {
        match self {
            Self::FwdBwd => "fwdbwd",
            Self::Ac2g => "ac2g",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "fwdbwd" => Some(Self::FwdBwd),
            "ac2g" => Some(Self::Ac2g),
            _ => None,
        }
    }
}

/// One end of a flow arrow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    pub id: u64,
    pub kind: FlowKind,
    /// True at the flow's start (`s`), false at its end (`f`).
    pub start: bool,
}

/// One recorded event: a host op, a user range, a runtime call, a kernel, a copy or an
/// instant. Counter samples are not activities: they live in [`Trace::counters`](crate::Trace::counters). Every source (host recorder, backends, plugins, the trace reader)
/// produces these, and every exporter and analysis reads them.
#[derive(Clone, Debug, PartialEq)]
pub struct Activity {
    pub kind: ActivityType,
    pub name: Arc<str>,
    /// The process row: the OS pid for host events, the device index for device events.
    pub device: i64,
    /// The thread row: the OS thread id for host events, the stream id for device events.
    pub resource: i64,
    pub start_ns: i64,
    /// Equal to `start_ns` for instants.
    pub end_ns: i64,
    /// The activity's own correlation id (0 = none).
    pub correlation: u64,
    /// The correlation id of the host op this activity is linked to (its `External id`).
    pub linked_correlation: Option<u64>,
    pub flow: Option<Flow>,
    /// Typed `args`, in the order they are written.
    pub args: Vec<(Arc<str>, Value)>,
}

impl Activity {
    /// A new activity with no correlation, flow or args.
    pub fn new(
        kind: ActivityType,
        name: impl Into<Arc<str>>,
        device: i64,
        resource: i64,
        start_ns: i64,
        end_ns: i64,
    ) -> Self {
        Self {
            kind,
            name: name.into(),
            device,
            resource,
            start_ns,
            end_ns,
            correlation: 0,
            linked_correlation: None,
            flow: None,
            args: Vec::new(),
        }
    }

    /// `max(end − start, 0)`.
    #[inline]
    pub fn duration_ns(&self) -> i64 {
        (self.end_ns - self.start_ns).max(0)
    }

    /// The value of an arg, if present.
    #[inline]
    pub fn arg(&self, key: &str) -> Option<&Value> {
        self.args.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_names_are_kineto_mains() {
        for (i, t) in ActivityType::ALL.iter().take(29).enumerate() {
            assert_eq!(t.as_i32(), i as i32);
            assert_eq!(ActivityType::from_i32(i as i32), Some(*t));
        }
        assert_eq!(ActivityType::from_i32(29), None);
        assert_eq!(ActivityType::ConcurrentKernel.name(), "kernel");
        assert_eq!(ActivityType::GpuPmCounter.as_i32(), 1000);
        for t in ActivityType::ALL {
            if t != ActivityType::ConcurrentKernel && t.as_i32() < 1000 {
                let enumerator = format!("{t:?}").to_ascii_lowercase();
                assert_eq!(enumerator.replace('_', ""), t.name().replace('_', ""));
            }
        }
    }

    #[test]
    fn default_set_has_eighteen_types() {
        let d = ActivitySet::default_set();
        assert_eq!(d.len(), 18);
        assert!(d.contains(ActivityType::MtiaCounters));
        assert!(!d.contains(ActivityType::GlowRuntime));
    }

    #[test]
    fn parsing_table() {
        let one = |s: &str| ActivitySet::parse_list(s).unwrap();
        let set = |ts: &[ActivityType]| ts.iter().copied().collect::<ActivitySet>();
        use ActivityType::*;
        for s in ["cpu_op", "CPU_OP", "Cpu_Op"] {
            assert_eq!(one(s), set(&[CpuOp]));
        }
        assert_eq!(one("gpu_MeMsEt"), set(&[GpuMemset]));
        assert_eq!(one("kernel"), set(&[ConcurrentKernel]));
        assert_eq!(one("xpu_Runtime"), set(&[XpuRuntime]));
        assert_eq!(one("xpu_scope_profiler"), set(&[XpuScopeProfiler]));
        assert_eq!(one("runtime"), set(&[CudaRuntime]));
        assert_eq!(one("driver"), set(&[CudaDriver]));
        assert_eq!(one("gpu_pm_counter"), set(&[GpuPmCounter]));
        assert_eq!(one("scope_profiler"), set(&[XpuScopeProfiler]));
        assert_eq!(one("cuda_Runtime,"), set(&[CudaRuntime]));
        assert_eq!(one(""), ActivitySet::empty());
        for bad in ["concurrent_kernel", "memcopy", "enum_count", "ENUM_COUNT"] {
            let err = ActivitySet::parse_list(bad).unwrap_err();
            assert_eq!(err.name, bad);
            assert!(err.to_string().contains(bad));
        }
    }

    #[test]
    fn gating_is_by_class() {
        use ActivityType::*;
        let s = ActivitySet::parse_list("runtime, driver, kernel").unwrap();
        for t in [
            CudaRuntime,
            CudaDriver,
            MtiaRuntime,
            MtiaCcpEvents,
            XpuRuntime,
            PrivateUse1Runtime,
            PrivateUse1Driver,
        ] {
            assert!(s.enabled(t), "{t} should be enabled");
        }
        assert!(!s.enabled(CpuOp));
        assert!(!s.enabled(GpuPmCounter));
        let s = ActivitySet::parse_list("cuda_runtime").unwrap();
        assert!(s.enabled(PrivateUse1Runtime));
        assert!(!s.enabled(PrivateUse1Driver));
        let d = ActivitySet::default_set();
        assert!(d.enabled(XpuRuntime) && d.enabled(GpuPmCounter) && d.enabled(HardwareCounters));
        assert!(!d.enabled(XpuScopeProfiler) && !d.enabled(CollectiveComm));
    }

    #[test]
    fn backend_share_is_the_enabled_intersection() {
        use ActivityType::*;
        let requested = ActivitySet::parse_list("cpu_op,runtime").unwrap();
        let supported: ActivitySet = [PrivateUse1Runtime, ConcurrentKernel].into_iter().collect();
        let share = requested.intersect_enabled(supported);
        assert_eq!(share, [PrivateUse1Runtime].into_iter().collect());
        let none = ActivitySet::parse_list("cpu_op")
            .unwrap()
            .intersect_enabled(supported);
        assert!(none.is_empty());
    }
}
