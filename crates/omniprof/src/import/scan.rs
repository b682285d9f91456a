//! A chunked scanner that finds where each JSON value ends without parsing it.
//!
//! The reader walks the document's outer structure (the top-level object and the
//! `traceEvents` array) itself and hands each complete value, as one byte slice, to
//! `serde_json::from_slice`. That keeps memory bounded by the largest single value, lets
//! serde_json borrow strings from the slice, and gives exact byte offsets for errors. Only
//! strings and bracket depth are tracked here; serde_json validates everything else.

use std::io::{ErrorKind, Read};

use super::error::{Position, ReadError, ReadErrorKind};

/// Bytes read per call; the buffer grows only for a single value larger than this.
const CHUNK: usize = 1 << 20;

pub(super) struct Scanner<R> {
    input: R,
    /// `buf[pos..end]` is read but not consumed.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// Input offset of `buf[0]`.
    discarded: u64,
    /// Newlines before `buf[0]`, and the input offset where the line holding `buf[0]` starts;
    /// kept so that errors can give a line and column.
    discarded_lines: u64,
    line_start: u64,
    /// `buf[utf8_start..utf8_end]` is known to be valid UTF-8, so that values can be parsed
    /// as `str` without serde_json validating every string again (see [`unread_str`]).
    ///
    /// [`unread_str`]: Self::unread_str
    utf8_start: usize,
    utf8_end: usize,
}

impl<R: Read> Scanner<R> {
    pub fn new(input: R) -> Self {
        Self {
            input,
            buf: vec![0; CHUNK],
            pos: 0,
            end: 0,
            eof: false,
            discarded: 0,
            discarded_lines: 0,
            line_start: 0,
            utf8_start: 0,
            utf8_end: 0,
        }
    }

    /// The input offset of the next unconsumed byte.
    pub fn offset(&self) -> u64 {
        self.discarded + self.pos as u64
    }

    /// Line and column of an input offset that is still in the buffer (any offset at or after
    /// the start of the last value returned).
    pub fn position(&self, offset: u64) -> Position {
        let rel = usize::try_from(offset.saturating_sub(self.discarded))
            .map_or(self.end, |rel| rel.min(self.end));
        let before = &self.buf[..rel];
        let newlines = count_newlines(before);
        let line_start = match before.iter().rposition(|&b| b == b'\n') {
            Some(i) => self.discarded + i as u64 + 1,
            None => self.line_start,
        };
        Position {
            offset,
            line: self.discarded_lines + newlines + 1,
            column: offset - line_start + 1,
        }
    }

