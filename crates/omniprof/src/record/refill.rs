//! A background thread that pre-faults memory for the recording threads: the record chunks'
//! pool and the spare blocks of packed args ask it to top them up when they run low, so a
//! recording thread rarely pays the first touch of a fresh page. It knows neither pool: each
//! hands it the function that tops it up.

use std::sync::{Condvar, Mutex, OnceLock};

use crate::{lock, wait};

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
