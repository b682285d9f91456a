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

/// Declares [`ActivityType`] and its one table: per type, in integer order, its Kineto
/// integer, its name (config and trace `cat`), its Kineto enumerator (the plugin ABI's name
/// for it), its class, where it happens, which correlation id it writes as `External id`,
/// and how it is drawn. Every property of a type is read from this table.
macro_rules! activity_types {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $int:literal, $name:literal, $enumerator:literal,
            $class:expr, $place:ident, $external_id:ident, $drawn:ident;
    )*) => {
        /// One kind of event. The discriminant is the integer Kineto main stores in traces;
        /// [`ActivityType::GpuPmCounter`] and [`ActivityType::HostCounters`] are omniprof's
        /// extensions and live in a reserved range.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i32)]
        pub enum ActivityType {
            $($(#[$doc])* $variant = $int,)*
        }

        impl ActivityType {
            /// Every type, in integer order (the extensions last).
            pub const ALL: [ActivityType; TYPES] = [$(Self::$variant,)*];

            /// Each type's row, in the order of [`ActivityType::ALL`].
            const TABLE: [Row; TYPES] = [$(Row {
                name: $name,
                enumerator: $enumerator,
                class: $class,
                place: Place::$place,
                external_id: ExternalId::$external_id,
                drawn: Drawn::$drawn,
            },)*];
        }
    };
}

/// How many activity types there are.
const TYPES: usize = 31;

/// A type's row in the table (see [`activity_types!`]).
struct Row {
    name: &'static str,
    enumerator: &'static str,
    class: Option<ActivityClass>,
    place: Place,
    external_id: ExternalId,
    drawn: Drawn,
}

/// Where a type's events happen.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Host,
    Device,
}

/// The correlation id a type's events write as `External id`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ExternalId {
    /// Their own.
    Own,
    /// The host op's they are linked to (device work, runtime and driver calls, counters);
    /// their own is written as `correlation`.
    Linked,
    /// As [`ExternalId::Linked`] when linked, else their own, as Kineto writes a
    /// `cuda_sync` (its writer leaves only device work and runtime and driver calls
    /// without one).
    LinkedElseOwn,
}

/// How a type's events are written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drawn {
    /// As spans or instants.
    Span,
    /// As counter (`C`) events.
    Counter,
}

use ActivityClass::{Driver, GpuPmCounter as PmCounter, Kernel, Runtime, ScopeProfiler};

