//! A chunked scanner that finds where each JSON value ends without parsing it.
//!
//! The reader walks the document's outer structure (the top-level object and the
//! `traceEvents` array) itself and hands each complete value, as one byte slice, to
//! `serde_json::from_slice`. That keeps memory bounded by the largest single value, lets
//! serde_json borrow strings from the slice, and gives exact byte offsets for errors. Only
//! strings and bracket depth are tracked here; serde_json validates everything else.

use std::io::{self, ErrorKind, Read};
use std::mem;

use super::error::{Position, ReadError, ReadErrorKind};
use omniprof_trace::prefix_within;

/// Bytes read per call, and the buffer's first size: it grows for a window of events, or for
/// a single value larger than this.
const CHUNK: usize = 1 << 20;

/// Room kept before the input read ahead, for the unread end of the buffer (usually an event
/// cut by the end of a window) to go in front of it when the two are joined.
const RESERVE: usize = 64 << 10;

pub(super) struct Scanner<R> {
    input: R,
    /// `buf[pos..end]` is read but not consumed.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// Input offset of `buf[0]`.
    discarded: u64,
    /// Newlines before `buf[counted]`, and the input offset where the line holding
    /// `buf[counted]` starts; kept so that errors can give a line and column. Consumed bytes
    /// are counted when they are dropped, or [by the caller](Self::consume_counted).
    lines: u64,
    line_start: u64,
    counted: usize,
    /// `buf[utf8_start..utf8_end]` is known to be valid UTF-8, so that values can be parsed
    /// as `str` without serde_json validating every string again (see [`unread_str`]).
    ///
    /// [`unread_str`]: Self::unread_str
    utf8_start: usize,
    utf8_end: usize,
    /// A read error met while [reading ahead](Self::fill_window), kept until the bytes
    /// before it are consumed, so that it is reported where reading one chunk at a time
    /// would have reported it.
    error: Option<io::Error>,
    /// The input after the buffer, read while the buffer's text was parsed ([`window`]):
    /// `ahead[RESERVE..RESERVE + ahead_len]`, of which the first `ahead_valid` bytes are
    /// known to be valid UTF-8. Joined to the buffer when the buffer runs dry.
    ///
    /// [`window`]: Self::window
    ahead: Vec<u8>,
    ahead_len: usize,
    ahead_valid: usize,
}

impl<R: Read> Scanner<R> {
    pub(super) fn new(input: R) -> Self {
        Self {
            input,
            buf: vec![0; CHUNK],
            pos: 0,
            end: 0,
            eof: false,
            discarded: 0,
            lines: 0,
            line_start: 0,
            counted: 0,
            utf8_start: 0,
            utf8_end: 0,
            error: None,
            ahead: Vec::new(),
            ahead_len: 0,
            ahead_valid: 0,
        }
    }

    /// The input offset of the next unconsumed byte.
    pub(super) fn offset(&self) -> u64 {
        self.discarded + self.pos as u64
    }

    /// Line and column of an input offset that is still in the buffer (any offset at or after
    /// the start of the last value returned).
    pub(super) fn position(&self, offset: u64) -> Position {
        let rel = usize::try_from(offset.saturating_sub(self.discarded))
            .map_or(self.end, |rel| rel.clamp(self.counted, self.end));
        let before = &self.buf[self.counted..rel];
        let newlines = count_newlines(before);
        let line_start = match before.iter().rposition(|&b| b == b'\n') {
            Some(i) => self.discarded + (self.counted + i) as u64 + 1,
            None => self.line_start,
        };
        Position {
            offset,
            line: self.lines + newlines + 1,
            column: offset - line_start + 1,
        }
    }

