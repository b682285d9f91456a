//! Text cut to a size: the one place that finds where a UTF-8 string may be cut.

/// The longest prefix of `text` that is at most `max_bytes` long and ends on a character
/// boundary (so it is valid UTF-8): `text` itself when it fits.
///
/// ```
/// use omniprof_trace::prefix_within;
///
/// assert_eq!(prefix_within("héllo", 2), "h");
/// assert_eq!(prefix_within("héllo", 3), "hé");
/// assert_eq!(prefix_within("hi", 10), "hi");
/// ```
pub fn prefix_within(text: &str, max_bytes: usize) -> &str {
    let mut end = text.len().min(max_bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
