//! The options `summary` and `diff` share for the rows they print (sort, grouping, format,
//! row limit), defined once and flattened into each command's arguments. `--row-limit` is
//! declared once too, with each command's default as a parameter: `summary` prints 100 rows
//! as PyTorch's `table()` does, `diff` all of them.

use omniprof_analysis::SortKey;

use crate::render::Format;

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

/// `--row-limit`, whose default is `DEFAULT` rows (-1: all).
#[derive(Debug, clap::Args)]
pub(crate) struct RowLimitArgs<const DEFAULT: i64> {
    /// Print at most N rows; -1 for all (as PyTorch's `row_limit`). Default: 100 for
    /// `summary` (as PyTorch's `table()`), all rows for `diff`.
    // No clap default: a derived default is built once for every `DEFAULT` (clap keeps its
    // text in one static), so `get` applies the command's own.
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = row_limit
    )]
    row_limit: Option<RowLimit>,
}

impl<const DEFAULT: i64> RowLimitArgs<DEFAULT> {
    /// At most this many rows (`None`: all).
    pub(crate) fn get(&self) -> Option<usize> {
        self.row_limit.unwrap_or(RowLimit::of(DEFAULT)).0
    }
}

/// `--row-limit`'s value: at most this many rows (`None`: all).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowLimit(Option<usize>);

impl RowLimit {
    /// The limit a count written as on the command line means (-1, or any negative: all).
    const fn of(count: i64) -> Self {
        if count < 0 {
            Self(None)
        } else {
            Self(Some(count as usize))
        }
    }
}

/// Reads `--row-limit`: a count, or -1 for no limit; other negative numbers are refused.
fn row_limit(text: &str) -> Result<RowLimit, String> {
    match text.parse::<i64>() {
        Ok(-1) => Ok(RowLimit(None)),
        Ok(n) => usize::try_from(n)
            .map(|n| RowLimit(Some(n)))
            .map_err(|_| "a row count, or -1 for all rows".to_owned()),
        Err(e) => Err(format!("not a number: {e}")),
    }
}
