//! [`ParquetError`]: why a conversion to Parquet failed, naming the file concerned.

use std::path::{Path, PathBuf};

use omniprof_read::ReadError;

/// Why converting traces to Parquet tables failed.
#[derive(Debug, thiserror::Error)]
pub enum ParquetError {
    /// A trace could not be read (the reader's error names the file, offset and event).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A file or folder of the output could not be made or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The Parquet writer refused a file.
    #[error("{}: {source}", path.display())]
    Parquet {
        /// The file being written.
        path: PathBuf,
        /// What the writer said.
        source: parquet::errors::ParquetError,
    },
    /// A table's rows do not match its schema (a bug in this crate).
    #[error("schema: {0}")]
    Schema(String),
    /// The output directory already holds files.
    #[error("{}: not empty; omniprof writes its tables into a new or empty directory", .0.display())]
    OutputNotEmpty(PathBuf),
    /// The output directory is refused: another user's link in a sticky directory, or
    /// not a directory.
    #[error("cannot write tables into {}: {why}", path.display())]
    OutputRefused {
        /// The output directory as given.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// No input is a trace.
    #[error("no trace to convert among the inputs")]
    NoTrace,
}

impl ParquetError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ParquetError::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn parquet(path: &Path, source: parquet::errors::ParquetError) -> Self {
        ParquetError::Parquet {
            path: path.to_owned(),
            source,
        }
    }
}
