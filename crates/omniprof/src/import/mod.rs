//! Readers that rebuild a [`Trace`](crate::Trace) from a file.
