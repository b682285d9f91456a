//! The protobuf wire format, as much of it as the writer needs, and the field numbers of the
//! Perfetto messages it writes (`perfetto_trace.proto`; `docs/perfetto.md`).
//!
//! Messages are written straight into one byte buffer: a nested message's length is not
//! known until it ends, so [`Buf::open`] leaves one byte for it and [`Buf::close`] fills it
//! in, moving the message right in the rare case the length needs more bytes.

use std::mem::MaybeUninit;

/// Wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

/// `Trace`.
pub(super) mod trace {
    pub(crate) const PACKET: u32 = 1;
}

/// `TracePacket`.
pub(super) mod packet {
    pub(crate) const CLOCK_SNAPSHOT: u32 = 6;
    pub(crate) const TIMESTAMP: u32 = 8;
    pub(crate) const TRUSTED_PACKET_SEQUENCE_ID: u32 = 10;
    pub(crate) const TRACK_EVENT: u32 = 11;
    pub(crate) const INTERNED_DATA: u32 = 12;
    pub(crate) const SEQUENCE_FLAGS: u32 = 13;
    pub(crate) const TRACE_PACKET_DEFAULTS: u32 = 59;
    pub(crate) const TRACK_DESCRIPTOR: u32 = 60;
    pub(crate) const FIRST_PACKET_ON_SEQUENCE: u32 = 87;
    /// `sequence_flags` bits.
    pub(crate) const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
    pub(crate) const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
}

/// `TracePacketDefaults`.
pub(super) mod defaults {
    pub(crate) const TIMESTAMP_CLOCK_ID: u32 = 58;
}

/// `ClockSnapshot` and its `Clock`s.
pub(super) mod clock {
    pub(crate) const CLOCKS: u32 = 1;
    pub(crate) const CLOCK_ID: u32 = 1;
    pub(crate) const TIMESTAMP: u32 = 2;
    pub(crate) const IS_INCREMENTAL: u32 = 3;
    /// The clock packets are timed in when they name none.
    pub(crate) const BOOTTIME: u64 = 6;
    /// The first clock id a sequence may define for itself.
    pub(crate) const FIRST_SEQUENCE_CLOCK: u64 = 64;
}

/// `TrackDescriptor`, `ProcessDescriptor`, `ThreadDescriptor`.
pub(super) mod track {
    pub(crate) const UUID: u32 = 1;
    pub(crate) const NAME: u32 = 2;
    pub(crate) const PROCESS: u32 = 3;
    pub(crate) const THREAD: u32 = 4;
    pub(crate) const PARENT_UUID: u32 = 5;
    pub(crate) const COUNTER: u32 = 8;
    pub(crate) const SIBLING_ORDER_RANK: u32 = 12;
    pub(crate) mod counter {
        pub(crate) const CATEGORIES: u32 = 2;
    }
    pub(crate) mod process {
        pub(crate) const PID: u32 = 1;
        pub(crate) const LEGACY_SORT_INDEX: u32 = 3;
        pub(crate) const PROCESS_NAME: u32 = 6;
        pub(crate) const PROCESS_LABELS: u32 = 8;
    }
    pub(crate) mod thread {
        pub(crate) const PID: u32 = 1;
        pub(crate) const TID: u32 = 2;
        pub(crate) const LEGACY_SORT_INDEX: u32 = 3;
        pub(crate) const THREAD_NAME: u32 = 5;
    }
}

/// `TrackEvent`.
pub(super) mod event {
    pub(crate) const CATEGORY_IIDS: u32 = 3;
    pub(crate) const DEBUG_ANNOTATIONS: u32 = 4;
    pub(crate) const TYPE: u32 = 9;
    pub(crate) const NAME_IID: u32 = 10;
    pub(crate) const TRACK_UUID: u32 = 11;
    pub(crate) const COUNTER_VALUE: u32 = 30;
    pub(crate) const EXTRA_COUNTER_VALUES: u32 = 12;
    pub(crate) const EXTRA_COUNTER_TRACK_UUIDS: u32 = 31;
    pub(crate) const EXTRA_DOUBLE_COUNTER_TRACK_UUIDS: u32 = 45;
    pub(crate) const EXTRA_DOUBLE_COUNTER_VALUES: u32 = 46;
    pub(crate) const DOUBLE_COUNTER_VALUE: u32 = 44;
    pub(crate) const FLOW_IDS: u32 = 47;
    pub(crate) const TERMINATING_FLOW_IDS: u32 = 48;
    pub(crate) const CORRELATION_ID: u32 = 52;
    pub(crate) const CATEGORIES: u32 = 22;
    pub(crate) const NAME: u32 = 23;
    /// `type` values.
    pub(crate) const TYPE_SLICE_BEGIN: u64 = 1;
    pub(crate) const TYPE_SLICE_END: u64 = 2;
    pub(crate) const TYPE_INSTANT: u64 = 3;
    pub(crate) const TYPE_COUNTER: u64 = 4;
}

