//! PyTorch's `key_averages()`: the summary of a trace's host ops and device work per key
//! (documented on [`KeyAverages`]), and the engine that makes it while the trace streams in.
//!
//! - [`summary`]: the summary and its rows; [`options`]: what a caller chooses.
//! - [`builder`]: takes a trace item by item, holds what the op trees need, and turns it
//!   into rows; [`fold`] folds host ops into their rows as they become final, so that the
//!   builder holds little; [`tree`] nests one thread's ops all at once when it holds them
//!   all; [`memory`] attributes memory records to host ops.
//! - [`types`]: what those hand each other; [`containers`]: the fold's general containers.
//! - [`event_listing`]: the events as the summary adds them to rows, for SQL tables;
//!   [`prof_events`]: every event with its PyTorch numbers, as `prof.events()` lists them.

mod builder;
mod containers;
mod event_listing;
mod fold;
mod memory;
mod options;
mod prof_events;
mod summary;
mod tree;
mod types;

pub use builder::{key_averages, KeyAveragesBuilder, ReadAgain};
pub use event_listing::SummedEvent;
pub use fold::OutOfOrder;
pub use options::{
    KeyAveragesOptions, SortKey, TableOptions, TimeUnit, UnknownSortKey, UnknownTimeUnit,
};
pub use prof_events::{
    average_events, event_rows, event_stacks, function_events, FunctionEvent, FunctionEvents,
    Kernel,
};
pub use summary::{KeyAverages, Row};

pub(crate) use options::MAX_NAME_WIDTH;
pub(crate) use summary::us;
