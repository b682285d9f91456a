//! What the analyses read off one activity: whether it is a host op, device work or neither
//! (its [`Role`]), the name of its row, its FLOPs and stub device time, its input shapes as
//! PyTorch prints them, and the device name a trace declares. The summary, the flame graph
//! and the Python stacks read activities alike through these.

use std::fmt::Write;

use omniprof_trace::keys::{arg, name as event_name};
use omniprof_trace::Value;
use omniprof_trace::{Activity, ActivityType};

/// How an activity takes part in the summary (PyTorch's device type of the event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A host op, range, runtime call or Python function: nested into its thread's op tree.
    Host,
    /// Work on a device: a row of its own, and device time for the host op it is linked to.
    Device,
    /// Instants, counters, overhead and the like: not summarized.
    Ignored,
}

pub(crate) fn role(kind: ActivityType) -> Role {
    use ActivityType::*;
    match kind {
        CpuOp | UserAnnotation | CudaRuntime | CudaDriver | XpuRuntime | XpuDriver
        | MtiaRuntime | GlowRuntime | PrivateUse1Runtime | PrivateUse1Driver | PythonFunction => {
            Role::Host
        }
        GpuMemcpy | GpuMemset | ConcurrentKernel | GpuUserAnnotation | CudaSync | XpuSync
        | CudaProfilerRange | MtiaCcpEvents | MtiaInsight | HpuOp => Role::Device,
        _ => Role::Ignored,
    }
}

/// The backend a runtime or driver call belongs to, as PyTorch spells its `use_device`.
pub(crate) fn runtime_device(kind: ActivityType) -> Option<&'static str> {
    use ActivityType::*;
    match kind {
        CudaRuntime | CudaDriver | CudaSync => Some("cuda"),
        XpuRuntime | XpuDriver | XpuSync => Some("xpu"),
        MtiaRuntime | MtiaCcpEvents | MtiaInsight => Some("mtia"),
        HpuOp => Some("hpu"),
        // PyTorch's name for a PrivateUse1 backend that did not rename itself.
        PrivateUse1Runtime | PrivateUse1Driver => Some("privateuseone"),
        _ => None,
    }
}

/// Names PyTorch leaves out of its summary (profiler bookkeeping and trivial accessors).
const DROPPED_NAMES: [&str; 8] = [
    "[memory]",
    "[OutOfMemory]",
    "profiler::_record_function_enter",
    "profiler::_record_function_enter_new",
    "profiler::_record_function_exit",
    "aten::is_leaf",
    "aten::output_nr",
    "aten::_version",
];

/// The row name of an event, or `None` for a dropped one: `ProfilerStep#<n>` becomes
/// `ProfilerStep*` so that steps aggregate.
pub(crate) fn row_name(name: &str) -> Option<&str> {
    if DROPPED_NAMES.contains(&name) {
        None
    } else if name.starts_with(event_name::PROFILER_STEP_PREFIX) {
        Some("ProfilerStep*")
    } else {
        Some(name)
    }
}

/// Whether the op was still running when the trace was taken (`"finished": false`, or the
/// string `"false"`).
pub(crate) fn is_unfinished(a: &Activity) -> bool {
    a.arg(arg::FINISHED)
        .is_some_and(|v| *v == Value::Bool(false) || v.as_str() == Some("false"))
}

/// The device time the stubs path measured for the op (`device_time_us`), in ns; only a
/// positive time counts, as PyTorch attaches a stub record only then.
pub(crate) fn stub_device_ns(a: &Activity) -> i64 {
    let us = a
        .arg(arg::DEVICE_TIME_US)
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    // `as` saturates, and NaN fails the test.
    if us > 0.0 {
        (us * 1000.0).round() as i64
    } else {
        0
    }
}

/// The event's `flops` arg (PyTorch's `with_flops`), `None` when it has none; a negative
/// or non-numeric count is 0.
pub(crate) fn flops(a: &Activity) -> Option<u64> {
    a.arg(arg::FLOPS).map(|v| match v {
        Value::UInt(n) => *n,
        Value::Int(n) => u64::try_from(*n).unwrap_or(0),
        // `as` saturates, and NaN becomes 0.
        Value::Float(f) if *f > 0.0 => *f as u64,
        _ => 0,
    })
}

/// The event's FLOPs: its `flops` arg, else, with `estimate` (the summary's `with_flops`),
/// PyTorch's count from its recorded inputs ([`estimated_flops`](crate::estimated_flops)),
/// for a trace torch.profiler wrote, which keeps none.
pub(crate) fn flops_or_estimate(a: &Activity, estimate: bool) -> Option<u64> {
    flops(a).or_else(|| estimate.then(|| crate::estimated_flops(a)).flatten())
}