/// `DebugAnnotation`.
pub(super) mod annotation {
    pub(crate) const NAME_IID: u32 = 1;
    pub(crate) const BOOL_VALUE: u32 = 2;
    pub(crate) const UINT_VALUE: u32 = 3;
    pub(crate) const INT_VALUE: u32 = 4;
    pub(crate) const DOUBLE_VALUE: u32 = 5;
    pub(crate) const STRING_VALUE: u32 = 6;
    pub(crate) const LEGACY_JSON_VALUE: u32 = 9;
    pub(crate) const NAME: u32 = 10;
    pub(crate) const DICT_ENTRIES: u32 = 11;
    pub(crate) const ARRAY_VALUES: u32 = 12;
}

/// `InternedData` and its entries (`EventCategory`, `EventName`, `DebugAnnotationName`).
pub(super) mod interned {
    pub(crate) const EVENT_CATEGORIES: u32 = 1;
    pub(crate) const EVENT_NAMES: u32 = 2;
    pub(crate) const DEBUG_ANNOTATION_NAMES: u32 = 3;
    pub(crate) const IID: u32 = 1;
    pub(crate) const NAME: u32 = 2;
}

/// A field's value, as the wire type after its key has it.
#[derive(Clone, Copy)]
enum Encoded {
    Varint(u64),
    Fixed64(u64),
}

/// A byte buffer that protobuf fields are appended to.
#[derive(Default)]
pub(super) struct Buf {
    pub bytes: Vec<u8>,
}

/// Where an open message's body starts (see [`Buf::open`]).
#[must_use = "an open message must be closed"]
pub(super) struct Open(usize);

/// The most bytes a field key and a varint take together: a key of a field number below
/// 2^11 takes two, a varint ten.
const KEY_AND_VARINT: usize = 12;

/// Encodes `v` as a varint into `out` from `at`; returns where it ends.
#[inline(always)]
fn put_varint(out: &mut [MaybeUninit<u8>], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        out[at].write(v as u8 | 0x80);
        v >>= 7;
        at += 1;
    }
    out[at].write(v as u8);
    at + 1
}

/// Room reserved in a [`Buf`] for a run of fields of bounded size (see [`Buf::room`]).
///
/// It writes into the buffer's spare capacity with its position in a register, and the
/// buffer's length is set once, when the run ends: a `Vec` written field by field reloads
/// its pointer and capacity after every byte it stores (a byte store may alias anything)
/// and checks the capacity at every field, which is most of the cost of a small field.
pub(super) struct Room<'a> {
    spare: &'a mut [MaybeUninit<u8>],
    /// The buffer's length when the room was made.
    base: usize,
    /// The bytes written so far: every byte before it is initialized.
    at: usize,
}

impl Room<'_> {
    /// Appends a key and the varint or fixed-size value after it.
    #[inline(always)]
    fn field(&mut self, field: u32, wire: u32, value: Encoded) {
        let at = put_varint(self.spare, self.at, u64::from(field << 3 | wire));
        self.at = match value {
            Encoded::Varint(v) => put_varint(self.spare, at, v),
            Encoded::Fixed64(v) => {
                for (slot, byte) in self.spare[at..at + 8].iter_mut().zip(v.to_le_bytes()) {
                    slot.write(byte);
                }
                at + 8
            }
        };
    }

    /// A `uint32` / `uint64` / `bool` / enum field.
    #[inline(always)]
    pub(super) fn uint(&mut self, field: u32, v: u64) {
        self.field(field, VARINT, Encoded::Varint(v));
    }

    #[inline(always)]
    pub(super) fn fixed64(&mut self, field: u32, v: u64) {
        self.field(field, FIXED64, Encoded::Fixed64(v));
    }

    /// Starts a length-delimited field (a sub-message, or a string written piece by piece)
    /// of `field`; [`Buf::close`] ends it, or [`Room::close`] if it ends in this room.
    #[inline(always)]
    pub(super) fn open(&mut self, field: u32) -> Open {
        self.field(field, LEN, Encoded::Varint(0));
        Open(self.base + self.at)
    }

    /// Ends a length-delimited field opened in this room: writes its length before it (one
    /// byte, as a room is shorter than 128 bytes).
    #[inline(always)]
    pub(super) fn close(&mut self, open: Open) {
        let start = open.0 - self.base;
        self.spare[start - 1].write((self.at - start) as u8);
    }
}

