//! The small JSON-writing primitives shared by the writers: string escaping, `µs.nnn` time
//! formatting and [`Value`] serialization. All of them append to a byte buffer by hand,
//! without serde, because they run once per event; a run of fields of bounded size is
//! written through a [`Room`], which appends it at once.

use std::mem::MaybeUninit;

use crate::value::Value;

impl Value {
    /// The value as JSON text, exactly as the Chrome writer emits it.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        write_value(&mut out, self);
        String::from_utf8(out).expect("the JSON writer emits UTF-8")
    }
}

/// Bytes that cannot appear raw inside a JSON string.
const fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether any byte of `bytes` must be escaped, eight bytes at a time (see
/// [`word_needs_escape`]); the bytes after the last whole word are checked as one word too,
/// overlapping the one before or repeating some of them, where a byte at a time took a
/// comparison and a branch per byte (a tenth of the Chrome writer's instructions).
#[inline]
fn any_needs_escape(bytes: &[u8]) -> bool {
    let mut words = bytes.chunks_exact(8);
    if words.any(|w| word_needs_escape(word(w))) {
        return true;
    }
    let tail = words.remainder();
    let last = match tail.len() {
        0 => return false,
        // Overlapping the last whole word.
        _ if bytes.len() >= 8 => word(&bytes[bytes.len() - 8..]),
        4.. => {
            let half = |b: &[u8]| u64::from(u32::from_ne_bytes(b.try_into().expect("four")));
            half(&tail[..4]) | half(&tail[tail.len() - 4..]) << 32
        }
        n => {
            let (a, b, c) = (tail[0], tail[n / 2], tail[n - 1]);
            u64::from_ne_bytes([a, b, c, a, b, c, a, b])
        }
    };
    word_needs_escape(last)
}

/// Eight bytes as a word (in memory order, which the tests below do not depend on).
#[inline(always)]
fn word(bytes: &[u8]) -> u64 {
    u64::from_ne_bytes(bytes.try_into().expect("eight bytes"))
}

/// Whether a byte of `w` is a control byte, a `"` or a `\`: each test sets the top bit of
/// some byte exactly when a byte is below 0x20, or zero once xored with the character.
#[inline(always)]
fn word_needs_escape(w: u64) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const TOPS: u64 = ONES << 7;
    let below = |w: u64, n: u64| w.wrapping_sub(ONES * n) & !w;
    let control = below(w, 0x20);
    let quote = below(w ^ (ONES * u64::from(b'"')), 1);
    let backslash = below(w ^ (ONES * u64::from(b'\\')), 1);
    (control | quote | backslash) & TOPS != 0
}

/// Appends `s` as a JSON string literal, escaped per RFC 8259.
#[inline]
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    write_str_rest(out, s);
}

/// Appends `s` escaped and its closing quote: a JSON string literal after its opening
/// quote.
#[inline]
pub(crate) fn write_str_rest(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    if !any_needs_escape(bytes) {
        out.extend_from_slice(bytes);
    } else {
        write_escaped(out, bytes);
    }
    out.push(b'"');
}

#[cold]
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        if !needs_escape(b) {
            out.push(b);
            continue;
        }
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
            ]),
            _ => out.push(b),
        }
    }
}

/// Appends nanoseconds as microseconds with exactly three decimals (`1234567` → `1234.567`),
/// from integers only; negative values are written as `0.000`.
#[inline]
pub(crate) fn write_us(out: &mut Vec<u8>, ns: i64) {
    room::<NUMBER_ROOM, _>(out, |r| r.us(ns));
}

/// Appends a signed integer.
#[inline]
pub(crate) fn write_i64(out: &mut Vec<u8>, v: i64) {
    room::<NUMBER_ROOM, _>(out, |r| r.i64(v));
}

/// Appends an unsigned integer.
#[inline]
pub(crate) fn write_u64(out: &mut Vec<u8>, v: u64) {
    room::<NUMBER_ROOM, _>(out, |r| r.u64(v));
}

/// The room a number needs in a [`Room`]: a sign, then the window its digits are written
/// into (of which it keeps what it takes).
pub(crate) const NUMBER_ROOM: usize = 1 + DIGIT_WINDOW;

/// The window digits are written into: the 20 digits of `u64::MAX`, or 17 and the point and
/// decimals of [`Room::us`].
const DIGIT_WINDOW: usize = 21;

