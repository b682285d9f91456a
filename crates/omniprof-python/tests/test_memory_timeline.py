"""``export_memory_timeline`` against torch.profiler's: the same small training loop profiled
by each in one process, their timelines compared where docs/python.md says they match (the
allocator's events, the tensors there before the window that ops read, the total over time,
the temporary category), and each suffix's file read back as torch's readers and a browser
read it."""

import base64
import gc
import gzip
import json
import warnings
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable, List, Tuple

import pytest

import omniprof

from conftest import require_torch

torch = require_torch()

from torch.profiler import ProfilerActivity, profile as torch_profile  # noqa: E402

# torch.profiler._memory_profiler.Action's values and the unknown category's index.
PREEXISTING, CREATE, INCREMENT_VERSION, DESTROY = 1, 2, 3, 4
TEMPORARY, UNKNOWN = 3, 7
FLAGS = dict(record_shapes=True, profile_memory=True, with_stack=True)


def training_loop() -> Callable[[], None]:
    """A small model's step (forward, loss, backward, Adam, gradients dropped), run once so
    that the optimizer's state exists before any window.

    The step drops its gradients at its end, not its start, so that no block from before a
    window is freed in it: PyTorch's CPU allocator keeps the size of a block allocated while
    a profiler listens until it is freed while one listens, so a block freed between
    windows leaves a stale size at its address, and another block allocated there outside a
    window, freed in one, is reported freed with that size (torch.profiler then counts it
    as one more storage from before the window)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def step() -> None:
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    step()
    return step


def export_both(tmp_path: Path, *names: str) -> Tuple[Path, Path]:
    """The loop's timeline written to each of ``names`` by torch.profiler (into
    ``tmp_path/torch``) and by omniprof (``tmp_path/omniprof``)."""
    # Stale sizes in PyTorch's CPU allocator (blocks allocated in a window and freed outside
    # any, as earlier tests in the process may leave them at the addresses the loop reuses):
    # the comparison must hold with them (see `training_loop`).
    with torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        blocks = [torch.empty(64 * 128) for _ in range(8)]
    del blocks
    step = training_loop()
    # Tensors an earlier test left in reference cycles would be freed whenever the
    # collector runs, in one window and not the other.
    gc.collect()
    with torch_profile(activities=[ProfilerActivity.CPU], **FLAGS) as theirs:
        for _ in range(3):
            step()
    with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU], **FLAGS) as ours:
        for _ in range(3):
            step()
    (tmp_path / "torch").mkdir()
    (tmp_path / "omniprof").mkdir()
    for name in names:
        with warnings.catch_warnings():
            # torch's deprecation of the call itself.
            warnings.simplefilter("ignore", FutureWarning)
            theirs.export_memory_timeline(str(tmp_path / "torch" / name), "cpu")
        with pytest.warns(RuntimeWarning, match="built from the allocator's reports"):
            ours.export_memory_timeline(str(tmp_path / "omniprof" / name), "cpu")
    return tmp_path / "torch", tmp_path / "omniprof"


def read_raw(path: Path) -> List[List[int]]:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def allocator_events(raw: List[List[int]]) -> List[Tuple[int, int]]:
    """(action, bytes) of each allocation and free, in time order."""
    return [(a, n) for _, a, n, _ in raw if a in (CREATE, DESTROY)]


def test_the_raw_timeline_has_torchs_allocations_frees_and_temporaries(tmp_path: Path) -> None:
    theirs_dir, ours_dir = export_both(tmp_path, "memory.raw.json.gz")
    theirs, ours = read_raw(theirs_dir / "memory.raw.json.gz"), read_raw(ours_dir / "memory.raw.json.gz")
    # Every allocation and free torch has, in its order with its size (torch's other events
    # are tensors there before the window, and version bumps, which move no bytes).
    assert allocator_events(ours) == allocator_events(theirs)
    assert len(allocator_events(ours)) > 100
    assert {a for _, a, _, _ in theirs} - {CREATE, DESTROY} <= {PREEXISTING, INCREMENT_VERSION}
    # The storages the ops read that were there before the window (the CPU allocator
    # reports no free of a block from before it): torch's, with its sizes.
    preexisting = lambda raw: sorted(n for _, a, n, _ in raw if a == PREEXISTING)  # noqa: E731
    assert preexisting(ours) == preexisting(theirs)
    # The temporaries are torch's: the same events, in the same order.
    temporary = lambda raw: [(a, n) for _, a, n, c in raw if c == TEMPORARY and a in (CREATE, DESTROY)]  # noqa: E731
    assert temporary(ours) == temporary(theirs)
    assert len(temporary(ours)) > 0
    assert {c for *_, c in ours} == {TEMPORARY, UNKNOWN}
    # Times are the allocator's, in nanoseconds, sorted as torch sorts them.
    assert [(t, a) for t, a, _, _ in ours] == sorted((t, a) for t, a, _, _ in ours)


def running_totals(raw: List[List[int]]) -> List[int]:
    """The total after each event that moves bytes."""
    totals, total = [], 0
    for _, action, size, _ in raw:
        if action != INCREMENT_VERSION:
            total += size
            totals.append(total)
    return totals


def test_the_total_over_time_is_torchs(tmp_path: Path) -> None:
    theirs_dir, ours_dir = export_both(tmp_path, "memory.json", "memory.raw.json.gz")
    theirs, ours = read_raw(theirs_dir / "memory.raw.json.gz"), read_raw(ours_dir / "memory.raw.json.gz")
    # The tensors from before the window that ops read: at least the model's parameters,
    # Adam's two states and step count (a float) per parameter and the batch.
    preexisting = sum(n for _, a, n, _ in ours if a == PREEXISTING)
    model_bytes = 4 * (64 * 128 + 128 + 128 * 10 + 10)
    assert preexisting >= 3 * model_bytes + 4 * 4 + 32 * 64 * 4 + 32 * 8
    assert preexisting == sum(n for _, a, n, _ in theirs if a == PREEXISTING)
    # After each allocation and free, all along and at the end: torch's total (both put
    # the preexisting events first, at time -1).
    before = lambda raw: sum(1 for _, a, _, _ in raw if a == PREEXISTING)  # noqa: E731
    for raw in (ours, theirs):
        assert [t for t, a, _, _ in raw[: before(raw)]] == [-1] * before(raw)
    assert running_totals(ours)[before(ours) :] == running_totals(theirs)[before(theirs) :]
    # The points: one per microsecond with an event, the running total per category (the
    # first column unused, as in torch), the preexisting bytes at the first; torch has more
    # (its version bumps). The two windows ran at other times, so their microseconds group
    # the events differently: each point is the total after its microsecond's last event,
    # and the last is torch's.
    our_times, our_sizes = json.loads((ours_dir / "memory.json").read_text())
    their_times, their_sizes = json.loads((theirs_dir / "memory.json").read_text())
    assert our_times == sorted({t // 1000 for t, *_ in ours if t >= 0})
    assert len(our_sizes) == len(our_times) and len(their_sizes) == len(their_times)
    assert all(len(s) == 9 and s[0] == 0 for s in our_sizes + their_sizes)
    after: dict = {}
    total = 0
    for t, _, size, _ in ours:
        total += size
        after[our_times[0] if t < 0 else t // 1000] = total
    assert [sum(s) for s in our_sizes] == [after[t] for t in our_times]
    assert sum(our_sizes[-1]) == sum(their_sizes[-1])


def test_json_gz_holds_the_points_and_html_an_image_a_browser_shows(tmp_path: Path) -> None:
    step = training_loop()
    with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU], **FLAGS) as prof:
        step()
    with pytest.warns(RuntimeWarning, match="TEMPORARY"):
        prof.export_memory_timeline(str(tmp_path / "t.json.gz"))
        prof.export_memory_timeline(str(tmp_path / "t.json"))
        prof.export_memory_timeline(str(tmp_path / "t.html"))
    with gzip.open(tmp_path / "t.json.gz", "rt") as f:
        assert json.load(f) == json.loads((tmp_path / "t.json").read_text())

    class Images(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.sources: List[str] = []
            self.title = ""

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            if tag == "img":
                self.sources.append(dict(attrs)["src"])

        def handle_data(self, data: str) -> None:
            self.title += data.strip()

    page = Images()
    page.feed((tmp_path / "t.html").read_text())
    assert page.title == "GPU Memory Timeline HTML"
    (src,) = page.sources
    prefix = "data:image/svg+xml;base64,"
    assert src.startswith(prefix)
    svg = ET.fromstring(base64.b64decode(src[len(prefix) :]))
    ns = "{http://www.w3.org/2000/svg}"
    assert svg.tag == f"{ns}svg"
    drawn = {p.find(f"{ns}title").text for p in svg.iter(f"{ns}polygon")}  # type: ignore[union-attr]
    assert drawn == {"TEMPORARY", "Unknown"}


def test_it_needs_what_torch_needs_and_a_trace() -> None:
    for flags, missing in [
        (dict(profile_memory=True, with_stack=True), "record_shapes=True"),
        (dict(record_shapes=True), "profile_memory=True, with_stack=True"),
    ]:
        prof = omniprof.profile(activities=[omniprof.ProfilerActivity.CPU], **flags)
        with pytest.raises(ValueError, match=f"^{missing} required for memory profiling.$"):
            prof.export_memory_timeline("never.json")
        theirs = torch_profile(activities=[ProfilerActivity.CPU], **flags)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            with pytest.raises(ValueError, match=f"^{missing} required for memory profiling.$"):
                theirs.export_memory_timeline("never.json")
    with pytest.raises(omniprof.ProfilerError, match="cannot export_memory_timeline: no trace yet"):
        omniprof.profile(**FLAGS).export_memory_timeline("never.json")


def test_the_native_timeline_from_a_file_lacks_only_the_storages_ops_read(tmp_path: Path) -> None:
    step = training_loop()
    with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU], **FLAGS) as prof:
        step()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    in_memory, from_file = prof._trace, omniprof.load_trace(str(tmp_path / "t.json"))
    asked: List[str] = []

    def has_schema(name: str) -> bool:
        asked.append(name)
        return bool(torch._C._jit_get_schemas_for_operator(name))

    events, reserved = in_memory.memory_timeline(0, -1, has_schema)  # type: ignore[union-attr]
    # The storages ops read are kept beside the trace, never written (Kineto writes no such
    # arg): the file's timeline has the rest.
    assert "storage_reads" not in (tmp_path / "t.json").read_text()
    file_events, file_reserved = from_file.memory_timeline(0, -1, has_schema)
    assert file_reserved == reserved
    assert Counter(file_events) - Counter(events) == Counter()
    read = Counter(events) - Counter(file_events)
    assert {e[:2] for e in read} == {(-1, PREEXISTING)} and sum(read.values()) >= 8
    assert len([e for e in events if e[1] == CREATE]) > 10
    assert any(temporary for *_, temporary in events)
    # PyTorch's CPU allocator reports nothing reserved.
    assert reserved == 0
    # Asked once per name and trace, only of names with a namespace.
    assert len(asked) == 2 * len(set(asked)) and all("::" in n for n in asked)
    # Another device's timeline is empty; what the question raises is raised.
    assert from_file.memory_timeline(1, 0, has_schema) == ([], 0)

    def broken(name: str) -> bool:
        raise KeyError(name)

    with pytest.raises(KeyError):
        from_file.memory_timeline(0, -1, broken)