activity_types! {
    /// A host operator (`aten::mm`).
    CpuOp = 0, "cpu_op", "CPU_OP", None, Host, Own, Span;
    /// A user range (`record_function`).
    UserAnnotation = 1, "user_annotation", "USER_ANNOTATION", None, Host, Own, Span;
    /// A user range on a device stream.
    GpuUserAnnotation = 2, "gpu_user_annotation", "GPU_USER_ANNOTATION",
        None, Device, Own, Span;
    /// A device memory copy.
    GpuMemcpy = 3, "gpu_memcpy", "GPU_MEMCPY", None, Device, Linked, Span;
    /// A device memory set.
    GpuMemset = 4, "gpu_memset", "GPU_MEMSET", None, Device, Linked, Span;
    /// A device kernel.
    ConcurrentKernel = 5, "kernel", "CONCURRENT_KERNEL", Some(Kernel), Device, Linked, Span;
    /// A link between a host op and the device work it launched.
    ExternalCorrelation = 6, "external_correlation", "EXTERNAL_CORRELATION",
        None, Host, Own, Span;
    /// A CUDA runtime API call.
    CudaRuntime = 7, "cuda_runtime", "CUDA_RUNTIME", Some(Runtime), Host, Linked, Span;
    /// A CUDA driver API call.
    CudaDriver = 8, "cuda_driver", "CUDA_DRIVER", Some(Driver), Host, Linked, Span;
    /// A point event on a host thread.
    CpuInstantEvent = 9, "cpu_instant_event", "CPU_INSTANT_EVENT", None, Host, Own, Span;
    /// A Python function or module frame (`with_stack`).
    PythonFunction = 10, "python_function", "PYTHON_FUNCTION", None, Host, Own, Span;
    /// The profiler's own overhead.
    Overhead = 11, "overhead", "OVERHEAD", None, Host, Own, Span;
    /// An MTIA runtime call.
    MtiaRuntime = 12, "mtia_runtime", "MTIA_RUNTIME", Some(Runtime), Host, Linked, Span;
    /// MTIA device work.
    MtiaCcpEvents = 13, "mtia_ccp_events", "MTIA_CCP_EVENTS",
        Some(Kernel), Device, Linked, Span;
    /// MTIA insight events.
    MtiaInsight = 14, "mtia_insight", "MTIA_INSIGHT", None, Host, Own, Span;
    /// A CUDA synchronization.
    CudaSync = 15, "cuda_sync", "CUDA_SYNC", None, Device, LinkedElseOwn, Span;
    /// A CUDA event.
    CudaEvent = 16, "cuda_event", "CUDA_EVENT", None, Host, Own, Span;
    /// MTIA counter samples.
    MtiaCounters = 17, "mtia_counters", "MTIA_COUNTERS",
        Some(PmCounter), Device, Own, Counter;
    /// A Glow runtime call.
    GlowRuntime = 18, "glow_runtime", "GLOW_RUNTIME", Some(Runtime), Host, Linked, Span;
    /// A CUDA profiler range (per-kernel metrics).
    CudaProfilerRange = 19, "cuda_profiler_range", "CUDA_PROFILER_RANGE",
        None, Host, Own, Span;
    /// An HPU op.
    HpuOp = 20, "hpu_op", "HPU_OP", Some(Runtime), Host, Own, Span;
    /// An XPU runtime call.
    XpuRuntime = 21, "xpu_runtime", "XPU_RUNTIME", Some(Runtime), Host, Linked, Span;
    /// An XPU driver call.
    XpuDriver = 22, "xpu_driver", "XPU_DRIVER", Some(Driver), Host, Linked, Span;
    /// A collective communication call.
    CollectiveComm = 23, "collective_comm", "COLLECTIVE_COMM", None, Host, Own, Span;
    /// A PrivateUse1 backend's runtime call.
    PrivateUse1Runtime = 24, "privateuse1_runtime", "PRIVATEUSE1_RUNTIME",
        Some(Runtime), Host, Linked, Span;
    /// A PrivateUse1 backend's driver call.
    PrivateUse1Driver = 25, "privateuse1_driver", "PRIVATEUSE1_DRIVER",
        Some(Driver), Host, Linked, Span;
    /// XPU scope-profiler metric samples.
    XpuScopeProfiler = 26, "xpu_scope_profiler", "XPU_SCOPE_PROFILER",
        Some(ScopeProfiler), Device, Own, Counter;
    /// An XPU synchronization.
    XpuSync = 27, "xpu_sync", "XPU_SYNC", None, Host, Own, Span;
    /// Hardware counter samples.
    HardwareCounters = 28, "hardware_counters", "HARDWARE_COUNTERS",
        Some(PmCounter), Device, Own, Counter;
    /// Device performance-monitor counter samples (Kineto PR 1148/1212). omniprof extension:
    /// it has no Kineto integer, so its value is outside the range Kineto uses.
    GpuPmCounter = 1000, "gpu_pm_counter", "GPU_PM_COUNTER",
        Some(PmCounter), Device, Linked, Counter;
    /// The host's own counters (Linux perf events, `PERF_EVENTS`) on the host thread rows.
    /// omniprof extension, selected whenever `PERF_EVENTS` names an event.
    HostCounters = 1001, "host_counters", "HOST_COUNTERS", None, Host, Own, Counter;
}

