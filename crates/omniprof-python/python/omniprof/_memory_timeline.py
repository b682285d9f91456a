"""``profile.export_memory_timeline``: torch.profiler's memory timeline, built from the
allocator's reports omniprof records (``[memory]`` records with ``profile_memory=True``).

torch.profiler builds its timeline from its event tree: every tensor the ops saw, with its
versions and the data flow between ops, which it sorts into categories (parameter,
optimizer state, input, temporary, activation, gradient, autograd detail). omniprof
records the allocator's reports, the ops around them and (with ``record_shapes`` and
``profile_memory``) the storage of each tensor an op read, not the data flow between ops,
so this timeline has what those tell for certain:

- every allocation and free in the window, at its time, with its size (``CREATE``,
  ``DESTROY``), and a block allocated before the window and freed in it as torch has it
  (``PREEXISTING`` at the start, then ``DESTROY``);
- a storage the ops read that was there before the window and is not freed in it:
  ``PREEXISTING`` at the start, as torch counts the tensors its ops read;
- ``TEMPORARY`` for a block allocated and freed inside one top-level operator (the
  outermost op with an operator schema, or an autograd node), as torch marks a tensor
  allocated and freed inside one node of its data flow graph;
- the category unknown for every other byte.

The events are computed from the trace in Rust (``Trace.memory_timeline``, over
``omniprof_analysis::memory_timeline``); this module numbers them as torch does, asks
PyTorch which names are operators, and writes the files. So each byte the allocator
reported is counted, under temporary or unknown, and the total is torch's; the categories
torch infers from the data flow are not (see ``DIFFERENCES``, and docs/python.md).
"""

import gzip
import json
from typing import Any, List, Optional, Sequence, Tuple

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
    "autograd detail from the tensors its ops saw), and there is no point for an op that "
    "only changed a tensor in place; see docs/python.md"
)


def default_device(use_device: Optional[str]) -> str:
    """torch.profiler's default: the ``use_device`` backend's device 0, else ``cuda:0``
    where CUDA is available, else ``cpu``."""
    if use_device and use_device != "cuda":
        return use_device + ":0"
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def _device_code(device: str) -> Tuple[int, int]:
    """``device`` as the allocator's records name it: the ``c10::DeviceType`` number
    (PrivateUse1's backend by its name; -1, matching no record, for a type it does not
    know) and the index (-1 for none: the CPU allocator reports -1)."""
    import torch

    d = torch.device(device)
    codes = {name: code for code, name in _DEVICE_TYPES.items()}
    codes[torch._C._get_privateuse1_backend_name()] = _PRIVATEUSE1
    return codes.get(d.type, -1), -1 if d.index is None else d.index


def _has_schema(name: str) -> bool:
    """Whether ``name`` is an operator with a schema, as torch's SchemaMatcher looks it up
    (the Rust side asks once per name)."""
    import torch

    try:
        return bool(torch._C._jit_get_schemas_for_operator(name))
    except RuntimeError:
        return False


def raw_events(trace: Any, device: str) -> Tuple[List[Raw], int]:
    """The timeline's raw events on ``device``, sorted as torch sorts them (by time, then
    action), and the most the allocator held reserved there at any record: computed from
    the trace in Rust (``omniprof_analysis::memory_timeline``), here only numbered as torch
    numbers them."""
    events, reserved = trace.memory_timeline(*_device_code(device), _has_schema)
    return [(t, action, size, _TEMPORARY if temporary else _UNKNOWN) for t, action, size, temporary in events], reserved


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
