//! The formats a command prints its result in, and the one trait each printable result
//! implements for the formats it supports: [`Render`] (a text table and JSON) and
//! [`RenderCsv`] (CSV too). A command matches on its `--format` once, in
//! [`Format::render`] (or `ranks`' own format, which has no CSV); what each format looks
//! like is the analysis crate's, reached through its results' own methods.
//!
//! Here too are the impls for the analysis results that print without options; a result
//! printed with a command's options (the rows' sort and limit) is wrapped, with them, in
//! that command's module.

use omniprof_analysis::{CounterSummary, KernelMetrics, RanksReport, StepTimes};

/// A result printed as a text table or as JSON.
pub(crate) trait Render {
    /// The text `--format table` prints: a table, or a report of tables.
    fn table(&self) -> String;

    /// The JSON value `--format json` prints, without the newline that
    /// [`json_line`](Self::json_line) ends it with.
    fn json(&self) -> String;

    /// The JSON as printed: the value on a line of its own, so that the output ends its
    /// last line as the table and CSV do.
    fn json_line(&self) -> String {
        self.json() + "\n"
    }
}

/// A result printed as CSV too.
pub(crate) trait RenderCsv: Render {
    /// A header line, then one line per row.
    fn csv(&self) -> String;
}

/// `--format` of the commands that print rows (`summary`, `diff`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// A text table (for `summary`, PyTorch's).
    Table,
    Csv,
    Json,
}

impl Format {
    /// `result` in this format.
    pub(crate) fn render(self, result: &impl RenderCsv) -> String {
        match self {
            Self::Table => result.table(),
            Self::Csv => result.csv(),
            Self::Json => result.json_line(),
        }
    }
}

/// `summary --steps`.
impl Render for StepTimes {
    fn table(&self) -> String {
        StepTimes::table(self)
    }

    fn json(&self) -> String {
        StepTimes::json(self)
    }
}

impl RenderCsv for StepTimes {
    fn csv(&self) -> String {
        StepTimes::csv(self)
    }
}

/// `summary --metrics`.
impl Render for KernelMetrics {
    fn table(&self) -> String {
        KernelMetrics::table(self)
    }

    fn json(&self) -> String {
        KernelMetrics::json(self)
    }
}

impl RenderCsv for KernelMetrics {
    fn csv(&self) -> String {
        KernelMetrics::csv(self)
    }
}

/// `summary --counters`.
impl Render for CounterSummary {
    fn table(&self) -> String {
        CounterSummary::table(self)
    }

    fn json(&self) -> String {
        CounterSummary::json(self)
    }
}

impl RenderCsv for CounterSummary {
    fn csv(&self) -> String {
        CounterSummary::csv(self)
    }
}

/// `ranks`: a text report and JSON, no CSV.
impl Render for RanksReport {
    fn table(&self) -> String {
        self.text()
    }

    fn json(&self) -> String {
        RanksReport::json(self)
    }
}
