//! Writers: every one reads the same [`Trace`](crate::Trace). [`save`](fn@save) writes a
//! file in the format its extension names: [`chrome`] JSON (`.json`, `.json.gz`) or
//! [`perfetto`] protobuf (`.pftrace`), through [`save::save_with`].

pub(crate) mod chrome;
mod format;
pub(crate) mod json;
pub(crate) mod lanes;
mod outcome;
pub(crate) mod perfetto;
pub(crate) mod save;

#[cfg(unix)]
pub use format::save_in;
pub use format::{save, save_as, save_perfetto_streamed, save_streamed, Format, UnknownFormat};
pub use outcome::{NeedsWholeTrace, WriteStats};
