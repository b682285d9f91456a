"""``profile.export_memory_timeline``: torch.profiler's memory timeline, built from the
allocator's reports omniprof records (``[memory]`` records with ``profile_memory=True``).

torch.profiler builds its timeline from its event tree: every tensor the ops saw, with its
versions and the data flow between ops, which it sorts into categories (parameter,
optimizer state, input, temporary, activation, gradient, autograd detail). omniprof
records the allocator's reports and the ops around them, not which tensor each op read, so
this timeline has what those tell for certain:

- every allocation and free in the window, at its time, with its size (``CREATE``,
  ``DESTROY``), and a block allocated before the window and freed in it as torch has it
  (``PREEXISTING`` at the start, then ``DESTROY``);
- ``TEMPORARY`` for a block allocated and freed inside one top-level operator (the
  outermost op with an operator schema, or an autograd node), as torch marks a tensor
  allocated and freed inside one node of its data flow graph;
- the category unknown for every other byte.

So each byte the allocator reported is counted, under temporary or unknown; what torch adds
from its tensor records is not (see ``Differences``, and docs/python.md).
"""

import bisect
import decimal
import gzip
import json
import os
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _warn

# torch.profiler._memory_profiler's categories, in the order of its _CATEGORY_TO_INDEX (the
# index each raw event carries; the coalesced timeline's columns are these plus one).
CATEGORIES = (
    "PARAMETER",
    "OPTIMIZER_STATE",
    "INPUT",
    "TEMPORARY",
    "ACTIVATION",
    "GRADIENT",
    "AUTOGRAD_DETAIL",
    None,
)
_TEMPORARY = CATEGORIES.index("TEMPORARY")
_UNKNOWN = CATEGORIES.index(None)
# The colors torch.profiler plots each category in, in the same order.
_COLORS = (
    "darkgreen",
    "goldenrod",
    "black",
    "mediumpurple",
    "red",
    "mediumblue",
    "royalblue",
    "grey",
)

# torch.profiler._memory_profiler.Action's values.
PREEXISTING, CREATE, INCREMENT_VERSION, DESTROY = 1, 2, 3, 4

# c10::DeviceType's numbers of the devices torch.device names; PrivateUse1 (20) is named by
# its backend.
_DEVICE_TYPES = {0: "cpu", 1: "cuda", 12: "xpu", 13: "mps", 15: "hpu", 19: "mtia"}
_PRIVATEUSE1 = 20

# One raw event: (time in ns or -1, action, bytes, category index), as torch writes them.
Raw = Tuple[int, int, int, int]

DIFFERENCES = (
    "omniprof's memory timeline is built from the allocator's reports: it counts every "
    "allocation and free in the window, and marks as TEMPORARY the blocks allocated and "
    "freed inside one operator; every other byte is in the unknown category (torch.profiler "
    "sorts them into parameters, optimizer state, inputs, activations, gradients and "
    "autograd detail from the tensors its ops saw). Tensors allocated before the window "
    "and not freed in it are not counted (torch.profiler counts those its ops read as "
    "preexisting), and there is no point for an op that only changed a tensor in place; "
    "see docs/python.md"
)


def default_device(use_device: Optional[str]) -> str:
    """torch.profiler's default: the ``use_device`` backend's device 0, else ``cuda:0``
    where CUDA is available, else ``cpu``."""
    if use_device and use_device != "cuda":
        return use_device + ":0"
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def _device_of(kind: int, index: int) -> Tuple[str, Optional[int]]:
    name = _DEVICE_TYPES.get(kind)
    if name is None and kind == _PRIVATEUSE1:
        import torch

        name = torch._C._get_privateuse1_backend_name()
    # torch.device("cpu") has no index; the CPU allocator reports -1.
    return (name or f"device_type_{kind}", None if index < 0 else index)


def _wanted(device: str) -> Tuple[str, Optional[int]]:
    import torch

    d = torch.device(device)
    return (d.type, d.index)


def _schema_ops() -> Any:
    """Whether a name is an operator with a schema, as torch's SchemaMatcher looks it up
    (cached per name)."""
    import torch

    known: Dict[str, bool] = {}

    def has_schema(name: str) -> bool:
        if name not in known:
            try:
                known[name] = "::" in name and bool(torch._C._jit_get_schemas_for_operator(name))
            except RuntimeError:
                known[name] = False
        return known[name]

    return has_schema


