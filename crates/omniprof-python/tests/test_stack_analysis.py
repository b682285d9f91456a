"""Results over Python stacks: ``key_averages(group_by_stack_n=N)`` rows with ``stack``,
``export_stacks`` and ``FunctionEvent.stack``, from omniprof's analysis of PyTorch's own
``with_stack=True`` traces (``omniprof.load_trace``, ``omniprof summary --group-by-stack``),
compared with what torch.profiler reports in the same process; and the same API on an
omniprof profile.

The workload: two user functions call the same ``nn.Linear``, then a backward pass. PyTorch
reports stacks only with a verbose experimental config (its ops then carry ``Call stack``);
omniprof derives them from the ``python_function`` events too, so both traces must give
PyTorch's verbose stacks.
"""

import gc
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterable, Tuple

import pytest

import omniprof

from conftest import require_torch, summary

torch = require_torch()
from torch._C._profiler import _ExperimentalConfig  # noqa: E402
from torch.profiler import ProfilerActivity, profile as torch_profile  # noqa: E402

torch.manual_seed(0)
MODEL = torch.nn.Linear(8, 8)


def first(x: Any) -> Any:
    return torch.relu(MODEL(x)).sum()


def second(x: Any) -> Any:
    return (MODEL(x) * 2).sum()


def step(x: Any) -> None:
    # Every run takes the same autograd path (a fresh gradient, not an accumulated one).
    MODEL.zero_grad(set_to_none=True)
    (first(x) + second(x)).backward()


X = torch.randn(4, 8)
step(X)

# The frames of the two user functions, as PyTorch names them (the file as its path ends).
FIRST = f"test_stack_analysis.py({first.__code__.co_firstlineno}): first"
SECOND = f"test_stack_analysis.py({second.__code__.co_firstlineno}): second"


def user_frame(frame: str) -> str:
    """``FIRST`` or ``SECOND`` for a frame of theirs (whatever its path), else the frame."""
    for name in (FIRST, SECOND):
        if frame.endswith(name):
            return name
    return frame


def without_addresses(text: str) -> str:
    """``<built-in method sum of Tensor object at 0x7f...>`` without its address, which
    differs from run to run."""
    return re.sub(r" at 0x[0-9a-f]+", " at 0x", text)


StackKey = Tuple[str, Tuple[str, ...]]


def per_stack_calls(rows: Iterable[Tuple[str, Iterable[str], int]]) -> Counter:
    """Calls per (aten:: op, stack without addresses)."""
    calls: Counter = Counter()
    for key, stack, count in rows:
        if key.startswith("aten::"):
            calls[(key, tuple(without_addresses(f) for f in stack))] += count
    return calls


