//! Kineto `KEY=VALUE` configuration (placeholder until the parser lands).

/// A profiler configuration.
#[derive(Clone, Debug, Default)]
pub struct Config {}
