//! One session recorded the way an application records, for the tests that write, read or
//! load a realistic trace.

use omniprof::trace::Trace;
use omniprof::{instant, record_function, record_op, Profiler};

/// A name with everything JSON writers get wrong: quotes, backslashes, newlines, control
/// characters (NUL and DEL included), and non-ASCII text.
pub const NASTY: &str =
    "say \"hi\" C:\\temp\\x\n\ttab\r\u{0}\u{1}\u{1b}[0m\u{1f}\u{7f} ünïcødé ✓ 😀 \u{2028}";

/// The thread name of [`record_sample_session`]'s worker that exits before `stop`.
pub const WORKER_DONE: &str = "worker done \"early\"";
/// The thread name of [`record_sample_session`]'s worker still alive at `stop`.
pub const WORKER_LIVE: &str = "worker \\ still \n alive ☃";
/// How many steps the first worker records, and ranges the second.
pub const STEPS: usize = 25;

/// Records one session the way an application would: the calling thread runs nested ranges
/// and ops with args, input shapes and instants; one worker thread records and exits before
/// `stop`; another records and is still alive at `stop`. Names hold [`NASTY`] text.
/// The caller holds [`serial`](crate::lock::serial).
pub fn record_sample_session() -> Trace {
    let mut profiler = Profiler::builder().build().expect("build a profiler");
    profiler.start().expect("start a session");

    let early = std::thread::Builder::new()
        .name("early".into())
        .spawn(|| {
            omniprof::set_thread_name(WORKER_DONE);
            for step in 0..STEPS {
                let _s = record_function(format!("ProfilerStep#{step}"));
                let _f = record_function("forward");
                let _mm = record_op("aten::mm").with_input_shapes(&[&[8, 16], &[16, 4]]);
            }
        })
        .expect("spawn a worker");
    early.join().expect("the early worker ran");

    // This worker is still alive at stop: it reports when its ranges are closed and waits
    // to be released after the session ends.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let live = std::thread::Builder::new()
        .name("live".into())
        .spawn(move || {
            omniprof::set_thread_name(WORKER_LIVE);
            for i in 0..STEPS as i64 {
                let _r = record_function(NASTY).with_arg(NASTY, NASTY);
                instant("tick").with_arg("i", i);
            }
            done_tx.send(()).expect("report done");
            release_rx.recv().expect("wait for release");
        })
        .expect("spawn a worker");

    {
        let _outer = record_function(format!("outer {NASTY}"))
            .with_arg("batch", 32i64)
            .with_arg("lr", 0.125f64)
            .with_arg("train", true)
            .with_arg("label", "a \"quoted\" \\ value\n")
            .with_arg(&format!("key {NASTY}"), -7i64);
        for layer in 0..3i64 {
            omniprof::scope!("block");
            let _op = record_op("aten::addmm")
                .with_input_shapes(&[&[64], &[64, 128], &[128, 64]])
                .with_arg("layer", layer);
            instant(format!("mark {layer} {NASTY}")).with_arg("note", NASTY);
        }
        let _named = record_op("C:\\path\\to\\op \"x\"");
    }

    done_rx.recv().expect("the live worker finished recording");
    let trace = profiler.stop().expect("stop the session");
    release_tx.send(()).expect("release the live worker");
    live.join().expect("the live worker ran");
    trace
}

/// Records a session with every activity type selected and the Kineto config text `config`
/// applied, around `steps` user ranges `step N` of `ops` host ops `host::op` each: what a
/// test of the plugins loaded into the process needs. The caller holds
/// [`serial`](crate::lock::serial).
pub fn record_host_steps(config: &str, steps: usize, ops: usize) -> Trace {
    let config = omniprof::Config::parse(config).expect("a valid config");
    let mut profiler = Profiler::builder()
        .activities(omniprof::trace::ActivitySet::all())
        .config(config)
        .build()
        .expect("build a profiler");
    profiler.start().expect("start a session");
    for step in 0..steps {
        let _step = record_function(format!("step {step}"));
        for _ in 0..ops {
            let _op = record_op("host::op");
        }
    }
    profiler.stop().expect("stop the session")
}

/// The trace's `backend_errors` entries (`<profiler>: <message>`), in order.
pub fn backend_errors(trace: &Trace) -> Vec<String> {
    let errors = &trace.health.backend_errors;
    errors.iter().map(ToString::to_string).collect()
}
