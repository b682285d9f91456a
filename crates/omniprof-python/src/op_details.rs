//! What the op observer packs of an op beside its name (`python/omniprof/csrc/table.h`:
//! its `RecordFunction` handle, its inputs as numbers, its FLOPs, its TorchScript module
//! hierarchy, its overload name, a TorchScript function's scope, a collective's fields), and
//! torch.profiler's text of it: the `args` `Record function id`, `Input Dims`, `Input
//! Strides`, `Input type`, `Concrete Inputs`, `flops`, `Module Hierarchy`, `Overload Name`,
//! `Record scope` and a collective's (`Collective name`, `In msg nelems`, ...), made when the
//! session stops ([`unpack`], an
//! [`UnpackArgs`](omniprof::recording::UnpackArgs)) instead of while the op runs.
//!
//! The text is PyTorch's: a dtype by the name PyTorch gives it (handed over once per attach,
//! [`name_dtype`]), an integer in decimal, a float as a `c10::IValue` prints it
//! ([`float_text`]), a bool in Python's spelling.

use std::sync::{Arc, OnceLock, RwLock};

use omniprof_trace::keys::arg;
use omniprof_trace::Value;

use crate::storage_reads;

/// An input's kind, in its tag word's low 8 bits (`packed::` in `table.h`).
mod kind {
    /// Nothing described (unpacked by the fallback arm, as a kind this build does not know).
    #[cfg(test)]
    pub(super) const OTHER: u64 = 0;
    pub(super) const TENSOR: u64 = 1;
    pub(super) const BOOL: u64 = 2;
    pub(super) const INT: u64 = 3;
    pub(super) const DOUBLE: u64 = 4;
    pub(super) const INT_LIST: u64 = 5;
    pub(super) const DOUBLE_LIST: u64 = 6;
    pub(super) const TENSOR_LIST: u64 = 7;
    pub(super) const SCALAR_TEXT: u64 = 8;
    pub(super) const BOOL_LIST: u64 = 9;
}

/// The most tensors a list may hold for torch.profiler to write their sizes and strides
/// (`TENSOR_LIST_DISPLAY_LENGTH_LIMIT` in PyTorch's `torch/csrc/profiler/util.h`): a longer
/// list's `Input Dims` and `Input Strides` are `[]`.
const TENSOR_LIST_SHOWN: usize = 30;

/// A tensor's tag: bit 16 says it is strided (its strides follow its sizes).
const STRIDED: u64 = 1 << 16;
/// A tensor's tag: bit 17 says its storage follows (with `profile_memory`).
const STORAGE: u64 = 1 << 17;

/// The dtypes' names by code (a `c10::ScalarType`), as the observer named them.
fn dtype_names() -> &'static RwLock<Vec<Option<Arc<str>>>> {
    static NAMES: OnceLock<RwLock<Vec<Option<Arc<str>>>>> = OnceLock::new();
    NAMES.get_or_init(|| RwLock::new(vec![None; 256]))
}

/// Names dtype `code` as the observer says PyTorch names it.
pub(crate) fn name_dtype(code: u8, name: &str) {
    let mut names = dtype_names().write().unwrap_or_else(|e| e.into_inner());
    if names[usize::from(code)].as_deref() != Some(name) {
        names[usize::from(code)] = Some(Arc::from(name));
    }
}

/// The keys of the args an op's details become, made once.
struct Keys {
    record_function_id: Arc<str>,
    dims: Arc<str>,
    strides: Arc<str>,
    types: Arc<str>,
    concrete: Arc<str>,
    flops: Arc<str>,
    hierarchy: Arc<str>,
    overload: Arc<str>,
    scope: Arc<str>,
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| Keys {
        record_function_id: arg::RECORD_FUNCTION_ID.into(),
        dims: arg::INPUT_DIMS.into(),
        strides: arg::INPUT_STRIDES.into(),
        types: arg::INPUT_TYPE.into(),
        concrete: arg::CONCRETE_INPUTS.into(),
        flops: arg::FLOPS.into(),
        hierarchy: arg::MODULE_HIERARCHY.into(),
        overload: arg::OVERLOAD_NAME.into(),
        scope: arg::RECORD_SCOPE.into(),
    })
}

