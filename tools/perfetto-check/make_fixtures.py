"""Writes the self-test's small traces into the directory given as argv[1].

No dependencies: the native trace is encoded by hand, field by field, from the TracePacket
messages in docs/perfetto.md. What each file should make Perfetto report is in selftest.sh.
"""

import struct
import sys
from pathlib import Path

# ----------------------------------------------------------------- protobuf, by hand


def varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def uint_field(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def len_field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def str_field(number: int, text: str) -> bytes:
    return len_field(number, text.encode())


def fixed64_field(number: int, value: int) -> bytes:
    return varint(number << 3 | 1) + struct.pack("<Q", value)


SEQUENCE = 7
INCREMENTAL_STATE_CLEARED = 1
NEEDS_INCREMENTAL_STATE = 2
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
UNIT_COUNT = 2


def packet(ts: int, body: bytes, flags: int = 0) -> bytes:
    fields = uint_field(10, SEQUENCE) + uint_field(8, ts) + body
    if flags:
        fields += uint_field(13, flags)
    return len_field(1, fields)  # Trace.packet


def descriptor(uuid: int, rest: bytes) -> bytes:
    return len_field(60, uint_field(1, uuid) + rest)


def track_event(kind: int, track: int, name: str = "", extra: bytes = b"") -> bytes:
    fields = uint_field(9, kind) + uint_field(11, track)
    if name:
        fields += str_field(23, name)
    return len_field(11, fields + extra)


def tiny_pftrace() -> bytes:
    """One process (pid 40) with one thread (tid 41) and a counter track: two nested slices,
    the inner one starting a flow that an instant ends, and two counter samples."""
    process, thread, counter = 100, 101, 102
    out = packet(
        0,
        descriptor(process, len_field(3, uint_field(1, 40) + str_field(6, "fixture"))),
        INCREMENTAL_STATE_CLEARED,
    )
    out += packet(
        0, descriptor(thread, len_field(4, uint_field(1, 40) + uint_field(2, 41) + str_field(5, "worker")))
    )
    out += packet(
        0,
        descriptor(counter, uint_field(5, process) + str_field(2, "queue depth") + len_field(8, uint_field(3, UNIT_COUNT))),
    )
    events = [
        (1_000, track_event(SLICE_BEGIN, thread, "outer")),
        (1_500, track_event(COUNTER, counter, extra=uint_field(30, 3))),
        (2_000, track_event(SLICE_BEGIN, thread, "inner", fixed64_field(47, 9))),
        (2_500, track_event(COUNTER, counter, extra=uint_field(30, 5))),
        (3_000, track_event(SLICE_END, thread)),
        (4_000, track_event(SLICE_END, thread)),
        (5_000, track_event(INSTANT, thread, "landing", fixed64_field(48, 9))),
    ]
    for ts, body in events:
        out += packet(ts, body, NEEDS_INCREMENTAL_STATE)
    return out


# ----------------------------------------------------------------- Chrome JSON

EVENTS_JSON = """{"traceEvents": [
 {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
 {"ph": "B", "name": "load", "pid": 1, "tid": 2, "ts": 1},
 {"ph": "E", "pid": 1, "tid": 2, "ts": 4},
 {"ph": "C", "name": "memory", "pid": 1, "ts": 1, "args": {"bytes": 64}},
 {"ph": "C", "name": "memory", "pid": 1, "ts": 3, "args": {"bytes": 32}},
 {"ph": "s", "id": 5, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": 2},
 {"ph": "f", "id": 5, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 2, "ts": 2, "bp": "e"}
]}
"""

# Two complete events on one thread that overlap without nesting: Perfetto drops one.
OVERLAP_JSON = """{"traceEvents": [
 {"ph": "X", "name": "first", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
 {"ph": "X", "name": "second", "pid": 1, "tid": 1, "ts": 5, "dur": 10}
]}
"""


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    pftrace = tiny_pftrace()
    (out / "tiny.pftrace").write_bytes(pftrace)
    # Cut inside the last packet.
    (out / "tiny-cut.pftrace").write_bytes(pftrace[:-3])
    (out / "events.json").write_text(EVENTS_JSON)
    (out / "overlap.json").write_text(OVERLAP_JSON)
    (out / "not-a-trace.txt").write_text("this is not a trace\n")
    (out / "empty.json").write_bytes(b"")


if __name__ == "__main__":
    main()
