//! The one-pass event parser: reads one element of `traceEvents` byte by byte into a
//! [`RawEvent`], converting only the `args` the mapper uses and skipping everything else
//! without building it. A plain decimal `ts` or `dur` is converted to nanoseconds as it is
//! read ([`Micros`]), so the converter does not scan its text again; a list of numbers and
//! strings (or of such lists) spaced as writers space them is skipped by a byte-driven state
//! machine ([`flat_list`]), any other value by the general skip.
//!
//! Parsing events is most of a read, and a general JSON deserializer pays per key for what a
//! trace never needs (a visitor per value, a check per byte for escapes). This parser knows
//! the event's shape. It never reports an error: on anything it does not expect (a syntax
//! error, a type the field cannot take, a duplicate field, a lone surrogate, a number out of
//! range, nesting deeper than it tracks, text cut off by the end of the buffer) it gives up
//! with `None`, and the caller parses the event again with the reference deserializer
//! ([`RawEvent`]'s derived one), which accepts or rejects it and says why. So what it
//! returns is always what the reference would give: the same fields, the same typed
//! [`Value`]s (integers that fit `i64` as `Int`, else `UInt`, else the correctly rounded
//! `Float`, as `Value`'s `Deserialize` reads them), the same length. The tests compare the
//! two over mutated events.

mod flat_list;

use std::borrow::Cow;
use std::sync::Arc;

use flat_list::after_flat_list;

use super::event::{
    digit_at, plain_micros_at, ArgKeys, Args, Id, KeptArgs, Micros, Raw, RawEvent, Str,
};
use omniprof_trace::{Value, MAX_VALUE_DEPTH};

/// Parses the event at the start of `text` (after any whitespace) in one pass, reading only
/// the `args` the mapper uses (with `filter`) when `ph` and `cat` come before `args`, as
/// every writer puts them; otherwise `args` is kept as text, as the reference does.
///
/// Fills `ev` (a default one: the parser sets only the fields it reads) and returns the
/// length of the event's text (to just after its `}`), or `None` for anything the reference
/// parser must judge (see the module docs; `ev` then holds part of the event, to be
/// dropped). The event is filled in place because it is large: returning it would copy it
/// at each step out.
pub(super) fn read_event<'a>(
    text: &'a str,
    filter: &KeptArgs,
    ev: &mut RawEvent<'a>,
) -> Option<usize> {
    let mut parser = Parser { text, at: 0 };
    parser.event(filter, ev)?;
    Some(parser.at)
}

/// The keys of the [`RawEvent`] fields the parser sets, each at its index below (the
/// seen-fields list's).
const FIELDS: [&str; 10] = [
    "ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args", "bp",
];

const PH: usize = 0;
const CAT: usize = 1;
const NAME: usize = 2;
const PID: usize = 3;
const TID: usize = 4;
const TS: usize = 5;
const DUR: usize = 6;
const ID: usize = 7;
const BP: usize = 9;

/// Which [`RawEvent`] field a key is.
fn field(key: &str) -> Option<usize> {
    FIELDS.iter().position(|&f| f == key)
}

/// Each of [`FIELDS`] packed into a word as [`Parser::event_key`] reads it (little-endian,
/// zeros after the key).
const FIELD_WORDS: [u64; FIELDS.len()] = {
    let mut words = [0; FIELDS.len()];
    let mut i = 0;
    while i < FIELDS.len() {
        let key = FIELDS[i].as_bytes();
        let mut j = 0;
        while j < key.len() {
            words[i] |= (key[j] as u64) << (8 * j);
            j += 1;
        }
        i += 1;
    }
    words
};

/// The slot of a key in [`FIELD_SLOTS`], from its first two bytes.
const fn field_slot(first: u8, second: u8) -> usize {
    ((first ^ second) & 31) as usize
}

/// For each slot, the field of [`FIELDS`] whose key has it ([`FIELDS`]`.len()` for none):
/// a key's first two bytes name the one field it can be, and one comparison with
/// [`QUOTED_FIELDS`] tells whether it is. (Building the table checks that no two fields
/// share a slot.)
const FIELD_SLOTS: [u8; 32] = {
    let mut slots = [FIELDS.len() as u8; 32];
    let mut i = 0;
    while i < FIELDS.len() {
        let key = FIELDS[i].as_bytes();
        assert!(key.len() >= 2 && key.len() < 8);
        let slot = field_slot(key[0], key[1]);
        assert!(slots[slot] == FIELDS.len() as u8, "two fields share a slot");
        slots[slot] = i as u8;
        i += 1;
    }
    slots
};

/// Each of [`FIELD_WORDS`] followed by `suffix`, the mask of the bytes they cover and their
/// length: what a word read at a key's first byte holds when it is that field's key
/// followed by `suffix`, and how far the two reach.
const fn fields_then(suffix: &[u8]) -> [(u64, u64, usize); FIELDS.len()] {
    let mut table = [(0, 0, 0); FIELDS.len()];
    let mut i = 0;
    while i < FIELDS.len() {
        let mut word = FIELD_WORDS[i];
        let mut bits = 8 * FIELDS[i].len();
        assert!(
            bits + 8 * suffix.len() <= 64,
            "a key too long to match with its suffix"
        );
        let mut j = 0;
        while j < suffix.len() {
            word |= (suffix[j] as u64) << bits;
            bits += 8;
            j += 1;
        }
        table[i] = (word, u64::MAX >> (64 - bits), bits / 8);
        i += 1;
    }
    table
}