/// Room appended to a buffer for a run of text of at most `N` bytes (see [`room`]), written
/// through a cursor in a register: appending to the `Vec` piece by piece reloads its length
/// and capacity from memory at each piece (a byte store may alias them) and checks the
/// capacity, which costs more than most pieces.
pub(crate) struct Room<'a> {
    /// The buffer's spare capacity, `N` bytes of it.
    bytes: &'a mut [MaybeUninit<u8>],
    /// The bytes written so far: every byte before it is written.
    at: usize,
}

/// Makes room for `N` bytes in `out` for `write` to write into, and appends what it wrote.
/// It writes into the buffer's spare capacity, which is neither zeroed first (zeroing
/// rooms was a twentieth of the Chrome writer's instructions) nor read.
#[inline(always)]
pub(crate) fn room<const N: usize, R>(
    out: &mut Vec<u8>,
    write: impl FnOnce(&mut Room<'_>) -> R,
) -> R {
    out.reserve(N);
    let start = out.len();
    let mut room = Room {
        bytes: &mut out.spare_capacity_mut()[..N],
        at: 0,
    };
    let result = write(&mut room);
    let written = room.at;
    // SAFETY: a room writes every byte before `at` (it moves `at` only past bytes it
    // wrote), within the spare capacity reserved for it.
    unsafe { out.set_len(start + written) };
    result
}

/// Bytes as bytes that may be uninitialized (the same layout; they are initialized).
#[inline(always)]
fn as_uninit(bytes: &[u8]) -> &[MaybeUninit<u8>] {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and an initialized byte is a valid
    // `MaybeUninit<u8>`; the slice is only read.
    unsafe { &*(bytes as *const [u8] as *const [MaybeUninit<u8>]) }
}

impl Room<'_> {
    /// The bytes written so far.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.at
    }

    /// Appends `bytes`.
    #[inline(always)]
    pub(crate) fn raw(&mut self, bytes: &[u8]) {
        self.bytes[self.at..][..bytes.len()].copy_from_slice(as_uninit(bytes));
        self.at += bytes.len();
    }

    /// Appends an unsigned integer.
    #[inline(always)]
    pub(crate) fn u64(&mut self, v: u64) {
        let digits = decimal_digits(v);
        put_digits(self.window(), digits, v);
        self.at += digits;
    }

    /// Appends a signed integer.
    #[inline(always)]
    pub(crate) fn i64(&mut self, v: i64) {
        if v < 0 {
            self.raw(b"-");
        }
        self.u64(v.unsigned_abs());
    }

    /// Appends nanoseconds as microseconds, as [`write_us`].
    #[inline(always)]
    pub(crate) fn us(&mut self, ns: i64) {
        let ns = ns.max(0) as u64;
        let (us, frac) = (ns / 1000, (ns % 1000) as usize);
        let digits = decimal_digits(us);
        let window = self.window();
        put_digits(window, digits, us);
        window[digits].write(b'.');
        window[digits + 1].write(b'0' + (frac / 100) as u8);
        window[digits + 2..digits + 4].copy_from_slice(pair(frac % 100));
        self.at += digits + 4;
    }

    /// Appends nanoseconds as microseconds, as [`us`](Self::us), taking the digits above
    /// the last four from `high` when they are the same as the last time's: times written
    /// one after the other share them (a `ts` counts 10 to 13 digits, and its last four
    /// change every 10 ms), so most times cost four digits, not a dozen.
    #[inline(always)]
    pub(crate) fn us_after(&mut self, high: &mut HighDigits, ns: i64) {
        let ns = ns.max(0) as u64;
        let (us, frac) = (ns / 1000, (ns % 1000) as usize);
        if us < HighDigits::LOW {
            return self.us(ns as i64);
        }
        let (top, low) = (us / HighDigits::LOW, (us % HighDigits::LOW) as usize);
        if top != high.value {
            high.len = decimal_digits(top);
            high.value = top;
            let mut window = [MaybeUninit::new(0); DIGIT_WINDOW];
            put_digits(&mut window, high.len, top);
            for (text, digit) in high.text.iter_mut().zip(window) {
                // SAFETY: every byte of the window was initialized, with 0 or a digit.
                *text = unsafe { digit.assume_init() };
            }
        }
        let len = high.len;
        let window = self.window();
        window[..HighDigits::TEXT].copy_from_slice(as_uninit(&high.text));
        window[len..len + 2].copy_from_slice(pair(low / 100));
        window[len + 2..len + 4].copy_from_slice(pair(low % 100));
        window[len + 4].write(b'.');
        window[len + 5].write(b'0' + (frac / 100) as u8);
        window[len + 6..len + 8].copy_from_slice(pair(frac % 100));
        self.at += len + 8;
    }

    /// The window the next number is written into: of fixed size, so that the digits'
    /// positions in it need no checks.
    #[inline(always)]
    fn window(&mut self) -> &mut [MaybeUninit<u8>; DIGIT_WINDOW] {
        self.bytes[self.at..]
            .first_chunk_mut()
            .expect("a room holds a number's window past its text")
    }
}

