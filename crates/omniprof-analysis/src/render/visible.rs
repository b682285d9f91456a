//! Control characters made visible. A name read from a trace may hold ESC, BEL, CR or a
//! line break, which a terminal obeys (retitling it, erasing or overwriting rows) and which
//! break a table's lines; the text tables and the flame graph's frames print each C0 or C1
//! control character and DEL as its Rust escape, `\u{1b}`, and leave every other
//! character as it is (a backslash too, so names without control characters print as
//! before; an escape is therefore not told apart from a name spelling one).

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with each control character (C0, DEL, C1: Unicode's `Cc`) written as `\u{<hex>}`;
/// borrowed when it has none.
///
/// ```
/// use omniprof_analysis::visible;
///
/// assert_eq!(visible("a\u{1b}]0;x\u{7}b\r\n"), r"a\u{1b}]0;x\u{7}b\u{d}\u{a}");
/// assert_eq!(visible("aten::mm"), "aten::mm");
/// ```
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            // Writing into a `String` cannot fail.
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}
