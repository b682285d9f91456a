"""The drop-in for torch.profiler's memory, FLOPs and result API: one workload under
torch.profiler and under omniprof in the same process, compared row by row; torch.profiler
sessions started before, inside and after an omniprof session that records memory; and the
sharp edges a user switching from torch.profiler hit.

torch is required (see test_torch.py).
"""

import json
import os
import re
import signal
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import pytest

import omniprof

from conftest import every_attribute, require_torch, summary

torch = require_torch()

from torch.profiler import ProfilerActivity, profile as torch_profile

FLAGS = dict(record_shapes=True, profile_memory=True, with_flops=True)


def workload() -> None:
    """Convolution, linear layers, matmul and bmm, cat and clone, backward, an optimizer
    step. Everything it allocates is made and freed inside it, so that two sessions see the
    same allocations and frees."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    head = torch.nn.Sequential(torch.nn.Linear(8 * 8 * 8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD([*conv.parameters(), *head.parameters()], lr=0.1)
    images, labels = torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))
    a, b = torch.randn(16, 32), torch.randn(32, 8)
    batch_a, batch_b = torch.randn(2, 16, 32), torch.randn(2, 32, 8)
    for _ in range(2):
        optimizer.zero_grad()
        features = conv(images).flatten(1)
        loss = torch.nn.functional.cross_entropy(head(features), labels)
        loss.backward()
        optimizer.step()
        joined = torch.cat([torch.mm(a, b), torch.matmul(a, b).clone()])
        total = torch.bmm(batch_a, batch_b).sum() + joined.mul(2).sum()
        del joined, total


def rows_by_name(averages: Any) -> Dict[str, Tuple[int, int, int, int]]:
    return {
        r.key: (r.count, r.flops, r.cpu_memory_usage, r.self_cpu_memory_usage) for r in averages
    }


def without_times(table: str) -> List[str]:
    """``table``'s lines with the cells of its time columns (``Self CPU %``, ``Self CPU``,
    ``CPU total %``, ``CPU total``, ``CPU time avg``) and the total's figure blanked, the
    columns found from the dashes of its first line."""
    lines = table.splitlines()
    spans = [m.span() for m in re.finditer(r"-+", lines[0])]
    timed = [(a, b) for a, b in spans if "CPU" in lines[1][a:b] and "Mem" not in lines[1][a:b]]
    assert len(timed) == 5, lines[1]
    out = []
    for line in lines:
        if line.startswith("Self CPU time total:"):
            line = "Self CPU time total:"
        elif not line.startswith("-"):
            for a, b in timed:
                line = line[:a] + " " * (b - a) + line[b:]
        out.append(line)
    return out


def memory_events(path: Path) -> List[Dict[str, Any]]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "[memory]"]


def test_one_workload_gives_torch_profilers_rows_memory_flops_and_events(tmp_path: Path) -> None:
    omniprof._observer.install()
    workload()  # warm-up: first-call allocations and lazy initialisation
    with torch_profile(activities=[ProfilerActivity.CPU], **FLAGS) as theirs:
        workload()
    with omniprof.profile(**FLAGS) as ours:
        workload()

    mine, expected = rows_by_name(ours.key_averages()), rows_by_name(theirs.key_averages())
    assert mine == expected
    # The counts are real: FLOPs of the matrix products and convolutions, memory of every
    # op that allocates, and top-level frees outside any op.
    assert expected["aten::mm"][1] > 0 and expected["aten::conv2d"][1] > 0
    assert expected["aten::bmm"][1] > 0 and expected["aten::addmm"][1] > 0
    assert expected["aten::empty"][2] > 0
    assert expected["[memory]"][0] > 0

    theirs.export_chrome_trace(str(tmp_path / "theirs.json"))
    ours.export_chrome_trace(tmp_path / "ours.json")
    mine_memory, their_memory = memory_events(tmp_path / "ours.json"), memory_events(tmp_path / "theirs.json")
    assert len(mine_memory) == len(their_memory) > 0
    assert [e["args"]["Bytes"] for e in mine_memory] == [e["args"]["Bytes"] for e in their_memory]
    assert mine_memory[0]["cat"] == "cpu_instant_event" and mine_memory[0]["ph"] == "i"
    assert set(mine_memory[0]["args"]) >= {"Total Reserved", "Total Allocated", "Bytes", "Device Id", "Device Type", "Addr"}

    # The table PyTorch prints, whole: the same columns in the same widths, the same rows in
    # the same order with the same calls, memory and FLOPs; only the times are each run's own.
    def head(table: str) -> List[str]:
        return table.splitlines()[:3]

    for sort_by in ("self_cpu_memory_usage", "cpu_memory_usage", "flops", "count"):
        mine_table = without_times(ours.key_averages().table(sort_by=sort_by, row_limit=-1))
        their_table = without_times(theirs.key_averages().table(sort_by=sort_by, row_limit=-1))
        assert len(mine_table) > 10 and mine_table == their_table, sort_by
    assert "Self CPU Mem" in head(ours.key_averages().table())[1]
    assert "Total " in head(ours.key_averages().table())[1] and "FLOPs" in head(ours.key_averages().table())[1]

    # events(): the same events by name and count.
    assert Counter(e.name for e in ours.events()) == Counter(e.name for e in theirs.events())

    # row_limit is any Python int, as torch takes it: past 64 bits, every row.
    theirs.key_averages().table(row_limit=2**64)
    assert ours.key_averages().table(row_limit=2**64) == ours.key_averages().table(row_limit=-1)

    # The CLI's summary of either exported file prints PyTorch's columns; of ours, the
    # table Python printed.
    for sort_by in ("self_cpu_memory_usage", "flops"):
        assert ours.key_averages().table(sort_by=sort_by, row_limit=-1) == summary(
            tmp_path / "ours.json", "--sort-by", sort_by, "--row-limit", "-1"
        )
    # PyTorch's Chrome JSON holds no FLOPs, so the table of its file is PyTorch's without
    # the last column (12 wide and its two spaces).
    assert head(summary(tmp_path / "theirs.json", "--sort-by", "cpu_memory_usage")) == [
        line[: -(12 + 2)] for line in head(theirs.key_averages().table(sort_by="cpu_memory_usage"))
    ]


# The ops PyTorch 2.15's saveExtraArgs (torch/csrc/profiler/util.cpp) saves arguments of,
# the only ones computeFlops counts; a later PyTorch may add some, which the observer learns.
PYTORCH_FLOP_OPS = [
    "aten::add", "aten::addmm", "aten::baddbmm", "aten::bmm", "aten::conv2d", "aten::mm", "aten::mul",
]


def every_flop_op() -> None:
    """Each op PyTorch counts FLOPs of, in each overload a user reaches (a tensor or a
    scalar operand, in place or not), beside ops of similar names it counts none of."""
    a, b, c = torch.randn(6, 5), torch.randn(5, 4), torch.randn(6, 4)
    batch_a, batch_b, batch_c = torch.randn(2, 6, 5), torch.randn(2, 5, 4), torch.randn(2, 6, 4)
    image, weight = torch.randn(2, 3, 9, 9), torch.randn(4, 3, 3, 3)
    torch.mm(a, b), torch.addmm(c, a, b), torch.bmm(batch_a, batch_b)
    torch.baddbmm(batch_c, batch_a, batch_b), torch.matmul(a, b)
    torch.nn.functional.conv2d(image, weight, stride=2, padding=1)
    # A padding PyTorch's formula cannot read (it warns and counts none): the observer's own
    # formula leaves it to PyTorch's functions, which then do the same.
    torch.nn.functional.conv2d(image, weight, padding="same")
    c.add(c), c.add(1), c.mul(c), c.mul(2), c.add_(1), c.mul_(2), c.addcmul(c, c), c.sub(c)


def test_flops_are_counted_for_exactly_the_ops_pytorch_counts_with_its_counts(tmp_path: Path) -> None:
    omniprof._observer.install()
    every_flop_op()  # warm-up
    with torch_profile(activities=[ProfilerActivity.CPU], with_flops=True) as theirs:
        every_flop_op()
    with warnings.catch_warnings(record=True) as warned, omniprof.profile(with_flops=True) as ours:
        warnings.simplefilter("always")
        every_flop_op()
    # PyTorch's warning of the convolution it cannot count reaches the user as under torch.profiler.
    assert any("Failed to compute flops for op aten::conv2d" in str(w.message) for w in warned)

    # Learned from the installed PyTorch by offering its saveExtraArgs every operator name:
    # at least the ops this workload has counted, and only ATen ops.
    learned = omniprof._observer.module().flop_op_names()
    assert set(PYTORCH_FLOP_OPS) <= set(learned), learned
    # Counted by the observer's own formulas (checked against PyTorch's once), not through
    # PyTorch's saveExtraArgs per op: the counts below are still PyTorch's.
    assert omniprof._observer.module().fast_flop_op_names() == PYTORCH_FLOP_OPS
    assert all(name.startswith("aten::") for name in learned), learned
    mine = [(e.name, e.flops) for e in ours.events()]
    expected = [(e.name, e.flops) for e in theirs.events()]
    assert mine == expected
    counted = {name for name, flops in expected if flops}
    assert counted == set(PYTORCH_FLOP_OPS)
    assert ("aten::conv2d", 2 * 2 * 5 * 5 * 3 * 3 * 3 * 4) in mine

    # torch.profiler's trace keeps no FLOPs: read back with FLOPs asked for, each op counts
    # PyTorch's from its recorded inputs, as torch.profiler's events count them.
    theirs.export_chrome_trace(str(tmp_path / "torch.json"))
    assert '"flops"' not in (tmp_path / "torch.json").read_text()
    loaded = omniprof.load_trace(tmp_path / "torch.json")
    assert [(e.name, e.flops) for e in loaded.events(with_flops=True)] == expected
    expected_rows = {(r.key, r.flops) for r in theirs.key_averages()}
    assert {(r.key, r.flops) for r in loaded.key_averages(with_flops=True)} == expected_rows
    assert {e.flops for e in loaded.events()} == {0}, "not asked for"


def test_events_carry_function_events_attributes(tmp_path: Path) -> None:
    omniprof._observer.install()
    x = torch.ones(8, 8)
    with omniprof.profile(**FLAGS) as prof:
        with torch.profiler.record_function("block"):
            torch.mm(x, x)
    events = prof.events()
    block = next(e for e in events if e.name == "block")
    mm = next(e for e in events if e.name == "aten::mm")
    assert mm.key == "aten::mm" and mm.cpu_parent is not None and mm.cpu_parent.name == "block"
    assert mm in block.cpu_children
    assert mm.input_shapes == [[8, 8], [8, 8]]
    assert mm.flops == 2 * 8 * 8 * 8
    assert mm.cpu_memory_usage == 8 * 8 * 4 and mm.self_cpu_memory_usage >= 0
    # As under torch.profiler: a user range is given no memory of its own, and its children's
    # come off its self memory.
    assert (block.cpu_memory_usage, block.self_cpu_memory_usage) == (0, -mm.cpu_memory_usage)
    assert block.time_range.start <= mm.time_range.start <= mm.time_range.end <= block.time_range.end
    assert mm.cpu_time_total == pytest.approx(mm.time_range.end - mm.time_range.start)
    assert block.self_cpu_time_total <= block.cpu_time_total
    assert mm.thread == block.thread and not mm.is_async and block.is_user_annotation
    assert mm.device_type == torch.autograd.DeviceType.CPU and mm.device_time_total == 0
    table = events.table(sort_by="cpu_time_total", row_limit=None)
    assert "aten::mm" in table and "block" in table
    # The totals of the key averages, as PyTorch's total_average() sums them.
    total = prof.key_averages().total_average()
    assert total.key == "Total"
    assert total.count == sum(r.count for r in prof.key_averages())
    assert total.flops == mm.flops
    assert total.self_cpu_time_total == pytest.approx(sum(r.self_cpu_time_total for r in prof.key_averages()))
    # prof.profiler, where code reads PyTorch's inner profiler.
    assert [e.name for e in prof.profiler.function_events] == [e.name for e in events]


def test_events_and_key_averages_are_lists_their_methods_read_as_under_torch_profiler(
    tmp_path: Path,
) -> None:
    omniprof._observer.install()
    workload()  # warm-up
    with torch_profile(activities=[ProfilerActivity.CPU], **FLAGS) as theirs:
        workload()
    with omniprof.profile(**FLAGS) as ours:
        workload()
    both = {"torch": theirs, "omniprof": ours}

    for prof in both.values():
        assert isinstance(prof.events(), list) and isinstance(prof.key_averages(), list)
        assert prof.events() is prof.events()  # one list, which stays as the user leaves it
    # `key_averages()` is the events' average, in torch.profiler by definition.
    for by_shapes in (False, True):
        averaged = ours.events().key_averages(group_by_input_shapes=by_shapes)
        assert averaged.table(row_limit=-1) == ours.key_averages(group_by_input_shape=by_shapes).table(
            row_limit=-1
        )
        assert rows_by_name(averaged) == rows_by_name(
            theirs.events().key_averages(group_by_input_shapes=by_shapes)
        )

    # Sorted in place, a table prints the list's order; filtered in place, what is left.
    def by_count(row: Any) -> Tuple[int, str]:
        return (row.count, row.key)

    tables = {}
    for name, prof in both.items():
        averages = prof.key_averages()
        averages.sort(key=by_count, reverse=True)
        assert [by_count(r) for r in averages] == sorted(map(by_count, averages), reverse=True)
        tables[name] = without_times(averages.table(row_limit=-1))
    assert len(tables["omniprof"]) > 10 and tables["omniprof"] == tables["torch"]
    kept = {}
    for name, prof in both.items():
        events = prof.events()
        events[:] = [e for e in events if e.name in ("aten::mm", "aten::addmm")]
        kept[name] = (len(events), events.total_average().count, events.total_average().flops)
        assert events.self_cpu_time_total == pytest.approx(sum(e.self_cpu_time_total for e in events))
        assert [line.split()[0] for line in events.table(row_limit=-1).splitlines()[3:-2]] == [
            e.name for e in events
        ]
        assert prof.events() is events and len(prof.events()) == kept[name][0]
    assert kept["omniprof"] == kept["torch"] and kept["torch"][0] >= 6

    # PyTorch's own Chrome export of a list: one complete event per event, no args.
    for name, prof in both.items():
        prof.events().export_chrome_trace(str(tmp_path / f"{name}.json"))
    written = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in both}
    assert [(e["name"], e["ph"], e["pid"], e["args"]) for e in written["omniprof"]] == [
        (e["name"], e["ph"], e["pid"], e["args"]) for e in written["torch"]
    ]
    assert ours.events().supported_export_stacks_metrics() == theirs.events().supported_export_stacks_metrics()

    # What a list holds must be events or rows: anything else is named, not a crash.
    with pytest.raises(TypeError, match="item 1 is a str"):
        omniprof.EventList([ours.key_averages()[0], "aten::mm"]).table()
    with pytest.raises(TypeError, match="item 0 is a KeyAverage, not a FunctionEvent"):
        ours.key_averages().key_averages()


def test_function_events_answer_torch_profilers_attributes_event_by_event() -> None:
    omniprof._observer.install()
    workload()  # warm-up
    with torch_profile(activities=[ProfilerActivity.CPU], **FLAGS) as theirs:
        with torch.profiler.record_function("block"):
            workload()
    with omniprof.profile(**FLAGS) as ours:
        with torch.profiler.record_function("block"):
            workload()

    def described(prof: Any) -> Counter:
        return Counter(
            (
                e.name,
                e.activity_type,
                e.node_id,
                e.is_remote,
                e.device_index,
                e.device_resource_id,
                e.use_device,
                # A host op's External id is its own id (the numbers are each session's).
                e.external_id == e.id,
                e.linked_correlation_id,
                tuple(e.kernels),
                e.cpu_time == e.cpu_time_total,
                e.cpu_time_str == e.cpu_time_total_str,
                e.self_cpu_time_total_str == torch.autograd.profiler_util._format_time(e.self_cpu_time_total),
                e.device_time_str,
                # PyTorch's numbers of threads, the same in one process.
                e.fwd_thread,
                repr(e.concrete_inputs),
                repr(e.structured_input_shapes),
                repr(e.structured_input_strides),
                # A forward op and its backward node share a fwdbwd flow (type 1), numbered
                # alike by both profilers.
                (e.flow_id, e.flow_type, e.flow_start),
                repr(e.kwinputs),
                e.metadata,
                (e.self_cpu_percent, e.total_cpu_percent, e.total_device_percent),
            )
            for e in prof.events()
        )

    mine, expected = described(ours), described(theirs)
    assert mine == expected
    assert sum(mine.values()) > 100
    assert ("block", "user_annotation", -1, False, os.getpid()) in {key[:5] for key in mine}
    # The new attributes hold something to compare: backward nodes' forward threads, a cat's
    # tensor list, a scalar, a list of ints.
    assert {key[14] for key in mine} > {0}
    flows = Counter(key[18][1:] for key in mine)
    assert flows[(1, True)] == flows[(1, False)] > 10 and set(flows) == {(0, False), (1, True), (1, False)}
    inputs = {(key[0], *key[15:17]) for key in mine}
    assert ("aten::cat", "[None, 0]", "[[[16, 8], [16, 8]], []]") in inputs
    backward = {concrete for name, concrete, _ in inputs if name == "aten::convolution_backward"}
    assert backward == {"[None, None, None, [8], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, True]]"}
    # Without record_shapes an event has none, as under PyTorch.
    with omniprof.profile() as bare:
        torch.cat([torch.ones(2), torch.ones(2)])
    cat = next(e for e in bare.events() if e.name == "aten::cat")
    assert (cat.concrete_inputs, cat.structured_input_shapes, cat.structured_input_strides) == ([], [], [])
    # PyTorch's deprecated names still answer, with its FutureWarning.
    event, row = ours.events()[0], ours.key_averages()[0]
    for owner, old, new in [
        (event, "cuda_time", "device_time"),
        (event, "cuda_time_total", "device_time_total"),
        (event, "self_cuda_time_total", "self_device_time_total"),
        (event, "self_cuda_memory_usage", "self_device_memory_usage"),
        (row, "cuda_time", "device_time"),
    ]:
        with pytest.warns(FutureWarning, match=f"`{old}` is deprecated"):
            assert getattr(owner, old) == getattr(owner, new)


def test_every_attribute_of_every_event_and_row_is_torch_profilers(tmp_path: Path) -> None:
    omniprof._observer.install()
    workload()  # warm-up
    flags = dict(FLAGS, with_modules=True)
    with torch_profile(activities=[ProfilerActivity.CPU], **flags) as theirs:
        workload()
    with omniprof.profile(**flags) as ours:
        workload()
    assert every_attribute(ours.events()) == every_attribute(theirs.events())
    # A row of omniprof's also says whether it is device work (`on_device`).
    ours_rows = {n for n in dir(ours.key_averages()[0]) if not n.startswith("_")} - {"on_device"}
    assert ours_rows == {n for n in dir(theirs.key_averages()[0]) if not n.startswith("_")}
    for rows in (
        lambda p: p.key_averages(),
        lambda p: p.key_averages(group_by_input_shape=True),
        lambda p: p.events().key_averages(),
        lambda p: [p.key_averages().total_average()],
    ):
        expected = every_attribute(rows(theirs))
        assert every_attribute(rows(ours), besides=("on_device",)) == expected
    # Read back from a file, either profiler's trace gives the same (FLOPs counted again for
    # torch.profiler's, which writes none).
    theirs.export_chrome_trace(str(tmp_path / "torch.json"))
    expected_events = every_attribute(theirs.events())
    for name, prof in [("torch.json", None), ("ours.json.gz", ours), ("ours.pftrace", ours)]:
        if prof is not None:
            prof.export_chrome_trace(str(tmp_path / name))
        loaded = omniprof.load_trace(tmp_path / name)
        assert every_attribute(loaded.events(profile_memory=True, with_flops=True)) == expected_events, name
        rows = loaded.key_averages(profile_memory=True, with_flops=True)
        assert every_attribute(rows, besides=("on_device",)) == every_attribute(theirs.key_averages()), name
    # [memory] events have PyTorch's fewer fields, and host events' device times its int 0.
    memory = next(e for e in ours.events() if e.name == "[memory]")
    assert (memory.flops, memory.concrete_inputs, memory.trace_name, memory.kwinputs) == (None, None, None, None)
    assert repr(ours.events()[0].device_time_total) == "0"


def test_rows_take_their_first_events_parent_children_and_scope_and_add_as_torch_profilers() -> None:
    omniprof._observer.install()
    workload()  # warm-up
    with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as theirs:
        with torch.profiler.record_function("block"):
            workload()
    with omniprof.profile(record_shapes=True) as ours:
        with torch.profiler.record_function("block"):
            workload()

    def name(event: Any) -> Any:
        return None if event is None else event.name

    def described(rows: Any) -> Counter:
        return Counter(
            (r.key, str(r.input_shapes), name(r.cpu_parent), tuple(sorted(c.name for c in r.cpu_children)), r.scope)
            for r in rows
        )

    for grouped in (False, True):
        expected = described(theirs.key_averages(group_by_input_shape=grouped))
        assert described(ours.key_averages(group_by_input_shape=grouped)) == expected, grouped
        assert described(ours.events().key_averages(group_by_input_shapes=grouped)) == expected, grouped
    rows = described(ours.key_averages())
    assert ("aten::conv2d", "", "block", ("aten::convolution",), 0) in rows
    assert any(key[4] == 1 for key in rows) and any(key[0] == "block" and key[2:5:2] == (None, 7) for key in rows)
    total, their_total = ours.key_averages().total_average(), theirs.key_averages().total_average()
    assert (name(total.cpu_parent), total.scope) == (name(their_total.cpu_parent), their_total.scope)

    # add (and +=) sums a row's or an event's calls and times into a row, in place.
    for prof in (theirs, ours):
        row = next(r for r in prof.key_averages() if r.key == "aten::conv2d")
        event = next(e for e in prof.events() if e.name == "aten::conv2d")
        count, total_us = row.count, row.cpu_time_total
        assert row.add(event) is row
        row += row
        assert (row.count, row.cpu_time_total) == (2 * (count + 1), pytest.approx(2 * (total_us + event.cpu_time_total)))
        with pytest.raises(AssertionError, match="Expected keys to match"):
            row.add(next(e for e in prof.events() if e.name != "aten::conv2d"))


def test_events_and_rows_print_as_torch_profilers_do() -> None:
    # What a notebook shows of `prof.events()[0]` or a row: PyTorch's text, field for field.
    omniprof._observer.install()
    x = torch.ones(8, 8)
    printed = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        with module.profile(activities=[module.ProfilerActivity.CPU], record_shapes=True) as prof:
            with torch.profiler.record_function("block"):
                torch.mm(x, x).add_(1)
        # Each session's ids, times and thread numbers differ: the rest is compared.
        varying = r"(id|node_id|thread|seq_nr|start_us|end_us)=-?[\d.]+|cpu_children=\[[\d, ]*\]|\d+\.\d+(us|ms|s)"
        printed[name] = (
            Counter(re.sub(varying, "#", repr(e)) for e in prof.events()),
            Counter(re.sub(varying, "#", repr(r)) for r in prof.key_averages()),
        )
    assert printed["omniprof"] == printed["torch"]
    events, rows = printed["torch"]
    assert "<FunctionEvent # name=aten::mm overload_name= device_type=DeviceType.CPU # cpu_time=# # # # None_time=# name=aten::mm # input_shapes=[[8, 8], [8, 8]] cpu_memory_usage=0 None_memory_usage=0 is_async=False is_remote=False # is_legacy=False>" in events
    assert "<FunctionEventAvg key=block self_cpu_time=# cpu_time=#  self_cuda_time=# cuda_time=# input_shapes= cpu_memory_usage=0 cuda_memory_usage=0>" in rows


def test_table_takes_pytorchs_layout_arguments() -> None:
    omniprof._observer.install()
    x = torch.ones(4, 4)
    with omniprof.profile() as prof:
        with torch.profiler.record_function("a_rather_long_user_range_name_for_the_width"):
            torch.mm(x, x)
    averages = prof.key_averages()
    narrow = averages.table(max_name_column_width=20, row_limit=None)
    assert narrow.splitlines()[1].startswith(" " * 16 + "Name"), narrow
    assert "\na_rather_long_use...  " in narrow  # cut to the width less 3, as PyTorch cuts
    top = averages.table(top_level_events_only=True)
    assert "a_rather_long_user_range_name_for_the_width" in top and "aten::mm" not in top
    headed = averages.table(header="MY HEADER")
    assert "MY HEADER" in headed.splitlines()[1]
    with pytest.raises(ValueError, match="self_cpu_memory_usage"):
        averages.table(sort_by="no_such_column")


def test_the_api_corners_people_call_answer_as_torch_profilers_do(tmp_path: Path) -> None:
    # Each profiler, the same steps; then what a script reads after the `with` block.
    omniprof._observer.install()
    x = torch.ones(16, 16)
    profilers: Dict[str, Any] = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        with module.profile(activities=[module.ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                torch.mm(x, x)
                prof.step()
        profilers[name] = prof
    theirs, ours = profilers["torch"], profilers["omniprof"]
    assert ours.step_num == theirs.step_num == 3

    their_row = next(r for r in theirs.key_averages() if r.key == "aten::mm")
    our_row = next(r for r in ours.key_averages() if r.key == "aten::mm")
    for attribute in [
        "is_async", "node_id", "is_remote", "overload_name", "use_device", "is_legacy", "input_shapes", "stack",
    ]:
        assert getattr(our_row, attribute) == getattr(their_row, attribute), attribute
    for time in ["self_cpu_time_total", "cpu_time_total", "cpu_time", "device_time_total", "device_time"]:
        text = getattr(our_row, f"{time}_str")
        value = getattr(our_row, time)
        assert text == torch.autograd.profiler_util._format_time(value), time

    # PyTorch's table in one time unit; another unit is warned about, not raised.
    for unit in ["s", "ms", "us"]:
        table = ours.key_averages().table(time_unit=unit, row_limit=-1)
        assert table.splitlines()[-1] == "Self CPU time total: " + {
            "s": f"{ours.key_averages().self_cpu_time_total / 1e6:.3f}s",
            "ms": f"{ours.key_averages().self_cpu_time_total / 1e3:.3f}ms",
            "us": f"{ours.key_averages().self_cpu_time_total:.3f}us",
        }[unit]
    with pytest.warns(RuntimeWarning, match='unknown time unit "minutes"'):
        assert ours.key_averages().table(time_unit="minutes") == ours.key_averages().table()

    # Any name gets Chrome JSON, a `.gz` name gzip, as torch.profiler writes them.
    ours.export_chrome_trace(str(tmp_path / "x.trace"))
    assert json.loads((tmp_path / "x.trace").read_text())["traceEvents"]
    theirs.export_chrome_trace(str(tmp_path / "theirs.trace"))
    assert json.loads((tmp_path / "theirs.trace").read_text())["traceEvents"]
    ours.export_chrome_trace(str(tmp_path / "x.trace.gz"))
    assert (tmp_path / "x.trace.gz").read_bytes()[:2] == b"\x1f\x8b"

    import importlib.metadata

    assert omniprof.__version__ == importlib.metadata.version("omniprof")


def test_inside_torch_profiler_a_profile_says_what_the_outer_one_holds(tmp_path: Path) -> None:
    omniprof._observer.install()

    def work() -> None:
        torch.ones(256, 256).sum()

    work()
    for outer_stacks in [False, True]:
        with torch_profile(activities=[ProfilerActivity.CPU], with_stack=outer_stacks):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with omniprof.profile(with_stack=True, profile_memory=True) as ours:
                    work()
        said = [str(w.message) for w in caught if "torch.profiler is recording" in str(w.message)]
        assert len(said) == 1, said
        assert "the allocator's reports, so this profile has no memory records" in said[0]
        assert ("no Python stacks (with_stack=True)" in said[0]) == outer_stacks, said[0]
        ours.export_chrome_trace(str(tmp_path / "nested.json"))
        trace = json.loads((tmp_path / "nested.json").read_text())["traceEvents"]
        frames = [e for e in trace if e.get("cat") == "python_function"]
        assert (len(frames) == 0) == outer_stacks
        assert not [e for e in trace if e.get("name") == "[memory]"]
    # Alone, nothing to say.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with omniprof.profile(with_stack=True, profile_memory=True):
            work()


def test_memory_events_of_a_scheduled_run_are_torch_profilers(tmp_path: Path) -> None:
    # A block allocated in each warm-up step is freed in the first recorded step, which
    # torch.profiler does not report (it tracked no size then); every step also allocates
    # and frees a block of its own. Nothing is freed after a cycle's last recorded step,
    # where torch.profiler may or may not still report it.
    omniprof._observer.install()

    def run(module: Any, tag: str) -> List[List[int]]:
        cycles: List[List[int]] = []

        def handler(prof: Any) -> None:
            path = tmp_path / f"{tag}{len(cycles)}.json"
            prof.export_chrome_trace(str(path))
            trace = json.loads(path.read_text())["traceEvents"]
            cycles.append(sorted(e["args"]["Bytes"] for e in trace if e.get("name") == "[memory]"))

        # Steps 1 and 5 warm up, 2-3 and 6-7 record.
        schedule = module.schedule(wait=1, warmup=1, active=2, repeat=2)
        kept = None
        with module.profile(
            activities=[module.ProfilerActivity.CPU], profile_memory=True, schedule=schedule, on_trace_ready=handler
        ) as prof:
            for i in range(9):
                if i in (1, 5):
                    kept = torch.empty(1000 + i)
                elif i in (2, 6):
                    kept = None
                torch.empty(2000 + i)
                prof.step()
        assert kept is None
        return cycles

    theirs, ours = run(torch.profiler, "theirs"), run(omniprof, "ours")
    assert ours == theirs
    assert ours == [[-8012, -8008, 8008, 8012], [-8028, -8024, 8024, 8028]]


class Deadline:
    """Fails the test instead of hanging it."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        def expired(*_: Any) -> None:
            raise TimeoutError(f"did not finish within {self.seconds} s")

        signal.signal(signal.SIGALRM, expired)
        signal.alarm(self.seconds)

    def __exit__(self, *_: Any) -> None:
        signal.alarm(0)


