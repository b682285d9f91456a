//! Dynamic `.so` plugins with Kineto's plugin C ABI, adapted to the backend trait;
//! documented on [`PluginError`].

mod adapter;
mod builder;
mod deadline;
mod error;
mod lend;
mod loader;
mod problem;
mod types;

pub use builder::HostTraceBuilder;
pub use error::PluginError;
pub use lend::late_plugin_calls;
pub(crate) use loader::load_env_once;
pub use loader::{
    env_plugin_rejections, load_entry_point, load_plugin, load_plugins_from_env, plugin_dirs,
    plugin_files, plugin_rejections, EntryPointProfiler, LoadedPlugin, RegisteredProfiler,
    DIR_VARIABLES,
};
pub use problem::{LastCall, Problem, ProblemKind};