/// The accelerator-agnostic class a type belongs to (PR 1212's alias map, plus omniprof's
/// `scope_profiler` and the placement of `hardware_counters`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActivityClass {
    /// Runtime API calls (`cuda_runtime`, `xpu_runtime`, ...).
    Runtime,
    /// Driver API calls (`cuda_driver`, `xpu_driver`, ...).
    Driver,
    /// Device kernels (`kernel`, `mtia_ccp_events`).
    Kernel,
    /// Device performance-monitor counters.
    GpuPmCounter,
    /// Scope-profiler metrics (`xpu_scope_profiler`).
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
    /// This type's row in the table.
    #[inline]
    const fn row(self) -> &'static Row {
        &Self::TABLE[self.index()]
    }

    /// The name used in config and written as the trace `cat`.
    #[inline]
    pub const fn name(self) -> &'static str {
        self.row().name
    }

    /// Kineto's enumerator for the type (`CONCURRENT_KERNEL`), which the plugin ABI's event
    /// types are named after.
    pub const fn enumerator(self) -> &'static str {
        self.row().enumerator
    }

    /// The type whose Kineto enumerator is `enumerator` (exact, upper case), if any.
    pub fn from_enumerator(enumerator: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.enumerator() == enumerator)
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
        self.row().class
    }

    /// False for the types whose `External id` is the id of the host op they are linked to
    /// (device work, runtime and driver calls, counters, `cuda_sync`): their own id is
    /// written as `correlation` (a `cuda_sync`'s as its `External id` too when unlinked:
    /// [`unlinked_external_id_is_own`](Self::unlinked_external_id_is_own)).
    #[inline]
    pub const fn has_own_external_id(self) -> bool {
        matches!(self.row().external_id, ExternalId::Own)
    }

    /// True for the types whose `External id`, when linked to no host op, is their own
    /// correlation id: those with [their own](Self::has_own_external_id), and `cuda_sync`,
    /// which otherwise carries its host op's as device work does (Kineto's writer leaves
    /// only device work and runtime and driver calls without one).
    #[inline]
    pub const fn unlinked_external_id_is_own(self) -> bool {
        !matches!(self.row().external_id, ExternalId::Linked)
    }

    /// True for types written as counter (`C`) events.
    pub const fn is_counter(self) -> bool {
        matches!(self.row().drawn, Drawn::Counter)
    }

    /// True for types that happen on a device rather than a host thread.
    #[inline]
    pub const fn is_device(self) -> bool {
        matches!(self.row().place, Place::Device)
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
    /// and the next ones for omniprof's extensions (1000 and up).
    #[inline]
    pub(crate) const fn index(self) -> usize {
        const EXTENSIONS: i32 = ActivityType::GpuPmCounter as i32;
        // The types Kineto numbers: 0 up to the last one.
        const KINETO_TYPES: usize = ActivityType::HardwareCounters as usize + 1;
        match self as i32 {
            i if i >= EXTENSIONS => KINETO_TYPES + (i - EXTENSIONS) as usize,
            i => i as usize,
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

    /// Selects `t`.
    pub fn insert(&mut self, t: ActivityType) {
        self.bits |= t.bit();
    }

    /// Deselects `t`.
    pub fn remove(&mut self, t: ActivityType) {
        self.bits &= !t.bit();
    }

    /// True when `t` itself was selected.
    pub const fn contains(self, t: ActivityType) -> bool {
        self.bits & t.bit() != 0
    }

    /// True when no type is selected.
    pub const fn is_empty(self) -> bool {
        self.bits == 0
    }

    /// How many types are selected.
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

    /// The kind whose name is `name` (`fwdbwd`, `ac2g`), if any.
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
    /// The flow id both ends share.
    pub id: u64,
    /// How the flow links its ends.
    pub kind: FlowKind,
    /// True at the flow's start (`s`), false at its end (`f`).
    pub start: bool,
}

/// One recorded event: a host op, a user range, a runtime call, a kernel, a copy or an
/// instant. Counter samples are not activities: they live in [`Trace::counters`](crate::Trace::counters). Every source (host recorder, backends, plugins, the trace reader)
/// produces these, and every exporter and analysis reads them.
#[derive(Clone, Debug, PartialEq)]
pub struct Activity {
    /// The activity type.
    pub kind: ActivityType,
    /// The name (op, range, kernel, ...).
    pub name: Arc<str>,
    /// The process row: the OS pid for host events, the device index for device events.
    pub device: i64,
    /// The thread row: the OS thread id for host events, the stream id for device events.
    pub resource: i64,
    /// Start, in nanoseconds since the Unix epoch.
    pub start_ns: i64,
    /// Equal to `start_ns` for instants.
    pub end_ns: i64,
    /// The activity's own correlation id (0 = none).
    pub correlation: u64,
    /// The correlation id of the host op this activity is linked to (its `External id`).
    pub linked_correlation: Option<u64>,
    /// The flow arrow end this activity carries, if any.
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
        self.end_ns.saturating_sub(self.start_ns).max(0)
    }

    /// The value of an arg, if present.
    #[inline]
    pub fn arg(&self, key: &str) -> Option<&Value> {
        self.args.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
    }

    /// The `External id` written for it: the linked host op's correlation id, else its own
    /// where its type writes its own when unlinked
    /// ([`ActivityType::unlinked_external_id_is_own`]); never 0.
    ///
    /// ```
    /// use omniprof_trace::{Activity, ActivityType};
    ///
    /// let mut sync = Activity::new(ActivityType::CudaSync, "Context Sync", 0, 1, 0, 10);
    /// sync.correlation = 42;
    /// assert_eq!(sync.external_id(), Some(42));
    /// sync.linked_correlation = Some(7);
    /// assert_eq!(sync.external_id(), Some(7));
    /// let mut kernel = Activity::new(ActivityType::ConcurrentKernel, "k", 0, 7, 0, 10);
    /// kernel.correlation = 42;
    /// assert_eq!(kernel.external_id(), None);
    /// ```
    #[inline]
    pub fn external_id(&self) -> Option<u64> {
        let own = self.kind.unlinked_external_id_is_own() && self.correlation != 0;
        self.linked_correlation
            .or(own.then_some(self.correlation))
            .filter(|&id| id != 0)
    }

    /// Read back, an activity whose `External id` names its own correlation id (the
    /// [`external_id`](Self::external_id) of an unlinked `cuda_sync`) is linked to no host
    /// op: the link is dropped. Readers call it once the args are read.
    #[inline]
    pub fn unlink_own_external_id(&mut self) {
        if self.kind.unlinked_external_id_is_own()
            && self.linked_correlation == Some(self.correlation)
        {
            self.linked_correlation = None;
        }
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
    fn the_table_holds_one_row_per_type_at_its_dense_index() {
        for (i, t) in ActivityType::ALL.into_iter().enumerate() {
            assert_eq!(t.index(), i, "{t:?}");
            assert_eq!(ActivityType::from_enumerator(t.enumerator()), Some(t));
            assert_eq!(ActivityType::parse(t.name()), Ok(t));
        }
        assert_eq!(
            ActivityType::ConcurrentKernel.enumerator(),
            "CONCURRENT_KERNEL"
        );
        assert_eq!(ActivityType::from_enumerator("concurrent_kernel"), None);
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