def torch_memory_bytes(prof: Any) -> List[int]:
    return [e.cpu_memory_usage for e in prof.events() if e.name == "[memory]"] + [
        e.cpu_memory_usage for e in prof.events() if e.name == "aten::empty"
    ]


def allocate(numel: int) -> None:
    torch.empty(numel)


def assert_torch_recorded(prof: Any, numel: int) -> None:
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["aten::empty"].cpu_memory_usage == numel * 4, rows["aten::empty"]


def assert_omniprof_recorded(prof: omniprof.profile, numel: int) -> None:
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["aten::empty"].cpu_memory_usage >= numel * 4, rows["aten::empty"]


def test_torch_profiler_before_inside_and_after_an_omniprof_memory_session() -> None:
    module = omniprof._observer.module()
    assert module is not None
    omniprof._observer.install()
    with Deadline(60):
        # Inside: torch.profiler starts and stops while omniprof records memory.
        with omniprof.profile(profile_memory=True) as ours:
            allocate(1000)
            assert module.reporter_installed()
            with torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True) as inside:
                allocate(2000)
            allocate(3000)
        assert_torch_recorded(inside, 2000)
        rows = {r.key: r for r in ours.key_averages()}
        # omniprof kept the allocations made while torch.profiler did not hold them.
        assert rows["aten::empty"].cpu_memory_usage == (1000 + 3000) * 4, rows["aten::empty"]

        # Before: torch.profiler holds the thread's reports; omniprof does not take them.
        with torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True) as before:
            with omniprof.profile(profile_memory=True) as ours:
                allocate(4000)
                assert not module.reporter_installed()
        assert_torch_recorded(before, 4000)

        # The legacy profiler starts inside a session too.
        with omniprof.profile():
            with torch.autograd.profiler_legacy.profile() as legacy:
                allocate(10)
        assert "aten::empty" in {e.name for e in legacy.function_events}

        # After: omniprof's session is over; torch.profiler starts on a clean thread.
        with torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True) as after:
            allocate(5000)
        assert_torch_recorded(after, 5000)
        assert not module.reporter_installed()


