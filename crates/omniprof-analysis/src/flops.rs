//! PyTorch's FLOP formulas over the inputs a trace recorded: the count `with_flops` gives an
//! op, for a trace that carries no `flops` arg. torch.profiler counts FLOPs in the process
//! (its table has them) but writes none into its trace, so a tool reading the trace has only
//! the op's `Input Dims`, `Input type` and `Concrete Inputs` (`record_shapes`, which
//! `with_flops` implies) to count them from again.
//!
//! The formulas are PyTorch's (`torch/csrc/profiler/util.cpp`, `computeFlops`), for the ops it
//! counts: `aten::mm`, `addmm`, `bmm` and `baddbmm` (2·m·k·n per product), `aten::add` and
//! `mul` (one per element of the first input) and `aten::conv2d`. Arithmetic is unsigned and
//! wrapping, as PyTorch's. An op whose inputs the trace does not describe as a formula reads
//! them counts 0, as under PyTorch, which counts nothing it cannot read.
//!
//! ```
//! use omniprof_trace::keys::arg;
//! use omniprof_trace::{Activity, ActivityType, Value};
//!
//! let mut mm = Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, 10);
//! mm.args.push((arg::INPUT_DIMS.into(), Value::from(vec![vec![8i64, 16], vec![16, 4]])));
//! mm.args.push((arg::INPUT_TYPE.into(), Value::from(vec!["float", "float"])));
//! assert_eq!(omniprof_analysis::estimated_flops(&mm), Some(2 * 8 * 16 * 4));
//! ```

use omniprof_trace::keys::arg;
use omniprof_trace::{Activity, Value};

/// The op's FLOPs by PyTorch's formula for its name, from its recorded inputs: `None` for an
/// op PyTorch counts none of, `Some(0)` for one whose inputs the trace does not describe as
/// the formula reads them.
pub fn estimated_flops(a: &Activity) -> Option<u64> {
    let formula = formula_of(&a.name)?;
    Some(count(formula, &Inputs::of(a)).unwrap_or(0))
}

/// The ops PyTorch counts, by formula.
#[derive(Clone, Copy)]
enum Formula {
    Mm,
    AddMm,
    Bmm,
    BAddBmm,
    Elementwise,
    Conv2d,
}

fn formula_of(name: &str) -> Option<Formula> {
    Some(match name {
        "aten::mm" => Formula::Mm,
        "aten::addmm" => Formula::AddMm,
        "aten::bmm" => Formula::Bmm,
        "aten::baddbmm" => Formula::BAddBmm,
        "aten::add" | "aten::mul" => Formula::Elementwise,
        "aten::conv2d" => Formula::Conv2d,
        _ => return None,
    })
}

/// What the trace says of an op's inputs.
struct Inputs<'a> {
    dims: &'a [Value],
    types: &'a [Value],
    concrete: &'a [Value],
}

impl<'a> Inputs<'a> {
    fn of(a: &'a Activity) -> Self {
        let list = |key: &str| match a.arg(key) {
            Some(Value::List(items)) => items.as_slice(),
            _ => &[],
        };
        Self {
            dims: list(arg::INPUT_DIMS),
            types: list(arg::INPUT_TYPE),
            concrete: list(arg::CONCRETE_INPUTS),
        }
    }

    /// The sizes of input `i` when it is a tensor (its type a dtype's name, not `Scalar`,
    /// a list's or none).
    fn tensor(&self, i: usize) -> Option<Vec<u64>> {
        let dtype = self.types.get(i)?.as_str()?;
        if matches!(dtype, "" | "Scalar" | "ScalarList" | "TensorList") {
            return None;
        }
        match self.dims.get(i)? {
            // PyTorch's sizes, as the unsigned numbers its formulas multiply.
            Value::List(sizes) => sizes.iter().map(|d| d.as_i64().map(|d| d as u64)).collect(),
            _ => None,
        }
    }

    /// Input `i`'s value as an int list (`Concrete Inputs`' text `"[1, 1]"`, or a list).
    fn ints(&self, i: usize) -> Option<Vec<i64>> {
        match self.concrete.get(i)? {
            Value::Str(text) => {
                let inner = text.strip_prefix('[')?.strip_suffix(']')?;
                inner.split(',').map(|v| v.trim().parse().ok()).collect()
            }
            Value::List(items) => items.iter().map(Value::as_i64).collect(),
            _ => None,
        }
    }

