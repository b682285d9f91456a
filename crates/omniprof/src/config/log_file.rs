//! Where the trace is written: `ACTIVITIES_LOG_FILE` as given, or Kineto's default.

/// Where the trace is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum LogFile {
    /// Kineto's default for the mode, which already names this process's pid.
    Default(String),
    /// `ACTIVITIES_LOG_FILE` as given; the writer inserts `_<pid>`.
    Given(String),
}

impl LogFile {
    pub(super) fn trace_default() -> Self {
        Self::Default(format!(
            "/tmp/libkineto_activities_{}.json",
            std::process::id()
        ))
    }

    pub(super) fn memory_snapshot_default() -> Self {
        Self::Default(format!(
            "/tmp/memory_snapshot_{}.pickle",
            std::process::id()
        ))
    }

    pub(super) fn path(&self) -> &str {
        match self {
            Self::Default(path) | Self::Given(path) => path,
        }
    }
}

/// Whether `path` starts with a URL scheme (`s3://...`), which selects the writer.
pub(super) fn has_scheme(path: &str) -> bool {
    path.split_once("://").is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}