def test_memory_of_threads_that_run_ops_is_recorded_on_their_rows(tmp_path: Path) -> None:
    import threading

    omniprof._observer.install()
    with omniprof.profile(profile_memory=True) as prof:
        worker = threading.Thread(target=allocate, args=(6000,))
        worker.start()
        worker.join()
    path = tmp_path / "threads.json"
    prof.export_chrome_trace(path)
    events = json.loads(path.read_text())["traceEvents"]
    empty = next(e for e in events if e.get("name") == "aten::empty")
    allocations = [e for e in events if e.get("name") == "[memory]" and e["args"]["Bytes"] == 6000 * 4]
    assert allocations and allocations[0]["tid"] == empty["tid"] != os.getpid()


# -- Sharp edges a switching user hit --------------------------------------------------------


def test_torch_tensorboard_trace_handler_writes_its_file(tmp_path: Path) -> None:
    handler = torch.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")
    with omniprof.profile(on_trace_ready=handler):
        with omniprof.record_function("step"):
            pass
    written = list(tmp_path.iterdir())
    assert len(written) == 1 and written[0].name.startswith("w.") and written[0].name.endswith(".pt.trace.json")
    assert "step" in {e.get("name") for e in json.loads(written[0].read_text())["traceEvents"]}


def test_an_exception_from_on_trace_ready_inside_a_with_block_is_the_one_raised() -> None:
    def fail(_: Any) -> None:
        raise KeyError("from on_trace_ready")

    with pytest.raises(KeyError, match="from on_trace_ready"):
        with omniprof.profile(schedule=omniprof.schedule(wait=0, warmup=0, active=1), on_trace_ready=fail) as prof:
            for _ in range(3):
                prof.step()