    /// Input `i`'s value as an int (`"1"`, or a number).
    fn int(&self, i: usize) -> Option<i64> {
        match self.concrete.get(i)? {
            Value::Str(text) => text.trim().parse().ok(),
            other => other.as_i64(),
        }
    }
}

fn product(sizes: &[u64]) -> u64 {
    sizes.iter().fold(1u64, |p, &d| p.wrapping_mul(d))
}

/// 2·m·k·n as PyTorch computes it: every size of the first operand but the shared one (nor
/// the batch, for a batched product), then every size of the second.
fn gemm(mat1: &[u64], mat2: &[u64], batched: bool) -> u64 {
    let (Some(&batch), Some(&overlap)) = (mat1.first(), mat1.last()) else {
        return 0;
    };
    if (batched && batch == 0) || overlap == 0 {
        return 0;
    }
    let mut flops = product(mat1) / overlap;
    if batched {
        flops /= batch;
    }
    flops.wrapping_mul(product(mat2)).wrapping_mul(2)
}

fn count(formula: Formula, inputs: &Inputs<'_>) -> Option<u64> {
    Some(match formula {
        Formula::Mm => gemm(&inputs.tensor(0)?, &inputs.tensor(1)?, false),
        Formula::Bmm => gemm(&inputs.tensor(0)?, &inputs.tensor(1)?, true),
        Formula::AddMm => gemm(&inputs.tensor(1)?, &inputs.tensor(2)?, false),
        Formula::BAddBmm => gemm(&inputs.tensor(1)?, &inputs.tensor(2)?, true),
        Formula::Elementwise => product(&inputs.tensor(0)?),
        Formula::Conv2d => conv2d(inputs)?,
    })
}