    /// Reads more input after `buf[end]`, first dropping the consumed bytes. Returns false at
    /// the end of the input.
    fn fill(&mut self) -> Result<bool, ReadError> {
        if self.ahead_len > 0 {
            self.join_ahead();
            return Ok(true);
        }
        if let Some(e) = self.error.take() {
            let at = self.position(self.discarded + self.end as u64);
            return Err(ReadError::at(at, ReadErrorKind::Io(e)));
        }
        if self.eof {
            return Ok(false);
        }
        self.compact();
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        loop {
            match self.read_more() {
                Ok(n) => return Ok(n > 0),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    let at = self.position(self.discarded + self.end as u64);
                    return Err(ReadError::at(at, ReadErrorKind::Io(e)));
                }
            }
        }
    }

    /// Joins the input read ahead, then reads until `window` bytes are unread or the input
    /// ends, so that many values can be parsed at once. Nothing is read while half a window
    /// is still unread (moving that much to the front of the buffer would cost more than it
    /// saves). A read error is kept for the [`fill`](Self::fill) that needs the bytes after
    /// it.
    pub(super) fn fill_window(&mut self, window: usize) {
        if self.ahead_len > 0 {
            self.join_ahead();
        }
        if self.error.is_some() || self.eof || self.end - self.pos >= window / 2 {
            return;
        }
        self.compact();
        if self.end < window {
            self.buf.truncate(self.end);
            let (read, eof) = append(&mut self.input, &mut self.buf, window - self.end);
            self.end = self.buf.len();
            self.validate_utf8();
            self.eof = eof;
            self.error = read.err();
        }
    }

    /// The unread text known to be valid UTF-8, at most `max` bytes of it (cut on a
    /// character boundary), and a [`ReadAhead`] that reads the input after the buffer while
    /// the text is parsed. Call after [`fill_window`](Self::fill_window).
    pub(super) fn window(&mut self, max: usize) -> (&str, ReadAhead<'_, R>) {
        debug_assert_eq!(self.ahead_len, 0, "the input read ahead is joined first");
        let text = valid_str(&self.buf, self.pos, self.utf8_start, self.utf8_end);
        let len = prefix_within(text, max).len();
        let ahead = ReadAhead {
            input: &mut self.input,
            buf: &mut self.ahead,
            len: &mut self.ahead_len,
            valid: &mut self.ahead_valid,
            eof: &mut self.eof,
            error: &mut self.error,
        };
        (&text[..len], ahead)
    }

    /// Joins the input read ahead to the unread bytes, dropping the consumed ones. The two
    /// buffers trade places, so the bytes read ahead are not copied, unless the unread bytes
    /// do not fit in front of them (or the bytes before, in the buffer that the input read
    /// ahead is in, would stand for input before the start of the input).
    fn join_ahead(&mut self) {
        let (pos, end) = (self.pos, self.end);
        let unread = end - pos;
        let start = RESERVE
            .checked_sub(unread)
            .filter(|&start| start as u64 <= self.offset());
        if let Some(start) = start {
            self.count_lines(pos);
            self.ahead[start..RESERVE].copy_from_slice(&self.buf[pos..end]);
            // The bytes before are not input: blanked, so that no stale newline among them
            // counts as a line.
            self.ahead[..start].fill(b' ');
            let valid = valid_str(&self.buf, pos, self.utf8_start, self.utf8_end).len();
            mem::swap(&mut self.buf, &mut self.ahead);
            self.discarded = self.discarded + pos as u64 - start as u64;
            (self.pos, self.end, self.counted) = (start, RESERVE + self.ahead_len, start);
            (self.utf8_start, self.utf8_end) = (start, start + valid);
            if valid == unread {
                // Both valid, the first ending on a character boundary: so is the whole.
                self.utf8_end = RESERVE + self.ahead_valid;
            }
        } else {
            self.compact();
            let ahead = &self.ahead[RESERVE..RESERVE + self.ahead_len];
            if self.buf.len() < self.end + ahead.len() {
                self.buf.resize(self.end + ahead.len(), 0);
            }
            self.buf[self.end..self.end + ahead.len()].copy_from_slice(ahead);
            self.end += ahead.len();
        }
        self.ahead_len = 0;
        self.validate_utf8();
    }

    /// Counts the newlines of `buf[counted..upto]`.
    fn count_lines(&mut self, upto: usize) {
        let new = &self.buf[self.counted..upto];
        self.lines += count_newlines(new);
        if let Some(i) = new.iter().rposition(|&b| b == b'\n') {
            self.line_start = self.discarded + (self.counted + i) as u64 + 1;
        }
        self.counted = upto;
    }

    /// Drops the consumed bytes, moving the unread ones to the front of the buffer.
    fn compact(&mut self) {
        if self.pos == 0 {
            return;
        }
        self.count_lines(self.pos);
        self.buf.copy_within(self.pos..self.end, 0);
        self.discarded += self.pos as u64;
        self.end -= self.pos;
        self.utf8_start = self.utf8_start.saturating_sub(self.pos);
        self.utf8_end = self.utf8_end.saturating_sub(self.pos);
        (self.pos, self.counted) = (0, 0);
    }

    /// One read into the free end of the buffer; 0 at the end of the input.
    fn read_more(&mut self) -> io::Result<usize> {
        let n = self.input.read(&mut self.buf[self.end..])?;
        if n == 0 {
            self.eof = true;
        } else {
            self.end += n;
            self.validate_utf8();
        }
        Ok(n)
    }

    /// Extends the valid UTF-8 region over the bytes read since, from where it ends (or from
    /// `pos` once consumption has passed an invalid sequence).
    fn validate_utf8(&mut self) {
        if self.utf8_end < self.pos {
            (self.utf8_start, self.utf8_end) = (self.pos, self.pos);
        }
        // Stops before an incomplete character at the end (completed by the next read) or an
        // invalid sequence (which the parser reports when it gets there).
        self.utf8_end += valid_utf8_len(&self.buf[self.utf8_end..self.end]);
    }

    /// Skips whitespace (and a leading byte-order mark) and returns the next byte without
    /// consuming it; `None` at the end of the input.
    pub(super) fn peek(&mut self) -> Result<Option<u8>, ReadError> {
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
    pub(super) fn expect(&mut self, byte: u8, expected: &str) -> Result<(), ReadError> {
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
    pub(super) fn bump(&mut self) {
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
    pub(super) fn unread_str(&self) -> &str {
        valid_str(&self.buf, self.pos, self.utf8_start, self.utf8_end)
    }

    /// Consumes `len` bytes of [`unread_str`](Self::unread_str).
    pub(super) fn consume(&mut self, len: usize) {
        self.pos = (self.pos + len).min(self.end);
    }

    /// [Consumes](Self::consume) `len` bytes whose newlines the caller counted: `newlines` of
    /// them, the last at `last_newline` (relative to the consumed bytes).
    pub(super) fn consume_counted(
        &mut self,
        len: usize,
        newlines: u64,
        last_newline: Option<usize>,
    ) {
        self.count_lines(self.pos);
        self.lines += newlines;
        if let Some(i) = last_newline {
            self.line_start = self.offset() + i as u64 + 1;
        }
        self.consume(len);
        self.counted = self.pos;
    }

    /// An error for `found` at the current offset.
    pub(super) fn unexpected(&self, found: u8, expected: &str) -> ReadError {
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
    pub(super) fn truncated(&self, expected: &str) -> ReadError {
        ReadError::truncated(self.position(self.discarded + self.end as u64), expected)
    }

    /// Consumes the next JSON value and returns its input offset and text. The text is
    /// complete as far as strings and brackets go; the caller parses (and so validates) it.
    /// A value longer than `limit` bytes is an error at its start, found before more than
    /// about `limit` bytes of it are held.
    pub(super) fn value(
        &mut self,
        expected: &str,
        limit: Limit,
    ) -> Result<(u64, &[u8]), ReadError> {
        let len = match self.peek()? {
            Some(b'{' | b'[' | b'"') => self.nested_len(expected, limit.bytes)?,
            Some(b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => self.scalar_len(limit.bytes)?,
            Some(other) => return Err(self.unexpected(other, expected)),
            None => return Err(self.truncated(expected)),
        };
        let Some(len) = len.filter(|&len| len <= limit.bytes) else {
            return Err(self.too_large(self.offset(), expected, limit));
        };
        let start = self.pos;
        self.pos += len;
        Ok((self.discarded + start as u64, &self.buf[start..start + len]))
    }

    /// The error for a value at `offset` past `limit`.
    pub(super) fn too_large(&self, offset: u64, expected: &str, limit: Limit) -> ReadError {
        ReadError::at(
            self.position(offset),
            ReadErrorKind::TooLarge {
                what: expected.to_owned(),
                limit: limit.total,
                of: limit.of,
            },
        )
    }

    /// The length of the string, object or array at `pos`, reading more input as needed;
    /// `None` once it is known to be longer than `limit`.
    fn nested_len(&mut self, expected: &str, limit: usize) -> Result<Option<usize>, ReadError> {
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
                            return Ok(Some(len));
                        }
                    }
                } else {
                    match b {
                        b'"' => in_string = true,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Ok(Some(len));
                            }
                        }
                        _ => {}
                    }
                }
            }
            if len > limit {
                return Ok(None);
            }
            if !self.fill()? {
                return Err(self.truncated(&format!("the end of {expected}")));
            }
        }
    }

    /// The length of the number or literal at `pos`: up to the next delimiter or the end of
    /// the input; `None` once it is known to be longer than `limit`.
    fn scalar_len(&mut self, limit: usize) -> Result<Option<usize>, ReadError> {
        let mut len = 0;
        loop {
            let rest = &self.buf[self.pos + len..self.end];
            match rest
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                Some(i) => return Ok(Some(len + i)),
                None => len += rest.len(),
            }
            if len > limit {
                return Ok(None);
            }
            if !self.fill()? {
                return Ok(Some(len));
            }
        }
    }
}

