//! A background thread that pre-faults memory for the recording threads: the record chunks'
//! pool and the [spare blocks](super::spare_blocks) of the side tables ask it to top them up
//! when they run low, so a recording thread rarely pays the first touch of a fresh page. It
//! knows no pool: each hands it the function that tops it up. The pools' shared moves are
//! here too: take a spare (asking for a refill when few are left), top up, trim.

use std::sync::{Condvar, Mutex, OnceLock};

use crate::{lock, wait};

/// Takes a spare from `spares`, asking the refill thread to run `top_up` when fewer than
/// `low` are left; `None` when there was none (the caller then makes one itself).
pub(crate) fn take<T>(spares: &Mutex<Vec<T>>, low: usize, top_up: fn()) -> Option<T> {
    let (spare, left) = {
        let mut spares = lock(spares);
        (spares.pop(), spares.len())
    };
    if left < low {
        request(top_up);
    }
    spare
}

/// Adds spares made by `make` (pages faulted in) until `spares` holds `high`; made outside
/// the lock, so a recording thread taking one never waits for them.
pub(crate) fn fill<T>(spares: &Mutex<Vec<T>>, high: usize, mut make: impl FnMut() -> T) {
    let have = lock(spares).len();
    let fresh: Vec<T> = (have..high).map(|_| make()).collect();
    lock(spares).extend(fresh);
}

/// Frees spares past `high`: rings in bounded memory should not sit beside spares that an
/// earlier, larger session gave back.
pub(crate) fn trim<T>(spares: &Mutex<Vec<T>>, high: usize) {
    let extra = {
        let mut spares = lock(spares);
        let keep = spares.len().min(high);
        spares.split_off(keep)
    };
    drop(extra);
}

/// Wakes the refill thread (starting it the first time) to run `top_up` once more.
pub(crate) fn request(top_up: fn()) {
    let refiller = refiller();
    let mut wanted = lock(&refiller.wanted);
    if !wanted.iter().any(|&f| std::ptr::fn_addr_eq(f, top_up)) {
        wanted.push(top_up);
        refiller.wake.notify_one();
    }
}

struct Refiller {
    /// The top-ups asked for since the thread last took them.
    wanted: Mutex<Vec<fn()>>,
    wake: Condvar,
}

impl Refiller {
    fn run(&self) {
        loop {
            let top_ups = {
                let mut wanted = lock(&self.wanted);
                while wanted.is_empty() {
                    wanted = wait(&self.wake, wanted);
                }
                std::mem::take(&mut *wanted)
            };
            for top_up in top_ups {
                top_up();
            }
        }
    }
}

fn refiller() -> &'static Refiller {
    static REFILLER: OnceLock<&'static Refiller> = OnceLock::new();
    REFILLER.get_or_init(|| {
        let refiller: &'static Refiller = Box::leak(Box::new(Refiller {
            wanted: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }));
        let spawned = std::thread::Builder::new()
            .name("omniprof-refill".into())
            .spawn(|| refiller.run());
        if let Err(e) = spawned {
            log::warn!("omniprof: no buffer refill thread ({e}); recording threads fault pages in");
        }
        refiller
    })
}