/// The digits of a microsecond count above its last four, as [`Room::us_after`] wrote them
/// last.
#[derive(Default)]
pub(crate) struct HighDigits {
    /// The microseconds above the last four (0: none yet, as times of four digits are
    /// written whole).
    value: u64,
    /// The digits, then bytes that do not matter: copied whole, the text is one store.
    text: [u8; Self::TEXT],
    len: usize,
}

impl HighDigits {
    /// The microseconds below the high digits.
    const LOW: u64 = 10_000;
    /// Room for the digits of `u64::MAX / 1000 / LOW` (13).
    const TEXT: usize = 16;
}

/// The two digits of each number below 100, in order.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
                            2021222324252627282930313233343536373839\
                            4041424344454647484950515253545556575859\
                            6061626364656667686970717273747576777879\
                            8081828384858687888990919293949596979899";

/// How many decimal digits `v` takes: estimated from its bit length (`1233 / 4096` is just
/// above log10 2), then corrected by one comparison, where `ilog10` took a dozen steps.
#[inline(always)]
fn decimal_digits(v: u64) -> usize {
    const POWERS: [u64; 20] = {
        let mut powers = [1; 20];
        let mut i = 1;
        while i < 20 {
            powers[i] = powers[i - 1] * 10;
            i += 1;
        }
        powers
    };
    // 0 takes a digit, as 1 does.
    let v = v | 1;
    let guess = (((64 - v.leading_zeros()) * 1233) >> 12) as usize;
    guess + usize::from(v >= POWERS[guess])
}

/// Writes the `digits` decimal digits of `v` at the start of `window`, a pair at a time
/// from the last. (Formatted into a local array and copied out, the digits would be read
/// back as one vector just after being stored a pair at a time, which stalls the load for
/// longer than the digits take: store-to-load forwarding fails.)
///
/// Four digits a step: half the divisions of two a step, and each step's two pairs come from
/// the same remainder.
#[inline(always)]
fn put_digits(window: &mut [MaybeUninit<u8>; DIGIT_WINDOW], digits: usize, mut v: u64) {
    let mut end = digits;
    while v >= 10_000 {
        let four = (v % 10_000) as usize;
        v /= 10_000;
        end -= 4;
        window[end..end + 2].copy_from_slice(pair(four / 100));
        window[end + 2..end + 4].copy_from_slice(pair(four % 100));
    }
    if v >= 100 {
        end -= 2;
        window[end..end + 2].copy_from_slice(pair((v % 100) as usize));
        v /= 100;
    }
    if v >= 10 {
        window[..2].copy_from_slice(pair(v as usize));
    } else {
        window[0].write(b'0' + v as u8);
    }
}

/// The two digits of `n` (below 100).
#[inline(always)]
fn pair(n: usize) -> &'static [MaybeUninit<u8>] {
    as_uninit(&PAIRS[n * 2..][..2])
}

/// Appends a float; non-finite values (which JSON cannot hold) are written as `null`.
///
/// A float is written plain (`1234.5`; an integer exactly, with `.0`) unless that is more
/// than twice as long as its shortest digits with an exponent (`1e9`, `1.5e-300`), which
/// read back as the same float: plain alone spells `1e300` with 301 digits and `1e9` as
/// `1000000000.0`, so a `deviceProperties` of such numbers, read within the reader's header
/// limit, was written 3.5 times larger and no longer read back. Common values (`100.0`,
/// `0.001`, integers of up to 20 digits) keep the plain form Kineto and Python write; none
/// takes more than twice its shortest form.
pub(crate) fn write_float(out: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    let start = out.len();
    write_plain_float(out, v);
    let plain = out.len() - start;
    // An exponent form takes at least three bytes (`1e5`).
    if plain > 6 {
        let exp = format!("{v:e}");
        if plain > 2 * exp.len() {
            out.truncate(start);
            out.extend_from_slice(exp.as_bytes());
        }
    }
}

