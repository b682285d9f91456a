//! Writers: every one reads the same [`Trace`](crate::Trace).

pub mod chrome;
pub mod json;
pub mod save;
