//! Saving a trace can neither corrupt nor clobber: concurrent saves to one path leave one
//! complete trace, a save never follows or replaces a name it did not create, a link is
//! written through, a FIFO or device is written in place, and anything else is refused.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use omniprof_read::TraceReader;
use omniprof_trace::save_with;
use omniprof_trace::{Activity, ActivityType, Trace};

/// A trace of `ops` host ops, so that traces of different sizes tell apart which one a file
/// holds.
fn trace_of(ops: i64) -> Trace {
    let mut trace = Trace::new(1_000_000, 1_000_000 + 10 * ops + 10);
    for i in 0..ops {
        let start = 1_000_000 + 10 * i;
        trace.activities.push(Activity::new(
            ActivityType::CpuOp,
            format!("op {i}"),
            1,
            1,
            start,
            start + 5,
        ));
    }
    trace
}

fn ops_in(path: &Path) -> usize {
    TraceReader::new()
        .read_path(path)
        .into_trace()
        .unwrap_or_else(|e| panic!("{} is not one complete trace: {e}", path.display()))
        .activities
        .len()
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn three_concurrent_saves_to_one_path_leave_one_complete_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.pt.trace.json");
    let traces = [trace_of(20_000), trace_of(30_000), trace_of(40_000)];
    for round in 0..10 {
        std::thread::scope(|scope| {
            let saves: Vec<_> = traces
                .iter()
                .map(|t| scope.spawn(|| omniprof_trace::save(t, &path)))
                .collect();
            for save in saves {
                let result = save.join().unwrap();
                assert!(result.is_ok(), "round {round}: {}", result.unwrap_err());
            }
        });
        let ops = ops_in(&path);
        assert!(
            [20_000, 30_000, 40_000].contains(&ops),
            "round {round}: {ops}"
        );
        assert_eq!(
            listing(dir.path()),
            ["shared.pt.trace.json"],
            "round {round}"
        );
    }
}

#[test]
fn a_symlink_or_a_user_file_at_the_old_temporary_name_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    fs::write(&victim, "precious").unwrap();
    let linked = dir.path().join("t.json");
    std::os::unix::fs::symlink(&victim, dir.path().join("t.json.tmp")).unwrap();
    let user = dir.path().join("u.json");
    fs::write(dir.path().join("u.json.tmp"), "the user's own file").unwrap();

    omniprof_trace::save(&trace_of(3), &linked).unwrap();
    omniprof_trace::save(&trace_of(4), &user).unwrap();

    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    let link = dir.path().join("t.json.tmp");
    assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(fs::read_link(&link).unwrap(), victim);
    assert_eq!(
        fs::read_to_string(dir.path().join("u.json.tmp")).unwrap(),
        "the user's own file"
    );
    assert_eq!((ops_in(&linked), ops_in(&user)), (3, 4));
}

#[test]
fn a_symlink_at_the_path_is_written_through_and_stays() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.json");
    fs::write(&real, "old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    let dangling = dir.path().join("dangling.json");
    std::os::unix::fs::symlink("made.json", &dangling).unwrap();

    omniprof_trace::save(&trace_of(2), &link).unwrap();
    omniprof_trace::save(&trace_of(5), &dangling).unwrap();

    assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(fs::symlink_metadata(&dangling).unwrap().is_symlink());
    assert_eq!(ops_in(&real), 2);
    assert_eq!(ops_in(&dir.path().join("made.json")), 5);
    assert_eq!(
        listing(dir.path()),
        ["dangling.json", "link.json", "made.json", "real.json"]
    );
}

#[test]
fn a_replaced_file_keeps_its_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("private.json");
    fs::write(&path, "old").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    omniprof_trace::save(&trace_of(1), &path).unwrap();
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn a_fifo_is_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut text = Vec::new();
            fs::File::open(fifo)
                .unwrap()
                .read_to_end(&mut text)
                .unwrap();
            text
        })
    };
    omniprof_trace::save(&trace_of(7), &fifo).unwrap();
    let text = reader.join().unwrap();
    let read = TraceReader::new().read(&text[..]).into_trace().unwrap();
    assert_eq!(read.activities.len(), 7);
    use std::os::unix::fs::FileTypeExt;
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(listing(dir.path()), ["pipe.json"]);
}

#[test]
fn a_character_device_is_written_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let null = Path::new("/dev/null");
    let stats = omniprof_trace::save(&trace_of(3), null).unwrap();
    assert_eq!(stats.events, 4);
    assert!(fs::symlink_metadata(null)
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn a_directory_is_refused_naming_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out.json");
    fs::create_dir(&target).unwrap();
    let err = omniprof_trace::save(&trace_of(1), &target).unwrap_err();
    assert_eq!(err.stage, "refused");
    let message = err.to_string();
    assert!(
        message.contains(&target.display().to_string()) && message.contains("it is a directory"),
        "{message}"
    );
    assert!(target.is_dir());
    assert_eq!(listing(dir.path()), ["out.json"]);
    assert!(listing(&target).is_empty());
}

#[test]
fn a_failed_save_keeps_the_old_file_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("kept.json");
    fs::write(&path, "old content").unwrap();
    let err = save_with(&path, |out| {
        out.write_all(b"half a trace")?;
        Err::<(), _>(std::io::Error::other("the writer failed"))
    })
    .unwrap_err();
    assert_eq!(err.stage, "write");
    assert!(err.to_string().contains("the writer failed"), "{err}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "old content");
    assert_eq!(listing(dir.path()), ["kept.json"]);
}