/// A finite float without an exponent.
fn write_plain_float(out: &mut Vec<u8>, v: f64) {
    if v.fract() == 0.0 && (-9_223_372_036_854_775_808.0..18_446_744_073_709_551_616.0).contains(&v)
    {
        // An integer in the range of i64 or u64 is written exactly, so that it reads back as
        // the same number: past 2^53, `Display` pads the shortest digits with zeros, which
        // spells another integer. The `.0` keeps it a float when read back.
        if v < 0.0 {
            write_i64(out, v as i64);
        } else {
            write_u64(out, v as u64);
        }
        out.extend_from_slice(b".0");
    } else if v.fract() == 0.0 {
        out.extend_from_slice(format!("{v}.0").as_bytes());
    } else {
        out.extend_from_slice(format!("{v}").as_bytes());
    }
}

/// Appends a value, with `, ` and `: ` between items as Kineto spells them (HTA finds the
/// rank by the text `"rank": `).
pub(crate) fn write_value(out: &mut Vec<u8>, v: &Value) {
    write_value_with(out, v, b", ", b": ");
}

/// Appends a value with no space between items: the header's form when the spaced one
/// would not fit the reader's limit (see [`chrome`](super::chrome)).
pub(crate) fn write_value_compact(out: &mut Vec<u8>, v: &Value) {
    write_value_with(out, v, b",", b":");
}

