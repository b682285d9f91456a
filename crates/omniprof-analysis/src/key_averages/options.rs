//! What a caller of the summary chooses: how events group into rows
//! ([`KeyAveragesOptions`]), and which rows print and how ([`TableOptions`], [`SortKey`]).

use std::fmt;
use std::str::FromStr;

/// The widest a text table's name column gets by default (PyTorch's
/// `max_name_column_width`): the summary's, the diff's and the metrics' tables cut a longer
/// name there, ending it in `...`.
pub(crate) const MAX_NAME_WIDTH: usize = 55;

/// How events are grouped into rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyAveragesOptions {
    /// Also group by the ops' input shapes (`Input Dims`), as PyTorch's
    /// `key_averages(group_by_input_shape=True)`.
    pub group_by_input_shapes: bool,
    /// Also group by the ops' overload names (`Overload Name`, recorded with PyTorch's
    /// `_ExperimentalConfig(capture_overload_names=True)`), as PyTorch's
    /// `key_averages(group_by_overload_name=True)`: `aten::add.Tensor` and
    /// `aten::add.Scalar` become two rows, and the table gains an `Overload Name` column
    /// when some row has one.
    pub group_by_overload_name: bool,
    /// The device name for the device columns, overriding what the trace says.
    pub device_name: Option<String>,
    /// Print the memory columns even when the trace holds no memory record (PyTorch's
    /// `profile(profile_memory=True)` of a run that allocated nothing).
    pub profile_memory: bool,
    /// Print the FLOPs column whenever some row has FLOPs, even when no event carries a
    /// `flops` arg (PyTorch's `profile(with_flops=True)`), and count an op that carries none
    /// by PyTorch's formulas from its recorded inputs ([`estimated_flops`](crate::estimated_flops)):
    /// torch.profiler counts FLOPs but writes none into its trace.
    pub with_flops: bool,
    /// Also group by the first N entries of the events' Python stacks
    /// ([`PythonStacks`](crate::PythonStacks)), as PyTorch's `key_averages(group_by_stack_n=N)`; 0: not.
    /// Rows then carry [`Row::stack`](crate::Row::stack), and the table a `Source Location` column. Stacks need
    /// the whole trace ([`KeyAveragesBuilder::add_trace`](crate::KeyAveragesBuilder::add_trace)): a streamed activity
    /// ([`KeyAveragesBuilder::add_activity`](crate::KeyAveragesBuilder::add_activity)) has an empty one.
    pub group_by_stack_n: usize,
    /// Also make rows of `python_function` events (PyTorch's
    /// `key_averages(include_python_functions=True)`). They always take part in the op
    /// trees, as in PyTorch.
    pub include_python_functions: bool,
}

/// Which rows to print, and how: PyTorch's `table()` parameters, with its defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// `None` keeps the order of first events.
    pub sort_by: Option<SortKey>,
    /// At most this many rows; `None` for all. PyTorch's default is 100.
    pub row_limit: Option<usize>,
    /// The widest the `Name` column gets (names of this width less 3 or more are cut and
    /// end in `...`); `None` for no limit. PyTorch's default is 55.
    pub max_name_column_width: Option<usize>,
    /// The widest the `Input Shapes` column gets; `None` for no limit. Default 80.
    pub max_shapes_column_width: Option<usize>,
    /// The widest the `Source Location` column gets (default 75): a longer frame prints
    /// as `...` and its last width − 3 characters. `None` for no limit.
    pub max_src_column_width: Option<usize>,
    /// A line printed above the table, between two rules of `=` as wide as the table.
    pub header: Option<String>,
    /// Only the rows whose first event has no parent (PyTorch's `cpu_parent is None`);
    /// the table says so above its header.
    pub top_level_events_only: bool,
    /// Every time in one unit (PyTorch's `time_unit`); `None`: each in its own, by size.
    pub time_unit: Option<TimeUnit>,
}

impl Default for TableOptions {
    fn default() -> Self {
        Self {
            sort_by: None,
            row_limit: Some(100),
            max_name_column_width: Some(MAX_NAME_WIDTH),
            max_shapes_column_width: Some(80),
            max_src_column_width: Some(75),
            header: None,
            top_level_events_only: false,
            time_unit: None,
        }
    }
}

/// The unit a table prints every time in (PyTorch's `table(time_unit=...)`: `s`, `ms` or
/// `us`), with three decimals.
///
/// ```
/// use omniprof_analysis::TimeUnit;
///
/// let ms: TimeUnit = "ms".parse().unwrap();
/// assert_eq!(ms.format(65_250.634), "65.251ms");
/// assert_eq!("us".parse::<TimeUnit>().unwrap().format(2_500_000.0), "2500000.000us");
/// assert!("min".parse::<TimeUnit>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// `s`.
    Seconds,
    /// `ms`.
    Milliseconds,
    /// `us`.
    Microseconds,
}

