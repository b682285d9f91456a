//! `omniprof flamegraph TRACE -o OUT.svg`: where a trace's time goes, as a flame graph: host
//! op stacks by self time, or with `--device` the device time of every kernel and copy on
//! the stack of the host op that launched it. `--folded` writes the folded stacks
//! (`a;b;c <ns>`) other flame graph tools read, instead of the SVG.
//!
//! The trace is streamed: memory is bounded by the reader's windows, each thread's open ops,
//! the distinct stacks and the correlation ids of the ops that launch device work, not by
//! the trace; a trace with Python stacks (`python_function` events, `Call stack` args), or
//! whose ops are out of order on a thread, is read again whole.
//!
//! OUT is written through the shared save path
//! ([`save_with`](omniprof_trace::save_with)), as traces are: a temporary file
//! of its own renamed over OUT, a FIFO or character device written in place, a link followed
//! only where the kernel's `fs.protected_symlinks` would follow it, and a directory, block
//! device or socket refused naming what it is.
//!
//! Exit status: 0 written; 1 the trace could not be read, holds no time to draw, or the
//! output could not be written (OUT then holds what it held before); 2 bad arguments.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use inferno::flamegraph::{self, Options};
use omniprof_analysis::{
    folded_stacks, visible, FlameBuilder, FlameTime, FoldedStacks, MAX_STACK_DEPTH,
};
use omniprof_read::{ArgFilter, ReadError, TraceReader};
use omniprof_trace::keys::arg;
use omniprof_trace::save_with;
use omniprof_trace::TraceItem;

use crate::progress::read_file;
use crate::reading::report_skipped;

/// Draw a flame graph of a trace.
#[derive(Debug, clap::Args)]
pub(crate) struct FlamegraphArgs {
    /// The trace: Kineto / PyTorch Chrome JSON or a Perfetto trace, plain or gzip.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Where to write the SVG (or, with --folded, the folded stacks).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Device time (kernels, copies) on the stack of the host op that launched it, instead
    /// of host self time.
    #[arg(long)]
    pub device: bool,
    /// Write the folded stacks (`frame;frame;frame <ns>` per line) instead of the SVG.
    #[arg(long)]
    pub folded: bool,
}

/// Runs `omniprof flamegraph`.
pub(crate) fn run(args: &FlamegraphArgs) -> ExitCode {
    let (time, title) = if args.device {
        (FlameTime::Device, "Device time by launching op")
    } else {
        (FlameTime::HostSelf, "Host self time")
    };
    let folded = match fold(&args.trace, time) {
        Ok(folded) => folded,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if folded.cut_frames > 0 {
        eprintln!(
            "warning: {} frames deeper than {MAX_STACK_DEPTH} were cut; their time is drawn on \
             their ancestor at depth {MAX_STACK_DEPTH}",
            folded.cut_frames
        );
    }
    if folded.stacks.is_empty() {
        let what = if args.device {
            "device activities"
        } else {
            "host ops"
        };
        eprintln!(
            "error: {} has no {what} with time to draw",
            args.trace.display()
        );
        return ExitCode::FAILURE;
    }
    let bytes = if args.folded {
        folded.to_text().into_bytes()
    } else {
        let (text, halved) = drawable(&folded);
        if halved > 0 {
            eprintln!(
                "warning: the stacks hold more than 2^64 ns in all, more than the graph can \
                 add up: it draws them divided by 2^{halved}"
            );
        }
        let mut options = Options::default();
        // A file name may hold control characters, which XML forbids.
        let path = args.trace.display().to_string();
        options.title = format!("{title}: {}", visible(&path));
        options.count_name = "ns".into();
        let mut svg = Vec::new();
        if let Err(e) = flamegraph::from_lines(&mut options, text.lines(), &mut svg) {
            eprintln!("error: cannot draw the flame graph: {e}");
            return ExitCode::FAILURE;
        }
        svg
    };
    match save_with(&args.output, |out| out.write_all(&bytes)) {
        Ok(()) => {
            println!(
                "wrote {} ({} stacks, {} ns)",
                args.output.display(),
                folded.stacks.len(),
                folded.total_ns()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "error: cannot write {}: {}",
                args.output.display(),
                e.source
            );
            ExitCode::FAILURE
        }
    }
}

/// The folded stacks of the trace at `path`: streamed into a [`FlameBuilder`] (memory bounded
/// by the read windows, each thread's open ops, the stacks and the launching ops'
/// correlations), or, when the builder needs the whole trace (Python stacks, ops out of order
/// on their thread), read again whole.
fn fold(path: &Path, time: FlameTime) -> Result<FoldedStacks, ReadError> {
    let mut builder = FlameBuilder::new(time);
    // The builder reads no arg but the one that says it needs the whole trace.
    let reader = TraceReader::new().args(ArgFilter::Only(vec![arg::CALL_STACK.to_string()]));
    let stats = read_file(path, |input| {
        reader.stream(input, |item| {
            if let TraceItem::Activity(a) = item {
                if !builder.needs_whole_trace() {
                    builder.add(&a);
                }
            }
        })
    })?;
    if !builder.needs_whole_trace() {
        report_skipped(&stats);
        return Ok(builder.finish());
    }
    let (trace, stats) = read_file(path, |input| TraceReader::new().read(input).into_result())?;
    report_skipped(&stats);
    Ok(folded_stacks(&trace, time))
}

/// The folded text the SVG is drawn from: the times halved until their sum fits in 64
/// bits (the renderer adds them up unchecked), and how many times they were.
fn drawable(folded: &FoldedStacks) -> (String, u32) {
    let fits = |shift: u32| {
        folded
            .stacks
            .iter()
            .try_fold(0u64, |sum, (_, ns)| sum.checked_add(ns >> shift))
            .is_some()
    };
    // Halved 63 times, each stack holds 0 or 1: the sum fits.
    let shift = (0..63).find(|&k| fits(k)).unwrap_or(63);
    if shift == 0 {
        return (folded.to_text(), 0);
    }
    let halved = FoldedStacks {
        stacks: folded
            .stacks
            .iter()
            .map(|(stack, ns)| (stack.clone(), ns >> shift))
            .collect(),
        cut_frames: folded.cut_frames,
    };
    (halved.to_text(), shift)
}
