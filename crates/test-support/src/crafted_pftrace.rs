//! Perfetto traces encoded by hand, packet by packet, for the tests of what the `.pftrace`
//! reader does with input no writer makes: the protobuf fields ([`varint_field`],
//! [`len_field`]), the few packets the tests combine ([`thread_track`], [`instant`],
//! [`slice_begin`], [`interned_name`], [`interned_instant`]), and whole hostile traces that
//! would make a reader holding state per packet grow with the file
//! ([`many_interned_names`], [`open_slice_then_instants`], [`never_ended_begins`]).
//!
//! ```
//! use omniprof_test_support::crafted_pftrace::{instant, packets, thread_track};
//! let trace = packets(&[thread_track(1, 7, 7), instant(1, 10, "op", &[])]);
//! assert_eq!(trace[0], 0x0a); // field 1 (a packet), length-delimited
//! ```

use std::io::{self, BufWriter, Write};

/// A protobuf varint.
pub fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// A field of wire type 0: its key, then a varint value.
pub fn varint_field(number: u32, value: u64) -> Vec<u8> {
    let mut out = varint(u64::from(number) << 3);
    out.extend(varint(value));
    out
}

/// A field of wire type 2: its key, its length, then `bytes`.
pub fn len_field(number: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = varint(u64::from(number) << 3 | 2);
    out.extend(varint(bytes.len() as u64));
    out.extend(bytes);
    out
}

/// A `Trace` of these packets.
pub fn packets(packets: &[Vec<u8>]) -> Vec<u8> {
    packets.iter().flat_map(|p| len_field(1, p)).collect()
}

/// A packet describing thread track `uuid` of `(pid, tid)`.
pub fn thread_track(uuid: u64, pid: i64, tid: i64) -> Vec<u8> {
    let thread = [varint_field(1, pid as u64), varint_field(2, tid as u64)].concat();
    let track = [varint_field(1, uuid), len_field(4, &thread)].concat();
    len_field(60, &track)
}

/// A packet with a `cpu_op` track event of `kind` (1 slice begin, 2 slice end, 3 instant)
/// named `name` at `ts` on track `track`, with these debug annotations.
fn cpu_op_event(kind: u64, track: u64, ts: u64, name: &str, annotations: &[Vec<u8>]) -> Vec<u8> {
    let mut event = [
        varint_field(9, kind),
        varint_field(11, track),
        len_field(22, b"cpu_op"),
        len_field(23, name.as_bytes()),
    ]
    .concat();
    for a in annotations {
        event.extend(len_field(4, a));
    }
    [varint_field(8, ts), len_field(11, &event)].concat()
}

/// A packet with a `cpu_op` instant named `name` at `ts` on track `track`, with these
/// debug annotations.
pub fn instant(track: u64, ts: u64, name: &str, annotations: &[Vec<u8>]) -> Vec<u8> {
    cpu_op_event(3, track, ts, name, annotations)
}

/// A packet beginning a `cpu_op` slice named `name` at `ts` on track `track`.
pub fn slice_begin(track: u64, ts: u64, name: &str) -> Vec<u8> {
    cpu_op_event(1, track, ts, name, &[])
}

/// A packet ending the innermost open slice of track `track` at `ts`.
pub fn slice_end(track: u64, ts: u64) -> Vec<u8> {
    let event = [varint_field(9, 2), varint_field(11, track)].concat();
    [varint_field(8, ts), len_field(11, &event)].concat()
}

/// A packet on sequence `seq` interning event name `iid` as `name`.
pub fn interned_name(seq: u64, iid: u64, name: &str) -> Vec<u8> {
    let entry = [varint_field(1, iid), len_field(2, name.as_bytes())].concat();
    [varint_field(10, seq), len_field(12, &len_field(2, &entry))].concat()
}

/// A packet on sequence `seq` with a `cpu_op` instant at `ts` on track `track`, named by
/// interned name `iid`.
pub fn interned_instant(seq: u64, track: u64, ts: u64, iid: u64) -> Vec<u8> {
    let event = [
        varint_field(9, 3),
        varint_field(11, track),
        len_field(22, b"cpu_op"),
        varint_field(10, iid),
    ]
    .concat();
    [
        varint_field(10, seq),
        varint_field(8, ts),
        len_field(11, &event),
    ]
    .concat()
}

/// Writes `packets` to `out` as a `Trace`, one at a time: a crafted file of millions of
/// packets is never whole in memory (a test that measures a child's peak memory must stay
/// small itself: the child's count starts from its parent's).
fn write_packets(out: &mut impl Write, packets: impl Iterator<Item = Vec<u8>>) -> io::Result<()> {
    let mut out = BufWriter::new(out);
    for p in packets {
        out.write_all(&len_field(1, &p))?;
    }
    out.flush()
}

/// Writes `n` distinct names of 40 bytes interned on one sequence (`name_` and 35 digits),
/// then one instant named by the first and one by the last.
pub fn many_interned_names(n: u64, out: &mut impl Write) -> io::Result<()> {
    let names = (1..=n).map(|iid| interned_name(1, iid, &format!("name_{iid:035}")));
    let instants = [interned_instant(1, 1, 1, 1), interned_instant(1, 1, 2, n)];
    write_packets(
        out,
        std::iter::once(thread_track(1, 1, 1))
            .chain(names)
            .chain(instants),
    )
}

/// Writes a slice `open` begun at 1 ns and never ended, then `n` instants `i` on its
/// thread, one a nanosecond from 2 ns.
pub fn open_slice_then_instants(n: u64, out: &mut impl Write) -> io::Result<()> {
    let head = [thread_track(1, 1, 1), slice_begin(1, 1, "open")];
    let instants = (0..n).map(|i| instant(1, 2 + i, "i", &[]));
    write_packets(out, head.into_iter().chain(instants))
}

/// Writes `n` slices `b` begun on one thread, one a nanosecond from 1 ns, each inside the
/// one before, none ever ended.
pub fn never_ended_begins(n: u64, out: &mut impl Write) -> io::Result<()> {
    let begins = (0..n).map(|i| slice_begin(1, 1 + i, "b"));
    write_packets(out, std::iter::once(thread_track(1, 1, 1)).chain(begins))
}
