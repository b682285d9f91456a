//! The legacy profiler stubs, adapted to the backend trait; documented on [`ProfilerStubs`].

mod adapter;
mod interface;
mod registry;

pub use adapter::timing_session;
pub(crate) use adapter::StubsProfiler;
pub use interface::{ProfilerStubs, RecordOut, StubError, StubEvent};
pub use registry::{register_stubs, registered_stubs};

/// Registers a [`ProfilerStubs`] type (with `Default`, or a constructor expression) for a
/// device name before `main` runs.
#[macro_export]
macro_rules! register_stubs {
    ($device:expr, $ty:ty) => {
        $crate::register_stubs!($device, $ty, <$ty as ::core::default::Default>::default());
    };
    ($device:expr, $ty:ty, $make:expr) => {
        $crate::run_at_load!({
            let stubs: $ty = $make;
            $crate::backends::register_stubs($device, ::std::sync::Arc::new(stubs));
        });
    };
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Stubs that do nothing, enabled or not.
    struct Idle {
        enabled: bool,
    }

    impl ProfilerStubs for Idle {
        fn record(&self, _: RecordOut<'_>) -> Result<(), StubError> {
            Ok(())
        }
        fn elapsed(&self, _: &StubEvent, _: &StubEvent) -> Result<f32, StubError> {
            Ok(0.0)
        }
        fn mark(&self, _: &str) {}
        fn range_push(&self, _: &str) {}
        fn range_pop(&self) {}
        fn enabled(&self) -> bool {
            self.enabled
        }
        fn on_each_device(&self, _: &mut dyn FnMut(i32)) {}
        fn synchronize(&self) -> Result<(), StubError> {
            Ok(())
        }
    }

    #[test]
    fn the_last_registration_wins() {
        register_stubs("Twice", Arc::new(Idle { enabled: false }));
        assert!(
            registered_stubs("Twice").is_err(),
            "a disabled backend is not enabled"
        );
        register_stubs("twice", Arc::new(Idle { enabled: true }));
        assert!(registered_stubs("TWICE").is_ok());
    }
}