/// The most a value may take, and which limit of [`Limits`](omniprof_trace::Limits) that is.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limit {
    /// What this value may take (what is left of the limit, for the header's values).
    pub bytes: usize,
    /// The limit, as set.
    pub total: usize,
    pub of: &'static str,
}

/// `buf[start..utf8_end]` when `start` lies on a character boundary inside
/// `buf[utf8_start..utf8_end]`, which must be valid UTF-8; else empty.
fn valid_str(buf: &[u8], start: usize, utf8_start: usize, utf8_end: usize) -> &str {
    // Values and whitespace end on ASCII bytes, so `start` is on a character boundary;
    // checked anyway, as a continuation byte there would make the slice invalid.
    let on_boundary = buf.get(start).is_none_or(|&b| (b as i8) >= -0x40);
    if utf8_start <= start && start <= utf8_end && on_boundary {
        // SAFETY: the scanner keeps `buf[utf8_start..utf8_end]` valid UTF-8 (checked by
        // `validate_utf8`, or by `ReadAhead::read` and joined on a character boundary, and
        // only shifted since, together with the bytes), and `start` lies inside it on a
        // character boundary, so `buf[start..utf8_end]` is valid UTF-8 too.
        unsafe { std::str::from_utf8_unchecked(&buf[start..utf8_end]) }
    } else {
        ""
    }
}