/// Each field's key with its closing quote ([`Parser::event_key`]).
const QUOTED_FIELDS: [(u64, u64, usize); FIELDS.len()] = fields_then(b"\"");

/// Each field's key with its closing quote and the `: ` writers put after it: the key, its
/// separator and the space are matched in one comparison ([`Parser::event_member_key`]).
const SPACED_FIELDS: [(u64, u64, usize); FIELDS.len()] = fields_then(b"\": ");

/// The field whose entry of `table` ([`fields_then`]) the word `chunk` starts with, if any,
/// and the length of that entry: its first two bytes name the one field it can be
/// ([`FIELD_SLOTS`]).
#[inline(always)]
fn field_then(
    chunk: &[u8; 8],
    table: &[(u64, u64, usize); FIELDS.len()],
) -> Option<(usize, usize)> {
    let f = usize::from(FIELD_SLOTS[field_slot(chunk[0], chunk[1])]);
    let &(word, mask, len) = table.get(f)?;
    (u64::from_le_bytes(*chunk) & mask == word).then_some((f, len))
}

/// The deepest nesting a skipped value may have: one bit per level.
const MAX_SKIP_DEPTH: u32 = 64;

/// A JSON number as the reference deserializer classifies it.
enum Number {
    U64(u64),
    I64(i64),
    F64(f64),
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn whitespace(&mut self) {
        self.at = after_whitespace(self.text.as_bytes(), self.at);
    }

    /// The next byte after whitespace, consumed.
    fn token(&mut self) -> Option<u8> {
        self.whitespace();
        self.next()
    }

    fn literal(&mut self, word: &str) -> Option<()> {
        self.at = after_literal(self.text.as_bytes(), self.at, word.as_bytes())?;
        Some(())
    }

    /// The rest of an event's key (its opening quote consumed), as the [`RawEvent`] field it
    /// names, or `Some(None)` for another key. A key of up to seven plain bytes, as all the
    /// fields' are, is read as one word and compared whole, with its field's first
    /// ([`FIELD_SLOTS`]).
    fn event_key(&mut self) -> Option<Option<usize>> {
        let bytes = self.text.as_bytes();
        if let Some(chunk) = bytes.get(self.at..).and_then(<[u8]>::first_chunk::<8>) {
            if let Some((f, len)) = field_then(chunk, &QUOTED_FIELDS) {
                self.at += len;
                return Some(Some(f));
            }
            // Another key.
            let w = u64::from_le_bytes(*chunk);
            let flags = special_bytes(w);
            let len = (flags.trailing_zeros() / 8) as usize;
            if flags != 0 && chunk[len] == b'"' {
                self.at += len + 1;
                let key = w & !(u64::MAX << (8 * len));
                return Some(FIELD_WORDS.iter().position(|&k| k == key));
            }
        }
        // Longer, escaped, or at the end of the text: the general way.
        self.string().map(|key| field(&key))
    }

    /// [`Self::event_key`] and the `:` after it, as [`Self::colon`] reads it: a field's key
    /// spaced as writers space it (`ts": `) is matched whole ([`SPACED_FIELDS`]).
    #[inline(always)]
    fn event_member_key(&mut self) -> Option<Option<usize>> {
        if let Some(chunk) = self
            .text
            .as_bytes()
            .get(self.at..)
            .and_then(<[u8]>::first_chunk::<8>)
        {
            if let Some((f, len)) = field_then(chunk, &SPACED_FIELDS) {
                self.at += len;
                return Some(Some(f));
            }
        }
        let key = self.event_key()?;
        self.colon()?;
        Some(key)
    }

    /// The `:` after an object's key and the whitespace around it, up to the value.
    #[inline(always)]
    fn colon(&mut self) -> Option<()> {
        // Writers separate as `"key": value`: that spacing is matched whole, and the value
        // is taken to follow it (every reader of a value gives up on whitespace, leaving
        // the event to the reference); any other the general way.
        if self.text.as_bytes().get(self.at..self.at + 2) == Some(b": ") {
            self.at += 2;
        } else {
            (self.token()? == b':').then_some(())?;
            self.whitespace();
        }
        Some(())
    }

    fn event(&mut self, filter: &KeptArgs, ev: &mut RawEvent<'a>) -> Option<()> {
        self.whitespace();
        let mut seen = [false; FIELDS.len()];
        self.object_with(true, Self::event_member_key, |p, key| {
            match key {
                None => p.skip_value()?,
                Some(f) if std::mem::replace(&mut seen[f], true) => return None,
                Some(PH) => ev.ph = p.optional(Self::str_value)?,
                Some(CAT) => ev.cat = p.optional(Self::str_value)?,
                Some(NAME) => ev.name = p.optional(Self::str_value)?,
                Some(PID) => ev.pid = p.optional(Self::id)?,
                Some(TID) => ev.tid = p.optional(Self::id)?,
                Some(TS) => ev.ts = p.optional(Self::micros)?,
                Some(DUR) => ev.dur = p.optional(Self::micros)?,
                Some(ID) => ev.id = p.optional(Self::id)?,
                Some(BP) => ev.bp = p.optional(Self::str_value)?,
                // `args`, the one field left.
                Some(_) => {
                    let ph = ev.ph.as_deref();
                    let known = seen[PH] && (seen[CAT] || !ArgKeys::need_cat(ph));
                    if !known {
                        ev.args = p.optional(Self::raw)?;
                    } else {
                        let keys = ArgKeys::of(ph, ev.cat.as_deref());
                        if let ArgKeys::Activity(kind) = keys {
                            ev.kind = Some(kind);
                        }
                        // Read in place: the args are large to move.
                        let args = ev.read_args.insert(Args::default());
                        match keys {
                            ArgKeys::None => p.skip_value()?,
                            _ => {
                                let kept = filter.of(keys);
                                p.args(args, |key| kept.keeps(key))?
                            }
                        }
                    }
                }
            }
            Some(())
        })?;
        Some(())
    }