/// The texts most inputs are described with, made once: a session with shapes describes
/// every op's inputs, and each text made anew was an allocation to make and one to free.
struct Texts {
    empty: Arc<str>,
    scalar: Arc<str>,
    scalar_list: Arc<str>,
    tensor_list: Arc<str>,
    true_: Arc<str>,
    false_: Arc<str>,
    /// The integers in [`SMALL_INTS`], in decimal: most integer inputs (a dim, a flag, 1).
    small_ints: Vec<Arc<str>>,
}

/// The integers whose text is made once.
const SMALL_INTS: std::ops::RangeInclusive<i64> = -16..=1024;

impl Texts {
    /// An integer in decimal.
    fn int(&self, value: i64) -> Arc<str> {
        if SMALL_INTS.contains(&value) {
            return self.small_ints[(value - SMALL_INTS.start()) as usize].clone();
        }
        // Written on the stack, so that the text is allocated once, as the `Arc`.
        let mut buf = [0u8; 24];
        let mut rest = &mut buf[..];
        let _ = std::io::Write::write_fmt(&mut rest, format_args!("{value}"));
        let len = 24 - rest.len();
        Arc::from(std::str::from_utf8(&buf[..len]).unwrap_or_default())
    }
}

fn texts() -> &'static Texts {
    static TEXTS: OnceLock<Texts> = OnceLock::new();
    TEXTS.get_or_init(|| Texts {
        empty: "".into(),
        scalar: "Scalar".into(),
        scalar_list: "ScalarList".into(),
        tensor_list: "TensorList".into(),
        true_: "True".into(),
        false_: "False".into(),
        small_ints: SMALL_INTS.map(|v| Arc::from(v.to_string())).collect(),
    })
}

/// Where word 2 keeps the op's `RecordScope`, above its module hierarchy's length
/// (`packed::kScopeShift` in `table.h`).
const SCOPE_SHIFT: u32 = 56;

/// Reads words one after another; a word past the end reads as 0, so words cut short
/// describe less instead of panicking.
struct Words<'a>(&'a [u64]);

