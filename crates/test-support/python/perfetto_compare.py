"""Decodes a Perfetto protobuf trace with Perfetto's own schema (the PyPI `perfetto` wheel's
`perfetto_trace_pb2`), checks the rules a valid trace keeps, and, given the Chrome JSON of the
same trace, compares every slice, instant, counter sample and flow.

Usage: perfetto_compare.py TRACE.pftrace [TRACE.json]

Prints one JSON object: counts, `violations` (broken rules) and, with a JSON trace,
`missing` (in the JSON, not in the protobuf trace) and `extra` (the other way round), each
capped at 20 entries with the total in `*_count`.
"""

import collections
import decimal
import gzip
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

# The Chrome writer puts an overlapping event on row `tid + lane * LANE_STRIDE`.
LANE_STRIDE = 1 << 24
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
SEQ_INCREMENTAL_STATE_CLEARED = 1
BOOTTIME = 6
CAP = 20


def canonical(value):
    """A value in a form both sides agree on: integral floats as ints, Decimals as floats."""
    if isinstance(value, decimal.Decimal):
        value = float(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    return value


def key_of(value):
    return json.dumps(canonical(value), sort_keys=True)


class Decoded:
    def __init__(self):
        self.violations = []
        self.tracks = {}
        self.slices = []
        self.instants = []
        self.counters = []
        self.flow_starts = {}
        self.flow_ends = {}
        self.packets = 0

    def violation(self, packet, text):
        self.violations.append(f"packet {packet}: {text}")


def annotation_value(a, names):
    kind = a.WhichOneof("value")
    if kind in ("bool_value", "uint_value", "int_value", "double_value", "string_value"):
        return getattr(a, kind)
    if kind == "legacy_json_value":
        return json.loads(a.legacy_json_value)
    if a.dict_entries:
        return {e.name: annotation_value(e, names) for e in a.dict_entries}
    if a.array_values:
        return [annotation_value(e, names) for e in a.array_values]
    # The writer's null: a name without a value.
    return None


def decode(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    d = Decoded()
    sequences = {}
    open_slices = collections.defaultdict(list)
    last_ts = {}
    for index, p in enumerate(trace.packet):
        d.packets += 1
        seq_id = p.trusted_packet_sequence_id
        if p.HasField("trusted_uid") and p.trusted_uid < 0:
            d.violation(index, "negative trusted_uid")
        if seq_id not in sequences:
            if not (p.first_packet_on_sequence and p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED):
                d.violation(index, f"first packet of sequence {seq_id} does not clear its state")
            sequences[seq_id] = {"names": {}, "categories": {}, "args": {}, "clock": None}
        state = sequences[seq_id]
        if p.HasField("trace_packet_defaults") and p.trace_packet_defaults.HasField("timestamp_clock_id"):
            state["clock"] = p.trace_packet_defaults.timestamp_clock_id
        if p.HasField("clock_snapshot"):
            clocks = {c.clock_id: c for c in p.clock_snapshot.clocks}
            clock = clocks.get(state["clock"])
            if clock is not None and clock.is_incremental:
                # Each timestamp adds to the last; the snapshot relates the clock to BOOTTIME.
                state["now"] = clock.timestamp
                state["offset"] = clocks[BOOTTIME].timestamp - clock.timestamp
        if p.HasField("timestamp") and "now" in state:
            state["now"] += p.timestamp
            ts = state["now"] + state["offset"]
        else:
            ts = p.timestamp
        if p.HasField("interned_data"):
            for field, table in (("event_names", "names"), ("event_categories", "categories"),
                                 ("debug_annotation_names", "args")):
                for entry in getattr(p.interned_data, field):
                    if entry.iid == 0:
                        d.violation(index, f"iid 0 in {field}")
                    state[table][entry.iid] = entry.name
        if p.HasField("track_descriptor"):
            t = p.track_descriptor
            if t.uuid == 0 or t.uuid in d.tracks:
                d.violation(index, f"track uuid {t.uuid} is zero or declared twice")
            if t.HasField("thread") and t.HasField("parent_uuid"):
                d.violation(index, f"thread track {t.uuid} has a parent")
            if t.HasField("parent_uuid") and t.parent_uuid not in d.tracks:
                d.violation(index, f"track {t.uuid}'s parent {t.parent_uuid} is not declared yet")
            d.tracks[t.uuid] = t
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        track = e.track_uuid
        if track not in d.tracks:
            d.violation(index, f"event on track {track} before its descriptor")
            continue
        if ts < last_ts.get(track, 0):
            d.violation(index, f"time goes backwards on track {track}")
        last_ts[track] = ts
        is_counter_track = d.tracks[track].HasField("counter")

        def interned(table, iid):
            if iid == 0 or iid not in state[table]:
                d.violation(index, f"undefined {table} iid {iid}")
            return state[table].get(iid)

        name = e.name if e.HasField("name") else (interned("names", e.name_iid) if e.name_iid else None)
        cats = list(e.categories) + [interned("categories", i) for i in e.category_iids]
        args = {}
        for a in e.debug_annotations:
            arg_name = a.name if a.HasField("name") else interned("args", a.name_iid)
            args[arg_name] = annotation_value(a, state["args"])
        # The `correlation` arg of device work and runtime calls is Perfetto's own field.
        if e.HasField("correlation_id") and "correlation" not in args:
            args["correlation"] = e.correlation_id
        if (e.type == COUNTER) != is_counter_track:
            d.violation(index, f"event type {e.type} on a {'counter' if is_counter_track else 'slice'} track")
        if e.type == SLICE_BEGIN:
            open_slices[track].append((ts, name, cats, args, index, list(e.flow_ids), list(e.terminating_flow_ids)))
        elif e.type == SLICE_END:
            if not open_slices[track]:
                d.violation(index, f"slice end with no open slice on track {track}")
                continue
            start, sname, scats, sargs, _, flows, terminating = open_slices[track].pop()
            ident = (row_of(d, track), sname, start)
            d.slices.append((row_of(d, track), sname, ",".join(scats), start, ts - start, key_of(sargs)))
            for f in flows:
                d.flow_starts[f] = ident
            for f in terminating:
                d.flow_ends[f] = ident
        elif e.type == INSTANT:
            d.instants.append((row_of(d, track), name, ts, key_of(args)))
        elif e.type == COUNTER:
            d.counters.append((d.tracks[track].name, ts, canonical(e.counter_value if e.HasField("counter_value") else e.double_counter_value)))
            # Values of other counters sampled at the same time ride along with this one.
            extras = list(zip(e.extra_counter_track_uuids, e.extra_counter_values))
            extras += list(zip(e.extra_double_counter_track_uuids, e.extra_double_counter_values))
            for extra_track, value in extras:
                if extra_track not in d.tracks or not d.tracks[extra_track].HasField("counter"):
                    d.violation(index, f"extra counter value on track {extra_track}, not a declared counter track")
                    continue
                d.counters.append((d.tracks[extra_track].name, ts, canonical(value)))
    for track, stack in open_slices.items():
        if stack:
            d.violation(stack[-1][4], f"{len(stack)} slices never end on track {track}")
    return d


def row_of(d, uuid):
    """A track as the JSON names its row: (process name, thread or track name)."""
    t = d.tracks[uuid]
    if t.HasField("thread"):
        return (process_name(d, t.thread.pid), t.thread.thread_name)
    parent = d.tracks.get(t.parent_uuid)
    if parent is None:
        return (t.name, "")
    if parent.HasField("process"):
        return (parent.process.process_name, t.name)
    return (parent.name, t.name)


def process_name(d, pid):
    for t in d.tracks.values():
        if t.HasField("process") and t.process.pid == pid:
            return t.process.process_name
    return ""


def load_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f, parse_float=decimal.Decimal)


def from_json(doc):
    """The same events, read from the Chrome JSON of the trace."""
    base = int(doc.get("baseTimeNanoseconds", 0))
    events = doc["traceEvents"]
    processes, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e["name"] == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e["name"] == "thread_name" and e["tid"] < LANE_STRIDE:
            threads[(e["pid"], e["tid"])] = e["args"]["name"]

    def ns(us):
        return base + int(decimal.Decimal(us) * 1000)

    def row(e):
        pid, tid = e["pid"], e["tid"]
        if isinstance(pid, str):
            return (pid, tid)
        tid %= LANE_STRIDE
        return (processes.get(pid, ""), threads.get((pid, tid), f"thread {tid}"))

    slices, instants, counters, global_instants = [], [], [], []
    flows = collections.defaultdict(dict)
    last_x = {}
    for e in events:
        ph = e.get("ph")
        if ph == "X":
            name = e["name"]
            slices.append((row(e), name, e.get("cat", ""), ns(e["ts"]), int(decimal.Decimal(e.get("dur", 0)) * 1000),
                           key_of(e.get("args", {}))))
            last_x[(e["pid"], e["tid"])] = (row(e), name, ns(e["ts"]))
        elif ph == "i" and e.get("s") == "g":
            global_instants.append((e["name"], ns(e["ts"])))
        elif ph == "i":
            instants.append((row(e), e["name"], ns(e["ts"]), key_of(e.get("args", {}))))
        elif ph == "C":
            for key, value in e.get("args", {}).items():
                if value is None:
                    continue
                series = e["name"] if e.get("cat") == "hardware_counters" else f"{e['name']} {key}"
                counters.append((series, ns(e["ts"]), canonical(value)))
        elif ph in ("s", "f"):
            end = "start" if ph == "s" else "end"
            flows[(e["cat"], e["id"])][end] = last_x[(e["pid"], e["tid"])]
    return slices, instants, counters, global_instants, flows


def compare(want, have):
    """(missing, extra): multiset differences, each capped."""
    w, h = collections.Counter(want), collections.Counter(have)
    missing = list((w - h).elements())
    extra = list((h - w).elements())
    return missing, extra


def main():
    d = decode(sys.argv[1])
    report = {
        "packets": d.packets,
        "tracks": len(d.tracks),
        "slices": len(d.slices),
        "instants": len(d.instants),
        "counters": len(d.counters),
        "flows": len(set(d.flow_starts) & set(d.flow_ends)),
        "violations": d.violations[:CAP],
        "violations_count": len(d.violations),
    }
    if len(sys.argv) > 2:
        slices, instants, counters, global_instants, flows = from_json(load_json(sys.argv[2]))
        flow_pairs = [(f.get("start"), f.get("end")) for f in flows.values()]
        have_flows = [(d.flow_starts.get(i), d.flow_ends.get(i)) for i in set(d.flow_starts) | set(d.flow_ends)]
        # Global markers (`Iteration Start`, `Record Window End`) sit on the spans' tracks.
        have_instants = [i for i in d.instants if i[0][0] != "Spans"]
        have_global = [(i[1], i[2]) for i in d.instants if i[0][0] == "Spans"]
        missing, extra = [], []
        for kind, want, have in (("slice", slices, d.slices), ("instant", instants, have_instants),
                                 ("global instant", global_instants, have_global),
                                 ("counter", counters, d.counters), ("flow", flow_pairs, have_flows)):
            m, x = compare(want, have)
            missing += [[kind, *map(str, item)] for item in m]
            extra += [[kind, *map(str, item)] for item in x]
        report.update({
            "json_slices": len(slices),
            "json_counters": len(counters),
            "json_flows": len(flow_pairs),
            "missing": missing[:CAP],
            "missing_count": len(missing),
            "extra": extra[:CAP],
            "extra_count": len(extra),
        })
    print(json.dumps(report))


if __name__ == "__main__":
    main()
