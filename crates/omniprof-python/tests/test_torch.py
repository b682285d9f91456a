"""PyTorch's own ops, observed: omniprof.profile() against torch.profiler.profile on one
workload, an op ended on another thread, the observer's removal at stop, and a machine
without a C++ compiler.

torch is required: without it these tests fail, unless ``OMNIPROF_PY_ALLOW_NO_TORCH`` is set,
which skips them with the reason.
"""

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest

import omniprof

from conftest import require_torch

torch = require_torch()

from torch.profiler import ProfilerActivity, profile as torch_profile


def observer() -> Any:
    module = omniprof._observer.module()
    assert module is not None, "the op observer did not build (needs a C++ compiler and ninja)"
    return module


def mlp_steps() -> None:
    """A small MLP: forward, cross-entropy, backward, SGD step, 3 steps."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    for _ in range(3):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


def counts(rows: Any) -> Dict[str, int]:
    return {r.key: r.count for r in rows}


def shape_counts(rows: Any) -> Dict[Tuple[str, str], int]:
    return {(r.key, str(r.input_shapes)): r.count for r in rows}


def under_both(work: Callable[[], None]) -> Tuple[Any, Any]:
    """`work` under torch.profiler, then under omniprof, both recording shapes."""
    observer()
    with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as theirs:
        work()
    with omniprof.profile(record_shapes=True) as ours:
        work()
    return theirs, ours


def test_the_mlp_holds_the_same_ops_and_counts_as_under_torch_profiler() -> None:
    theirs, ours = under_both(mlp_steps)
    # Both record exactly the same op names (ATen ops, autograd nodes, optimizer steps, the
    # optimizer's record_function ranges) with the same call counts, and the same groups by
    # input shape: no name is recorded by one and not the other.
    assert counts(ours.key_averages()) == counts(theirs.key_averages())
    assert shape_counts(ours.key_averages(group_by_input_shape=True)) == shape_counts(
        theirs.key_averages(group_by_input_shape=True)
    )
    names = counts(ours.key_averages())
    for expected in ("aten::addmm", "autograd::engine::evaluate_function: AddmmBackward0",
                     "Optimizer.step#SGD.step"):
        assert expected in names, sorted(names)


def test_events_carry_input_dtypes_and_sequence_numbers_as_under_torch_profiler() -> None:
    theirs, ours = under_both(mlp_steps)

    def described(prof: Any) -> List[Tuple[str, List[str], int]]:
        # Autograd numbers ops on from where the process's counter stands: each session's
        # numbers are compared from its first one.
        first = min(e.sequence_nr for e in prof.events() if e.sequence_nr >= 0)
        return [
            (e.name, list(e.input_dtypes), e.sequence_nr - first if e.sequence_nr >= 0 else -1)
            for e in prof.events()
        ]

    assert described(ours) == described(theirs)
    rows = described(ours)
    assert ("aten::addmm", ["float", "float", "float", "Scalar", "Scalar"]) in [r[:2] for r in rows]
    # A forward op and its backward node share a number.
    numbers = {name: n for name, _, n in rows}
    assert numbers["aten::addmm"] >= 0
    assert any(n == numbers["aten::addmm"] for name, _, n in rows if "AddmmBackward0" in name)


def test_ops_on_tensor_lists_group_by_input_shape_as_under_torch_profiler() -> None:
    """PyTorch keeps only tensors' shapes in an event's input_shapes: a tensor list's entry is
    [] there however long the list, so cats of 2, 30, 31 and 48 tensors group together."""
    x = torch.ones(2, 3)
    params = [torch.zeros(4) for _ in range(40)]

    def lists() -> None:
        for n in (2, 30, 31, 48):
            torch.cat([x] * n)
        torch.stack([x, x])
        torch._foreach_add_(params, 1.0)

    theirs, ours = under_both(lists)
    grouped = shape_counts(ours.key_averages(group_by_input_shape=True))
    assert grouped == shape_counts(theirs.key_averages(group_by_input_shape=True))
    # The four cats and the one torch.stack runs.
    assert grouped[("aten::cat", "[[], []]")] == 5

    def shapes(prof: Any) -> List[Tuple[str, str]]:
        return [(e.name, str(e.input_shapes)) for e in prof.events()]

    assert shapes(ours) == shapes(theirs)


def events(prof: omniprof.profile, tmp_path: Path) -> Any:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]


def test_a_range_ended_on_another_thread_is_recorded_with_that_end(tmp_path: Path) -> None:
    observer()
    future: "torch.futures.Future[torch.Tensor]" = torch.futures.Future()
    with omniprof.profile() as prof:
        handle = torch.ops.profiler._record_function_enter_new("async_range", None)
        # The range's end callbacks run when the future completes: on the thread below.
        done = torch.ops.profiler._call_end_callbacks_on_jit_fut(handle, future)
        with torch.profiler.record_function("after_fork"):
            pass

        def complete() -> None:
            time.sleep(0.05)
            future.set_result(torch.ones(1))

        worker = threading.Thread(target=complete)
        worker.start()
        worker.join()
        done.wait()
    by_name = {e["name"]: e for e in events(prof, tmp_path)}
    ranged = by_name["async_range"]
    assert ranged["cat"] == "user_annotation"
    assert ranged["tid"] == by_name["after_fork"]["tid"], "the range stays on its thread"
    assert "finished" not in ranged.get("args", {}), ranged
    # It ends when the other thread completed the future, not when this thread went on.
    assert ranged["dur"] >= 50_000, ranged
    assert ranged["ts"] + ranged["dur"] >= by_name["after_fork"]["ts"] + by_name["after_fork"]["dur"]


def test_the_observer_is_removed_when_the_session_ends(tmp_path: Path) -> None:
    module = observer()
    assert not module.torch_has_callbacks(), "another callback would hide what this test checks"
    x = torch.zeros(1)
    with omniprof.profile() as prof:
        assert module.registered() and module.torch_has_callbacks()
        x.add_(1)
    assert "aten::add_" in {e["name"] for e in events(prof, tmp_path)}
    # PyTorch has no callback left: it does not even build a RecordFunction for an op.
    assert not module.registered()
    assert not module.torch_has_callbacks()
    # And a session that raised at start leaves none behind either.
    with omniprof.profile():
        with pytest.raises(omniprof.ProfilerError):
            omniprof.profile().start()
    assert not module.registered() and not module.torch_has_callbacks()


def test_torch_profiler_record_function_is_a_user_range_with_its_ops_inside(tmp_path: Path) -> None:
    observer()
    x = torch.ones(4, 4)
    with omniprof.profile(record_shapes=True) as prof:
        with torch.profiler.record_function("block"):
            torch.mm(x, x)
    evs = events(prof, tmp_path)
    block = next(e for e in evs if e["name"] == "block")
    mm = next(e for e in evs if e["name"] == "aten::mm")
    assert block["cat"] == "user_annotation" and mm["cat"] == "cpu_op"
    assert block["ts"] <= mm["ts"] and mm["ts"] + mm["dur"] <= block["ts"] + block["dur"]
    assert mm["args"]["Input Dims"] == [[4, 4], [4, 4]]
    assert Counter(e["tid"] for e in (block, mm)).most_common(1)[0][1] == 2


def test_a_new_record_function_name_every_step_stays_right_across_retired_generations() -> None:
    """torch.profiler.record_function names are transient, like any range named by a string:
    two sessions of more new names than a generation keeps retire the first one's names, and
    the observer's per-thread cache of ids must not hand the third session a retired id."""
    observer()
    names_per_session = 17_000  # past the recorder's RETIRE_NAMES (16,384)
    first = [f"first {i:05}" for i in range(names_per_session)]
    with omniprof.profile() as prof:
        for name in first:
            with torch.profiler.record_function(name):
                pass
    assert counts(prof.key_averages())[first[-1]] == 1

    # The second session's new names come from another thread, so this thread's cache still
    # holds the first session's last name, whose generation the third session's start frees.
    def second() -> None:
        for i in range(names_per_session):
            with torch.profiler.record_function(f"second {i:05}"):
                pass

    with omniprof.profile() as prof:
        thread = threading.Thread(target=second)
        thread.start()
        thread.join()
    assert counts(prof.key_averages())[f"second {names_per_session - 1:05}"] == 1
    with omniprof.profile() as prof:
        for name in [first[-1], first[-2], first[-1]]:
            with torch.profiler.record_function(name):
                pass
    assert counts(prof.key_averages()) == {first[-1]: 2, first[-2]: 1}