/// Reads the input that follows a [`Scanner`]'s buffer while the buffer's text is parsed
/// elsewhere; the scanner joins it to its buffer when it needs it.
pub(super) struct ReadAhead<'s, R> {
    input: &'s mut R,
    buf: &'s mut Vec<u8>,
    len: &'s mut usize,
    valid: &'s mut usize,
    eof: &'s mut bool,
    error: &'s mut Option<io::Error>,
}

impl<R: Read> ReadAhead<'_, R> {
    /// Reads up to `len` bytes: less at the end of the input, or at a read error, which the
    /// scanner reports once the bytes before it are consumed.
    pub(super) fn read(self, len: usize) {
        if *self.eof || self.error.is_some() {
            return;
        }
        // Only the reserve is ever zeroed (once): the input goes after it.
        self.buf.resize(RESERVE, 0);
        let (read, eof) = append(self.input, self.buf, len);
        let n = self.buf.len() - RESERVE;
        *self.eof = eof;
        *self.error = read.err();
        *self.len = n;
        *self.valid = valid_utf8_len(&self.buf[RESERVE..RESERVE + n]);
    }
}

/// Reads up to `len` bytes of `input` onto the end of `buf`, into memory that is not zeroed
/// first (a buffer zeroed before each read would be written twice), retrying interrupted
/// reads. Returns the read's error, if any (the bytes before it are kept), and whether the
/// input ended.
fn append(input: &mut impl Read, buf: &mut Vec<u8>, len: usize) -> (io::Result<usize>, bool) {
    buf.reserve_exact(len);
    let start = buf.len();
    let read = input.by_ref().take(len as u64).read_to_end(buf);
    let eof = read.is_ok() && buf.len() - start < len;
    (read, eof)
}