    /// Reads more input after `buf[end]`, first dropping the consumed bytes. Returns false at
    /// the end of the input.
    fn fill(&mut self) -> Result<bool, ReadError> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            let gone = &self.buf[..self.pos];
            self.discarded_lines += count_newlines(gone);
            if let Some(i) = gone.iter().rposition(|&b| b == b'\n') {
                self.line_start = self.discarded + i as u64 + 1;
            }
            self.buf.copy_within(self.pos..self.end, 0);
            self.discarded += self.pos as u64;
            self.end -= self.pos;
            self.utf8_start = self.utf8_start.saturating_sub(self.pos);
            self.utf8_end = self.utf8_end.saturating_sub(self.pos);
            self.pos = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        loop {
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    self.validate_utf8();
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    let at = self.position(self.discarded + self.end as u64);
                    return Err(ReadError::at(at, ReadErrorKind::Io(e)));
                }
            }
        }
    }

    /// Extends the valid UTF-8 region over the bytes read since, from where it ends (or from
    /// `pos` once consumption has passed an invalid sequence).
    fn validate_utf8(&mut self) {
        if self.utf8_end < self.pos {
            (self.utf8_start, self.utf8_end) = (self.pos, self.pos);
        }
        let new = &self.buf[self.utf8_end..self.end];
        self.utf8_end += match std::str::from_utf8(new) {
            Ok(_) => new.len(),
            // Stops before an incomplete character at the end (completed by the next read)
            // or an invalid sequence (which the parser reports when it gets there).
            Err(e) => e.valid_up_to(),
        };
    }

    /// Skips whitespace (and a leading byte-order mark) and returns the next byte without
    /// consuming it; `None` at the end of the input.
    pub fn peek(&mut self) -> Result<Option<u8>, ReadError> {
        loop {
            while self.pos < self.end {
                match self.buf[self.pos] {
                    b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                    0xEF if self.offset() == 0 => self.skip_bom()?,
                    b => return Ok(Some(b)),
                }
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    fn skip_bom(&mut self) -> Result<(), ReadError> {
        while self.end - self.pos < 3 && self.fill()? {}
        if self.buf[self.pos..self.end].starts_with(b"\xEF\xBB\xBF") {
            self.pos += 3;
            Ok(())
        } else {
            Err(self.unexpected(0xEF, "a JSON value"))
        }
    }

    /// Consumes `byte` after optional whitespace, or fails saying `expected`.
    pub fn expect(&mut self, byte: u8, expected: &str) -> Result<(), ReadError> {
        match self.peek()? {
            Some(b) if b == byte => {
                self.pos += 1;
                Ok(())
            }
            Some(other) => Err(self.unexpected(other, expected)),
            None => Err(self.truncated(expected)),
        }
    }

    /// Consumes the byte [`peek`](Self::peek) returned.
    pub fn bump(&mut self) {
        self.pos += 1;
    }

    /// The bytes read but not consumed.
    #[cfg(test)]
    fn unread(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// The longest valid UTF-8 start of the bytes read but not consumed, for parsing a value
    /// in place when it is complete, without validating it again; empty when it is not
    /// known to be valid (the caller then parses the value's bytes).
    pub fn unread_str(&self) -> &str {
        let (start, end) = (self.pos, self.utf8_end);
        // Values and whitespace end on ASCII bytes, so `pos` is on a character boundary;
        // checked anyway, as a continuation byte there would make the slice invalid.
        let on_boundary = self.buf.get(start).is_none_or(|&b| (b as i8) >= -0x40);
        if self.utf8_start <= start && start <= end && on_boundary {
            // SAFETY: `buf[utf8_start..utf8_end]` is valid UTF-8 (checked by `validate_utf8`,
            // and only shifted since, together with the bytes) and `start` lies inside it on
            // a character boundary, so `buf[start..end]` is valid UTF-8 too.
            unsafe { std::str::from_utf8_unchecked(&self.buf[start..end]) }
        } else {
            ""
        }
    }

    /// Consumes `len` bytes of [`unread_str`](Self::unread_str).
    pub fn consume(&mut self, len: usize) {
        self.pos = (self.pos + len).min(self.end);
    }

    /// An error for `found` at the current offset.
    pub fn unexpected(&self, found: u8, expected: &str) -> ReadError {
        let found = match found {
            0x20..=0x7e => format!("`{}`", found as char),
            _ => format!("byte 0x{found:02x}"),
        };
        ReadError::at(
            self.position(self.offset()),
            ReadErrorKind::Syntax(format!("expected {expected}, found {found}")),
        )
    }

    /// An error for the end of the input, at the end of the input.
    pub fn truncated(&self, expected: &str) -> ReadError {
        ReadError::truncated(self.position(self.discarded + self.end as u64), expected)
    }

    /// Consumes the next JSON value and returns its input offset and text. The text is
    /// complete as far as strings and brackets go; the caller parses (and so validates) it.
    pub fn value(&mut self, expected: &str) -> Result<(u64, &[u8]), ReadError> {
        let len = match self.peek()? {
            Some(b'{' | b'[' | b'"') => self.nested_len(expected)?,
            Some(b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => self.scalar_len()?,
            Some(other) => return Err(self.unexpected(other, expected)),
            None => return Err(self.truncated(expected)),
        };
        let start = self.pos;
        self.pos += len;
        Ok((self.discarded + start as u64, &self.buf[start..start + len]))
    }

    /// The length of the string, object or array at `pos`, reading more input as needed.
    fn nested_len(&mut self, expected: &str) -> Result<usize, ReadError> {
        let mut depth = 0u32;
        let mut in_string = false;
        let mut escaped = false;
        let mut len = 0;
        loop {
            for &b in &self.buf[self.pos + len..self.end] {
                len += 1;
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if b == b'\\' {
                        escaped = true;
                    } else if b == b'"' {
                        in_string = false;
                        if depth == 0 {
                            return Ok(len);
                        }
                    }
                } else {
                    match b {
                        b'"' => in_string = true,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Ok(len);
                            }
                        }
                        _ => {}
                    }
                }
            }
            if !self.fill()? {
                return Err(self.truncated(&format!("the end of {expected}")));
            }
        }
    }

    /// The length of the number or literal at `pos`: up to the next delimiter or the end of
    /// the input.
    fn scalar_len(&mut self) -> Result<usize, ReadError> {
        let mut len = 0;
        loop {
            let rest = &self.buf[self.pos + len..self.end];
            match rest
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                Some(i) => return Ok(len + i),
                None => len += rest.len(),
            }
            if !self.fill()? {
                return Ok(len);
            }
        }
    }
}