impl TimeUnit {
    /// `time_us` (microseconds) in this unit, as PyTorch prints it.
    pub fn format(self, time_us: f64) -> String {
        match self {
            Self::Seconds => format!("{:.3}s", time_us / 1_000_000.0),
            Self::Milliseconds => format!("{:.3}ms", time_us / 1_000.0),
            Self::Microseconds => format!("{time_us:.3}us"),
        }
    }
}

impl FromStr for TimeUnit {
    type Err = UnknownTimeUnit;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "s" => Ok(Self::Seconds),
            "ms" => Ok(Self::Milliseconds),
            "us" => Ok(Self::Microseconds),
            _ => Err(UnknownTimeUnit(text.to_owned())),
        }
    }
}

/// A time unit that is not `s`, `ms` or `us`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownTimeUnit(pub String);

impl fmt::Display for UnknownTimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown time unit {:?} (s, ms or us)", self.0)
    }
}

impl std::error::Error for UnknownTimeUnit {}

/// A column to sort rows by, descending. Parsed from PyTorch's `sort_by` names, in which
/// `cuda`, `xpu` and `privateuse1` stand for `device` (`cuda_time_total`,
/// `self_xpu_memory_usage`).
///
/// ```
/// use omniprof_analysis::SortKey;
///
/// assert_eq!("self_cuda_time_total".parse(), Ok(SortKey::SelfDeviceTimeTotal));
/// assert_eq!("cpu_time".parse(), Ok(SortKey::CpuTime));
/// assert_eq!("cuda_memory_usage".parse(), Ok(SortKey::DeviceMemoryUsage));
/// assert_eq!("flops".parse(), Ok(SortKey::Flops));
/// assert!("memory".parse::<SortKey>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SortKey {
    /// CPU time per call.
    CpuTime,
    /// CPU time of the row's events.
    CpuTimeTotal,
    /// CPU time less the children's.
    SelfCpuTimeTotal,
    /// Device time per call.
    DeviceTime,
    /// Device time of the row's events.
    DeviceTimeTotal,
    /// Device time less the children's.
    SelfDeviceTimeTotal,
    /// Number of calls.
    Count,
    /// Bytes of CPU memory allocated during the row's events.
    CpuMemoryUsage,
    /// CPU memory less the children's.
    SelfCpuMemoryUsage,
    /// Bytes of device memory allocated during the row's events.
    DeviceMemoryUsage,
    /// Device memory less the children's.
    SelfDeviceMemoryUsage,
    /// The row's FLOPs.
    Flops,
}

impl SortKey {
    /// Every key.
    pub const ALL: [SortKey; 12] = [
        Self::CpuTime,
        Self::CpuTimeTotal,
        Self::SelfCpuTimeTotal,
        Self::DeviceTime,
        Self::DeviceTimeTotal,
        Self::SelfDeviceTimeTotal,
        Self::Count,
        Self::CpuMemoryUsage,
        Self::SelfCpuMemoryUsage,
        Self::DeviceMemoryUsage,
        Self::SelfDeviceMemoryUsage,
        Self::Flops,
    ];

    /// PyTorch's name (`self_cpu_time_total`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::CpuTime => "cpu_time",
            Self::CpuTimeTotal => "cpu_time_total",
            Self::SelfCpuTimeTotal => "self_cpu_time_total",
            Self::DeviceTime => "device_time",
            Self::DeviceTimeTotal => "device_time_total",
            Self::SelfDeviceTimeTotal => "self_device_time_total",
            Self::Count => "count",
            Self::CpuMemoryUsage => "cpu_memory_usage",
            Self::SelfCpuMemoryUsage => "self_cpu_memory_usage",
            Self::DeviceMemoryUsage => "device_memory_usage",
            Self::SelfDeviceMemoryUsage => "self_device_memory_usage",
            Self::Flops => "flops",
        }
    }
}

impl fmt::Display for SortKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `sort_by` name that is not a [`SortKey`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown sort key {0:?}; expected one of: cpu_time, cpu_time_total, self_cpu_time_total, device_time, device_time_total, self_device_time_total, count, cpu_memory_usage, self_cpu_memory_usage, device_memory_usage, self_device_memory_usage (cuda, xpu or privateuse1 in place of device), flops")]
pub struct UnknownSortKey(pub String);

impl FromStr for SortKey {
    type Err = UnknownSortKey;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s
            .replace("cuda", "device")
            .replace("xpu", "device")
            .replace("privateuse1", "device");
        Self::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| UnknownSortKey(s.to_string()))
    }
}
