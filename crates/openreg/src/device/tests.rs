//! The device registry's tests, in a file of their own: they share the crate's test support
//! ([`test_support`](crate::test_support)), which initializes the runtime through
//! [`device`](super), so keeping them inside device.rs would make the two files import each
//! other.

use super::*;
use crate::test_support::{shared, Task};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[test]
fn current_device_is_per_thread_and_starts_at_zero() {
    let _guard = shared();
    assert_eq!(device_count(), 2);
    std::thread::spawn(|| {
        assert_eq!(current_device(), 0);
        set_device(1).unwrap();
        assert_eq!(current_device(), 1);
    })
    .join()
    .unwrap();
    assert_eq!(current_device(), 0);
}

#[test]
fn bad_device_ids_are_errors() {
    let _guard = shared();
    let invalid = |r: Result<()>| {
        matches!(
            r,
            Err(OrError::InvalidDevice {
                device: 2,
                count: 2
            })
        )
    };
    assert!(invalid(set_device(2)));
    assert!(invalid(device_properties(2).map(drop)));
    assert!(invalid(device_memory_used(2).map(drop)));
    assert_eq!(current_device(), 0, "a failed set_device changes nothing");
}

#[test]
fn init_is_idempotent_and_rejects_other_options() {
    let _guard = shared();
    init(Options::default()).unwrap();
    let other = Options {
        devices: 3,
        ..Options::default()
    };
    assert!(
        matches!(init(other), Err(OrError::AlreadyInitialized { active }) if active == Options::default())
    );
    let no_default_stream = Options {
        streams_per_device: 0,
        ..Options::default()
    };
    assert!(matches!(
        init(no_default_stream),
        Err(OrError::InvalidOptions(_))
    ));
    let huge_pool = Options {
        streams_per_device: usize::MAX,
        ..Options::default()
    };
    assert!(matches!(init(huge_pool), Err(OrError::InvalidOptions(_))));
}

#[test]
fn device_synchronize_waits_for_every_stream_of_the_device() {
    let _guard = shared();
    set_device(1).unwrap();
    let device = runtime().device(1).unwrap();
    let streams = [device.new_stream().unwrap(), device.new_stream().unwrap()];
    let done: Arc<[AtomicBool; 2]> = Arc::default();
    for (i, stream) in streams.iter().enumerate() {
        let done = Arc::clone(&done);
        stream.submit(
            Task::new(move || {
                std::thread::sleep(Duration::from_millis(2));
                done[i].store(true, Ordering::Relaxed);
            }),
            None,
        );
    }
    device_synchronize().unwrap();
    assert!(done.iter().all(|d| d.load(Ordering::Relaxed)));
}
