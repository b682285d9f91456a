//! The tables and their columns, defined once: the writer builds each file's Parquet schema
//! from them, and a test checks that `docs/parquet.md` documents each column with this name,
//! type and unit.

/// The schema's version, written in every file's key-value metadata under
/// [`SCHEMA_VERSION_KEY`]. Raised when a column is removed, renamed or changes meaning;
/// adding a column or a table keeps it.
pub const SCHEMA_VERSION: u32 = 1;

/// The key-value metadata key that holds [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_KEY: &str = "omniprof.schema_version";

/// The Hive partition column every table is split by (`<table>/rank=<N>/`).
pub(crate) const RANK_PARTITION: &str = "rank";

/// A column's type, as Parquet stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// `INT64`, never null.
    Int64,
    /// `INT64`, null where the value does not apply.
    NullableInt64,
    /// `DOUBLE`.
    Float64,
    /// `BOOLEAN`.
    Bool,
    /// `BYTE_ARRAY` annotated `STRING` (UTF-8), dictionary-encoded, never null.
    String,
    /// A nullable `STRING`.
    NullableString,
}

impl ColumnType {
    /// Whether a value may be null.
    pub const fn nullable(self) -> bool {
        matches!(self, ColumnType::NullableInt64 | ColumnType::NullableString)
    }

    /// How `docs/parquet.md` names the type.
    pub fn doc_name(self) -> &'static str {
        match self {
            ColumnType::Int64 => "INT64",
            ColumnType::NullableInt64 => "INT64 null",
            ColumnType::Float64 => "DOUBLE",
            ColumnType::Bool => "BOOLEAN",
            ColumnType::String => "STRING",
            ColumnType::NullableString => "STRING null",
        }
    }
}

/// One column of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    /// Its name in the files and in SQL.
    pub name: &'static str,
    /// Its Parquet type.
    pub ty: ColumnType,
    /// Its unit (`ns`, `ns since the Unix epoch`), or `-`.
    pub unit: &'static str,
}

/// One table: a folder of per-rank files with these columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    /// Its folder under the output directory, and its name in SQL.
    pub name: &'static str,
    /// Its columns, in file order.
    pub columns: &'static [Column],
}

const fn col(name: &'static str, ty: ColumnType, unit: &'static str) -> Column {
    Column { name, ty, unit }
}

use ColumnType::{Bool, Float64, Int64, NullableInt64, NullableString, String};

const EPOCH_NS: &str = "ns since the Unix epoch";

/// The unit of a duration column.
pub(crate) const DURATION_NS: &str = "ns";

/// Activities with a duration (every activity but `cpu_instant_event`s), in input order.
pub(crate) const SLICES: Table = Table {
    name: "slices",
    columns: &[
        col("slice_id", Int64, "-"),
        col("name", String, "-"),
        col("category", String, "-"),
        col("pid", Int64, "-"),
        col("tid", Int64, "-"),
        col("start_ns", Int64, EPOCH_NS),
        col("dur_ns", Int64, DURATION_NS),
        col("correlation", Int64, "-"),
        col("linked_correlation", NullableInt64, "-"),
        col("op_id", NullableInt64, "-"),
    ],
};

/// `cpu_instant_event` activities (PyTorch's `i` events: memory records, markers).
pub(crate) const INSTANTS: Table = Table {
    name: "instants",
    columns: &[
        col("instant_id", Int64, "-"),
        col("name", String, "-"),
        col("category", String, "-"),
        col("pid", Int64, "-"),
        col("tid", Int64, "-"),
        col("ts_ns", Int64, EPOCH_NS),
        col("op_id", NullableInt64, "-"),
    ],
};

/// Counter samples, one row per value.
pub(crate) const COUNTERS: Table = Table {
    name: "counters",
    columns: &[
        col("name", String, "-"),
        col("category", String, "-"),
        col("pid", Int64, "-"),
        col("tid", Int64, "-"),
        col("series", String, "-"),
        col("ts_ns", Int64, EPOCH_NS),
        col("value", Float64, "the series' own"),
    ],
};

/// Flow ends (`s` / `f` events), each on the slice it leaves or enters.
pub(crate) const FLOWS: Table = Table {
    name: "flows",
    columns: &[
        col("flow_id", Int64, "-"),
        col("kind", String, "-"),
        col("is_start", Bool, "-"),
        col("slice_id", NullableInt64, "-"),
        col("instant_id", NullableInt64, "-"),
        col("pid", Int64, "-"),
        col("tid", Int64, "-"),
        col("ts_ns", Int64, EPOCH_NS),
    ],
};

/// The events the summary counts, with its self and total times.
pub(crate) const OPS: Table = Table {
    name: "ops",
    columns: &[
        col("op_id", Int64, "-"),
        col("parent_op_id", NullableInt64, "-"),
        col("name", String, "-"),
        col("on_device", Bool, "-"),
        col("user_annotation", Bool, "-"),
        col("legacy", Bool, "-"),
        col("python_function", Bool, "-"),
        col("is_async", Bool, "-"),
        col("self_host_ns", Int64, DURATION_NS),
        col("host_total_ns", Int64, DURATION_NS),
        col("self_device_ns", Int64, DURATION_NS),
        col("device_total_ns", Int64, DURATION_NS),
        // Added after the first release of version 1: new columns go last, so that readers
        // that take columns by position keep theirs.
        col("depth", NullableInt64, "-"),
        col("host_op_id", NullableInt64, "-"),
    ],
};

/// The trace's header: every top-level value but `traceEvents`, one row per key.
pub(crate) const METADATA: Table = Table {
    name: "metadata",
    columns: &[
        col("source", String, "-"),
        col("key", String, "-"),
        col("value", String, "JSON"),
    ],
};

/// `deviceProperties`, one row per device.
pub(crate) const DEVICE_PROPERTIES: Table = Table {
    name: "device_properties",
    columns: &[
        col("device_index", Int64, "-"),
        col("id", NullableInt64, "-"),
        col("name", NullableString, "-"),
        col("properties", String, "JSON"),
    ],
};

/// Every table, in the order the writer opens them.
pub const TABLES: [Table; 7] = [
    SLICES,
    INSTANTS,
    COUNTERS,
    FLOWS,
    OPS,
    METADATA,
    DEVICE_PROPERTIES,
];