@pytest.fixture(scope="module")
def torch_traces(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """The workload under torch.profiler, verbose and not: the trace files, and what torch
    itself reported of the verbose run."""
    out = tmp_path_factory.mktemp("torch")
    result: Dict[str, Any] = {}
    # The runs are compared frame for frame: no garbage collection (an earlier test's object
    # whose __del__ is Python) may add frames to one of them.
    gc.collect()
    gc.disable()
    try:
        for verbose in (True, False):
            extra = {"experimental_config": _ExperimentalConfig(verbose=True)} if verbose else {}
            with torch_profile(activities=[ProfilerActivity.CPU], with_stack=True, **extra) as prof:
                step(X)
            name = "verbose" if verbose else "plain"
            path = out / f"{name}.json"
            prof.export_chrome_trace(str(path))
            result[name] = path
            if verbose:
                folded = out / "torch.folded"
                prof.export_stacks(str(folded), "self_cpu_time_total")
                result["folded"] = folded.read_text().splitlines()
                result["calls"] = per_stack_calls(
                    (r.key, r.stack, r.count) for r in prof.key_averages(group_by_stack_n=5)
                )
                result["events"] = Counter(
                    (e.name, tuple(e.stack), e.is_python_function) for e in prof.events()
                )
    finally:
        gc.enable()
    # Non-verbose, PyTorch itself has no stacks: nothing to compare with but the verbose run.
    stripped = json.loads(result["verbose"].read_text())
    for event in stripped["traceEvents"]:
        event.get("args", {}).pop("Call stack", None)
    result["stripped"] = out / "stripped.json"
    result["stripped"].write_text(json.dumps(stripped))
    return result


def test_the_reference_holds_the_same_op_under_each_user_function(torch_traces: Dict[str, Any]) -> None:
    calls = torch_traces["calls"]
    linear = (
        "<built-in function linear>",
        "torch/nn/modules/linear.py(130): forward",
        "torch/nn/modules/module.py(1791): _call_impl",
        "nn.Module: Linear_0",
    )
    addmm = {stack: n for (key, stack), n in calls.items() if key == "aten::addmm"}
    assert {stack[:4]: n for stack, n in addmm.items()} == {linear: 1}
    assert sorted(user_frame(stack[4]) for stack in addmm) == [FIRST, SECOND]
    assert sum(addmm.values()) == 2
    # The backward pass's ops stand under the forward op's stack, as PyTorch puts them.
    mm = {stack: n for (key, stack), n in calls.items() if key == "aten::mm"}
    assert set(mm) == set(addmm), mm
    assert sum(calls.values()) >= 60, calls


@pytest.mark.parametrize("trace", ["verbose", "plain", "stripped"])
def test_key_averages_of_a_torch_trace_give_torchs_calls_per_stack(
    torch_traces: Dict[str, Any], trace: str
) -> None:
    loaded = omniprof.load_trace(str(torch_traces[trace]))
    rows = loaded.key_averages(group_by_stack_n=5)
    ours = per_stack_calls((r.key, r.stack, r.count) for r in rows)
    assert ours == torch_traces["calls"]
    # Rows carry at most five frames; without grouping, none.
    assert max(len(r.stack) for r in rows) == 5
    assert all(r.stack == [] for r in loaded.key_averages())


def test_summary_group_by_stack_prints_torchs_calls_per_stack_as_json(torch_traces: Dict[str, Any]) -> None:
    out = json.loads(summary(torch_traces["plain"], "--group-by-stack", "5", "--format", "json", "--row-limit", "-1"))
    ours = per_stack_calls((r["name"], r["stack"], r["count"]) for r in out["rows"])
    assert ours == torch_traces["calls"]


@pytest.mark.parametrize("trace", ["verbose", "stripped"])
def test_export_stacks_of_a_torch_trace_is_torchs(torch_traces: Dict[str, Any], trace: str, tmp_path: Path) -> None:
    # The same profile: the same lines, times included (from the Call stack args, and from
    # the Python events alone).
    loaded = omniprof.load_trace(str(torch_traces[trace]))
    path = tmp_path / "ours.folded"
    loaded.export_stacks(str(path), "self_cpu_time_total")
    ours = path.read_text().splitlines()
    theirs = torch_traces["folded"]
    assert len(theirs) >= 50
    assert Counter(ours) == Counter(theirs)
    # events() lists the same events with the same stacks.
    events = Counter((e.name, tuple(e.stack), e.is_python_function) for e in loaded.events())
    assert events == torch_traces["events"]


def test_events_of_the_plain_trace_have_torchs_verbose_stacks(torch_traces: Dict[str, Any], tmp_path: Path) -> None:
    # Another run of the same code: the same events under the same frames, but other times
    # (so the folded lines, which leave out events under 1 µs, are not compared).
    def normalized(events: Iterable[Tuple[str, Iterable[str], bool]]) -> Counter:
        return Counter(
            (without_addresses(name), tuple(without_addresses(f) for f in stack), python)
            for name, stack, python in events
        )

    loaded = omniprof.load_trace(str(torch_traces["plain"]))
    ours = normalized((e.name, e.stack, e.is_python_function) for e in loaded.events())
    assert ours == normalized(torch_traces["events"].elements())
    path = tmp_path / "ours.folded"
    loaded.events().export_stacks(str(path), "self_cuda_time_total")
    assert path.read_text() == ""  # A CPU run has no device time.


def test_an_unknown_metric_is_a_value_error_naming_the_accepted_ones(torch_traces: Dict[str, Any], tmp_path: Path) -> None:
    loaded = omniprof.load_trace(str(torch_traces["verbose"]))
    with pytest.raises(ValueError, match=r"self_cpu_time_total.*self_cuda_time_total.*self_device_time_total"):
        loaded.export_stacks(str(tmp_path / "x"), "cpu_time_total")
    with pytest.raises(omniprof.ProfilerError, match="cannot load"):
        omniprof.load_trace(str(tmp_path / "missing.json"))


def test_an_omniprof_profile_with_stack_gives_stacked_rows_events_and_folded_stacks(tmp_path: Path) -> None:
    with omniprof.profile(with_stack=True) as prof:
        step(X)
    rows = [r for r in prof.key_averages(group_by_stack_n=5) if r.key == "aten::addmm"]
    assert sorted(user_frame(r.stack[-1]) for r in rows) == [FIRST, SECOND]
    assert all(r.count == 1 and r.stack[0] == "<built-in function linear>" for r in rows)
    assert "Source Location" in prof.key_averages(group_by_stack_n=5).table()
    events = prof.events()
    assert any(e.is_python_function and e.name == "nn.Module: Linear_0" for e in events)
    addmm = [e for e in events if e.name == "aten::addmm"]
    assert [[e.stack[3], user_frame(e.stack[4])] for e in addmm] == [
        ["nn.Module: Linear_0", FIRST],
        ["nn.Module: Linear_0", SECOND],
    ]
    path = tmp_path / "stacks.txt"
    prof.export_stacks(path)
    lines = path.read_text().splitlines()
    calls = [line for line in lines if ";nn.Module:_Linear_0;" in line]
    assert any(FIRST.replace(" ", "_") + ";" in line for line in calls), lines
    assert all(re.fullmatch(r"\S+ [1-9][0-9]*", line) for line in lines), lines
    with pytest.raises(ValueError, match="self_cpu_time_total"):
        prof.export_stacks(path, metric="flops")


def test_an_omniprof_profile_gives_torchs_calls_per_stack(torch_traces: Dict[str, Any]) -> None:
    # omniprof records the frames and the autograd sequence numbers itself. The frames
    # around step() (this test, the fixture, pytest) differ: stacks are cut after step().
    step_frame = f"test_stack_analysis.py({step.__code__.co_firstlineno}): step"

    def within_step(calls: Counter) -> Counter:
        out: Counter = Counter()
        for (key, stack), n in calls.items():
            frames = [user_frame(f) for f in stack]
            ends = [i for i, f in enumerate(frames) if f.endswith(step_frame)]
            if ends or any(f in (FIRST, SECOND) for f in frames):
                cut = frames[: ends[0] + 1] if ends else frames
                out[(key, tuple(cut))] += n
        return out

    with omniprof.profile(with_stack=True) as prof:
        step(X)
    ours = per_stack_calls((r.key, r.stack, r.count) for r in prof.key_averages(group_by_stack_n=5))
    theirs = within_step(torch_traces["calls"])
    assert sum(theirs.values()) >= 60
    assert within_step(ours) == theirs


def test_export_stacks_without_with_stack_asserts_as_torch_does(tmp_path: Path) -> None:
    with omniprof.profile() as prof:
        step(X)
    with pytest.raises(AssertionError, match="with_stack=True"):
        prof.export_stacks(tmp_path / "stacks.txt")