def _is_autograd_node(name: str) -> bool:
    """An autograd node's range (torch's BACKWARD_FUNCTION scope): ``XBackward0``,
    ``torch::autograd::AccumulateGrad`` and the like, not the engine's range around it."""
    if name.startswith("autograd::engine::"):
        return False
    base = name.rsplit("::", 1)[-1]
    return base == "AccumulateGrad" or base.rstrip("0123456789").endswith("Backward")


def _read_trace(trace: Any) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="omniprof-memory-") as tmp:
        path = os.path.join(tmp, "trace.json")
        trace.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            # Exact nanoseconds: times are microseconds with three decimals.
            return json.load(f, parse_float=decimal.Decimal)


# A thread: (pid, tid) as the trace has them.
Thread = Tuple[Any, Any]


def _leaves(ops: Dict[Thread, List[Tuple[int, int]]]) -> Dict[Thread, List[Tuple[int, int]]]:
    """Per thread, the outermost of its ops by start: an op inside another is part of it."""
    leaves = {}
    for thread, spans in ops.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        outer: List[Tuple[int, int]] = []
        for s in spans:
            if not outer or s[0] >= outer[-1][1]:
                outer.append(s)
        leaves[thread] = outer
    return leaves


def _leaf_at(spans: List[Tuple[int, int]], t: int) -> Optional[int]:
    """The index of the span holding time ``t``, if one does."""
    i = bisect.bisect_right(spans, (t, float("inf"))) - 1
    return i if i >= 0 and spans[i][0] <= t <= spans[i][1] else None


def raw_events(trace: Any, device: str) -> Tuple[List[Raw], int]:
    """The timeline's raw events on ``device``, sorted as torch sorts them (by time, then
    action), and the most the allocator held reserved there at any record."""
    doc = _read_trace(trace)
    base = int(doc.get("baseTimeNanoseconds", 0))

    def ns(us: Any) -> int:
        return base + int(decimal.Decimal(us) * 1000)

    wanted = _wanted(device)
    has_schema = _schema_ops()
    # The ops torch's data flow graph has as nodes: the outermost with a schema, or an
    # autograd node.
    ops: Dict[Thread, List[Tuple[int, int]]] = {}
    records: List[Tuple[int, Thread, int, int]] = []
    reserved = 0
    for e in doc.get("traceEvents", []):
        name = e.get("name", "")
        thread = (e.get("pid"), e.get("tid"))
        if name == "[memory]":
            args = e.get("args", {})
            where = _device_of(int(args.get("Device Type", 0)), int(args.get("Device Id", -1)))
            if where == wanted:
                records.append((ns(e["ts"]), thread, int(args.get("Addr", 0)), int(args.get("Bytes", 0))))
                reserved = max(reserved, int(args.get("Total Reserved", 0)))
        elif e.get("ph") == "X" and e.get("cat") == "cpu_op" and (has_schema(name) or _is_autograd_node(name)):
            start = ns(e["ts"])
            ops.setdefault(thread, []).append((start, start + int(decimal.Decimal(e.get("dur", 0)) * 1000)))
    leaves = _leaves(ops)

    def leaf_of(thread: Thread, t: int) -> Optional[Tuple[Thread, int]]:
        i = _leaf_at(leaves.get(thread, []), t)
        return None if i is None else (thread, i)

    records.sort(key=lambda r: r[0])
    # Per live block: where its CREATE is in `out`, and the operator it was allocated in.
    live: Dict[int, Tuple[int, Optional[Tuple[Thread, int]]]] = {}
    out: List[List[int]] = []
    for t, thread, addr, size in records:
        if size > 0:
            live[addr] = (len(out), leaf_of(thread, t))
            out.append([t, CREATE, size, _UNKNOWN])
        elif size < 0:
            born = live.pop(addr, None)
            category = _UNKNOWN
            if born is None:
                # Allocated before the window: there from the start, as torch has it.
                out.append([-1, PREEXISTING, -size, _UNKNOWN])
            elif born[1] is not None and born[1] == leaf_of(thread, t):
                category = _TEMPORARY
                out[born[0]][3] = _TEMPORARY
            out.append([t, DESTROY, size, category])
    events: List[Raw] = [(e[0], e[1], e[2], e[3]) for e in out]
    events.sort(key=lambda e: (e[0], e[1]))
    return events, reserved


