//! The session engine (placeholder).
pub struct Profiler;
pub struct ProfilerBuilder;
pub struct SessionError;