impl Words<'_> {
    fn next(&mut self) -> u64 {
        let (&first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        first
    }

    fn take(&mut self, count: u64) -> &[u64] {
        let count = usize::try_from(count)
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        let (taken, rest) = self.0.split_at(count);
        self.0 = rest;
        taken
    }

    /// `len` bytes of text, packed 8 to a word (invalid UTF-8 replaced).
    fn text(&mut self, len: u64) -> String {
        let bytes: Vec<u8> = self
            .take(len.div_ceil(8))
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .take(usize::try_from(len).unwrap_or(usize::MAX))
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Unpacks an op's details (`table.h`'s layout) into its args: `Record function id` (first,
/// after `External id`, where Kineto writes it) when PyTorch gave the op one, then in the
/// order torch.profiler writes them `Input Dims`, `Input Strides`, `Input type`, `Concrete
/// Inputs`, `flops`, `Module Hierarchy`, then `Overload Name` (omniprof's, with
/// `capture_overload_names`), `Record scope` (omniprof's, on a TorchScript function) and
/// a collective's fields; inputs only when there are some, `flops` only when counted, an
/// overload only when not the default.
pub(crate) fn unpack(words: &[u64], args: &mut Vec<(Arc<str>, Value)>) {
    let keys = keys();
    let mut words = Words(words);
    let record_function_id = words.next();
    if record_function_id != 0 {
        args.push((
            keys.record_function_id.clone(),
            Value::UInt(record_function_id),
        ));
    }
    let flops = words.next();
    let word = words.next();
    let (hierarchy_len, scope) = (word & ((1 << SCOPE_SHIFT) - 1), word >> SCOPE_SHIFT);
    let hierarchy = (hierarchy_len > 0).then(|| words.text(hierarchy_len));
    let inputs = words.next();
    if inputs > 0 {
        let names = dtype_names().read().unwrap_or_else(|e| e.into_inner());
        let texts = texts();
        // Sized once: ops with more inputs than a first allocation holds are common
        // (`aten::empty_strided` has six). More inputs than words is a cut-short pack.
        let room = usize::try_from(inputs).unwrap_or(0).min(words.0.len());
        let mut dims = Vec::with_capacity(room);
        let mut strides = Vec::with_capacity(room);
        let mut types = Vec::with_capacity(room);
        let mut concrete = Vec::with_capacity(room);
        let mut storages = Vec::new();
        for _ in 0..inputs {
            let input = unpack_input(&mut words, &names, texts, &mut storages);
            dims.push(input.dims);
            strides.push(input.strides);
            types.push(input.type_text);
            concrete.push(input.concrete);
        }
        args.push((keys.dims.clone(), Value::List(dims)));
        args.push((keys.strides.clone(), Value::List(strides)));
        args.push((keys.types.clone(), Value::List(types)));
        args.push((keys.concrete.clone(), Value::List(concrete)));
        if !storages.is_empty() {
            args.push(storage_reads::arg(storages));
        }
    }
    if flops > 0 {
        args.push((keys.flops.clone(), Value::UInt(flops)));
    }
    if let Some(hierarchy) = hierarchy {
        args.push((keys.hierarchy.clone(), Value::from(hierarchy.as_str())));
    }
    let overload_len = words.next();
    if overload_len > 0 {
        let overload = words.text(overload_len);
        args.push((keys.overload.clone(), Value::from(overload.as_str())));
    }
    if scope != 0 {
        args.push((keys.scope.clone(), Value::UInt(scope)));
    }
    unpack_collective(&mut words, args);
}

/// A collective's fields (`table.h`: a count, then each key and its value's JSON text), as
/// torch.profiler writes them on a `record_param_comms` op: each value as the JSON PyTorch
/// gave (a text that is no JSON is kept as a string).
fn unpack_collective(words: &mut Words<'_>, args: &mut Vec<(Arc<str>, Value)>) {
    let count = words.next();
    for _ in 0..count {
        if words.0.is_empty() {
            return; // cut short
        }
        let key_len = words.next();
        let key = words.text(key_len);
        let value_len = words.next();
        let text = words.text(value_len);
        let value = Value::from_json(&text).unwrap_or_else(|_| Value::from(text.as_str()));
        args.push((Arc::from(key.as_str()), value));
    }
}

/// One input as torch.profiler describes it.
struct Input {
    dims: Value,
    strides: Value,
    type_text: Value,
    concrete: Value,
}

impl Input {
    fn described(type_text: &Arc<str>, concrete: Arc<str>) -> Self {
        Input {
            dims: Value::List(Vec::new()),
            strides: Value::List(Vec::new()),
            type_text: Value::Str(type_text.clone()),
            concrete: Value::Str(concrete),
        }
    }
}

/// Unpacks the next input (`table.h`'s layout), its dtype named from `names`; a tensor's
/// storage, when packed, goes to `storages`.
fn unpack_input(
    words: &mut Words<'_>,
    names: &[Option<Arc<str>>],
    texts: &Texts,
    storages: &mut Vec<Value>,
) -> Input {
    let tag = words.next();
    match tag & 0xff {
        kind::TENSOR => {
            let rank = words.next();
            let dims = words
                .take(rank)
                .iter()
                .map(|&d| Value::Int(d as i64))
                .collect();
            let strides = if tag & STRIDED != 0 {
                words
                    .take(rank)
                    .iter()
                    .map(|&s| Value::Int(s as i64))
                    .collect()
            } else {
                Vec::new()
            };
            if tag & STORAGE != 0 {
                let [address, bytes, device] = [words.next(), words.next(), words.next()];
                storages.extend(storage_reads::packed(address, bytes, device));
            }
            let dtype = names[((tag >> 8) & 0xff) as usize].clone();
            Input {
                dims: Value::List(dims),
                strides: Value::List(strides),
                type_text: Value::Str(dtype.unwrap_or_else(|| texts.empty.clone())),
                concrete: Value::Str(texts.empty.clone()),
            }
        }
        kind::TENSOR_LIST => {
            // Every tensor is unpacked, for its storage, however long the list.
            let tensors: Vec<Input> = (0..tag >> 8)
                .map(|_| unpack_input(words, names, texts, storages))
                .collect();
            if tensors.len() > TENSOR_LIST_SHOWN {
                return Input::described(&texts.tensor_list, texts.empty.clone());
            }
            let (dims, strides) = tensors.into_iter().map(|t| (t.dims, t.strides)).unzip();
            Input {
                dims: Value::List(dims),
                strides: Value::List(strides),
                ..Input::described(&texts.tensor_list, texts.empty.clone())
            }
        }
        kind::BOOL => {
            let value = if words.next() != 0 {
                &texts.true_
            } else {
                &texts.false_
            };
            Input::described(&texts.scalar, value.clone())
        }
        kind::INT => Input::described(&texts.scalar, texts.int(words.next() as i64)),
        kind::DOUBLE => Input::described(
            &texts.scalar,
            float_text(f64::from_bits(words.next())).into(),
        ),
        kind::INT_LIST | kind::DOUBLE_LIST | kind::BOOL_LIST => {
            let values = words.take(tag >> 8);
            let text: Vec<String> = match tag & 0xff {
                kind::INT_LIST => values.iter().map(|&v| (v as i64).to_string()).collect(),
                kind::BOOL_LIST => values
                    .iter()
                    .map(|&v| if v != 0 { "True" } else { "False" }.to_owned())
                    .collect(),
                _ => values
                    .iter()
                    .map(|&v| float_text(f64::from_bits(v)))
                    .collect(),
            };
            Input::described(&texts.scalar_list, format!("[{}]", text.join(", ")).into())
        }
        kind::SCALAR_TEXT => Input::described(&texts.scalar, words.text(tag >> 8).into()),
        _ => Input::described(&texts.empty, texts.empty.clone()),
    }
}

/// A float as a `c10::IValue` prints it (torch.profiler's `Concrete Inputs`): an integral
/// value that an `int64_t` holds as the integer and a dot (`1.`, `0.` for -0 too,
/// `100000000000000000.`), anything else with 17 significant digits as C++ streams write
/// them (`%.17g`: `0.10000000000000001`, `1e+20`, `inf`, `nan`). Checked against
/// torch.profiler by the Python tests.
pub(crate) fn float_text(value: f64) -> String {
    // C++ converts with an instruction that gives i64::MIN out of range: of the values
    // outside [-2^63, 2^63), none converts back to itself.
    const INT64_RANGE: std::ops::Range<f64> =
        -9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0;
    if (value.is_normal() || value == 0.0)
        && INT64_RANGE.contains(&value)
        && (value as i64) as f64 == value
    {
        return format!("{}.", value as i64);
    }
    if value.is_nan() {
        return if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .into();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf" } else { "inf" }.into();
    }
    // The exponent of the value rounded to 17 significant digits picks the notation.
    let scientific = format!("{value:.16e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..17).contains(&exponent) {
        let fixed = format!("{value:.*}", (16 - exponent) as usize);
        trim_zeros(&fixed).to_string()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim_zeros(mantissa), exponent.abs())
    }
}

/// `%g`'s trailing zeros, and a dot left bare by them, removed.
fn trim_zeros(number: &str) -> &str {
    if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_a_cpp_ivalue_prints_them() {
        let cases = [
            (1.0, "1."),
            (-0.0, "0."),
            (0.0, "0."),
            (2.5, "2.5"),
            (0.1, "0.10000000000000001"),
            (1e-5, "1.0000000000000001e-05"),
            (1e10, "10000000000."),
            (-1e17, "-100000000000000000."),
            (2f64.powi(63), "9.2233720368547758e+18"),
            (-(2f64.powi(63)), "-9223372036854775808."),
            (1.25e16, "12500000000000000."),
            (1e20, "1e+20"),
            (1.5e-300, "1.5000000000000001e-300"),
            (123456.789, "123456.789"),
            (-3.25, "-3.25"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (5e-324, "4.9406564584124654e-324"),
            (0.0001, "0.0001"),
            (1e-300, "1e-300"),
            (123456.5, "123456.5"),
        ];
        for (value, text) in cases {
            assert_eq!(float_text(value), text, "{value:e}");
        }
    }

    fn words_of(text: &str) -> Vec<u64> {
        text.as_bytes()
            .chunks(8)
            .map(|c| {
                let mut b = [0; 8];
                b[..c.len()].copy_from_slice(c);
                u64::from_ne_bytes(b)
            })
            .collect()
    }

    fn args_of(words: &[u64]) -> Vec<(String, String)> {
        let mut args = Vec::new();
        unpack(words, &mut args);
        args.into_iter()
            .map(|(k, v)| (k.to_string(), v.to_json()))
            .collect()
    }

    #[test]
    fn integers_in_and_past_the_made_once_range_print_in_decimal() {
        let texts = texts();
        let (low, high) = (*SMALL_INTS.start(), *SMALL_INTS.end());
        for value in [i64::MIN, low - 1, low, -1, 0, 1, high, high + 1, i64::MAX] {
            assert_eq!(&*texts.int(value), value.to_string(), "{value}");
        }
        // Made once: the same text, not a copy.
        assert!(Arc::ptr_eq(&texts.int(1), &texts.int(1)));
    }

    #[test]
    fn every_input_kind_unpacks_as_torch_profiler_writes_it() {
        name_dtype(6, "float");
        let tensor = kind::TENSOR | (6 << 8) | STRIDED;
        let minus = |v: i64| v as u64;
        let mut words = vec![0, 0, 0, 10];
        words.extend([tensor, 2, 2, 3, 3, 1]);
        words.extend([kind::TENSOR | (6 << 8), 1, 4]);
        words.extend([
            kind::BOOL,
            1,
            kind::INT,
            minus(-7),
            kind::DOUBLE,
            0.5f64.to_bits(),
        ]);
        words.extend([kind::INT_LIST | (2 << 8), 1, minus(-1)]);
        words.extend([kind::DOUBLE_LIST | (1 << 8), 2.0f64.to_bits()]);
        words.extend([kind::BOOL_LIST | (3 << 8), 0, 1, 1]);
        words.extend([
            kind::TENSOR_LIST | (2 << 8),
            tensor,
            1,
            4,
            1,
            kind::OTHER,
            kind::OTHER,
        ]);
        assert_eq!(
            args_of(&words),
            [
                ("Input Dims", "[[2, 3], [4], [], [], [], [], [], [], [[4], []], []]"),
                ("Input Strides", "[[3, 1], [], [], [], [], [], [], [], [[1], []], []]"),
                (
                    "Input type",
                    r#"["float", "float", "Scalar", "Scalar", "Scalar", "ScalarList", "ScalarList", "ScalarList", "TensorList", ""]"#
                ),
                (
                    "Concrete Inputs",
                    r#"["", "", "True", "-7", "0.5", "[1, -1]", "[2.]", "[False, True, True]", "", ""]"#
                ),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn a_tensor_list_of_more_than_thirty_is_written_without_dims_but_keeps_its_storages() {
        name_dtype(6, "float");
        let list = |len: u64, storage: u64| {
            let mut words = vec![0, 0, 0, 2, kind::TENSOR_LIST | (len << 8)];
            for i in 0..len {
                words.extend([kind::TENSOR | (6 << 8) | STRIDED | storage, 1, 4, 1]);
                if storage != 0 {
                    words.extend([0x1000 + 16 * i, 16, u64::from(-1i8 as u8) << 8]);
                }
            }
            words.extend([kind::INT, 0]);
            words
        };
        let shown = args_of(&list(30, 0));
        assert_eq!(
            shown[0].1,
            format!("[[{}], []]", vec!["[4]"; 30].join(", "))
        );
        assert_eq!(
            shown[1].1,
            format!("[[{}], []]", vec!["[1]"; 30].join(", "))
        );
        let long = args_of(&list(31, 0));
        assert_eq!(long[0], ("Input Dims".into(), "[[], []]".into()));
        assert_eq!(long[1], ("Input Strides".into(), "[[], []]".into()));
        assert_eq!(long[2].1, r#"["TensorList", "Scalar"]"#);
        assert_eq!(long[3].1, r#"["", "0"]"#);
        // The words after the list are read where they are, and each tensor's storage kept.
        let mut args = Vec::new();
        unpack(&list(31, STORAGE), &mut args);
        assert_eq!(args.len(), 5, "the four texts and the storages");
        assert_eq!(args[3].1.to_json(), r#"["", "0"]"#);
        let Value::List(fields) = &args[4].1 else {
            panic!("storages: {:?}", args[4]);
        };
        // Four fields a storage: the last one's address is the 31st tensor's.
        assert_eq!(fields.len(), 31 * 4);
        assert_eq!(fields[30 * 4], Value::Int(0x1000 + 16 * 30));
    }

    #[test]
    fn flops_a_hierarchy_and_a_text_scalar_unpack_after_the_inputs() {
        let hierarchy = "TOP(M)::forward.";
        let mut words = vec![0, 42, hierarchy.len() as u64];
        words.extend(words_of(hierarchy));
        words.extend([1, kind::SCALAR_TEXT | (6 << 8)]);
        words.extend(words_of("(1+2j)"));
        let args = args_of(&words);
        let keys: Vec<_> = args.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "Input Dims",
                "Input Strides",
                "Input type",
                "Concrete Inputs",
                "flops",
                "Module Hierarchy"
            ]
        );
        assert_eq!(args[3].1, r#"["(1+2j)"]"#);
        assert_eq!(args[4].1, "42");
        assert_eq!(args[5].1, r#""TOP(M)::forward.""#);
    }

    #[test]
    fn a_torchscript_functions_scope_rides_above_its_hierarchys_length() {
        let hierarchy = "TOP(M)::forward.";
        let mut words = vec![0, 0, (2 << SCOPE_SHIFT) | hierarchy.len() as u64];
        words.extend(words_of(hierarchy));
        words.extend([0, 0]);
        assert_eq!(
            args_of(&words),
            [
                ("Module Hierarchy".into(), r#""TOP(M)::forward.""#.into()),
                ("Record scope".into(), "2".into())
            ]
        );
        assert_eq!(args_of(&[0, 0, 2 << SCOPE_SHIFT, 0, 0]).len(), 1);
    }

    #[test]
    fn a_collectives_fields_unpack_last_as_the_json_pytorch_gave() {
        let mut words = vec![0, 0, 0, 0, 0, 3];
        for (key, value) in [
            ("Collective name", r#""allreduce""#),
            ("Group size", "2"),
            ("Odd", "not json"),
        ] {
            words.push(key.len() as u64);
            words.extend(words_of(key));
            words.push(value.len() as u64);
            words.extend(words_of(value));
        }
        assert_eq!(
            args_of(&words),
            [
                ("Collective name".into(), r#""allreduce""#.into()),
                ("Group size".into(), "2".into()),
                ("Odd".into(), r#""not json""#.into())
            ]
        );
        // Cut short: what is there, no panic.
        assert_eq!(args_of(&words[..9]).len(), 1);
    }

    #[test]
    fn an_overload_name_unpacks_last_after_the_inputs() {
        let mut words = vec![0, 0, 0, 1, kind::INT, 3, "Tensor".len() as u64];
        words.extend(words_of("Tensor"));
        let args = args_of(&words);
        assert_eq!(
            args.last(),
            Some(&("Overload Name".into(), r#""Tensor""#.into()))
        );
        assert_eq!(args.len(), 5);
    }

    #[test]
    fn an_op_without_inputs_gets_no_input_args_and_cut_words_describe_less() {
        assert!(args_of(&[0, 0, 0, 0]).is_empty());
        assert_eq!(args_of(&[0, 7, 0, 0]), [("flops".into(), "7".into())]);
        // Two inputs announced, the words end inside the first.
        let cut = args_of(&[0, 0, 0, 2, kind::TENSOR | STRIDED, 3, 5]);
        assert_eq!(cut[0].1, "[[5], []]");
    }

    #[test]
    fn a_record_function_handle_becomes_the_first_arg() {
        assert_eq!(
            args_of(&[23, 5, 0, 0]),
            [
                ("Record function id".into(), "23".into()),
                ("flops".into(), "5".into())
            ]
        );
    }

    #[test]
    fn storages_leave_the_text_as_it_is_and_ride_in_an_arg_taken_off_the_trace() {
        use omniprof_trace::{Activity, ActivityType, Trace};

        name_dtype(6, "float");
        let tensor = kind::TENSOR | (6 << 8) | STRIDED;
        let mut plain = vec![0, 0, 0, 2];
        plain.extend([tensor, 2, 2, 3, 3, 1]);
        plain.extend([kind::TENSOR_LIST | (1 << 8), tensor, 1, 4, 1]);
        // Type 0 (the CPU), index -1.
        let cpu = u64::from(-1i8 as u8) << 8;
        let cuda1 = 1 | (1 << 8);
        let mut with_storages = vec![0, 0, 0, 2];
        with_storages.extend([tensor | STORAGE, 2, 2, 3, 3, 1, 0xa0, 24, cpu]);
        with_storages.extend([kind::TENSOR_LIST | (1 << 8), tensor | STORAGE, 1, 4, 1]);
        with_storages.extend([0xb0, 16, cuda1]);

        let text = args_of(&plain);
        let mut args = Vec::new();
        unpack(&with_storages, &mut args);
        let mut op = Activity::new(ActivityType::CpuOp, "aten::cat", 1, 1, 50, 60);
        op.args = args;
        let mut trace = Trace::new(0, 100);
        trace.activities.push(op);
        let reads = storage_reads::take(&mut trace);
        let unpacked: Vec<(String, String)> = trace.activities[0]
            .args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_json()))
            .collect();
        assert_eq!(unpacked, text);
        let read = |device_type, device_index, address, bytes| omniprof_analysis::StorageRead {
            time_ns: 50,
            device_type,
            device_index,
            address,
            bytes,
        };
        assert_eq!(reads, [read(0, -1, 0xa0, 24), read(1, 1, 0xb0, 16)]);
    }
}
