//! `--format` of the commands that print rows (`summary`, `diff`): the one place a command's
//! format is matched, through the analysis crate's [`Render`], which every printable result
//! implements (the summaries there; a command's own compositions, such as `summary
//! --by-rank`, in its module).

use omniprof_analysis::{Render, RenderFormat};

/// `--format` of the commands that print rows (`summary`, `diff`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// A text table (for `summary`, PyTorch's).
    Table,
    Csv,
    Json,
}

impl Format {
    /// `result` in this format, printed with `options`; JSON on a line of its own, so that
    /// the output ends its last line as the table and CSV do.
    pub(crate) fn render<R: Render + ?Sized>(self, result: &R, options: &R::Options) -> String {
        let format = match self {
            Self::Table => RenderFormat::Table,
            Self::Csv => RenderFormat::Csv,
            Self::Json => RenderFormat::Json,
        };
        let mut text = result.render(format, options);
        if format == RenderFormat::Json {
            text.push('\n');
        }
        text
    }
}