impl Room<'_> {
    /// Appends a slice's end event, encoded when it began.
    #[inline(always)]
    pub(super) fn slice_end(&mut self, end: SliceEnd) {
        let len = (end.0 >> 56) as usize;
        if len == 0 {
            let e = self.open(packet::TRACK_EVENT);
            self.uint(event::TYPE, event::TYPE_SLICE_END);
            self.uint(event::TRACK_UUID, end.0);
            return self.close(e);
        }
        // All eight bytes at once; the room's bytes past `at` are written over or dropped.
        for (slot, byte) in self.spare[self.at..self.at + 8]
            .iter_mut()
            .zip(end.0.to_le_bytes())
        {
            slot.write(byte);
        }
        self.at += len;
    }
}

/// A slice's end: the `TrackEvent` field of a `TYPE_SLICE_END` on its track, encoded once,
/// when the slice begins, and written with one store when it ends, where its four fields
/// took a varint each (a slice end is a third of the packets). Key, length, type and track
/// take at most seven bytes for a track below 2^14 (every row track but in traces of
/// thousands of rows); the top byte says how many. Another track is kept as its uuid, with
/// a top byte of 0, and written field by field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct SliceEnd(u64);

impl SliceEnd {
    /// The end of a slice on `track` (a uuid below 2^56, as every uuid the writer gives).
    #[inline]
    pub(super) fn on(track: u64) -> Self {
        const TRACK_EVENT: u64 = (packet::TRACK_EVENT << 3 | LEN) as u64;
        const TYPE: u64 = (event::TYPE << 3 | VARINT) as u64;
        const TRACK_UUID: u64 = (event::TRACK_UUID << 3 | VARINT) as u64;
        // Low byte first: the event's key and length, type key and value, track key, then
        // the track's varint; the top byte says how many bytes are the event's.
        const HEAD: u64 = TRACK_EVENT | TYPE << 16 | event::TYPE_SLICE_END << 24 | TRACK_UUID << 32;
        match track {
            0..0x80 => Self(HEAD | 4 << 8 | track << 40 | 6 << 56),
            0x80..0x4000 => {
                let varint = track & 0x7f | 0x80 | (track >> 7) << 8;
                Self(HEAD | 5 << 8 | varint << 40 | 7 << 56)
            }
            _ => Self(track),
        }
    }
}

