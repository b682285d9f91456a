//! The protobuf wire format, read: a message's fields one at a time, each a number and a
//! value of one of the four wire types. Only what a Perfetto trace needs; no schema, no
//! allocation (a length-delimited value borrows the message's bytes).

/// One field's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    /// A string, bytes, a nested message or a packed repeated field.
    Len(&'a [u8]),
}

impl<'a> Wire<'a> {
    /// The value as an unsigned integer (`uint*`, `int64` as two's complement, `bool`,
    /// enums, `fixed64`).
    pub(super) fn uint(self) -> Option<u64> {
        match self {
            Wire::Varint(v) | Wire::Fixed64(v) => Some(v),
            Wire::Fixed32(v) => Some(v.into()),
            Wire::Len(_) => None,
        }
    }

    /// The value as a signed integer (`int32`, `int64`: two's complement in a varint).
    pub(super) fn int(self) -> Option<i64> {
        self.uint().map(|v| v as i64)
    }

    /// A `double`.
    pub(super) fn double(self) -> Option<f64> {
        match self {
            Wire::Fixed64(v) => Some(f64::from_bits(v)),
            _ => None,
        }
    }

    /// A string (invalid UTF-8 replaced).
    pub(super) fn str(self) -> Option<String> {
        match self {
            Wire::Len(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// A nested message's bytes.
    pub(super) fn bytes(self) -> Option<&'a [u8]> {
        match self {
            Wire::Len(b) => Some(b),
            _ => None,
        }
    }

    /// The integers of a repeated integer field: one, or a packed list of varints.
    pub(super) fn uints(self) -> impl Iterator<Item = u64> + 'a {
        let (one, packed) = match self {
            Wire::Len(b) => (None, b),
            other => (other.uint(), &[][..]),
        };
        let mut rest = packed;
        one.into_iter().chain(std::iter::from_fn(move || {
            let (v, n) = varint(rest).ok()?;
            rest = &rest[n..];
            Some(v)
        }))
    }

    /// The values of a repeated `fixed64` field: one, or packed.
    pub(super) fn fixed64s(self) -> impl Iterator<Item = u64> + 'a {
        let (one, packed) = match self {
            Wire::Len(b) => (None, b),
            other => (other.uint(), &[][..]),
        };
        one.into_iter().chain(
            packed
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))),
        )
    }
}

/// A varint at the start of `b`: its value and length; an error says what is wrong.
pub(super) fn varint(b: &[u8]) -> Result<(u64, usize), &'static str> {
    let mut value = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(if b.len() < 10 {
        "a varint cut short"
    } else {
        "a varint longer than 10 bytes"
    })
}

/// The fields of one message, in order. An error (a cut or malformed field) ends it, with
/// the offset in the message where the bad field starts.
pub(super) struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn field(&mut self) -> Result<(u32, Wire<'a>), &'static str> {
        let rest = &self.bytes[self.at..];
        let (key, n) = varint(rest)?;
        let rest = &rest[n..];
        let number = u32::try_from(key >> 3).map_err(|_| "a field number out of range")?;
        let (value, len) = match key & 7 {
            0 => {
                let (v, m) = varint(rest)?;
                (Wire::Varint(v), m)
            }
            1 => {
                let b = rest.get(..8).ok_or("a fixed64 cut short")?;
                (
                    Wire::Fixed64(u64::from_le_bytes(b.try_into().expect("8 bytes"))),
                    8,
                )
            }
            2 => {
                let (len, m) = varint(rest)?;
                let len = usize::try_from(len).map_err(|_| "a length out of range")?;
                let b = rest
                    .get(m..)
                    .and_then(|r| r.get(..len))
                    .ok_or("a length-delimited field longer than its message")?;
                (Wire::Len(b), m + len)
            }
            5 => {
                let b = rest.get(..4).ok_or("a fixed32 cut short")?;
                (
                    Wire::Fixed32(u32::from_le_bytes(b.try_into().expect("4 bytes"))),
                    4,
                )
            }
            _ => return Err("an unknown wire type (groups are not supported)"),
        };
        self.at += n + len;
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Wire<'a>), (usize, &'static str)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.bytes.len() {
            return None;
        }
        let at = self.at;
        Some(self.field().map_err(|why| {
            // Nothing after a bad field can be read.
            self.at = self.bytes.len();
            (at, why)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_every_wire_type_read_back() {
        // 1: varint 300; 2: "hi"; 3: fixed64 7; 4: fixed32 9; 5: packed varints 1, 150.
        let bytes = [
            0x08, 0xac, 0x02, 0x12, 2, b'h', b'i', 0x19, 7, 0, 0, 0, 0, 0, 0, 0, 0x25, 9, 0, 0, 0,
            0x2a, 3, 1, 0x96, 0x01,
        ];
        let fields: Vec<_> = Fields::new(&bytes).map(Result::unwrap).collect();
        assert_eq!(fields[0], (1, Wire::Varint(300)));
        assert_eq!(fields[1].1.str().as_deref(), Some("hi"));
        assert_eq!(fields[2], (3, Wire::Fixed64(7)));
        assert_eq!(fields[3], (4, Wire::Fixed32(9)));
        assert_eq!(fields[4].1.uints().collect::<Vec<_>>(), [1, 150]);
    }

    #[test]
    fn a_field_longer_than_its_message_is_an_error_at_its_offset() {
        let bytes = [0x08, 1, 0x12, 5, b'a'];
        let fields: Vec<_> = Fields::new(&bytes).collect();
        assert_eq!(fields[0], Ok((1, Wire::Varint(1))));
        assert_eq!(
            fields[1],
            Err((2, "a length-delimited field longer than its message"))
        );
        assert_eq!(fields.len(), 2);
    }
}
