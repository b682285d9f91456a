//! `omniprof demo`: a small model-like workload on several threads, profiled end to end.
//!
//! Each worker thread runs training steps made of nested user ranges (`ProfilerStep#N`,
//! `forward`, `backward`, `optimizer`) around host ops that do real arithmetic (matrix
//! multiplies, activations, reductions), so the trace shows what a framework's would.

use std::path::PathBuf;
use std::process::ExitCode;

use omniprof::export::chrome;
use omniprof::{record_function, record_op, Profiler};

/// Profile a sample workload and write its trace.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Where to write the trace (`.json`, or `.json.gz` for gzip).
    #[arg(short, long, default_value = "omniprof_demo.pt.trace.json")]
    pub output: PathBuf,
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Training steps per thread.
    #[arg(long, default_value_t = 40)]
    pub steps: usize,
}

/// Side of the square matrices the ops multiply.
const DIM: usize = 48;

pub fn run(args: &DemoArgs) -> ExitCode {
    let mut profiler = match Profiler::builder().build() {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    if let Err(e) = profiler.start() {
        return fail(&e);
    }
    let checksum = workload(args.threads.max(1), args.steps);
    let trace = match profiler.stop() {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    match chrome::save(&trace, &args.output) {
        Ok(stats) => {
            println!(
                "wrote {} ({} trace events, {} activities on {} threads; checksum {checksum:.3})",
                args.output.display(),
                stats.events,
                trace.activities.len(),
                trace.threads.len(),
            );
            println!("open it at https://ui.perfetto.dev (Open trace file) or in chrome://tracing");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn fail(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::FAILURE
}

/// Runs the steps on `threads` named threads and returns a checksum of the results, so the
/// arithmetic cannot be optimized away.
fn workload(threads: usize, steps: usize) -> f64 {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::Builder::new()
                .name(format!("worker-{t}"))
                .spawn(move || (0..steps).map(|s| train_step(t, s)).sum::<f64>())
                .expect("spawn a demo worker")
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("demo worker panicked"))
        .sum()
}

fn train_step(thread: usize, step: usize) -> f64 {
    let _step = record_function(format!("ProfilerStep#{step}"));
    let seed = (thread * 31 + step) as f32;
    let weights: Vec<Matrix> = (0..3).map(|l| Matrix::filled(seed + l as f32)).collect();
    let mut x = Matrix::filled(seed * 0.5);
    {
        let _fwd = record_function("forward");
        for (layer, w) in weights.iter().enumerate() {
            let _block = record_function(format!("block_{layer}"));
            x = matmul(&x, w);
            x = relu(&x);
        }
    }
    let loss = sum(&x);
    {
        let _bwd = record_function("backward");
        for w in weights.iter().rev() {
            let _g = record_op("aten::mm_backward");
            x = matmul(&x, w);
        }
    }
    {
        let _opt = record_function("optimizer");
        let _op = record_op("aten::add_");
        x = add(&x, &weights[0]);
    }
    loss + sum(&x) * 1e-9
}

struct Matrix(Vec<f32>);

impl Matrix {
    fn filled(seed: f32) -> Self {
        Self(
            (0..DIM * DIM)
                .map(|i| ((i as f32 * 0.37 + seed).sin()) * 0.1)
                .collect(),
        )
    }
}

fn matmul(a: &Matrix, b: &Matrix) -> Matrix {
    let dims: &[i64] = &[DIM as i64, DIM as i64];
    let _op = record_op("aten::mm").with_input_shapes(&[dims, dims]);
    let mut out = vec![0f32; DIM * DIM];
    for i in 0..DIM {
        for k in 0..DIM {
            let aik = a.0[i * DIM + k];
            for j in 0..DIM {
                out[i * DIM + j] += aik * b.0[k * DIM + j];
            }
        }
    }
    Matrix(out)
}

fn relu(a: &Matrix) -> Matrix {
    let _op = record_op("aten::relu");
    Matrix(a.0.iter().map(|v| v.max(0.0)).collect())
}

fn add(a: &Matrix, b: &Matrix) -> Matrix {
    Matrix(a.0.iter().zip(&b.0).map(|(x, y)| x + y).collect())
}

fn sum(a: &Matrix) -> f64 {
    let _op = record_op("aten::sum");
    a.0.iter().map(|&v| v as f64).sum()
}
