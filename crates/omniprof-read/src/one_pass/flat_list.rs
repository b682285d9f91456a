//! Skipping a list of integers, plain decimals and plain strings, or of such lists, spaced
//! as writers space them (`[[64, 1], []]`, `["float", ""]`): most of the args a trace's
//! reader turns away (`Input Dims`, `Input Strides`, `Concrete Inputs`, `Input type`).
//!
//! A byte-driven state machine: each byte is one look-up in [`NEXT`], with its state, which
//! both checks the grammar and finds the list's end, instead of a call per element. It takes
//! only a subset of JSON: anything else (another spacing, an exponent, an escape, a literal,
//! an object, nesting past the depth allowed) gives `None`, and the caller skips the list
//! the general way, which judges it.

/// The states between bytes, each the start of its row in [`NEXT`] (a multiple of 256, so
/// that a state and a byte together are the index of the next state). After `[`: a value or
/// the list's end.
const OPEN: u16 = 0;
/// After `, `: a value.
const VALUE: u16 = 1 << 8;
/// Inside a string.
const STRING: u16 = 2 << 8;
/// After a number's `-`.
const MINUS: u16 = 3 << 8;
/// In an integer's digits (not a lone `0`).
const INT: u16 = 4 << 8;
/// After a number's leading `0`.
const ZERO: u16 = 5 << 8;
/// After a number's `.`.
const POINT: u16 = 6 << 8;
/// In a fraction's digits.
const FRACTION: u16 = 7 << 8;
/// After a string or a list: `,` or `]`.
const AFTER: u16 = 8 << 8;
/// After `,`: its space.
const COMMA: u16 = 9 << 8;
/// The byte opened a list: [`OPEN`], and one level deeper (its row is [`OPEN`]'s).
const PUSH: u16 = 13 << 8;
/// The byte closed a list: [`AFTER`], and one level out (its row is [`AFTER`]'s).
const POP: u16 = 14 << 8;
/// The byte is not what the subset allows (its row is never read).
const BAIL: u16 = 15 << 8;

/// The next state from each state on each byte: at `state + byte`.
static NEXT: [u16; 16 * 256] = {
    let mut next = [BAIL; 16 * 256];
    // Where a value starts.
    let mut s = 0;
    while s < 2 {
        let row = [OPEN, VALUE][s] as usize;
        next[row + b'[' as usize] = PUSH;
        next[row + b'"' as usize] = STRING;
        next[row + b'-' as usize] = MINUS;
        next[row + b'0' as usize] = ZERO;
        let mut d = b'1';
        while d <= b'9' {
            next[row + d as usize] = INT;
            d += 1;
        }
        s += 1;
    }
    next[OPEN as usize + b']' as usize] = POP;
    // A string: any byte but a control character (which JSON refuses) and the backslash
    // (an escape, left to the general way) to its quote. Bytes above 0x7f are parts of
    // characters of text already known to be UTF-8.
    let mut b = 0x20;
    while b < 256 {
        next[STRING as usize + b] = STRING;
        b += 1;
    }
    next[STRING as usize + b'"' as usize] = AFTER;
    next[STRING as usize + b'\\' as usize] = BAIL;
    // Numbers: no leading zero, digits after the point; an exponent is left to the
    // general way.
    let mut d = b'0';
    while d <= b'9' {
        next[INT as usize + d as usize] = INT;
        next[POINT as usize + d as usize] = FRACTION;
        next[FRACTION as usize + d as usize] = FRACTION;
        if d > b'0' {
            next[MINUS as usize + d as usize] = INT;
        }
        d += 1;
    }
    next[MINUS as usize + b'0' as usize] = ZERO;
    next[INT as usize + b'.' as usize] = POINT;
    next[ZERO as usize + b'.' as usize] = POINT;
    // What ends a value: `, ` before the next one, or the list's `]`.
    let mut s = 0;
    while s < 4 {
        let row = [INT, ZERO, FRACTION, AFTER][s] as usize;
        next[row + b',' as usize] = COMMA;
        next[row + b']' as usize] = POP;
        s += 1;
    }
    next[COMMA as usize + b' ' as usize] = VALUE;
    // The level changes are states too, that go on as the states they lead to.
    let mut b = 0;
    while b < 256 {
        next[PUSH as usize + b] = next[OPEN as usize + b];
        next[POP as usize + b] = next[AFTER as usize + b];
        b += 1;
    }
    next
};