impl Buf {
    /// Writes a run of fields that take at most `max` (< 128) bytes with `fields`.
    #[inline(always)]
    pub(super) fn room<R>(&mut self, max: usize, fields: impl FnOnce(&mut Room<'_>) -> R) -> R {
        assert!(max < 0x80, "a room's messages have one-byte lengths");
        self.bytes.reserve(max);
        let base = self.bytes.len();
        let mut room = Room {
            spare: &mut self.bytes.spare_capacity_mut()[..max],
            base,
            at: 0,
        };
        let result = fields(&mut room);
        let written = room.at;
        // SAFETY: a room initializes every byte before `at` (it moves `at` only past bytes
        // it wrote), inside the spare capacity it was given.
        unsafe { self.bytes.set_len(base + written) };
        result
    }

    /// A `uint32` / `uint64` / `bool` / enum field.
    #[inline(always)]
    pub(super) fn uint(&mut self, field: u32, v: u64) {
        self.room(KEY_AND_VARINT, |r| r.uint(field, v));
    }

    /// An `int32` / `int64` field (a negative value takes ten bytes, as protobuf has it).
    #[inline(always)]
    pub(super) fn int(&mut self, field: u32, v: i64) {
        self.uint(field, v as u64);
    }

    #[inline(always)]
    pub(super) fn fixed64(&mut self, field: u32, v: u64) {
        self.room(KEY_AND_VARINT, |r| r.fixed64(field, v));
    }

    #[inline]
    pub(super) fn double(&mut self, field: u32, v: f64) {
        self.fixed64(field, v.to_bits());
    }

    #[inline]
    pub(super) fn str(&mut self, field: u32, s: &str) {
        self.room(KEY_AND_VARINT, |r| {
            r.field(field, LEN, Encoded::Varint(s.len() as u64))
        });
        self.bytes.extend_from_slice(s.as_bytes());
    }

    /// Starts a length-delimited field (a sub-message, or a string written piece by piece)
    /// of `field`; [`close`](Self::close) ends it.
    #[inline(always)]
    pub(super) fn open(&mut self, field: u32) -> Open {
        self.room(KEY_AND_VARINT, |r| r.open(field))
    }

    /// Ends a length-delimited field: writes its length before it.
    #[inline(always)]
    pub(super) fn close(&mut self, open: Open) {
        let start = open.0;
        let len = self.bytes.len() - start;
        if len < 0x80 {
            self.bytes[start - 1] = len as u8;
            return;
        }
        self.close_long(start, len);
    }

    #[cold]
    fn close_long(&mut self, start: usize, len: usize) {
        let mut prefix = [MaybeUninit::uninit(); KEY_AND_VARINT];
        let end = put_varint(&mut prefix, 0, len as u64);
        let extra = end - 1;
        self.bytes.resize(self.bytes.len() + extra, 0);
        self.bytes.copy_within(start..start + len, start + extra);
        for (at, byte) in prefix[..end].iter().enumerate() {
            // SAFETY: `put_varint` wrote the first `end` bytes.
            self.bytes[start - 1 + at] = unsafe { byte.assume_init() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_encoding_vector() {
        // `docs/perfetto.md`, section 9: a SLICE_BEGIN on track 2 at 1000 ns.
        let mut b = Buf::default();
        let p = b.open(trace::PACKET);
        b.uint(packet::TRUSTED_PACKET_SEQUENCE_ID, 1);
        b.uint(packet::TIMESTAMP, 1000);
        let e = b.open(packet::TRACK_EVENT);
        b.uint(event::TYPE, event::TYPE_SLICE_BEGIN);
        b.uint(event::TRACK_UUID, 2);
        b.str(event::CATEGORIES, "cpu_op");
        b.str(event::NAME, "aten::mm");
        b.fixed64(event::FLOW_IDS, 901);
        b.close(e);
        b.close(p);
        let mut want = vec![0x0a, 0x29, 0x50, 0x01, 0x40, 0xe8, 0x07, 0x5a, 0x22];
        want.extend([0x48, 0x01, 0x58, 0x02, 0xb2, 0x01, 0x06]);
        want.extend(b"cpu_op");
        want.extend([0xba, 0x01, 0x08]);
        want.extend(b"aten::mm");
        want.extend([0xf9, 0x02]);
        want.extend(901u64.to_le_bytes());
        assert_eq!(b.bytes, want);
    }

    #[test]
    fn long_messages_get_multi_byte_lengths() {
        let mut b = Buf::default();
        let outer = b.open(1);
        let inner = b.open(2);
        b.str(3, &"x".repeat(300));
        b.close(inner);
        b.close(outer);
        // inner: key 0x1a, 300 = 0xac 0x02, then "x"×300 → 303 bytes; outer: 0x12, 303, body.
        assert_eq!(&b.bytes[..3], &[0x0a, 0xb2, 0x02]);
        assert_eq!(&b.bytes[3..6], &[0x12, 0xaf, 0x02]);
        assert_eq!(&b.bytes[6..9], &[0x1a, 0xac, 0x02]);
        assert_eq!(b.bytes.len(), 3 + 3 + 3 + 300);
    }

    #[test]
    fn a_slice_end_encoded_at_its_begin_is_the_event_written_field_by_field() {
        for track in [0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1 << 40] {
            let mut fields = Buf::default();
            let e = fields.open(packet::TRACK_EVENT);
            fields.uint(event::TYPE, event::TYPE_SLICE_END);
            fields.uint(event::TRACK_UUID, track);
            fields.close(e);
            let mut encoded = Buf::default();
            encoded.room(16, |r| r.slice_end(SliceEnd::on(track)));
            assert_eq!(encoded.bytes, fields.bytes, "track {track}");
        }
    }

    #[test]
    fn negative_ints_take_ten_bytes() {
        let mut b = Buf::default();
        b.int(4, -1);
        assert_eq!(
            b.bytes,
            [0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
    }
}