    /// An object, its `{` next: `member` reads each member's value, its key given, from
    /// after the colon and the whitespace that follows ([`Self::colon`]).
    fn object(&mut self, member: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>) -> Option<()> {
        self.object_with(false, Self::string, member)
    }

    /// [`Self::object`] with the keys read by `key` from after their opening quote, and the
    /// `:` that follows them too when `key_reads_colon`.
    #[inline(always)]
    fn object_with<K>(
        &mut self,
        key_reads_colon: bool,
        mut key: impl FnMut(&mut Self) -> Option<K>,
        mut member: impl FnMut(&mut Self, K) -> Option<()>,
    ) -> Option<()> {
        // Writers open an object as `{"key"`: that is matched whole.
        if self.text.as_bytes().get(self.at..self.at + 2) == Some(b"{\"") {
            self.at += 2;
        } else {
            (self.next()? == b'{').then_some(())?;
            self.whitespace();
            if self.peek()? == b'}' {
                self.at += 1;
                return Some(());
            }
            (self.next()? == b'"').then_some(())?;
        }
        loop {
            let key = key(self)?;
            if !key_reads_colon {
                self.colon()?;
            }
            member(self, key)?;
            // Writers separate members as `, "key"`: that spacing is matched whole.
            if self.text.as_bytes().get(self.at..self.at + 3) == Some(b", \"") {
                self.at += 3;
                continue;
            }
            match self.token()? {
                b',' => (self.token()? == b'"').then_some(())?,
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// `null` as `None`, else what `read` reads.
    #[inline(always)]
    fn optional<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.peek()? == b'n' {
            self.literal("null")?;
            return Some(None);
        }
        read(self).map(Some)
    }

    fn str_value(&mut self) -> Option<Str<'a>> {
        (self.next()? == b'"').then_some(())?;
        self.string().map(Str)
    }

    /// An integer that fits `i64`, or a string: what [`Id`] accepts.
    fn id(&mut self) -> Option<Id<'a>> {
        if self.peek()? == b'"' {
            return self.str_value().map(Id::Str);
        }
        match self.number()? {
            Number::I64(v) => Some(Id::Int(v)),
            Number::U64(v) => i64::try_from(v).ok().map(Id::Int),
            Number::F64(_) => None,
        }
    }