def test_a_device_activity_nothing_records_warns_once_naming_it() -> None:
    # MTIA: no backend here records it (CUDA's own warning, with CUPTI's reason, is in
    # test_cuda.py).
    omniprof.profiler._warned.discard("activity:MTIA")
    with pytest.warns(RuntimeWarning, match=r"ProfilerActivity\.MTIA .*KINETO_PLUGIN_LIB_DIR_PATH"):
        with omniprof.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.MTIA]):
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with omniprof.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.MTIA]):
            pass


def test_dropped_events_warn_at_stop_with_the_count_the_cap_and_the_key() -> None:
    with pytest.warns(RuntimeWarning) as record:
        with omniprof.profile(config="OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=1000"):
            for _ in range(1000):
                with omniprof.record_function("r"):
                    pass
    messages = [str(w.message) for w in record if "dropped" in str(w.message)]
    assert len(messages) == 1, messages
    assert "cap of 1000 records" in messages[0] and "OMNIPROF_MAX_HOST_RECORDS_PER_THREAD" in messages[0]
    dropped = int(messages[0].split("omniprof: ")[1].split(" ")[0])
    # 1,000 ranges of two records each: the first 500 fit.
    assert dropped == 500, messages[0]


def test_config_warnings_reach_python() -> None:
    with pytest.warns(RuntimeWarning, match="BOGUS_KEY"):
        omniprof.profile(config="BOGUS_KEY=1")


