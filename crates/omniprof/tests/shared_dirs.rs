//! The shared save path in a shared directory (issue 25, items 1 and 3): another user's link
//! in a sticky world-writable directory is never followed (as the kernel's
//! `fs.protected_symlinks` would refuse), and a replaced file of another user does not pass
//! its mode on. Another user is a second uid, which needs root (see
//! `crates/test-support/src/shared_dirs.rs`); elsewhere these tests skip, saying why.

#![cfg(unix)]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use omniprof::trace::{Activity, ActivityType, Trace};
use omniprof_test_support::shared_dirs::{give_to, make_sticky, other_owner};

fn trace() -> Trace {
    let mut trace = Trace::new(1_000_000, 2_000_000);
    trace.activities.push(Activity::new(
        ActivityType::CpuOp,
        "aten::mm",
        1,
        1,
        1_100_000,
        1_500_000,
    ));
    trace
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn another_users_link_in_a_sticky_world_writable_directory_is_refused_naming_it() {
    let Some(other) = other_owner("another user's link in a sticky directory") else {
        return;
    };
    let shared = tempfile::tempdir().unwrap();
    make_sticky(shared.path());
    let private = tempfile::tempdir().unwrap();
    let victim = private.path().join("secret.json");
    fs::write(&victim, "root's own").unwrap();
    let link = shared.path().join("x.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    give_to(&link, other);

    let err = omniprof::trace::save(&trace(), &link).unwrap_err();

    assert_eq!(err.stage, "refused");
    assert_eq!(
        err.to_string(),
        format!(
            "cannot write trace to {link}: refused: {link} is a symbolic link of uid {other} in \
             the sticky world-writable directory {dir} (owned by uid 0), and this process runs \
             as uid 0: it is not followed, as the kernel's fs.protected_symlinks would refuse; \
             remove it or save elsewhere",
            link = link.display(),
            dir = shared.path().display(),
        )
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root's own");
    assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
}

#[test]
fn a_link_of_ones_own_or_of_the_directorys_owner_in_a_sticky_directory_is_followed() {
    let shared = tempfile::tempdir().unwrap();
    make_sticky(shared.path());
    let target = shared.path().join("real.json");
    let link = shared.path().join("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();

    omniprof::trace::save(&trace(), &link).unwrap();

    assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(fs::read_to_string(&target).unwrap().contains("aten::mm"));
}

#[test]
fn a_replaced_file_of_another_user_gets_the_default_mode_not_its_own() {
    let Some(other) = other_owner("replacing another user's file") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.json");
    omniprof::trace::save(&trace(), &fresh).unwrap();
    let planted = dir.path().join("planted.json");
    fs::write(&planted, "theirs").unwrap();
    // World-writable and executable: no default mode (0666 less the umask) is this.
    fs::set_permissions(&planted, fs::Permissions::from_mode(0o777)).unwrap();
    give_to(&planted, other);

    omniprof::trace::save(&trace(), &planted).unwrap();

    assert_eq!(mode(&planted), mode(&fresh));
    assert_eq!(fs::metadata(&planted).unwrap().uid(), 0);
    assert!(fs::read_to_string(&planted).unwrap().contains("aten::mm"));
}

#[test]
fn a_replaced_file_of_ones_own_keeps_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.json");
    fs::write(&path, "old").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();

    omniprof::trace::save(&trace(), &path).unwrap();

    assert_eq!(mode(&path), 0o640);
}