    /// A `ts` or `dur`: a plain decimal, as writers write them, is converted to nanoseconds
    /// as it is read; any other value is kept as text for the converter to judge.
    #[inline(always)]
    fn micros(&mut self) -> Option<Micros<'a>> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        if let Some((end, ns)) = plain_micros_at(bytes, start) {
            // A JSON number as it stands: no leading zero, a digit after the point, no
            // exponent (which the general way reads).
            let int = start + usize::from(bytes[start] == b'-');
            let leading_zero = bytes[int] == b'0' && end > int + 1 && bytes[int + 1] != b'.';
            let json = !leading_zero
                && bytes[end - 1] != b'.'
                && !matches!(bytes.get(end), Some(b'.' | b'e' | b'E'));
            if json {
                self.at = end;
                return Some(Micros(&self.text[start..end], Some(ns)));
            }
        }
        self.raw().map(|raw| Micros(raw.0, None))
    }

    /// Any value, as its text.
    fn raw(&mut self) -> Option<Raw<'a>> {
        let start = self.at;
        // Nearly always a number (`ts`, `dur`): skipped without the containers' machinery.
        if matches!(self.peek()?, b'-' | b'0'..=b'9') {
            self.skip_number()?;
        } else {
            self.skip_value()?;
        }
        Some(Raw(&self.text[start..self.at]))
    }

    /// The rest of a string whose opening quote was consumed: borrowed unless it holds
    /// escapes.
    #[inline(always)]
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        self.at = plain_run_end(bytes, self.at);
        match *bytes.get(self.at)? {
            b'"' => {
                self.at += 1;
                Some(Cow::Borrowed(&self.text[start..self.at - 1]))
            }
            b'\\' => self.escaped_string(start),
            _ => None,
        }
    }

    /// [`Self::string`] from its first backslash on, the plain run before it starting at
    /// `start`.
    #[inline(never)]
    fn escaped_string(&mut self, start: usize) -> Option<Cow<'a, str>> {
        let bytes = self.text.as_bytes();
        let mut owned = String::from(&self.text[start..self.at]);
        loop {
            let run = self.at;
            self.at = plain_run_end(bytes, self.at);
            owned.push_str(&self.text[run..self.at]);
            match self.next()? {
                b'"' => return Some(Cow::Owned(owned)),
                b'\\' => {}
                _ => return None,
            }
            let c = match self.next()? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => self.unicode_escape()?,
                _ => return None,
            };
            owned.push(c);
        }
    }

    /// The character of a `\u` escape whose `\u` was consumed: a surrogate pair is one
    /// character; a lone surrogate is left to the reference (which refuses it).
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if !(0xD800..0xE000).contains(&first) {
            return char::from_u32(first);
        }
        if first >= 0xDC00 {
            return None;
        }
        self.literal("\\u")?;
        let second = self.hex4()?;
        if !(0xDC00..0xE000).contains(&second) {
            return None;
        }
        char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.at..self.at + 4)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    /// A number's text, checked but not converted ([`after_number`]).
    fn skip_number(&mut self) -> Option<()> {
        self.at = after_number(self.text.as_bytes(), self.at)?;
        Some(())
    }

    /// A number, classified as the reference deserializer does: an integer is `U64` when
    /// not negative, `I64` when negative (`-0` and below `i64::MIN` are floats), a float
    /// when it has a fraction or an exponent or does not fit `u64`.
    #[inline(always)]
    fn number(&mut self) -> Option<Number> {
        match self.small_integer() {
            Some(v) => Some(Number::U64(v)),
            None => self.any_number(),
        }
    }

    /// [`Self::number`] for any number.
    #[inline(never)]
    fn any_number(&mut self) -> Option<Number> {
        let start = self.at;
        self.skip_number()?;
        let text = &self.text[start..self.at];
        let (negative, digits) = match text.strip_prefix('-') {
            Some(digits) => (true, digits),
            None => (false, text),
        };
        // An integer that fits `u64` (an integer beyond it is a float, as below).
        let integer = digits
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| digits.parse::<u64>().ok())
            .flatten();
        let Some(significand) = integer else {
            let v: f64 = text.parse().ok()?;
            // Out of range is the reference's error; an underflow to zero is left to it too.
            let digits_nonzero = text
                .bytes()
                .take_while(|b| !matches!(b, b'e' | b'E'))
                .any(|b| matches!(b, b'1'..=b'9'));
            if !v.is_finite() || (v == 0.0 && digits_nonzero) {
                return None;
            }
            return Some(Number::F64(v));
        };
        if !negative {
            return Some(Number::U64(significand));
        }
        // As the reference: `-0` and magnitudes beyond `i64` are floats.
        let negated = (significand as i64).wrapping_neg();
        Some(if negated >= 0 {
            Number::F64(-(significand as f64))
        } else {
            Number::I64(negated)
        })
    }

    /// The common number, converted as it is checked: a non-negative integer of at most 19
    /// digits (so it fits `u64`), without fraction or exponent. `None`, having consumed
    /// nothing, for any other text.
    #[inline(always)]
    fn small_integer(&mut self) -> Option<u64> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        let mut at = start;
        let mut v: u64 = 0;
        while let Some(d) = digit_at(bytes, at) {
            if at - start == 19 {
                return None;
            }
            v = v * 10 + u64::from(d);
            at += 1;
        }
        let len = at - start;
        let leading_zero = len > 1 && bytes[start] == b'0';
        if len == 0 || leading_zero || matches!(bytes.get(at), Some(b'.' | b'e' | b'E') | None) {
            return None;
        }
        self.at = at;
        Some(v)
    }

    /// `args`: `null`, or an object whose values `keep` accepts by key are converted (into
    /// `args`) and the others skipped.
    fn args(&mut self, args: &mut Args<'a>, keep: impl Fn(&str) -> bool) -> Option<()> {
        if self.peek()? == b'n' {
            return self.literal("null");
        }
        // The keys read inline (most are turned away at once), not through `object`'s call.
        #[allow(clippy::redundant_closure)]
        self.object_with(
            false,
            |p| p.string(),
            |p, key| {
                if keep(&key) {
                    // A value too deep for other readers is skipped and counted: one such arg
                    // does not make the whole trace unreadable.
                    let mut too_deep = false;
                    let value = p.value(0, &mut too_deep)?;
                    match too_deep {
                        false => args.kept.push((Str(key), value)),
                        true => args.too_deep += 1,
                    }
                    Some(())
                } else {
                    p.skip_value()
                }
            },
        )
    }

    /// A value converted to [`MAX_VALUE_DEPTH`] levels, `depth` being this one's; a list or
    /// object at that depth is skipped and sets `too_deep`. The common arg, an id, is read
    /// here; any other value by [`Self::any_value`].
    #[inline(always)]
    fn value(&mut self, depth: usize, too_deep: &mut bool) -> Option<Value> {
        match self.small_integer() {
            Some(v) => Some(Self::integer(v)),
            None => self.any_value(depth, too_deep),
        }
    }

    /// The [`Value`] of a non-negative integer, as the reference reads it.
    fn integer(v: u64) -> Value {
        i64::try_from(v).map_or(Value::UInt(v), Value::Int)
    }

    /// [`Self::value`] for any value.
    #[inline(never)]
    fn any_value(&mut self, depth: usize, too_deep: &mut bool) -> Option<Value> {
        Some(match self.peek()? {
            b'n' => self.literal("null").map(|()| Value::Null)?,
            b't' => self.literal("true").map(|()| Value::Bool(true))?,
            b'f' => self.literal("false").map(|()| Value::Bool(false))?,
            b'"' => {
                self.at += 1;
                Value::Str(Arc::from(&*self.string()?))
            }
            b'[' | b'{' if depth == MAX_VALUE_DEPTH => {
                self.skip_value()?;
                *too_deep = true;
                Value::Null
            }
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                self.whitespace();
                if self.peek()? == b']' {
                    self.at += 1;
                    return Some(Value::List(items));
                }
                loop {
                    self.whitespace();
                    items.push(self.value(depth + 1, too_deep)?);
                    match self.token()? {
                        b',' => {}
                        b']' => break Value::List(items),
                        _ => return None,
                    }
                }
            }
            b'{' => {
                let mut entries = Vec::new();
                self.object(|p, key| {
                    entries.push((key.into_owned(), p.value(depth + 1, too_deep)?));
                    Some(())
                })?;
                Value::Map(entries)
            }
            _ => match self.number()? {
                Number::U64(v) => Self::integer(v),
                Number::I64(v) => Value::Int(v),
                Number::F64(v) => Value::Float(v),
            },
        })
    }

    /// Skips one value, checking its syntax, without building anything. A number, a
    /// string, or a list of them or of lists of them (most skipped args: `[[64, 1], [1]]`,
    /// [`after_flat_list`]) is stepped over here; other values by [`Self::skip_nested`].
    #[inline(always)]
    fn skip_value(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        match *bytes.get(self.at)? {
            b'0'..=b'9' | b'-' => self.at = after_number(bytes, self.at)?,
            b'"' => self.at = self.skipped_string(self.at + 1)?,
            b'[' => match after_flat_list(bytes, self.at + 1, MAX_SKIP_DEPTH) {
                Some(end) => self.at = end,
                None => self.skip_nested()?,
            },
            _ => self.skip_nested()?,
        }
        Some(())
    }

    /// [`Self::skip_value`] for any value. Containers nest through a bit stack (set: an
    /// object), [`MAX_SKIP_DEPTH`] levels at most. (The place is kept in a local, which the
    /// compiler keeps in a register.)
    #[inline(never)]
    fn skip_nested(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        let mut at = self.at;
        let mut objects: u64 = 0;
        let mut depth: u32 = 0;
        loop {
            // A value.
            match *bytes.get(at)? {
                b'"' => at = self.skipped_string(at + 1)?,
                open @ (b'[' | b'{') => {
                    if depth == MAX_SKIP_DEPTH {
                        return None;
                    }
                    let object = open == b'{';
                    // A list of numbers and strings as writers space it (`[64, 1]`,
                    // `["float", ""]`) is stepped over whole ([`after_flat_list`]).
                    let scalars = match object {
                        false => after_flat_list(bytes, at + 1, MAX_SKIP_DEPTH - depth),
                        true => None,
                    };
                    if let Some(end) = scalars {
                        at = end;
                    } else {
                        objects = objects << 1 | u64::from(object);
                        depth += 1;
                        at = after_whitespace(bytes, at + 1);
                        let close = if object { b'}' } else { b']' };
                        if *bytes.get(at)? != close {
                            if object {
                                at = self.skipped_key(at)?;
                            }
                            continue;
                        }
                        at += 1;
                        objects >>= 1;
                        depth -= 1;
                    }
                }
                b'n' => at = after_literal(bytes, at, b"null")?,
                b't' => at = after_literal(bytes, at, b"true")?,
                b'f' => at = after_literal(bytes, at, b"false")?,
                _ => at = after_number(bytes, at)?,
            }
            // What follows it: the next element, or the ends of containers.
            loop {
                if depth == 0 {
                    self.at = at;
                    return Some(());
                }
                let object = objects & 1 == 1;
                at = after_whitespace(bytes, at);
                match *bytes.get(at)? {
                    b',' => {
                        at = after_whitespace(bytes, at + 1);
                        if object {
                            at = self.skipped_key(at)?;
                        }
                        break;
                    }
                    b'}' if object => {}
                    b']' if !object => {}
                    _ => return None,
                }
                at += 1;
                objects >>= 1;
                depth -= 1;
            }
        }
    }

    /// Where `"key":` and the whitespace after it end, in a skipped object.
    fn skipped_key(&self, at: usize) -> Option<usize> {
        let bytes = self.text.as_bytes();
        (*bytes.get(at)? == b'"').then_some(())?;
        let at = after_whitespace(bytes, self.skipped_string(at + 1)?);
        (*bytes.get(at)? == b':').then_some(())?;
        Some(after_whitespace(bytes, at + 1))
    }

    /// Where the rest of a string that starts at `at` (after its opening quote) ends, its
    /// escapes checked.
    #[inline(always)]
    fn skipped_string(&self, mut at: usize) -> Option<usize> {
        let bytes = self.text.as_bytes();
        loop {
            at = plain_run_end(bytes, at);
            match *bytes.get(at)? {
                b'"' => return Some(at + 1),
                b'\\' => match *bytes.get(at + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => at += 2,
                    b'u' => {
                        let mut escape = Parser {
                            text: self.text,
                            at: at + 2,
                        };
                        escape.unicode_escape()?;
                        at = escape.at;
                    }
                    _ => return None,
                },
                _ => return None,
            }
        }
    }
}

