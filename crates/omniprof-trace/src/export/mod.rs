//! Writers: every one reads the same [`Trace`](crate::Trace). [`save`] writes a file in the
//! format its extension names: [`chrome`] JSON (`.json`, `.json.gz`) or [`perfetto`]
//! protobuf (`.pftrace`).

pub mod chrome;
pub mod json;
pub(crate) mod lanes;
pub mod perfetto;
mod save;

pub use save::{save, Format, UnknownFormat, WriteError, WriteStats};
