//! The options `summary` and `diff` share for the rows they print (sort, grouping, format),
//! defined once and flattened into each command's arguments, and `--row-limit`'s type
//! (each command has its own default).

use omniprof_trace::SortKey;

/// How rows are sorted, grouped and printed.
#[derive(Debug, clap::Args)]
pub(crate) struct RowArgs {
    /// Sort rows by this column, largest first (`diff`: by its change): cpu_time_total,
    /// self_cpu_time_total, cpu_time, device_time_total, self_device_time_total, device_time,
    /// count, cpu_memory_usage, self_cpu_memory_usage, device_memory_usage,
    /// self_device_memory_usage (cuda / xpu / privateuse1 in place of device also work),
    /// flops. Default: `summary` keeps the order of first appearance, `diff` sorts by self
    /// CPU plus self device time.
    #[arg(long, value_name = "KEY")]
    pub(crate) sort_by: Option<SortKey>,
    /// Also group ops by their input shapes (`Input Dims`), adding an `Input Shapes` column.
    #[arg(long)]
    pub(crate) group_by_shapes: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub(crate) format: Format,
}

/// How the rows are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// A text table (for `summary`, PyTorch's).
    Table,
    Csv,
    Json,
}

/// `--row-limit`: at most this many rows (`None`: all).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowLimit(pub Option<usize>);

/// Reads `--row-limit`: a count, or -1 for no limit; other negative numbers are refused.
pub(crate) fn row_limit(text: &str) -> Result<RowLimit, String> {
    match text.parse::<i64>() {
        Ok(-1) => Ok(RowLimit(None)),
        Ok(n) => usize::try_from(n)
            .map(|n| RowLimit(Some(n)))
            .map_err(|_| "a row count, or -1 for all rows".to_owned()),
        Err(e) => Err(format!("not a number: {e}")),
    }
}