/// Where the whitespace at `at` ends.
#[inline(always)]
pub(super) fn after_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while let Some(&b) = bytes.get(at) {
        // Every byte that is not whitespace is above a space: one comparison for most.
        if b > b' ' || !matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
            break;
        }
        at += 1;
    }
    at
}

/// Where `word` ends if it is at `at`.
#[inline(always)]
fn after_literal(bytes: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    let end = at + word.len();
    (bytes.get(at..end)? == word).then_some(end)
}

/// Where the number at `at` ends, its text checked against JSON's grammar but not
/// converted (so, as the reference skips numbers, one beyond `f64`'s range is accepted).
#[inline(always)]
fn after_number(bytes: &[u8], mut at: usize) -> Option<usize> {
    let digits = |mut at: usize| {
        let start = at;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        (at > start).then_some(at)
    };
    if bytes.get(at) == Some(&b'-') {
        at += 1;
    }
    match *bytes.get(at)? {
        b'0' => at += 1,
        b'1'..=b'9' => at = digits(at)?,
        _ => return None,
    }
    if bytes.get(at) == Some(&b'.') {
        at = digits(at + 1)?;
    }
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        at = digits(at)?;
    }
    Some(at)
}

/// The high bit of each byte of `w` (eight bytes of text, little-endian) that is a quote, a
/// backslash or a control character, and perhaps of bytes above the lowest such one (see
/// [`plain_run_end`]); 0 when there is none.
#[inline(always)]
fn special_bytes(w: u64) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = ONES << 7;
    // A byte XOR 0x02 is below 0x21 exactly when it is a control character or the quote
    // (0x22 becomes 0x20): one test for both. The XORs keep the high bits, so `!w` masks
    // the bytes above 0x7f out of both tests.
    let quote_or_control = (w ^ (ONES * 0x02)).wrapping_sub(ONES * 0x21);
    let backslash = (w ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES);
    (quote_or_control | backslash) & !w & HIGHS
}