fn write_value_with(out: &mut Vec<u8>, v: &Value, comma: &[u8], colon: &[u8]) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Int(i) => write_i64(out, *i),
        Value::UInt(u) => write_u64(out, *u),
        Value::Float(f) => write_float(out, *f),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Str(s) => write_str(out, s),
        Value::List(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(comma);
                }
                write_value_with(out, item, comma, colon);
            }
            out.push(b']');
        }
        Value::Map(entries) => {
            out.push(b'{');
            for (i, (key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(comma);
                }
                write_str(out, key);
                out.extend_from_slice(colon);
                write_value_with(out, value, comma, colon);
            }
            out.push(b'}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn microseconds_have_three_decimals() {
        assert_eq!(
            s(|o| write_us(o, 4_385_904_291_872_315)),
            "4385904291872.315"
        );
        assert_eq!(s(|o| write_us(o, 5)), "0.005");
        assert_eq!(s(|o| write_us(o, 1000)), "1.000");
        assert_eq!(s(|o| write_us(o, -7)), "0.000");
    }

    #[test]
    fn integers_match_the_standard_formatting() {
        for v in [0u64, 7, 10, 99, 100, 12345, 1 << 53, u64::MAX] {
            assert_eq!(s(|o| write_u64(o, v)), v.to_string());
        }
        // Every digit count, at its edges, and a spread of values between.
        let edges = (0..20).flat_map(|k| {
            let p = 10u64.pow(k);
            [p - 1, p, p + 1, p.saturating_mul(5).saturating_add(4_321)]
        });
        let spread = (0..100_000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 64));
        for v in edges.chain(spread) {
            assert_eq!(s(|o| write_u64(o, v)), v.to_string());
            let ns = v as i64 & i64::MAX;
            let us = format!("{}.{:03}", ns / 1000, ns % 1000);
            assert_eq!(s(|o| write_us(o, ns)), us);
        }
        assert_eq!(s(|o| write_i64(o, -42)), "-42");
        assert_eq!(s(|o| write_i64(o, i64::MIN)), i64::MIN.to_string());
    }

    #[test]
    fn a_byte_to_escape_is_found_at_any_place_in_strings_of_any_length() {
        for len in 1..=20 {
            for at in 0..len {
                for b in 0..=u8::MAX {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = b;
                    assert_eq!(
                        any_needs_escape(&bytes),
                        needs_escape(b),
                        "byte {b:#04x} at {at} of {len}"
                    );
                }
            }
        }
        // Bytes next to the ones tested (a borrow across bytes) and UTF-8 are no match.
        assert!(!any_needs_escape("!#[]~\u{7f}é😀 !#".as_bytes()));
        assert!(!any_needs_escape(b""));
    }

    #[test]
    fn times_that_share_high_digits_are_written_as_times_written_alone() {
        let mut high = HighDigits::default();
        let mut after = |ns: i64| s(|o| room::<NUMBER_ROOM, _>(o, |r| r.us_after(&mut high, ns)));
        let times = [
            4_320_000_123_456_789,
            4_320_000_123_456_790,
            4_320_000_129_999_999,
            4_320_000_130_000_000,
            9_999_999,
            10_000_000,
            10_000_001,
            -5,
            4_320_000_130_000_001,
            i64::MAX,
            i64::MAX - 1_000,
        ];
        for ns in times {
            assert_eq!(after(ns), s(|o| write_us(o, ns)), "{ns}");
        }
    }

    #[test]
    fn strings_are_escaped_and_round_trip() {
        for name in [
            r#"{"device": "cpu", "dtype": "float32"}(12): run"#,
            "aten::addmm",
            r#"thread "with" quotes"#,
            "C:\\path\\to\nfile\t\u{1}\u{1f}é😀",
        ] {
            let json = s(|o| write_str(o, name));
            let back: String = serde_json::from_str(&json).unwrap();
            assert_eq!(back, name);
        }
        assert_eq!(s(|o| write_str(o, "\u{1}")), r#""\u0001""#);
    }

    #[test]
    fn values_are_written_as_json() {
        assert_eq!(s(|o| write_value(o, &Value::Float(f64::NAN))), "null");
        assert_eq!(s(|o| write_value(o, &Value::Float(87.5))), "87.5");
        let rank: Value = [("rank", 0i64)].into_iter().collect();
        assert_eq!(rank.to_json(), r#"{"rank": 0}"#);
        assert_eq!(Value::from("not json").to_json(), r#""not json""#);
        assert_eq!(Value::Null.to_json(), "null");
    }

    #[test]
    fn integral_floats_are_written_as_their_exact_integer_and_stay_floats() {
        assert_eq!(s(|o| write_float(o, -0.0)), "0.0");
        assert_eq!(s(|o| write_float(o, 12.0)), "12.0");
        assert_eq!(
            s(|o| write_float(o, 2.316481084218713e17)),
            "231648108421871296.0"
        );
        assert_eq!(
            s(|o| write_float(o, -(2f64.powi(63)))),
            format!("{}.0", i64::MIN)
        );
        assert_eq!(
            s(|o| write_float(o, 2f64.powi(64) - 2048.0)),
            "18446744073709549568.0"
        );
        // Past u64, the float's shortest digits with an exponent, not 21 digits.
        assert_eq!(s(|o| write_float(o, 1e20)), "1e20");
        for v in [1.0, -3.0, 1e20] {
            let text = s(|o| write_value(o, &Value::Float(v)));
            let back: Value = serde_json::from_str(&text).unwrap();
            assert!(
                matches!(back, Value::Float(f) if f == v),
                "{text} read as {back:?}"
            );
        }
    }

    #[test]
    fn floats_take_the_shorter_of_the_plain_and_exponent_forms() {
        for (v, text) in [
            (1e9, "1e9"),
            (-1e300, "-1e300"),
            (1.5e-300, "1.5e-300"),
            (100.0, "100.0"),
            (123456.0, "123456.0"),
            (1_000_000.0, "1e6"),
            (0.001, "0.001"),
            (0.00001, "0.00001"),
            (0.0000001, "1e-7"),
            (87.5, "87.5"),
        ] {
            assert_eq!(s(|o| write_float(o, v)), text);
        }
        // A list of a million `1e9`s is as long as it was read (plus the spaces).
        let list = Value::List(vec![Value::Float(1e9); 1000]);
        assert_eq!(list.to_json().len(), 1000 * 3 + 999 * 2 + 2);
        let mut compact = Vec::new();
        write_value_compact(&mut compact, &list);
        assert_eq!(compact.len(), 1000 * 3 + 999 + 2);
    }

    #[test]
    fn floats_read_back_as_the_same_number() {
        for v in [
            -2.409967748125284e-275,
            0.1,
            87.5,
            2.316481084218713e17,
            1e20,
            5e-324,
            f64::MAX,
            f64::MIN,
            1e9,
            1.5e-300,
            -1e300,
        ] {
            let back: Value = serde_json::from_str(&Value::Float(v).to_json()).unwrap();
            assert_eq!(back, Value::Float(v), "{v:e}");
        }
    }
}