def coalesce(events: Sequence[Raw]) -> Tuple[List[int], List[List[int]]]:
    """``[times, sizes]`` as torch's ``_coalesce_timeline`` makes them: one point per
    microsecond with an event, each a running total per category (column 0 unused, as in
    torch; category i in column i + 1); the start's events at the earliest time."""
    times: List[int] = []
    sizes: List[List[int]] = []
    earliest = min((t for t, *_ in events if t >= 0), default=0) // 1000
    for t, _action, size, category in events:
        us = earliest if t < 0 else t // 1000
        if not times or us != times[-1]:
            times.append(us)
            sizes.append(list(sizes[-1]) if sizes else [0] * (len(CATEGORIES) + 1))
        sizes[-1][category + 1] += size
    return times, sizes


def write(trace: Any, path: str, device: str) -> None:
    """Writes the timeline as torch.profiler writes it for ``path``'s suffix, and warns
    what differs from torch.profiler's."""
    events, reserved = raw_events(trace, device)
    if path.endswith(".html"):
        text = _html(events, device, reserved)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    elif path.endswith(".gz"):
        data: Any = events if path.endswith("raw.json.gz") else list(coalesce(events))
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(data, f)
    else:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(list(coalesce(events)), f)
    _warn.warn(DIFFERENCES)


def _html(events: Sequence[Raw], device: str, reserved_peak: int) -> str:
    """torch's page: the stacked timeline as an image, here SVG (no plotting library
    needed), with the peaks in its title."""
    import base64
    from html import escape

    times, sizes = coalesce(events)
    width, height, pad = 1600, 900, 60
    t0 = times[0] if times else 0
    span = max((times[-1] - t0) if times else 0, 1)
    totals = [sum(s) for s in sizes]
    top = max(totals, default=0) or 1
    x = lambda t: pad + (t - t0) * (width - 2 * pad) / span  # noqa: E731
    y = lambda b: height - pad - b * (height - 2 * pad) / top  # noqa: E731
    shapes = []
    legend = []
    below = [0] * len(times)
    for i, color in enumerate(_COLORS):
        above = [b + s[i + 1] for b, s in zip(below, sizes)]
        if any(a != b for a, b in zip(above, below)):
            upper = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in zip(times, above))
            lower = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in reversed(list(zip(times, below))))
            name = CATEGORIES[i] or "Unknown"
            shapes.append(f'<polygon points="{upper} {lower}" fill="{color}" fill-opacity="0.7"><title>{name}</title></polygon>')
            row = 60 + 24 * len(legend)
            legend.append(
                f'<rect x="{width - pad - 170}" y="{row - 12}" width="14" height="14" fill="{color}" fill-opacity="0.7"/>'
                f'<text x="{width - pad - 150}" y="{row}" font-size="14">{name}</text>'
            )
        below = above
    gib = 1024**3
    title = f"Max memory allocated: {top / gib:.2f} GiB, max memory reserved: {reserved_peak / gib:.2f} GiB ({device})"
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
        f'<rect width="{width}" height="{height}" fill="white"/>'
        f'<text x="{width / 2}" y="30" text-anchor="middle" font-size="20">{escape(title)}</text>'
        + "".join(shapes)
        + "".join(legend)
        + f'<text x="{width / 2}" y="{height - 15}" text-anchor="middle" font-size="16">Time (ms), {span / 1000:.3f} ms in all</text>'
        f'<text x="20" y="{height / 2}" font-size="16" transform="rotate(-90 20 {height / 2})" text-anchor="middle">Memory (GB), {top / gib:.6f} GB at most</text>'
        "</svg>"
    )
    encoded = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return (
        '<html>\n<head><meta charset="utf-8" /><title>GPU Memory Timeline HTML</title></head>\n'
        f"<body>\n  <img src='data:image/svg+xml;base64,{encoded}'>\n</body>\n</html>"
    )