def table_rows(table: str) -> List[Tuple[str, ...]]:
    """A table's rows as (name, [overload name,] # of calls): its cells without times, cut
    where the rule above the header puts the columns."""
    import re

    rule, header, *_ = table.splitlines()
    spans = [m.span() for m in re.finditer("-+", rule)]
    cells = lambda line: [line[start:end].strip() for start, end in spans]  # noqa: E731
    names = cells(header)
    keep = [names.index(n) for n in ("Name", "Overload Name", "# of Calls") if n in names]
    return [tuple(cells(line)[i] for i in keep) for line in table.splitlines()[3:-2]]


def test_grouping_by_overload_name_gives_torch_profilers_rows() -> None:
    from torch._C._profiler import _ExperimentalConfig

    omniprof._observer.install()
    a, b = torch.ones(4), torch.ones(4)

    def overloads() -> None:
        for _ in range(2):
            a + b  # aten::add.Tensor
            a + 1  # aten::add.Tensor too: PyTorch wraps the scalar
            torch.add(a, b, out=torch.empty(4))  # aten::add.out
            torch.ops.aten.add.Scalar(a, 1.5)  # aten::add.Scalar
            a.sum()  # aten::sum, the default overload
            a.sum(0)  # aten::sum.dim_IntList

    for capture in [True, False]:
        profilers: Dict[str, Any] = {}
        for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
            config = _ExperimentalConfig(capture_overload_names=capture)
            with module.profile(activities=[module.ProfilerActivity.CPU], experimental_config=config) as prof:
                overloads()
            profilers[name] = prof
        theirs, ours = profilers["torch"], profilers["omniprof"]
        for by_overload in [True, False]:
            rows = [
                [(r.key, r.overload_name, r.count) for r in p.key_averages(group_by_overload_name=by_overload)]
                for p in (theirs, ours)
            ]
            assert rows[1] == rows[0], (capture, by_overload)
            tables = [table_rows(p.key_averages(group_by_overload_name=by_overload).table(row_limit=-1)) for p in (theirs, ours)]
            assert tables[1] == tables[0], (capture, by_overload)
        # Each event has its op's overload name, as torch.profiler's events() give it.
        events = [Counter((e.name, e.overload_name) for e in p.events()) for p in (theirs, ours)]
        assert events[1] == events[0], capture
        assert events[1][("aten::add", "Tensor" if capture else "")] == (4 if capture else 8)
        tables = [sorted(table_rows(p.events().table(row_limit=-1))) for p in (theirs, ours)]
        assert tables[1] == tables[0], capture
        grouped = {(k, o): n for k, o, n in rows_of(ours.key_averages(group_by_overload_name=True))}
        if capture:
            assert {k: grouped[k] for k in [("aten::add", "Tensor"), ("aten::add", "Scalar"), ("aten::add", "out")]} == {
                ("aten::add", "Tensor"): 4,
                ("aten::add", "Scalar"): 2,
                ("aten::add", "out"): 2,
            }
            assert (grouped[("aten::sum", "")], grouped[("aten::sum", "dim_IntList")]) == (2, 2)
        else:
            # Nothing captured: every op has the default overload's name, as in PyTorch.
            assert (grouped[("aten::add", "")], grouped[("aten::sum", "")]) == (8, 4)


def rows_of(averages: Any) -> List[Tuple[str, str, int]]:
    return [(r.key, r.overload_name, r.count) for r in averages]


def test_arguments_not_acted_on_warn_once_and_unknown_ones_raise() -> None:
    from torch._C._profiler import _ExperimentalConfig

    omniprof.profiler._warned.discard("experimental_config")
    asks = _ExperimentalConfig(profile_all_threads=True)
    with pytest.warns(RuntimeWarning, match="omniprof does not support experimental_config yet; it is ignored"):
        omniprof.profile(experimental_config=asks)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        omniprof.profile(experimental_config=asks)  # once
        omniprof.profile(with_stack=True, with_modules=True, acc_events=True)  # acted on: no warning
        # Stacks need no verbose config here: accepted, nothing to say.
        omniprof.profile(experimental_config=_ExperimentalConfig(verbose=True))
        omniprof.profile(acc_events=False, experimental_config=None)
    with pytest.raises(TypeError, match="no_such_argument"):
        omniprof.profile(no_such_argument=1)  # type: ignore[call-arg]


def test_a_custom_trace_id_names_each_cycles_trace_as_under_torch_profiler(tmp_path: Path) -> None:
    omniprof._observer.install()
    x = torch.ones(4, 4)
    seen: Dict[str, List[Tuple[Any, Any]]] = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        ids = iter(["first", "second", "third"])
        seen[name] = []

        def ready(prof: Any, name: str = name) -> None:
            path = tmp_path / f"{name}-{len(seen[name])}.json"
            prof.export_chrome_trace(str(path))
            seen[name].append((prof.get_trace_id(), json.loads(path.read_text())["trace_id"]))

        with module.profile(
            activities=[module.ProfilerActivity.CPU],
            schedule=module.schedule(wait=1, warmup=1, active=1, repeat=2),
            on_trace_ready=ready,
            custom_trace_id_callback=lambda: next(ids),
        ) as prof:
            for _ in range(7):
                torch.mm(x, x)
                prof.step()
    # One call of the callback at the start of each cycle, its id in the file.
    assert seen["omniprof"] == seen["torch"] == [("first", "first"), ("second", "second")]

    # Without a schedule, set after construction; then without a callback, an id of its own.
    with omniprof.profile() as prof:
        pass
    prof.set_custom_trace_id_callback(lambda: "named")
    with prof:
        assert prof.get_trace_id() == "named"
    assert prof.get_trace_id() == "named"
    prof.set_custom_trace_id_callback(None)
    with prof:
        pass
    prof.export_chrome_trace(tmp_path / "own.json")
    own = json.loads((tmp_path / "own.json").read_text())["trace_id"]
    assert re.fullmatch("[0-9A-F]{32}", own) and prof.get_trace_id() == own
    # A callback that fails is said; the trace keeps an id of its own.
    for callback, said in [(lambda: 1 / 0, "raised ZeroDivisionError"), (lambda: 7, "returned 7, not a string")]:
        with pytest.warns(RuntimeWarning, match=f"custom_trace_id_callback {said}"):
            with omniprof.profile(custom_trace_id_callback=callback) as prof:
                pass
        assert re.fullmatch("[0-9A-F]{32}", prof.get_trace_id())