/// The length of the longest start of `bytes` that is valid UTF-8 (all of it, or what
/// `std::str::from_utf8` finds valid up to).
///
/// Every byte of the input passes through here once, and traces are nearly all ASCII, so
/// whole blocks of ASCII are passed over with one vectorized check each; only from a block
/// with other bytes, for `SPAN` bytes and up to the next ASCII byte (a character boundary
/// in valid UTF-8, so the parts check as the whole would), is the text validated as UTF-8.
fn valid_utf8_len(bytes: &[u8]) -> usize {
    const BLOCK: usize = 256;
    /// The bytes validated at once from a block with other bytes than ASCII: long enough
    /// that text with such bytes everywhere costs hardly more than one validation of the
    /// whole (checking each block first would cost 1.4 times as much where every 100th
    /// character is an `é`).
    const SPAN: usize = 16 * BLOCK;
    let mut at = 0;
    while at < bytes.len() {
        let ascii = bytes[at..]
            .chunks_exact(BLOCK)
            .take_while(|block| {
                let block = <&[u8; BLOCK]>::try_from(*block).expect("a whole block");
                block.iter().fold(0, |any, &b| any | b) < 0x80
            })
            .count();
        at += ascii * BLOCK;
        let upto = bytes[at..]
            .iter()
            .skip(SPAN)
            .position(u8::is_ascii)
            .map_or(bytes.len(), |i| at + SPAN + i);
        if let Err(e) = std::str::from_utf8(&bytes[at..upto]) {
            return at + e.valid_up_to();
        }
        at = upto;
    }
    bytes.len()
}