/// Where the plain run of a string that starts at `at` ends: the index of the first quote,
/// backslash or control character (which JSON does not allow unescaped), or the end.
///
/// Eight bytes at a time: in each word, a byte is flagged when it is zero after an XOR with
/// the backslash, or below 0x21 after an XOR with 0x02 (a control character or the quote),
/// by the borrow trick of "bit twiddling hacks" (`(w - 0x01..) & !w & 0x80..`). A borrow
/// can flag a byte above a flagged one but never below, so the lowest flag is always a true
/// one.
fn plain_run_end(bytes: &[u8], mut at: usize) -> usize {
    while let Some(chunk) = bytes.get(at..).and_then(<[u8]>::first_chunk::<8>) {
        let flags = special_bytes(u64::from_le_bytes(*chunk));
        if flags != 0 {
            return at + (flags.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while bytes
        .get(at)
        .is_some_and(|&b| b != b'"' && b != b'\\' && b >= 0x20)
    {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::super::event::{micros_to_ns, ArgFilter};

    use super::*;

    /// [`read_event`] into a new event.
    fn read<'a>(text: &'a str, filter: &ArgFilter) -> Option<(RawEvent<'a>, usize)> {
        let mut ev = RawEvent::default();
        let len = read_event(text, &KeptArgs::new(filter.clone()), &mut ev)?;
        Some((ev, len))
    }

    /// The event's fields and its args as the mapper would get them (it reads none of an
    /// event whose [`ArgKeys`] are `None`), as text (`Debug` tells `Int` from `UInt` and
    /// `Float`).
    fn fields(mut ev: RawEvent, filter: &ArgFilter) -> String {
        let id = |id: &Option<Id>| id.as_ref().map(Id::to_text);
        let read = ArgKeys::of(ev.ph.as_deref(), ev.cat.as_deref()) != ArgKeys::None;
        let args = read.then(|| ev.args(filter)).map(|args| {
            args.map(|args| {
                let kept: Vec<_> = args
                    .kept
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                (kept, args.too_deep)
            })
        });
        format!(
            "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {args:?}",
            ev.ph.as_deref(),
            ev.cat.as_deref(),
            ev.name.as_deref(),
            id(&ev.pid),
            id(&ev.tid),
            ev.ts.map(|r| r.0),
            ev.dur.map(|r| r.0),
            id(&ev.id),
        )
    }

    /// The reference read of the event at the start of `text`: its fields and length.
    fn reference(text: &str, filter: &ArgFilter) -> Option<(String, usize)> {
        let mut events = serde_json::Deserializer::from_str(text).into_iter::<RawEvent>();
        let event = events.next()?.ok()?;
        Some((fields(event, filter), events.byte_offset()))
    }

    fn one_pass(text: &str, filter: &ArgFilter) -> Option<(String, usize)> {
        let (ev, len) = read(text, filter)?;
        Some((fields(ev, filter), len))
    }

    const FILTERS: [fn() -> ArgFilter; 2] =
        [|| ArgFilter::All, || ArgFilter::Only(vec!["keep".into()])];

    /// Events the one-pass parser reads as the reference does.
    const EVENTS: &[&str] = &[
        r#"{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, "ts": 1.5, "dur": 2, "args": {"External id": 3, "keep": [1], "drop": {"a": 1}}}"#,
        // `ph` or `cat` after `args`: args are kept as text.
        r#"{"args": {"keep": 1, "drop": 2}, "ph": "X", "cat": "cpu_op"}"#,
        r#"{"ph": "X", "args": {"keep": 1, "drop": 2}, "cat": "kernel"}"#,
        // A row needs no `cat`; a flow and an unknown phase read no args.
        r#"{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "t", "x": 1}}"#,
        r#"{"ph": "f", "id": "9", "pid": 1, "tid": 1, "ts": 0, "cat": "ac2g", "bp": "e", "args": [1]}"#,
        r#"{"ph": "?", "cat": "cpu_op", "args": {"keep": 1}}"#,
        r#"{"ph": "C", "cat": "gpu_pm_counter", "args": {"": 4, "u": "%"}, "extra": [1, {"b": 2}]}"#,
        r#"{"ph": null, "cat": null, "name": "esc\u0061ped", "args": null}"#,
        r#"{"ph": "X", "cat": "Trace", "args": {"Op count": 5, "x": 1}}"#,
        r#"{"ph": "X", "cat": "cpu_op", "args": null, "ts": null, "pid": null}"#,
        // Escapes in keys and values, a surrogate pair, whitespace everywhere.
        "{ \"\\u0070h\" :\t\"X\" ,\r\n \"cat\": \"cpu_op\", \"name\": \"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\\ud83d\\ude00\\u00e9\",\n\"args\" : { \"k\\u0065ep\" : [ \"\\u0000\" , { } , [ ] ] , \"\\\"\": 1 } }",
        // Numbers of every kind the reference tells apart.
        r#"{"ph": "X", "cat": "cpu_op", "pid": -9223372036854775808, "tid": 9223372036854775807, "ts": -0.5e-3, "dur": 1E2, "args": {"keep": [0, -0, 18446744073709551615, 18446744073709551616, -9223372036854775809, 1.5, -2.25e-300, 123456789012345678901234567890, 0.1], "u": 18446744073709551615, "v": 9999999999999999999, "w": 10000000000000000000}}"#,
        // Nested past the depth converted: the arg is dropped and counted.
        r#"{"ph": "X", "cat": "cpu_op", "args": {"keep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], "x": {"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}, "y": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}"#,
        r#"{"name": "unknown fields skipped", "s": {"a": [true, false, null, "x\"]", -1.5e+3, {"b": {}}]}, "big": [1e400, -0.0E-0], "ph": "i", "ts": 1e999}"#,
        "{}",
        " \n{ }",
    ];

    #[test]
    fn the_one_pass_read_agrees_with_the_reference_read() {
        for text in EVENTS {
            for filter in FILTERS.map(|f| f()) {
                let with_next = format!("{text} , {{}}");
                let expected = reference(text, &filter).expect(text);
                assert_eq!(expected.1, text.len(), "{text}");
                assert_eq!(one_pass(&with_next, &filter), Some(expected), "{text}");
            }
        }
    }

    #[test]
    fn anything_unusual_is_left_to_the_reference() {
        for bad in [
            // Errors the reference reports.
            r#"{"ph": "X", "ph": "X"}"#,
            r#"{"args": {}, "args": {}}"#,
            r#"{"ph": "X", "cat": "cpu_op", "args": {"a": 1}"#,
            r#"{"ph": 1}"#,
            r#"{"ph": "X", "cat": "cpu_op", "args": [1]}"#,
            r#"{"pid": 1.5}"#,
            r#"{"pid": -0}"#,
            r#"{"pid": 9223372036854775808}"#,
            r#"{"ph": "X", "cat": "cpu_op", "args": {"a": 1e400}}"#,
            r#"{"name": "\ud800"}"#,
            r#"{"name": "a	b"}"#,
            r#"{"a": 01}"#,
            r#"{"a": 1,}"#,
            r#"["X"]"#,
            "",
            // Accepted by the reference, but unusual: it reads them.
            r#"{"a": "\udc00"}"#,
            r#"{"ph": "X", "cat": "cpu_op", "args": {"a": 1e-400}}"#,
            // More whitespace after `: ` than writers put there, before a value read.
            r#"{"ph":  "X"}"#,
            "{\"ts\": \n1}",
            r#"{"ph": "X", "cat": "cpu_op", "args": {"a":  1}}"#,
        ] {
            assert!(read(bad, &ArgFilter::All).is_none(), "{bad}");
        }
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(65), "]".repeat(65));
        assert!(read(&deep, &ArgFilter::All).is_none());
        assert!(reference(&deep, &ArgFilter::All).is_some());
    }

    /// `text` cut at every byte and with every byte replaced by each of a set that JSON
    /// gives meaning to.
    fn mutations(text: &str) -> Vec<String> {
        let replacements = [
            "\"", "\\", ",", ":", "}", "]", "{", "[", " ", "0", "9", "-", ".", "e", "n", "x",
            "\u{1}", "é",
        ];
        let mut variants: Vec<String> = Vec::new();
        for (at, c) in text.char_indices() {
            variants.push(text[..at].to_string());
            for r in replacements {
                variants.push(format!("{}{r}{}", &text[..at], &text[at + c.len_utf8()..]));
            }
        }
        variants
    }

    /// Every event above, [mutated](mutations): whenever the one-pass parser reads
    /// something, the reference reads the same.
    #[test]
    fn whatever_the_one_pass_read_accepts_the_reference_reads_the_same() {
        let mut accepted = 0;
        for text in EVENTS {
            let filter = ArgFilter::All;
            let variants = mutations(text);
            for variant in &variants {
                if let Some(read) = one_pass(variant, &filter) {
                    accepted += 1;
                    assert_eq!(reference(variant, &filter), Some(read), "{variant}");
                }
            }
        }
        // The mutations that keep an event valid (a digit for a digit, a space for a
        // space, ...) are read, not all given up.
        assert!(accepted > 1000, "{accepted}");
    }

    /// Events whose args are skipped (a filter that keeps none of them): lists of numbers
    /// and strings spaced as writers space them, and others; `ts` and `dur` of every form.
    const SKIPPED: &[&str] = &[
        r#"{"ph": "X", "cat": "cpu_op", "ts": 1003.137, "dur": 28.518, "args": {"Concrete Inputs": ["", "", "a\"b"], "Input Dims": [[64, 1], [], [-1.5e3, 0]], "grid": [128,1, 1], "x": [ 1 , "s" ], "y": ["\u00e9", [1, 2], {"a": [3]}, null], "z": [true]}}"#,
        r#"{"ph": "X", "cat": "kernel", "ts": 0, "dur": 0.0005, "args": {"grid": [128, 1, 1], "block": [], "t": ["float", ""], "u": [0, -0, 10, 1.25, 2E-2, "x"]}}"#,
        r#"{"ph": "i", "cat": "cpu_op", "ts": -0.25, "args": {"a": [[[]]], "b": [""]}}"#,
        r#"{"ph": "X", "cat": "cpu_op", "ts": 123456789012345.6789, "dur": 1234567890123456, "args": {}}"#,
    ];

    #[test]
    fn skipped_lists_and_converted_times_agree_with_the_reference() {
        let filter = ArgFilter::Only(vec!["keep".into()]);
        let mut accepted = 0;
        for text in SKIPPED {
            let (ev, len) = read(text, &filter).expect(text);
            assert_eq!(len, text.len(), "{text}");
            // A plain `ts` is converted as it is read; a `dur` of 16 digits is left to the
            // converter.
            assert!(ev.ts.expect(text).1.is_some(), "{text}");
            assert_eq!(
                ev.dur.is_some_and(|dur| dur.1.is_none()),
                text.contains("3456,")
            );
            for variant in mutations(text).iter().chain([&text.to_string()]) {
                let Some((ev, _)) = read(variant, &filter) else {
                    continue;
                };
                accepted += 1;
                // What the parser converted is what the text converts to.
                for micros in [ev.ts, ev.dur].into_iter().flatten() {
                    if let Some(ns) = micros.1 {
                        assert_eq!(Some(ns), micros_to_ns(micros.0), "{variant}");
                    }
                }
                assert_eq!(
                    reference(variant, &filter),
                    one_pass(variant, &filter),
                    "{variant}"
                );
            }
        }
        assert!(accepted > 500, "{accepted}");
    }

    #[test]
    fn event_keys_are_their_fields_and_no_others() {
        let key = |text: &str| {
            let mut parser = Parser { text, at: 0 };
            (parser.event_key(), parser.at)
        };
        for (f, name) in FIELDS.iter().enumerate() {
            assert_eq!(
                key(&format!("{name}\": 1, \"x\"")),
                (Some(Some(f)), name.len() + 1)
            );
            // A key that starts as the field's does, or that the field's key starts.
            for other in [format!("{name}x"), name[..name.len() - 1].to_string()] {
                let text = format!("{other}\": 1, \"x\"");
                assert_eq!(
                    key(&text),
                    (Some(field(&other)), other.len() + 1),
                    "{other}"
                );
            }
        }
        assert_eq!(key("tts\": 1}"), (Some(None), 4));
    }

    #[test]
    fn a_member_key_is_read_through_its_colon_however_it_is_spaced() {
        let key = |text: &str| {
            let mut parser = Parser { text, at: 0 };
            let key = parser.event_member_key();
            // Where the value starts (the caller steps over whitespace after the colon).
            (key, after_whitespace(text.as_bytes(), parser.at))
        };
        for (f, name) in FIELDS.iter().enumerate() {
            for spacing in ["\": ", "\":", "\" : ", "\"\t:\n"] {
                let text = format!("{name}{spacing}1, \"x\": 2}}");
                assert_eq!(
                    key(&text),
                    (Some(Some(f)), text.find('1').unwrap()),
                    "{text}"
                );
            }
            // A key that starts as the field's does, or that the field's key starts.
            for other in [format!("{name}x"), name[..name.len() - 1].to_string()] {
                let text = format!("{other}\": 1}}");
                assert_eq!(
                    key(&text),
                    (Some(field(&other)), other.len() + 3),
                    "{other}"
                );
            }
            // No colon, or the text cut before it.
            assert_eq!(key(&format!("{name}\" 1}}")).0, None, "{name}");
            assert_eq!(key(&format!("{name}\"")).0, None, "{name}");
        }
        assert_eq!(key("tts\": 1}"), (Some(None), 6));
    }

    #[test]
    fn a_plain_run_ends_at_the_first_quote_backslash_or_control_byte() {
        for (text, end) in [
            ("", 0),
            ("abc", 3),
            ("abcdefghijklmnop", 16),
            ("abcdefghij\"", 10),
            ("abcdefg\\h\"", 7),
            ("\u{1f}abcdefgh", 0),
            ("abcdefgh\u{0}", 8),
            // A byte above 0x7f is part of the run, and a borrow out of a flagged byte
            // does not hide the first one.
            ("éèabcd\u{1}\"", 8),
            ("\u{0}\u{1}\"\\", 0),
            ("ab\u{1f}\u{20}\"\u{0}\u{0}\u{0}\u{0}", 2),
        ] {
            assert_eq!(plain_run_end(text.as_bytes(), 0), end, "{text:?}");
            for from in 0..=text.len() {
                let expected = text.as_bytes()[from..]
                    .iter()
                    .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                    .map_or(text.len(), |i| from + i);
                assert_eq!(
                    plain_run_end(text.as_bytes(), from),
                    expected,
                    "{text:?} {from}"
                );
            }
        }
    }

    #[test]
    fn raw_values_keep_their_text() {
        let (ev, _) = read(
            r#"{"ts": 12.500, "dur": "7", "args": {"a": [1, 2]}}"#,
            &ArgFilter::All,
        )
        .unwrap();
        assert_eq!(ev.ts.map(|r| r.0), Some("12.500"));
        assert_eq!(ev.dur.map(|r| r.0), Some("\"7\""));
        assert_eq!(ev.args.map(|r| r.0), Some(r#"{"a": [1, 2]}"#));
        // The reference gives the same text.
        let reference = RawEvent::deserialize(&mut serde_json::Deserializer::from_str(
            r#"{"ts": 12.500, "dur": "7"}"#,
        ))
        .unwrap();
        assert_eq!(reference.ts.map(|r| r.0), Some("12.500"));
        assert_eq!(reference.dur.map(|r| r.0), Some("\"7\""));
    }
}
