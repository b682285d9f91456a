//! How the summaries print. The key averages as PyTorch's text [`table`], as [`csv`] and as
//! [`json`] (each adds its method to [`KeyAverages`](crate::KeyAverages)); the plain aligned
//! tables of the other summaries ([`grid`]); and [`Render`], which picks a summary's format
//! at run time.

pub(crate) mod csv;
mod format;
pub(crate) mod grid;
mod json;
pub(crate) mod table;

pub use format::{Render, RenderFormat};
