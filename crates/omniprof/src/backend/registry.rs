//! The process-wide backend registry, with the semantics of PyTorch's PrivateUse1 profiler
//! registry (`docs/lifecycle.md`, section 9): registering the same key again warns and
//! overwrites; a factory registered before the engine initializes is forwarded at init, one
//! registered after is forwarded at once; forwarding is one-shot per key, so a replacement
//! factory never reaches an engine that already has the first.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::interface::ActivityProfiler;
use crate::lock;

/// Makes a backend. Called once, when the engine takes the backend in.
pub type ProfilerFactory = Box<dyn Fn() -> Box<dyn ActivityProfiler> + Send + Sync>;

struct Entry {
    key: String,
    factory: Arc<ProfilerFactory>,
    forwarded: bool,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    initialized: bool,
    profilers: Vec<Arc<dyn ActivityProfiler>>,
}

/// The registry. There is one per process ([`Registry::global`]); the free functions of
/// [`crate::backend`] use it.
pub(super) struct Registry {
    state: Mutex<State>,
}

impl Registry {
    /// The process-wide instance.
    pub(super) fn global() -> &'static Registry {
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(|| Registry {
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Stores `factory` under `key`; forwards it at once when the engine is initialized.
    pub(super) fn register(&self, key: &str, factory: ProfilerFactory) {
        let forward = {
            let mut state = self.lock();
            let initialized = state.initialized;
            let factory = Arc::new(factory);
            match state.entries.iter_mut().find(|e| e.key == key) {
                Some(entry) => {
                    log::warn!("omniprof: profiler factory {key} already registered, overwriting");
                    entry.factory = factory;
                    if entry.forwarded {
                        log::warn!(
                            "omniprof: {key} was already handed to the engine; the replacement \
                             takes effect in a new process"
                        );
                    }
                    (initialized && !entry.forwarded).then(|| entry.factory.clone())
                }
                None => {
                    state.entries.push(Entry {
                        key: key.to_owned(),
                        factory: factory.clone(),
                        forwarded: false,
                    });
                    initialized.then_some(factory)
                }
            }
        };
        if let Some(factory) = forward {
            self.forward(key, &factory);
        }
    }

    /// Marks the engine initialized and forwards every factory not yet forwarded.
    pub(super) fn init_engine(&self) {
        let pending: Vec<(String, Arc<ProfilerFactory>)> = {
            let mut state = self.lock();
            state.initialized = true;
            state
                .entries
                .iter()
                .filter(|e| !e.forwarded)
                .map(|e| (e.key.clone(), e.factory.clone()))
                .collect()
        };
        for (key, factory) in pending {
            self.forward(&key, &factory);
        }
    }

    /// Instantiates the backend outside the lock (a factory may itself register), once.
    fn forward(&self, key: &str, factory: &ProfilerFactory) {
        let made = catch_unwind(AssertUnwindSafe(factory));
        let mut state = self.lock();
        let Some(entry) = state.entries.iter_mut().find(|e| e.key == key) else {
            return;
        };
        if entry.forwarded {
            return;
        }
        entry.forwarded = true;
        match made {
            Ok(profiler) => state.profilers.push(Arc::from(profiler)),
            Err(_) => log::warn!("omniprof: the factory of {key} panicked; it takes no part"),
        }
    }

    /// True when a factory is stored under `key`.
    pub(super) fn has_factory(&self, key: &str) -> bool {
        self.lock().entries.iter().any(|e| e.key == key)
    }

    /// True when the factory under `key` has been handed to the engine.
    pub(super) fn is_registered_with_engine(&self, key: &str) -> bool {
        self.lock()
            .entries
            .iter()
            .any(|e| e.key == key && e.forwarded)
    }

    /// The backends the engine has taken in, in the order they arrived.
    pub(super) fn profilers(&self) -> Vec<Arc<dyn ActivityProfiler>> {
        self.lock().profilers.clone()
    }
}

/// Registers a backend factory under `key` (the [`register_profiler!`](crate::register_profiler)
/// macro uses the type name).
pub fn register_profiler_factory(key: &str, factory: ProfilerFactory) {
    Registry::global().register(key, factory);
}

/// Initializes the engine side of the registry (the session engine calls it at prepare).
pub fn init_engine() {
    Registry::global().init_engine();
}

/// Whether a factory is registered under `key`.
pub fn has_factory(key: &str) -> bool {
    Registry::global().has_factory(key)
}

/// Whether the engine has taken in the backend registered under `key`.
pub fn is_registered_with_engine(key: &str) -> bool {
    Registry::global().is_registered_with_engine(key)
}

/// The backends the engine has taken in.
pub fn registered_profilers() -> Vec<Arc<dyn ActivityProfiler>> {
    Registry::global().profilers()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{BackendError, ProfilerSession};
    use crate::config::Config;
    use crate::{ActivitySet, ActivityType};

    struct Mock(&'static str);

    impl ActivityProfiler for Mock {
        fn name(&self) -> &str {
            self.0
        }
        fn available_activities(&self) -> ActivitySet {
            [ActivityType::CpuOp].into_iter().collect()
        }
        fn configure(
            &self,
            _: ActivitySet,
            _: &Config,
        ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
            Ok(None)
        }
    }

    fn fresh() -> Registry {
        Registry {
            state: Mutex::new(State::default()),
        }
    }

    #[test]
    fn registry_is_a_singleton() {
        assert!(std::ptr::eq(Registry::global(), Registry::global()));
    }

    #[test]
    fn register_factory() {
        let r = fresh();
        r.register("mock", Box::new(|| Box::new(Mock("mock"))));
        assert!(r.has_factory("mock"));
        assert!(!r.is_registered_with_engine("mock"));
        assert!(r.profilers().is_empty());
    }

    #[test]
    fn forwarded_at_engine_init() {
        let r = fresh();
        r.register("mock", Box::new(|| Box::new(Mock("mock"))));
        r.init_engine();
        assert!(r.has_factory("mock") && r.is_registered_with_engine("mock"));
        assert_eq!(r.profilers().len(), 1);
    }

    #[test]
    fn registered_after_init_is_forwarded_at_once_and_only_once() {
        let r = fresh();
        r.init_engine();
        r.register("late", Box::new(|| Box::new(Mock("first"))));
        assert!(r.is_registered_with_engine("late"));
        r.register("late", Box::new(|| Box::new(Mock("second"))));
        r.init_engine();
        let names: Vec<String> = r.profilers().iter().map(|p| p.name().to_owned()).collect();
        assert_eq!(names, ["first"]);
    }

    #[test]
    fn a_panicking_factory_is_skipped() {
        let r = fresh();
        r.register("bad", Box::new(|| panic!("factory failed")));
        r.register("good", Box::new(|| Box::new(Mock("good"))));
        r.init_engine();
        assert!(r.is_registered_with_engine("bad"));
        assert_eq!(r.profilers().len(), 1);
    }
}