/// Where the list whose `[` ends just before `at` ends (just after its `]`), when it is of
/// the subset the module docs describe and nests at most `max_depth` lists deep (itself
/// one); `None` for any other list, or text cut before its end.
///
/// Eight bytes a step (the compiler unrolls the step), one byte at a time for the rest.
#[inline(never)]
pub(super) fn after_flat_list(bytes: &[u8], mut at: usize, max_depth: u32) -> Option<usize> {
    let mut depth = 1;
    let mut state = usize::from(OPEN);
    while let Some(chunk) = bytes.get(at..).and_then(<[u8]>::first_chunk::<8>) {
        for (i, &b) in chunk.iter().enumerate() {
            if let Some(end) = step(&mut state, &mut depth, max_depth, b) {
                return end.then_some(at + i + 1);
            }
        }
        at += 8;
    }
    for (i, &b) in bytes.get(at..)?.iter().enumerate() {
        if let Some(end) = step(&mut state, &mut depth, max_depth, b) {
            return end.then_some(at + i + 1);
        }
    }
    None
}

/// Moves `state` on by `b` and counts `depth` (of lists open): `Some(true)` when `b` closed
/// the outermost list, `Some(false)` when the list is not of the subset, else `None`.
#[inline(always)]
fn step(state: &mut usize, depth: &mut u32, max_depth: u32, b: u8) -> Option<bool> {
    // The mask keeps the index in the table (it always is) without a bounds check.
    *state = usize::from(NEXT[(*state | usize::from(b)) & (NEXT.len() - 1)]);
    if *state < usize::from(PUSH) {
        return None;
    }
    if *state == usize::from(PUSH) {
        if *depth == max_depth {
            return Some(false);
        }
        *depth += 1;
        None
    } else if *state == usize::from(POP) {
        *depth -= 1;
        (*depth == 0).then_some(true)
    } else {
        Some(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the list at the start of `text` ends, its `[` included.
    fn end(text: &[u8]) -> Option<usize> {
        (text.first() == Some(&b'[')).then_some(())?;
        after_flat_list(text, 1, 64)
    }

    #[test]
    fn lists_of_numbers_strings_and_lists_are_stepped_over_to_their_end() {
        for list in [
            "[]",
            "[[]]",
            "[1]",
            "[0, -0, 10, -12, 0.5, -3.25, 1.0]",
            r#"["", "", "a]b", "é, [x"]"#,
            "[[64, 1], [64, 1], [1]]",
            "[[64, 64], [], [[]], [\"float\", 2]]",
        ] {
            let text = format!("{list}, \"next\": 1}}");
            assert_eq!(end(text.as_bytes()), Some(list.len()), "{list}");
            // Cut anywhere before its end, it is not a list.
            for cut in 0..list.len() {
                assert_eq!(end(&text.as_bytes()[..cut]), None, "{list} cut at {cut}");
            }
        }
    }

    #[test]
    fn anything_outside_the_subset_is_left_to_the_general_way() {
        for list in [
            // Valid JSON, but spaced, escaped or typed otherwise.
            "[1,2]",
            "[ 1]",
            "[1 ]",
            "[1,  2]",
            "[1,\n2]",
            "[1e3]",
            "[1.5E-3]",
            r#"["a\"b"]"#,
            "[true]",
            "[null]",
            "[{}]",
            // Not JSON.
            "[01]",
            "[-]",
            "[-01]",
            "[1.]",
            "[.5]",
            "[+1]",
            "[1, ]",
            "[, 1]",
            "[[1], ]",
            "[\"a\u{1}\"]",
            "[\"a]",
            "[1}",
            "[[1]",
        ] {
            assert_eq!(end(list.as_bytes()), None, "{list}");
        }
    }

    #[test]
    fn lists_nest_as_deep_as_allowed_and_no_deeper() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        for max_depth in [1, 2, 64] {
            let n = max_depth as usize;
            let deepest = nested(n);
            assert_eq!(
                after_flat_list(deepest.as_bytes(), 1, max_depth),
                Some(2 * n)
            );
            let deeper = nested(n + 1);
            assert_eq!(after_flat_list(deeper.as_bytes(), 1, max_depth), None);
        }
    }
}
