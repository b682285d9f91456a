//! The perf events `PERF_EVENTS` may name, apart from the backend that counts them
//! ([`crate::perf`]), so that the configuration checks names without depending on the
//! backend, and the backend reads its configuration without the configuration depending on
//! it.

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;

/// The events `PERF_EVENTS` accepts: (name, perf type, perf config), with perf's own names.
const EVENTS: [(&str, u32, u64); 14] = [
    ("cycles", PERF_TYPE_HARDWARE, 0),
    ("instructions", PERF_TYPE_HARDWARE, 1),
    ("cache-references", PERF_TYPE_HARDWARE, 2),
    ("cache-misses", PERF_TYPE_HARDWARE, 3),
    ("branch-instructions", PERF_TYPE_HARDWARE, 4),
    ("branch-misses", PERF_TYPE_HARDWARE, 5),
    ("bus-cycles", PERF_TYPE_HARDWARE, 6),
    ("cpu-clock", PERF_TYPE_SOFTWARE, 0),
    ("task-clock", PERF_TYPE_SOFTWARE, 1),
    ("page-faults", PERF_TYPE_SOFTWARE, 2),
    ("context-switches", PERF_TYPE_SOFTWARE, 3),
    ("cpu-migrations", PERF_TYPE_SOFTWARE, 4),
    ("minor-faults", PERF_TYPE_SOFTWARE, 5),
    ("major-faults", PERF_TYPE_SOFTWARE, 6),
];

/// Every name `PERF_EVENTS` accepts.
pub(crate) const PERF_EVENT_NAMES: [&str; 14] = {
    let mut names = [""; 14];
    let mut i = 0;
    while i < EVENTS.len() {
        names[i] = EVENTS[i].0;
        i += 1;
    }
    names
};

/// A perf event: its name and what `perf_event_open` is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerfEvent {
    /// Its name, as perf names it.
    pub name: &'static str,
    kind: u32,
    config: u64,
}

impl PerfEvent {
    /// `perf_event_attr.type`.
    pub(crate) fn kind(&self) -> u32 {
        self.kind
    }

    /// `perf_event_attr.config`.
    pub(crate) fn config(&self) -> u64 {
        self.config
    }

    /// True for events the CPU's PMU counts (absent in most VMs and containers).
    pub fn is_hardware(&self) -> bool {
        self.kind == PERF_TYPE_HARDWARE
    }
}

/// The event called `name`, if omniprof knows it.
pub(crate) fn perf_event_by_name(name: &str) -> Option<PerfEvent> {
    EVENTS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(name, kind, config)| PerfEvent { name, kind, config })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_perfs() {
        assert!(perf_event_by_name("cycles").unwrap().is_hardware());
        assert!(!perf_event_by_name("task-clock").unwrap().is_hardware());
        assert!(perf_event_by_name("cycels").is_none());
        assert_eq!(PERF_EVENT_NAMES.len(), EVENTS.len());
        assert!(PERF_EVENT_NAMES.contains(&"context-switches"));
    }
}