def test_a_torch_profiler_schedule_drives_omniprof_as_the_same_schedule() -> None:
    """Switching the import is enough: a ``torch.profiler.schedule`` is read as omniprof's."""
    import torch.profiler

    traces = []
    with omniprof.profile(
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=lambda prof: traces.append(prof.key_averages()),
    ) as prof:
        for _ in range(6):
            with omniprof.record_function("work"):
                torch.ones(4).add_(1)
            prof.step()
    assert len(traces) == 1, "one recorded cycle, as PyTorch's schedule gives"
    counts = {row.key: row.count for row in traces[0]}
    assert counts.get("ProfilerStep*") == 2 and counts.get("work") == 2, counts


NO_COMPILER = """
import json, sys, warnings, torch, omniprof
warnings.simplefilter("always")
for _ in range(2):
    with omniprof.profile() as prof:
        with omniprof.record_function("mine"):
            torch.ones(4).add_(1)
prof.export_chrome_trace(sys.argv[1])
"""


def test_without_a_compiler_one_warning_names_it_and_profiling_goes_on(tmp_path: Path) -> None:
    # A fresh extensions directory: nothing built by another test is used.
    env = dict(os.environ, CXX=str(tmp_path / "no-such-c++"),
               TORCH_EXTENSIONS_DIR=str(tmp_path / "extensions"))
    trace_path = tmp_path / "no_compiler.json"
    run = subprocess.run([sys.executable, "-c", NO_COMPILER, str(trace_path)],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    warned = [line for line in run.stderr.splitlines() if "PyTorch ops are not recorded" in line]
    assert len(warned) == 1, f"one warning for two sessions, got: {run.stderr}"
    assert "a C++ compiler" in warned[0] and "apt install g++" in warned[0], warned[0]
    # Attributed to the user's `with` line, whose entry started the profiler.
    assert warned[0].startswith("<string>:5: "), warned[0]
    names = [e["name"] for e in json.loads(trace_path.read_text())["traceEvents"]
             if e.get("ph") == "X"]
    assert "mine" in names, "omniprof's own range is recorded"
    assert not [n for n in names if n.startswith("aten::")], "no op observer, no PyTorch ops"