/// conv2d (input, weight, bias, stride, padding, dilation, groups): 2 · batch · output height
/// · output width · kernel height · kernel width · in channels · out channels / groups.
fn conv2d(inputs: &Inputs<'_>) -> Option<u64> {
    let input = inputs.tensor(0)?;
    let weight = inputs.tensor(1)?;
    let (stride, padding, dilation) = (inputs.ints(3)?, inputs.ints(4)?, inputs.ints(5)?);
    let groups = inputs.int(6)?;
    if input.len() != 4 || weight.len() != 4 || groups == 0 {
        return None;
    }
    if [&stride, &padding, &dilation]
        .iter()
        .any(|pair| pair.len() != 2)
    {
        return None;
    }
    let mut out = [0u64; 2];
    for i in 0..2 {
        // Sizes and arguments are the file's: an overflow is no convolution PyTorch ran.
        let reach = dilation[i].checked_mul((weight[2 + i] as i64).checked_sub(1)?)?;
        let span = (input[2 + i] as i64)
            .checked_add(padding[i].checked_mul(2)?)?
            .checked_sub(reach)?
            .checked_sub(1)?;
        if span < 0 || stride[i] <= 0 {
            return None;
        }
        out[i] = (span / stride[i] + 1) as u64;
    }
    let flops = [
        2, input[0], out[0], out[1], weight[2], weight[3], input[1], weight[0],
    ]
    .iter()
    .fold(1u64, |p, &f| p.wrapping_mul(f));
    Some(flops / groups as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use omniprof_trace::ActivityType;

    fn op(name: &str, dims: Value, types: &[&str], concrete: &[&str]) -> Activity {
        let mut a = Activity::new(ActivityType::CpuOp, name, 1, 1, 0, 10);
        a.args.push((arg::INPUT_DIMS.into(), dims));
        a.args
            .push((arg::INPUT_TYPE.into(), Value::from(types.to_vec())));
        a.args
            .push((arg::CONCRETE_INPUTS.into(), Value::from(concrete.to_vec())));
        a
    }

    fn dims(lists: &[&[i64]]) -> Value {
        Value::from(lists.iter().map(|l| l.to_vec()).collect::<Vec<_>>())
    }

    #[test]
    fn products_count_two_flops_per_multiply_add() {
        let f = ["float", "float", "float"];
        let mm = op(
            "aten::mm",
            dims(&[&[4, 32], &[32, 512]]),
            &f[..2],
            &["", ""],
        );
        assert_eq!(estimated_flops(&mm), Some(2 * 4 * 32 * 512));
        let bmm = op(
            "aten::bmm",
            dims(&[&[2, 16, 32], &[2, 32, 8]]),
            &f[..2],
            &["", ""],
        );
        assert_eq!(estimated_flops(&bmm), Some(2 * 2 * 16 * 32 * 8));
        let addmm = op(
            "aten::addmm",
            dims(&[&[4], &[8, 32], &[32, 4]]),
            &f,
            &["", "", ""],
        );
        assert_eq!(estimated_flops(&addmm), Some(2 * 8 * 32 * 4));
        let shared_zero = op("aten::mm", dims(&[&[4, 0], &[0, 5]]), &f[..2], &["", ""]);
        assert_eq!(estimated_flops(&shared_zero), Some(0));
    }

    #[test]
    fn elementwise_ops_count_the_first_tensors_elements_and_nothing_for_a_scalar() {
        let add = op(
            "aten::add",
            dims(&[&[4, 8], &[4, 8], &[]]),
            &["float", "float", "Scalar"],
            &["", "", "1"],
        );
        assert_eq!(estimated_flops(&add), Some(32));
        let scalar_first = op(
            "aten::mul",
            dims(&[&[], &[4]]),
            &["Scalar", "float"],
            &["2", ""],
        );
        assert_eq!(estimated_flops(&scalar_first), Some(0));
        let zero_dim = op(
            "aten::mul",
            dims(&[&[], &[]]),
            &["float", "Scalar"],
            &["", "2"],
        );
        assert_eq!(estimated_flops(&zero_dim), Some(1));
    }

    /// The FLOPs of a conv2d of a [4, 3, 8, 8] input and an [8, 3, 3, 3] weight with these
    /// concrete inputs (stride, padding, dilation and groups are inputs 3 to 6).
    fn conv(concrete: [&str; 7]) -> Option<u64> {
        let types = [
            "float",
            "float",
            "float",
            "ScalarList",
            "ScalarList",
            "ScalarList",
            "Scalar",
        ];
        let d = dims(&[&[4, 3, 8, 8], &[8, 3, 3, 3], &[8], &[], &[], &[], &[]]);
        estimated_flops(&op("aten::conv2d", d, &types, &concrete))
    }

    #[test]
    fn conv2d_reads_stride_padding_dilation_and_groups_from_the_concrete_inputs() {
        // Padding 1 keeps 8×8: 2 · 4 · 8 · 8 · 3 · 3 · 3 · 8.
        let same = conv(["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]);
        assert_eq!(same, Some(110_592));
        // Stride 2, no padding: 3×3 out.
        let strided = conv(["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "1"]);
        assert_eq!(strided, Some(2 * 4 * 3 * 3 * 3 * 3 * 3 * 8));
        // Groups divide; groups 0 or no stride is not PyTorch's convolution: 0.
        let grouped = conv(["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "2"]);
        assert_eq!(grouped, Some(55_296));
        let no_groups = conv(["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "0"]);
        assert_eq!(no_groups, Some(0));
        assert_eq!(conv(["", "", "", "", "", "", ""]), Some(0));
    }

    #[test]
    fn hostile_sizes_and_arguments_count_nothing_without_a_panic() {
        let max = i64::MAX.to_string();
        let huge = format!("[{max}, {max}]");
        for concrete in [
            ["", "", "", "[1, 1]", huge.as_str(), "[1, 1]", "1"],
            ["", "", "", "[1, 1]", "[1, 1]", huge.as_str(), "1"],
            ["", "", "", "[0, 1]", "[1, 1]", "[1, 1]", "1"],
            ["", "", "", "[1, 1]", "[-9, 1]", "[1, 1]", "1"],
        ] {
            assert_eq!(conv(concrete), Some(0));
        }
        let negative = dims(&[&[-4, i64::MAX], &[i64::MAX, -3]]);
        let mm = op("aten::mm", negative, &["float", "float"], &["", ""]);
        assert!(
            estimated_flops(&mm).is_some(),
            "wraps as PyTorch's unsigned sizes do"
        );
    }

    #[test]
    fn other_ops_and_ops_without_inputs_count_as_pytorch_counts_them() {
        let relu = op("aten::relu", dims(&[&[4]]), &["float"], &[""]);
        assert_eq!(estimated_flops(&relu), None);
        let bare = Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, 10);
        assert_eq!(estimated_flops(&bare), Some(0));
    }
}