def test_a_profile_and_the_module_have_torch_profilers_attributes(tmp_path: Path) -> None:
    cpu, cuda = (
        [ProfilerActivity.CPU],
        [ProfilerActivity.CPU, ProfilerActivity.CUDA],
    )
    for activities in (cpu, cuda):
        theirs, ours = torch_profile(activities=activities), omniprof.profile(activities=activities)
        assert {a.name for a in ours.activities} == {a.name for a in theirs.activities}
        assert ours.use_device == theirs.use_device
        assert (ours.record_steps, ours.schedule(3).name) == (theirs.record_steps, theirs.schedule(3).name)
    assert omniprof.profile(activities=cuda).use_device == "cuda"
    assert omniprof.profile().activities == omniprof.supported_activities()
    assert omniprof.profile(use_device="cuda").use_device == "cuda"
    every_other = omniprof.schedule(wait=1, warmup=0, active=1)
    scheduled = omniprof.profile(schedule=every_other)
    assert scheduled.schedule is every_other and scheduled.record_steps

    # Preset metadata reaches the trace, as torch.profiler's does.
    with omniprof.profile() as prof:
        prof.preset_metadata_json("run", '{"seed": 7}')
    assert prof.preset_metadata == {"run": '{"seed": 7}'}
    prof.export_chrome_trace(tmp_path / "preset.json")
    assert json.loads((tmp_path / "preset.json").read_text())["run"] == {"seed": 7}

    # prof.profiler: what code reads of torch.autograd.profiler.profile after a run.
    x = torch.ones(4, 4)
    inner = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        with module.profile(activities=[module.ProfilerActivity.CPU], with_stack=True) as run:
            torch.mm(x, x)
        inner[name] = run.profiler
        assert run.profiler.trace_id == run.get_trace_id() and run.profiler.trace_id
        assert run.profiler.self_cpu_time_total == pytest.approx(
            sum(e.self_cpu_time_total for e in run.events())
        )
        run.profiler.export_stacks(str(tmp_path / f"{name}.stacks"))
        assert "aten::mm" in run.profiler.table(row_limit=-1)
    for attribute in ("use_cpu", "use_device", "enabled", "entered", "record_shapes", "with_stack", "acc_events"):
        assert getattr(inner["omniprof"], attribute) == getattr(inner["torch"], attribute), attribute
    assert inner["omniprof"].toggle_collection_dynamic.__name__ == inner["torch"].toggle_collection_dynamic.__name__
    assert [r.key for r in inner["omniprof"].key_averages(group_by_overload_name=True)] == [
        r.key for r in inner["omniprof"].key_averages()
    ]

    # Every name of torch.profiler's module, and every attribute of its events.
    missing = [n for n in torch.profiler.__all__ if not hasattr(omniprof, n)]
    assert missing == []
    theirs_event, ours_event = inner["torch"].function_events[0], inner["omniprof"].function_events[0]
    public = {n for n in dir(theirs_event) if not n.startswith("_")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert sorted(n for n in public if not hasattr(ours_event, n)) == []
    # PyTorch builds its events with these; omniprof's are views of the trace.
    for method, args in [("append_cpu_child", (ours_event,)), ("set_cpu_parent", (ours_event,)), ("append_kernel", ("k", 0, 1.0))]:
        with pytest.raises(TypeError, match=f"FunctionEvent.{method}: omniprof's events are read-only"):
            getattr(ours_event, method)(*args)
    assert omniprof.DeviceType is torch.profiler.DeviceType and omniprof.kineto_available()
    assert omniprof.ExecutionTraceObserver is torch.profiler.ExecutionTraceObserver
    assert omniprof._ExperimentalConfig is torch.profiler._ExperimentalConfig
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        omniprof.no_such_name  # noqa: B018


def test_collection_toggled_off_leaves_out_what_begins_meanwhile_as_torch_profiler_does() -> None:
    omniprof._observer.install()
    x = torch.ones(4, 4)
    names = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        cpu = [module.ProfilerActivity.CPU]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's, of CPU toggled with GPU activity
            with module.profile(activities=cpu) as prof:
                with torch.profiler.record_function("before"):
                    torch.mm(x, x)
                prof.toggle_collection_dynamic(False, cpu)
                with torch.profiler.record_function("hidden"):
                    torch.mm(x, x)
                with torch.profiler.record_function("begun_while_off"):
                    torch.mm(x, x)
                    prof.toggle_collection_dynamic(True, cpu)
                    torch.add(x, x)
                with torch.profiler.record_function("after"):
                    torch.mm(x, x)
        names[name] = Counter(e.name for e in prof.events())
    assert names["omniprof"] == names["torch"]
    assert names["torch"]["aten::mm"] == 2 and names["torch"]["aten::add"] == 1
    assert "hidden" not in names["torch"] and "begun_while_off" not in names["torch"]
    # A new session starts with everything on.
    with omniprof.profile() as prof:
        with omniprof.record_function("on_again"):
            pass
    assert [r.key for r in prof.key_averages()] == ["on_again"]
    # Not running: nothing happens, as in PyTorch.
    prof.toggle_collection_dynamic(False, [omniprof.ProfilerActivity.CPU])


def called_while_cpu_is_off() -> "torch.Tensor":
    return torch.ones(3)


def test_cpu_toggled_off_keeps_memory_events_and_python_calls_as_torch_profiler_does(tmp_path: Path) -> None:
    """PyTorch's switch of CPU removes its op callbacks only: the allocator's reports and the
    Python tracer's calls of that time stay in its trace, and so they do in omniprof's."""
    omniprof._observer.install()
    seen = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        cpu = [module.ProfilerActivity.CPU]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with module.profile(activities=cpu, profile_memory=True, with_stack=True) as prof:
                a = torch.empty(1000)
                prof.toggle_collection_dynamic(False, cpu)
                b = torch.empty(2000)
                del a
                called_while_cpu_is_off()
                prof.toggle_collection_dynamic(True, cpu)
                c = torch.empty(3000)
                del b, c
        path = tmp_path / f"{name}.json"
        prof.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())["traceEvents"]
        memory = [e["args"]["Bytes"] for e in trace if e.get("name") == "[memory]"]
        calls = [e["name"] for e in trace if e.get("cat") == "python_function" and "called_while_cpu_is_off" in e["name"]]
        ops = Counter(e["name"] for e in trace if e.get("cat") == "cpu_op")
        seen[name] = (memory, len(calls), ops)
    assert seen["omniprof"] == seen["torch"]
    assert seen["torch"] == ([4000, 8000, -4000, 12, -12, 12000, -8000, -12000], 1, {"aten::empty": 2})


