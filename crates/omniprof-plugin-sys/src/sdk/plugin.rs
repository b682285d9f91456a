//! What a plugin written with the SDK implements ([`PluginProfiler`], [`PluginSession`]), the
//! host's correlation callbacks ([`CorrelationListener`]), the plugin's error, and the status
//! codes the ABI's functions return.

use core::ffi::c_int;
use std::sync::Arc;

use super::trace::{HostTrace, TraceError};
use crate::abi::ProfileEventType;

/// Success.
pub const OK: c_int = 0;
/// The plugin's code reported an error (a [`PluginError`]).
pub const ERROR_FAILED: c_int = -1;
/// A pointer the ABI requires was NULL.
pub const ERROR_NULL_ARGUMENT: c_int = -2;
/// A struct from the host was smaller than the version this crate knows.
pub const ERROR_STRUCT_TOO_SMALL: c_int = -3;
/// The plugin panicked, now or in an earlier call on the same session.
pub const ERROR_PANICKED: c_int = -4;

/// A profiler a plugin provides: a long-lived factory of one session per trace.
///
/// One instance per type lives for the life of the process, created when the host calls
/// the entry point (with `Default`, or the expression given to
/// [`export_plugin!`](crate::export_plugin)).
pub trait PluginProfiler: Send + Sync + 'static {
    /// What [`create_session`](Self::create_session) makes.
    type Session: PluginSession;

    /// The profiler's name. The host's buffer takes 31 bytes: a longer name is cut at the
    /// last character boundary that fits, and at the first NUL.
    fn name(&self) -> &str;

    /// The event types the profiler can record. The host's array takes
    /// [`ProfileEventType::NUM_TYPES`] entries; any beyond what it takes are not reported.
    fn supported_activity_types(&self) -> &[ProfileEventType];

    /// A session for one trace, recording `enabled`: the requested types that the profiler
    /// supports, as the host sent them.
    fn create_session(&self, enabled: &[ProfileEventType]) -> Result<Self::Session, PluginError>;
}

/// One trace's worth of a profiler, called from the host's engine thread.
pub trait PluginSession: Send + 'static {
    /// The capture window opened.
    fn start(&mut self) -> Result<(), PluginError> {
        Ok(())
    }

    /// The capture window closed.
    fn stop(&mut self) -> Result<(), PluginError> {
        Ok(())
    }

    /// Hands the recorded events to the host's trace builder.
    fn process_events(&mut self, trace: &mut HostTrace<'_>) -> Result<(), PluginError>;

    /// Where correlation pushes and pops go, asked once right after the session is created;
    /// `None` (the default) ignores them.
    fn correlation_listener(&self) -> Option<Arc<dyn CorrelationListener>> {
        None
    }
}

/// Receives the host's correlation pushes and pops on application threads, concurrently;
/// calls for one thread come from that thread, properly nested.
pub trait CorrelationListener: Send + Sync {
    /// A host op with this correlation id began on the calling thread.
    fn push_correlation_id(&self, id: u64);
    /// The innermost host op of the calling thread ended.
    fn pop_correlation_id(&self);
    /// A user range with this correlation id began on the calling thread.
    fn push_user_correlation_id(&self, id: u64);
    /// The innermost user range of the calling thread ended.
    fn pop_user_correlation_id(&self);
}

/// What a plugin reports as having gone wrong. The host receives [`ERROR_FAILED`]; the
/// message goes to the plugin's logger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginError(String);

impl PluginError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PluginError {}

impl From<TraceError> for PluginError {
    fn from(error: TraceError) -> Self {
        Self(error.to_string())
    }
}
