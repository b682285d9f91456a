//! Fork handlers: the registry, chunk pool and spare-block locks are held across a fork so
//! the child's copies are unlocked, and in the child the forking thread's buffer becomes the
//! child's (the [buffer's module docs](super) say why the parent's buffers are forgotten
//! there, and are the "module docs" cited below).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};

use super::chunk_pool::{Chunk, POOL};
use super::local::LOCAL;
use super::registry::{ThreadBuffer, REGISTRY};
use super::side_tables::SPARE_AUTOGRAD;
use crate::lock;
use crate::record::autograd::Autograd;
use crate::record::packed_args::SPARE_BLOCKS;

/// The tick at which this process was forked from its parent (0 in a process that was not):
/// the records of an inherited session older than it are the parent's (module docs).
pub(super) static FORK_TICK: AtomicU64 = AtomicU64::new(0);

/// The registry, chunk pool and spare-block locks, held by the forking thread across a fork
/// (taken in this order; no code holds a spare-block lock while it waits for another lock).
type ForkGuards = (
    MutexGuard<'static, Vec<Arc<ThreadBuffer>>>,
    MutexGuard<'static, Vec<Chunk>>,
    MutexGuard<'static, Vec<Vec<u64>>>,
    MutexGuard<'static, Vec<Vec<(u32, Autograd)>>>,
);

thread_local! {
    static FORK_GUARDS: RefCell<Option<ForkGuards>> = const { RefCell::new(None) };
}

/// Installs the fork handlers, once: before a fork they take the registry, pool and
/// spare-block locks (so no other thread holds them when the child is made; a fork waits for
/// a drain in progress), and release them after it in both processes. In the child they also
/// mark the forking thread's buffer as the child's and note the fork's tick (module docs).
pub(super) fn at_fork() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // SAFETY: the handlers are `extern "C"` functions without arguments that live for
        // the whole process; none unwinds.
        let rc =
            unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(in_child)) };
        if rc != 0 {
            log::warn!("omniprof: cannot install fork handlers (error {rc})");
        }
    });
}

extern "C" fn before_fork() {
    let guards = (
        lock(&REGISTRY),
        lock(&POOL),
        SPARE_BLOCKS.lock(),
        SPARE_AUTOGRAD.lock(),
    );
    let _ = FORK_GUARDS.try_with(|g| *g.borrow_mut() = Some(guards));
}

extern "C" fn after_fork() {
    let _ = FORK_GUARDS.try_with(|g| g.borrow_mut().take());
}

extern "C" fn in_child() {
    FORK_TICK.store(crate::clock::ticks(), Ordering::Relaxed);
    let _ = LOCAL.try_with(|l| {
        let buffer = l.buffer.get();
        if !buffer.is_null() {
            // SAFETY: the forking thread's own buffer, alive while it lives (module docs).
            unsafe { (*buffer).pid.store(std::process::id(), Ordering::Relaxed) };
        }
    });
    after_fork();
}
