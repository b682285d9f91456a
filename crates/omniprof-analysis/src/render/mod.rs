//! How the summaries print. The key averages as PyTorch's text [`table`], as [`csv`] and as
//! [`json`] (each adds its method to [`KeyAverages`](crate::KeyAverages)); the plain aligned
//! tables of the other summaries ([`grid`]); [`Render`], which picks a summary's format at
//! run time; and [`visible()`], which shows a name's control characters in the text tables.

pub(crate) mod csv;
mod format;
pub(crate) mod grid;
mod json;
pub(crate) mod table;
mod visible;

pub use format::{Render, RenderFormat};
pub use table::format_time;
pub use visible::visible;