/// Counts `\n` bytes. Every byte of the input passes through here once, so it is written for
/// speed: a count of at most 255 fits a byte, which lets the compiler compare and add 16 or
/// 32 bytes at a time.
fn count_newlines(bytes: &[u8]) -> u64 {
    bytes
        .chunks(255)
        .map(|chunk| {
            let n = chunk
                .iter()
                .fold(0u8, |n, &b| n.wrapping_add(u8::from(b == b'\n')));
            u64::from(n)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out one byte per call, to exercise every refill path.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            match (self.0.split_first(), out.first_mut()) {
                (Some((&b, rest)), Some(slot)) => {
                    *slot = b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    fn values(text: &str) -> Vec<(u64, String)> {
        let mut s = Scanner::new(Trickle(text.as_bytes()));
        let mut out = Vec::new();
        while s.peek().unwrap().is_some() {
            let (offset, v) = s.value("a value").unwrap();
            out.push((offset, String::from_utf8(v.to_vec()).unwrap()));
            if s.peek().unwrap() == Some(b',') {
                s.bump();
            }
        }
        out
    }

    #[test]
    fn finds_value_ends_across_refills() {
        let text = r#" {"a": "}\"]", "b": [1, {"c": []}]} , "x\\" ,-1.5e3,true, [] "#;
        assert_eq!(
            values(text),
            [
                (1, r#"{"a": "}\"]", "b": [1, {"c": []}]}"#.to_string()),
                (38, r#""x\\""#.to_string()),
                (45, "-1.5e3".to_string()),
                (52, "true".to_string()),
                (58, "[]".to_string()),
            ]
        );
    }

    #[test]
    fn positions_count_lines_and_columns() {
        let mut s = Scanner::new(Trickle(b"\xEF\xBB\xBF\n  [1,\n   22]"));
        assert_eq!(s.peek().unwrap(), Some(b'['));
        let (offset, v) = s.value("a value").unwrap();
        assert_eq!((offset, v), (6, &b"[1,\n   22]"[..]));
        let p = s.position(offset + 8);
        assert_eq!((p.line, p.column), (3, 5));
        assert_eq!(s.position(offset).line, 2);
    }

    #[test]
    fn newlines_are_counted_across_chunks() {
        let text: Vec<u8> = (0..1000)
            .map(|i| if i % 3 == 0 { b'\n' } else { b'x' })
            .collect();
        assert_eq!(count_newlines(&text), 334);
        assert_eq!(count_newlines(&[b'\n'; 255]), 255);
        assert_eq!(count_newlines(b""), 0);
    }

    #[test]
    fn truncated_values_fail_at_the_end() {
        let mut s = Scanner::new(Trickle(b"{\"a\": [1, 2"));
        let err = s.value("an event").unwrap_err();
        assert!(matches!(err.kind, ReadErrorKind::Truncated { .. }), "{err}");
        assert_eq!(err.location.position.unwrap().offset, 11);
        assert!(err.to_string().contains("the end of an event"), "{err}");
    }

    #[test]
    fn unread_str_covers_the_valid_utf8_read_so_far() {
        // `é` split across two reads, then an invalid byte.
        let mut s = Scanner::new(Trickle("[\"é\", 1]".as_bytes()));
        assert_eq!(s.peek().unwrap(), Some(b'['));
        s.bump();
        while s.unread().len() < 3 {
            assert!(s.fill().unwrap());
        }
        assert_eq!(s.unread_str(), "\"é");
        let mut s = Scanner::new(&b"\"a\xff\" 1"[..]);
        assert_eq!(s.peek().unwrap(), Some(b'"'));
        assert_eq!(s.unread_str(), "\"a");
        let (_, v) = s.value("a value").unwrap();
        assert_eq!(v, b"\"a\xff\"");
        // Past the invalid byte, validation starts again.
        assert_eq!(s.peek().unwrap(), Some(b'1'));
        assert!(!s.fill().unwrap());
        assert_eq!(s.unread_str(), "");
    }

    #[test]
    fn a_stray_byte_is_a_syntax_error() {
        let mut s = Scanner::new(&b"  }"[..]);
        let err = s.value("an event").unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1, column 3 (byte 2): invalid JSON: expected an event, found `}`"
        );
    }
}