def test_ops_run_while_cpu_collection_is_off_take_no_room_as_under_torch_profiler() -> None:
    """With ``ProfilerActivity.CPU`` off, the observer's callbacks are removed, as PyTorch
    removes its own: ops then cost no recording. Under a cap of 1,000 records a thread, the
    5,000 ops run while off leave room for what comes after, which recording them would have
    filled (and dropped, with a warning)."""
    omniprof._observer.install()
    x = torch.ones(2)
    cpu = [omniprof.ProfilerActivity.CPU]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with omniprof.profile(activities=cpu, config="OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=1000") as prof:
            prof.toggle_collection_dynamic(False, cpu)
            for _ in range(5000):
                torch.add(x, x)
            prof.toggle_collection_dynamic(True, cpu)
            with torch.profiler.record_function("after"):
                torch.mul(x, x)
    assert [str(w.message) for w in caught if "dropped" in str(w.message)] == []
    assert Counter(e.name for e in prof.events()) == {"after": 1, "aten::mul": 1}
    # Switched off and on again: the callbacks are back.
    with omniprof.profile(activities=cpu) as prof:
        prof.toggle_collection_dynamic(False, cpu)
        prof.toggle_collection_dynamic(True, cpu)
        with torch.profiler.record_function("on_again"):
            torch.add(x, x)
    assert Counter(e.name for e in prof.events()) == {"on_again": 1, "aten::add": 1}


def categories_written(prof: Any, path: Path) -> Dict[str, int]:
    """The trace file's complete events by category (PyTorch's own `Trace` span left out)."""
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    return dict(Counter(e["cat"] for e in events if e.get("ph") == "X" and e["cat"] != "Trace"))


def test_activities_filtered_by_dict_write_the_types_torch_profiler_writes(tmp_path: Path) -> None:
    omniprof._observer.install()
    x = torch.ones(4, 4)
    filters: List[Callable[[Any], List[Any]]] = [
        lambda m: [m.ProfilerActivity.CPU],
        lambda m: [{m.ProfilerActivity.CPU: ["CPU_OP"]}],
        lambda m: [{m.ProfilerActivity.CPU: ["USER_ANNOTATION"]}],
        lambda m: [{m.ProfilerActivity.CPU: ["USER_ANNOTATION", "CPU_OP"]}],
        lambda m: [{m.ProfilerActivity.CPU: []}],
        lambda m: [{m.ProfilerActivity.CPU: m.ProfilerActivityConfig()}],
        lambda m: [{m.ProfilerActivity.CPU: m.ProfilerActivityConfig(activity_types=["CPU_OP"])}],
        # A runtime's calls belong to CPU's filter and their device's.
        lambda m: [{m.ProfilerActivity.CPU: ["CPU_OP", "CUDA_RUNTIME"]}, {m.ProfilerActivity.CUDA: ["CUDA_RUNTIME"]}],
    ]
    for index, make in enumerate(filters):
        written, members = {}, {}
        for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # PyTorch's, of events its filter left out
                with module.profile(activities=make(module)) as prof:
                    with torch.profiler.record_function("mine"):
                        torch.mm(x, x)
            written[name] = categories_written(prof, tmp_path / f"{name}{index}.json")
            members[name] = (
                {a.name for a in prof.activities},
                {a.name: c.activity_types for a, c in prof.activity_configs.items()},
            )
            prof.wait_for_exports()
        assert written["omniprof"] == written["torch"], index
        assert members["omniprof"] == members["torch"], index
        # torch.profiler's config class works under omniprof too.
        with omniprof.profile(activities=make(torch.profiler)) as prof:
            with torch.profiler.record_function("mine"):
                torch.mm(x, x)
        assert categories_written(prof, tmp_path / f"both{index}.json") == written["torch"], index
    # What omniprof also leaves out: its events and rows are the trace's.
    with omniprof.profile(activities=[{omniprof.ProfilerActivity.CPU: ["USER_ANNOTATION"]}]) as prof:
        with torch.profiler.record_function("mine"):
            torch.mm(x, x)
    assert [e.name for e in prof.events()] == ["mine"]

    # The errors torch.profiler raises, of the same types.
    wrong: List[Callable[[Any], List[Any]]] = [
        lambda m: [{m.ProfilerActivity.CPU: ["GPU_MEMCPY"]}],
        lambda m: [{m.ProfilerActivity.CPU: ["NO_SUCH_TYPE"]}],
        lambda m: [m.ProfilerActivity.CPU, {m.ProfilerActivity.CPU: ["CPU_OP"]}],
    ]
    for index, make in enumerate(wrong):
        with pytest.raises((RuntimeError, ValueError)) as torch_error:
            with torch.profiler.profile(activities=make(torch.profiler)):
                pass
        with pytest.raises(type(torch_error.value)):
            with omniprof.profile(activities=make(omniprof)):
                pass
    with pytest.raises(RuntimeError, match="'NO_SUCH_TYPE'.*ProfilerActivity.CPU"):
        omniprof.profile(activities=[{omniprof.ProfilerActivity.CPU: ["NO_SUCH_TYPE"]}])
    with pytest.raises(ValueError, match="ProfilerActivity.CPU specified more than once"):
        omniprof.profile(activities=[{omniprof.ProfilerActivity.CPU: []}, omniprof.ProfilerActivity.CPU])
    with pytest.raises(TypeError, match="expected a ProfilerActivity"):
        omniprof.profile(activities=[{"cpu_op": []}])
    for value in ("CPU_OP", 5, ["CPU_OP", None], omniprof.ProfilerActivityConfig(activity_types=[1])):
        with pytest.raises(TypeError, match=r"activities\[CPU\] is .*expected a list of activity type names"):
            omniprof.profile(activities=[{omniprof.ProfilerActivity.CPU: value}])

    # PyTorch's profiler extensions are taken and said not to be acted on.
    metrics = torch.profiler.PerformanceMetricsConfig(metric_names=["sm__cycles_active.avg"])
    config = omniprof.ProfilerActivityConfig(profiler_configs=[metrics])
    with pytest.warns(RuntimeWarning, match="does not act on PerformanceMetricsConfig"):
        with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU, {omniprof.ProfilerActivity.CUDA: config}]):
            pass


def test_prepare_then_start_trace_records_from_the_start_as_torch_profiler_does() -> None:
    omniprof._observer.install()
    x = torch.ones(4, 4)
    names = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        prof = module.profile(activities=[module.ProfilerActivity.CPU])
        # Without prepare_trace, start_trace is PyTorch's AssertionError.
        with pytest.raises(AssertionError, match="must be initialized before starting trace"):
            prof.start_trace()
        prof.prepare_trace()
        torch.add(x, x)  # warmed up, not recording
        prof.start_trace()
        with torch.profiler.record_function("recorded"):
            torch.mm(x, x)
        prof.stop_trace()
        names[name] = Counter(e.name for e in prof.events())
    assert names["omniprof"] == names["torch"]
    assert names["torch"]["aten::mm"] == 1 and "aten::add" not in names["torch"]
    # Prepared twice, or with a schedule whose steps warm up: refused, and nothing is held.
    prof = omniprof.profile()
    prof.prepare_trace()
    with pytest.raises(omniprof.ProfilerError, match="already prepared or running"):
        prof.prepare_trace()
    prof.start_trace()
    prof.stop_trace()
    with pytest.raises(omniprof.ProfilerError, match="prepare"):
        omniprof.profile(schedule=omniprof.schedule(wait=0, warmup=1, active=1)).prepare_trace()
    with omniprof.profile() as again:
        torch.mm(x, x)
    assert Counter(e.name for e in again.events())["aten::mm"] == 1


def test_acc_events_keeps_every_cycles_events_as_torch_profiler_does() -> None:
    omniprof._observer.install()
    x = torch.ones(4, 4)
    work = [lambda: torch.mm(x, x), lambda: torch.add(x, x), lambda: torch.mul(x, x)]
    kept: Dict[str, Any] = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        per_cycle = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's note that the profiler is reused
            with module.profile(
                activities=[module.ProfilerActivity.CPU],
                schedule=module.schedule(wait=0, warmup=0, active=1, repeat=3),
                acc_events=True,
                on_trace_ready=lambda p: per_cycle.append(len(p.events())),
            ) as prof:
                for step in range(3):
                    with torch.profiler.record_function(f"step_{step}"):
                        work[step]()
                    prof.step()
        names = [e.name for e in prof.events()]
        rows = {r.key: r.count for r in prof.key_averages()}
        kept[name] = (Counter(names), rows, per_cycle, [n for n in names if n.startswith("step_")])
    assert kept["omniprof"] == kept["torch"]
    counts, rows, per_cycle, steps = kept["torch"]
    # Each cycle's events after the newer ones', growing cycle by cycle.
    assert steps == ["step_2", "step_1", "step_0"] and per_cycle[0] < per_cycle[1] < per_cycle[2]
    assert rows["aten::mm"] == rows["aten::add"] == rows["aten::mul"] == 1
    # Without it, the last cycle's only.
    with omniprof.profile(schedule=omniprof.schedule(wait=0, warmup=0, active=1, repeat=2)) as prof:
        for step in range(2):
            with torch.profiler.record_function(f"step_{step}"):
                work[step]()
            prof.step()
    assert [e.name for e in prof.events() if e.name.startswith("step_")] == ["step_1"]


