//! [`Render`]: the one shape the summaries' renderers share. Each summary prints as a text
//! table, CSV or JSON through methods of its own (`table`, `csv`, `json`); this trait picks
//! among them by a [`RenderFormat`] known only at run time, as `omniprof summary --format`
//! does, so that a caller writes that choice once for every summary.

use crate::{CounterSummary, KernelMetrics, KeyAverages, StepTimes, TableOptions, TraceDiff};

/// A format a summary prints in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RenderFormat {
    /// An aligned text table (for the key averages, PyTorch's `table()`).
    Table,
    /// CSV (RFC 4180): a header line, then one line per row.
    Csv,
    /// One JSON object, without a final line break.
    Json,
}

/// A summary that prints as a text table, CSV or JSON: [`KeyAverages`] (given
/// [`TableOptions`]), [`TraceDiff`] (given a row limit), and [`StepTimes`],
/// [`KernelMetrics`] and [`CounterSummary`] (given nothing). The text is that of the
/// summary's own `table`, `csv` or `json` method.
///
/// ```
/// use omniprof_analysis::{key_averages, KeyAveragesOptions, Render, RenderFormat, TableOptions};
/// use omniprof_trace::{Activity, ActivityType, Trace};
///
/// let mut trace = Trace::new(0, 1_000_000);
/// trace.activities.push(Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, 700_000));
/// let summary = key_averages(&trace, &KeyAveragesOptions::default());
/// let options = TableOptions::default();
/// assert_eq!(summary.render(RenderFormat::Csv, &options), summary.csv(&options));
/// assert_eq!(summary.render(RenderFormat::Table, &options), summary.table(&options));
/// ```
pub trait Render {
    /// What printing takes besides the summary.
    type Options: ?Sized;

    /// The summary as `format` prints it.
    fn render(&self, format: RenderFormat, options: &Self::Options) -> String;
}

impl Render for KeyAverages {
    type Options = TableOptions;

    fn render(&self, format: RenderFormat, options: &TableOptions) -> String {
        match format {
            RenderFormat::Table => self.table(options),
            RenderFormat::Csv => self.csv(options),
            RenderFormat::Json => self.json(options),
        }
    }
}

impl Render for TraceDiff {
    /// At most this many rows; `None` for all.
    type Options = Option<usize>;

    fn render(&self, format: RenderFormat, row_limit: &Option<usize>) -> String {
        match format {
            RenderFormat::Table => self.table(*row_limit),
            RenderFormat::Csv => self.csv(*row_limit),
            RenderFormat::Json => self.json(*row_limit),
        }
    }
}

/// The summaries that print without options.
macro_rules! render_without_options {
    ($($summary:ty),*) => {$(
        impl Render for $summary {
            type Options = ();

            fn render(&self, format: RenderFormat, _: &()) -> String {
                match format {
                    RenderFormat::Table => self.table(),
                    RenderFormat::Csv => self.csv(),
                    RenderFormat::Json => self.json(),
                }
            }
        }
    )*};
}

render_without_options!(StepTimes, KernelMetrics, CounterSummary);