/// The op's `Input Dims` as Python prints PyTorch's `FunctionEvent.input_shapes`
/// (`[[256, 256], []]`), into `out`: a tensor list's entry (a list of lists) is `[]` there,
/// as PyTorch keeps only tensors' shapes in it; `[]` when the op has none, as PyTorch
/// reports for user ranges and device work.
pub(crate) fn write_input_shapes(a: &Activity, out: &mut String) {
    out.clear();
    match a.arg(arg::INPUT_DIMS) {
        Some(Value::List(inputs)) => {
            out.push('[');
            for (i, input) in inputs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match input {
                    Value::List(items) if items.iter().any(|d| matches!(d, Value::List(_))) => {
                        out.push_str("[]")
                    }
                    _ => write_python(input, out),
                }
            }
            out.push(']');
        }
        Some(dims) => write_python(dims, out),
        None => out.push_str("[]"),
    }
}

/// A value as Python's `str()` writes the equivalent object.
fn write_python(value: &Value, out: &mut String) {
    // Writing into a `String` cannot fail.
    let _ = match value {
        Value::Null => write!(out, "None"),
        Value::Int(v) => write!(out, "{v}"),
        Value::UInt(v) => write!(out, "{v}"),
        Value::Float(v) if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e16 => {
            write!(out, "{v:.1}")
        }
        Value::Float(v) => write!(out, "{v}"),
        Value::Bool(true) => write!(out, "True"),
        Value::Bool(false) => write!(out, "False"),
        Value::Str(s) => write!(out, "'{s}'"),
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python(item, out);
            }
            out.push(']');
            Ok(())
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "'{key}': ");
                write_python(item, out);
            }
            out.push('}');
            Ok(())
        }
    };
}

/// A device name from a metadata value: a non-empty string.
pub(crate) fn metadata_string(value: &Value) -> Option<String> {
    value.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_print_as_python_lists() {
        let mut a = Activity::new(ActivityType::CpuOp, "op", 1, 1, 0, 1);
        let mut out = String::new();
        write_input_shapes(&a, &mut out);
        assert_eq!(out, "[]");
        a.args.push((
            "Input Dims".into(),
            Value::from(vec![
                Value::from(vec![256i64, 256]),
                Value::List(vec![]),
                Value::from(vec![Value::from(2.0), Value::from(0.5)]),
                Value::from(vec![Value::from("s"), Value::from(true)]),
            ]),
        ));
        write_input_shapes(&a, &mut out);
        assert_eq!(out, "[[256, 256], [], [2.0, 0.5], ['s', True]]");
    }

    #[test]
    fn a_tensor_lists_shapes_print_as_an_empty_list_as_pytorch_keeps_them() {
        let mut a = Activity::new(ActivityType::CpuOp, "aten::cat", 1, 1, 0, 1);
        let tensors = Value::from(vec![Value::from(vec![2i64, 3]), Value::from(vec![2i64, 3])]);
        a.args.push((
            "Input Dims".into(),
            Value::from(vec![tensors, Value::List(vec![]), Value::from(vec![4i64])]),
        ));
        let mut out = String::new();
        write_input_shapes(&a, &mut out);
        assert_eq!(out, "[[], [], [4]]");
    }

    #[test]
    fn names_are_dropped_or_rewritten_as_pytorch_does() {
        assert_eq!(row_name("aten::mm"), Some("aten::mm"));
        assert_eq!(row_name("ProfilerStep#12"), Some("ProfilerStep*"));
        assert_eq!(row_name("aten::is_leaf"), None);
        assert_eq!(row_name("[memory]"), None);
    }

    #[test]
    fn unfinished_and_stub_times_come_from_args() {
        let mut a = Activity::new(ActivityType::CpuOp, "op", 1, 1, 0, 1);
        assert!(!is_unfinished(&a));
        assert_eq!(stub_device_ns(&a), 0);
        a.args.push(("finished".into(), Value::Bool(false)));
        a.args.push(("device_time_us".into(), Value::from(12.5)));
        assert!(is_unfinished(&a));
        assert_eq!(stub_device_ns(&a), 12_500);
        a.args[1].1 = Value::from(-1i64);
        assert_eq!(stub_device_ns(&a), 0);
    }

    #[test]
    fn metadata_strings_are_non_empty_strings() {
        assert_eq!(metadata_string(&Value::from("xpu")), Some("xpu".into()));
        assert_eq!(metadata_string(&Value::Int(1)), None);
        assert_eq!(metadata_string(&Value::from("")), None);
    }
}