def test_results_before_the_first_trace_are_empty_as_torch_profilers_are() -> None:
    """Code that prints a table every N steps runs from the first step under torch.profiler,
    whose results are empty until its first cycle ends: so are omniprof's (it warns once why)."""
    omniprof._observer.install()
    x = torch.ones(4, 4)
    seen: Dict[str, Any] = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        lengths = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with module.profile(activities=[module.ProfilerActivity.CPU]) as prof:
                torch.mm(x, x)
                inside = (prof.events(), prof.key_averages(), prof.key_averages().table())
            with module.profile(schedule=module.schedule(wait=1, warmup=1, active=2)) as prof:
                for _ in range(3):
                    torch.mm(x, x)
                    prof.step()
                    lengths.append((len(prof.events()), len(prof.key_averages())))
        empty = [(type(e).__name__, len(e)) for e in inside[:2]]
        ours = [str(w.message) for w in caught if "no trace has finished yet" in str(w.message)]
        seen[name] = (empty, inside[2], lengths, len(ours))
    assert seen["torch"] == ([("EventList", 0), ("EventList", 0)], "", [(0, 0)] * 3, 0)
    assert seen["omniprof"] == ([("EventList", 0), ("EventList", 0)], "", [(0, 0)] * 3, 2)


def test_each_events_record_scope_is_torch_profilers() -> None:
    """FunctionEvent.scope: 7 for user ranges, 1 for autograd nodes, 2 for TorchScript
    functions, 0 for the rest, event by event as under torch.profiler."""
    omniprof._observer.install()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit.script is deprecated

        @torch.jit.script
        def scripted_double(x: torch.Tensor) -> torch.Tensor:
            return x * 2

    layer = torch.nn.Linear(8, 8)

    def work() -> None:
        with torch.profiler.record_function("user_range"):
            scripted_double(layer(torch.randn(4, 8))).relu().sum().backward()

    for _ in range(3):  # TorchScript's executor specializes over its first runs
        work()
    seen = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        with module.profile(activities=[module.ProfilerActivity.CPU]) as prof:
            work()
        seen[name] = sorted(Counter((e.name, e.scope) for e in prof.events()).items())
    assert seen["omniprof"] == seen["torch"]
    scopes = {name: scope for (name, scope), _ in seen["torch"]}
    assert (scopes["user_range"], scopes["AddmmBackward0"], scopes["scripted_double"], scopes["aten::mm"]) == (7, 1, 2, 0)
    assert scopes["autograd::engine::evaluate_function: AddmmBackward0"] == 0


# A collective as c10d's backends record one (RECORD_PARAM_COMMS: its fields in the thread's
# debug info, a `record_param_comms` RecordFunction), moving no data. NCCL records every
# collective so; gloo, on this machine's CPU, records none.
PARAM_COMMS_SOURCE = r"""
#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/ParamCommsUtils.hpp>

void collective(const at::Tensor& t, int64_t seq) {
  RECORD_PARAM_COMMS(
      seq, std::make_tuple(std::string("7"), std::string("test_pg")), 0, "allreduce",
      t.numel(), t.numel(), t.scalar_type(), std::vector<int64_t>(), std::vector<int64_t>(),
      0, 1, 2);
}
"""


def test_a_collectives_fields_are_written_as_torch_profiler_writes_them(tmp_path: Path) -> None:
    """HTA's communication analysis reads `Collective name`, `In msg nelems`, `Group size` and
    the rest off each `record_param_comms` op: they are written with any flags, as
    torch.profiler writes them, each value the JSON PyTorch gives."""
    from torch.utils import cpp_extension

    omniprof._observer.install()
    omniprof._observer._put_ninja_on_path()
    ext = cpp_extension.load_inline(
        name="omniprof_param_comms", cpp_sources=[PARAM_COMMS_SOURCE], functions=["collective"]
    )
    seen = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        for flags in ({}, {"record_shapes": True}):
            with module.profile(activities=[module.ProfilerActivity.CPU], **flags) as prof:
                ext.collective(torch.ones(5), 3)
            path = tmp_path / f"{name}.json"
            prof.export_chrome_trace(str(path))
            (op,) = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "record_param_comms"]
            # Kineto's own bookkeeping (`Ev Idx`, `Record function id` 0) and the ids differ.
            seen[name, str(flags)] = {k: v for k, v in op["args"].items() if k not in ("External id", "Ev Idx", "Record function id")}
    for flags in ({}, {"record_shapes": True}):
        assert seen["omniprof", str(flags)] == seen["torch", str(flags)]
    fields = seen["torch", "{}"]
    assert (fields["Collective name"], fields["In msg nelems"], fields["Group size"], fields["dtype"]) == ("allreduce", 5, 2, "Float")
    assert fields["Process Group Ranks"] == "[0, 1]" and fields["Is asynchronized op"] is False


def test_record_function_takes_bytes_as_pytorch_does(tmp_path: Path) -> None:
    with omniprof.profile() as prof:
        with omniprof.record_function(b"abc"):
            pass
    assert [r.key for r in prof.key_averages()] == ["abc"]


def test_every_argument_torch_profiler_takes_is_taken_with_its_default() -> None:
    """A call written for torch.profiler's functions and profile methods must not be a
    TypeError under omniprof: each of PyTorch's parameters is there, with its default."""
    import inspect

    pairs = [
        (torch.profiler.profile.__init__, omniprof.profile.__init__),
        (torch.profiler.schedule, omniprof.schedule),
        (torch.profiler.tensorboard_trace_handler, omniprof.tensorboard_trace_handler),
    ]
    methods = [m for m in dir(torch.profiler.profile) if not m.startswith("_") and callable(getattr(torch.profiler.profile, m))]
    assert {"export_chrome_trace", "key_averages", "step", "toggle_collection_dynamic"} <= set(methods)
    pairs += [(getattr(torch.profiler.profile, m), getattr(omniprof.profile, m)) for m in methods]
    from torch.autograd.profiler_util import EventList as TorchEventList

    lists = [m for m in dir(TorchEventList) if not m.startswith("_") and m not in dir(list)]
    assert {"table", "key_averages", "total_average", "export_stacks"} <= set(lists)
    pairs += [(getattr(TorchEventList, m), getattr(omniprof.EventList, m)) for m in lists if callable(getattr(TorchEventList, m))]
    differences = []
    for theirs, ours in pairs:
        ours_params = inspect.signature(ours).parameters
        for name, p in inspect.signature(theirs).parameters.items():
            mine = ours_params.get(name)
            if mine is None:
                differences.append((theirs.__qualname__, name, "missing"))
            elif repr(mine.default) != repr(p.default):
                differences.append((theirs.__qualname__, name, mine.default, p.default))
    assert differences == []


def test_supported_activities_holds_cpu() -> None:
    assert ProfilerActivity.CPU.name in {a.name for a in omniprof.supported_activities()}


NEVER_IMPORTS_TORCH = """
import omniprof
with omniprof.profile():
    with omniprof.record_function("mine"):
        pass
assert omniprof._observer._module is None, omniprof._observer._module
"""

FIRST_BUILD = """
import torch, omniprof
for _ in range(2):
    with omniprof.profile():
        torch.ones(2).add_(1)
"""


def test_the_observer_is_built_only_for_torch_and_the_first_build_says_so(tmp_path: Path) -> None:
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(tmp_path / "extensions"))
    run = subprocess.run([sys.executable, "-c", NEVER_IMPORTS_TORCH], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert not (tmp_path / "extensions").exists()

    run = subprocess.run([sys.executable, "-c", FIRST_BUILD], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    said = [line for line in run.stderr.splitlines() if "building the PyTorch op observer" in line]
    assert len(said) == 1 and str(tmp_path / "extensions") in said[0], run.stderr
    # Cached: a second program builds nothing and says nothing.
    run = subprocess.run([sys.executable, "-c", FIRST_BUILD], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and "building" not in run.stderr, run.stderr