/// Counts `\n` bytes. Every byte of the input passes through here once, so it is written for
/// speed: the compiler compares and adds 16 bytes at a time over a block of a fixed length, and
/// a block's count of at most 192 fits the byte it is added up in.
pub(super) fn count_newlines(bytes: &[u8]) -> u64 {
    const BLOCK: usize = 192;
    let is_newline = |&b: &u8| b == b'\n';
    let mut blocks = bytes.chunks_exact(BLOCK);
    let whole: u64 = (&mut blocks)
        .map(|block| {
            let block = <&[u8; BLOCK]>::try_from(block).expect("a whole block");
            u64::from(block.iter().fold(0u8, |n, b| n + u8::from(is_newline(b))))
        })
        .sum();
    whole + blocks.remainder().iter().filter(|b| is_newline(b)).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANY: Limit = Limit {
        bytes: usize::MAX,
        total: usize::MAX,
        of: "a test",
    };

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
            let (offset, v) = s.value("a value", ANY).unwrap();
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
        let (offset, v) = s.value("a value", ANY).unwrap();
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
        // Every byte a newline, so that each counter fills up in every block, and the
        // lengths around a block's and a chunk's end.
        for len in [191, 192, 193, 3 * 192 + 45, 20_000] {
            assert_eq!(count_newlines(&vec![b'\n'; len]), len as u64, "{len}");
        }
        let mut text = vec![b'x'; 20_000];
        text[0] = b'\n';
        text[191] = b'\n';
        text[192] = b'\n';
        text[19_999] = b'\n';
        assert_eq!(count_newlines(&text), 4);
    }

    /// What `valid_utf8_len` must give: the standard library's answer.
    fn std_valid_len(bytes: &[u8]) -> usize {
        std::str::from_utf8(bytes).map_or_else(|e| e.valid_up_to(), str::len)
    }

    #[test]
    fn valid_utf8_lengths_are_the_standard_librarys() {
        // Mostly ASCII with characters of every width, invalid bytes and characters cut
        // short, at every distance from the ends of the checked blocks.
        let parts: [&[u8]; 8] = [
            b"{\"ph\": \"X\"}, ",
            b"x",
            "\u{e9}".as_bytes(),
            "\u{20ac}".as_bytes(),
            "\u{1f600}".as_bytes(),
            b"\xff",
            b"\xe2\x82",
            b"\xf0\x9f\x98",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for round in 0..600 {
            let mut text = Vec::new();
            let len = next(20_000);
            while text.len() < len {
                // Characters other than ASCII ever more rarely, down to none, and invalid
                // bytes rarer still, so that validation resumes after spans of both.
                let part = match next(2 + round % 400) {
                    0 => parts[2 + next(3)],
                    1 if next(40) == 0 => parts[5 + next(3)],
                    _ => parts[next(2)],
                };
                text.extend_from_slice(part);
            }
            for end in [text.len(), text.len().saturating_sub(1 + next(4))] {
                let bytes = &text[..end];
                assert_eq!(valid_utf8_len(bytes), std_valid_len(bytes), "{bytes:?}");
            }
        }
        let ascii = vec![b'a'; 1000];
        assert_eq!(valid_utf8_len(&ascii), 1000);
        let mut late = ascii.clone();
        late[700] = 0x80;
        assert_eq!(valid_utf8_len(&late), 700);
        // Validation resumes in ASCII after a span with an `é`, and finds the invalid byte
        // after it.
        let mut resumed = [&[b'a'; 5000][..], "\u{e9}".as_bytes(), &[b'b'; 10_000]].concat();
        assert_eq!(valid_utf8_len(&resumed), 15_002);
        resumed.push(0xff);
        resumed.push(b'c');
        assert_eq!(valid_utf8_len(&resumed), 15_002);
    }

    #[test]
    fn truncated_values_fail_at_the_end() {
        let mut s = Scanner::new(Trickle(b"{\"a\": [1, 2"));
        let err = s.value("an event", ANY).unwrap_err();
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
        let (_, v) = s.value("a value", ANY).unwrap();
        assert_eq!(v, b"\"a\xff\"");
        // Past the invalid byte, validation starts again.
        assert_eq!(s.peek().unwrap(), Some(b'1'));
        assert!(!s.fill().unwrap());
        assert_eq!(s.unread_str(), "");
    }

    /// A reader that hands out at most `step` bytes per call, then fails.
    struct Failing<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Failing<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.data.is_empty() {
                return Err(io::Error::other("disk on fire"));
            }
            let n = self.data.len().min(out.len()).min(self.step);
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// Line and column of the end of `text`, counted the slow way.
    fn end_of(text: &str) -> (u64, u64) {
        let line_start = text.rfind('\n').map_or(0, |i| i + 1);
        (
            text.matches('\n').count() as u64 + 1,
            (text.len() - line_start) as u64 + 1,
        )
    }

    #[test]
    fn windows_read_ahead_join_in_order() {
        // Multibyte characters, so that reads split them; lines, so that positions count.
        let text: String = (0..4000).map(|i| format!("{i} é€😀 line\n")).collect();
        // Consuming all of each window, or all but an event's worth (the unread bytes go in
        // front of the bytes read ahead, but for the first windows, where the bytes before
        // them would stand for input before the start), or once all but more than `RESERVE`
        // (the unread bytes do not fit in front).
        for (window, keep_first, keep) in [
            (1000, 0, 0),
            (1000, 37, 37),
            (4000, 1, 1),
            (100_000, RESERVE + 10, 0),
        ] {
            let mut s = Scanner::new(Failing {
                data: text.as_bytes(),
                step: 777,
            });
            let mut consumed = 0;
            for round in 0.. {
                s.fill_window(window);
                let (chunk, ahead) = s.window(window);
                if chunk.is_empty() {
                    break;
                }
                assert!(text[consumed..].starts_with(chunk), "{window}");
                let keep = if round == 0 { keep_first } else { keep };
                let mut n = chunk.len().saturating_sub(keep).max(1);
                while !chunk.is_char_boundary(n) {
                    n += 1;
                }
                let newlines = count_newlines(&chunk.as_bytes()[..n]);
                let last_newline = chunk[..n].rfind('\n');
                ahead.read(window);
                if round % 2 == 0 {
                    s.consume_counted(n, newlines, last_newline);
                } else {
                    s.consume(n);
                }
                consumed += n;
                let p = s.position(s.offset());
                assert_eq!((p.line, p.column), end_of(&text[..consumed]));
            }
            assert_eq!(consumed, text.len(), "{window}");
            // The read error, once everything before it is consumed, at the end.
            let err = s.peek().unwrap_err();
            assert!(matches!(err.kind, ReadErrorKind::Io(_)), "{err}");
            assert_eq!(err.location.position.unwrap().offset, text.len() as u64);
        }
    }

    #[test]
    fn a_stray_byte_is_a_syntax_error() {
        let mut s = Scanner::new(&b"  }"[..]);
        let err = s.value("an event", ANY).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1, column 3 (byte 2): invalid JSON: expected an event, found `}`"
        );
    }
}
