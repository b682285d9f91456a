"""Schedules, step, on_trace_ready and the TensorBoard trace handler."""

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest

import omniprof
from conftest import assert_loads_in_perfetto, cli, events, hta_load, load_trace, summary

A = omniprof.ProfilerAction


def test_schedule_maps_steps_as_pytorch_does() -> None:
    s = omniprof.schedule(wait=1, warmup=1, active=2, repeat=1)
    assert [s(i) for i in range(6)] == [A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE, A.NONE]
    s = omniprof.schedule(skip_first=10, wait=20, warmup=1, active=1, skip_first_wait=1)
    assert (s(10), s(11), s(32)) == (A.WARMUP, A.RECORD_AND_SAVE, A.WARMUP)
    with pytest.raises(ValueError, match="steps count from 0"):
        s(-1)


def test_two_cycles_through_the_trace_handler(tmp_path: Path) -> None:
    handler = omniprof.tensorboard_trace_handler(tmp_path / "tb", worker_name="worker0")
    seen: List[int] = []

    def on_ready(prof: omniprof.profile) -> None:
        seen.append(prof.step_num)
        handler(prof)

    sched = omniprof.schedule(wait=1, warmup=1, active=2, repeat=2)
    with omniprof.profile(schedule=sched, on_trace_ready=on_ready) as prof:
        for i in range(10):
            with omniprof.record_function("train_step"):
                with omniprof.record_function(f"work-{i}"):
                    pass
            prof.step()
    assert seen == [4, 8]
    files = sorted(Path(p) for p in handler.written)
    assert len(files) == 2 and [f.parent for f in files] == [tmp_path / "tb"] * 2
    assert all(f.name.startswith("worker0.") and f.name.endswith(".pt.trace.json") for f in files)
    expected = [["ProfilerStep#2", "ProfilerStep#3"], ["ProfilerStep#6", "ProfilerStep#7"]]
    for f, steps in zip(files, expected):
        trace = load_trace(f)
        names = [e["name"] for e in events(trace, "user_annotation")]
        assert sorted(n for n in names if n.startswith("ProfilerStep#")) == steps
        assert names.count("train_step") == 2
        assert_loads_in_perfetto(f)
        # One directory per file: HTA reads a directory as the ranks of one job.
        one = tmp_path / f"hta-{f.name}"
        one.mkdir()
        shutil.copy(f, one / "rank0.pt.trace.json")
        loaded = hta_load(one)
        assert loaded["events"] > 0, loaded
        # HTA trims a trace to whole iterations, leaving the last ProfilerStep out.
        assert {steps[0], "train_step"} <= set(loaded["names"]), loaded
        # The table of the file the handler wrote is the one `omniprof summary` prints.
        assert "ProfilerStep*" in summary(f)


def test_on_trace_ready_exports_the_cycles_trace(tmp_path: Path) -> None:
    paths: List[Path] = []

    def on_ready(prof: omniprof.profile) -> None:
        path = tmp_path / f"cycle{len(paths)}.json.gz"
        prof.export_chrome_trace(path)
        paths.append(path)

    prof = omniprof.profile(schedule=omniprof.schedule(wait=0, warmup=1, active=1), on_trace_ready=on_ready)
    prof.start()
    for i in range(6):
        with omniprof.record_function(f"s{i}"):
            pass
        prof.step()
    prof.stop()
    assert len(paths) == 3
    for n, path in enumerate(paths):
        names = {e["name"] for e in events(load_trace(path), "user_annotation")}
        assert names == {f"ProfilerStep#{2 * n + 1}", f"s{2 * n + 1}"}


class Boom(Exception):
    pass


def test_a_raising_callback_propagates_from_step_and_leaves_the_profiler_reusable(tmp_path: Path) -> None:
    def on_ready(prof: omniprof.profile) -> None:
        raise Boom("callback failed")

    prof = omniprof.profile(schedule=omniprof.schedule(wait=0, warmup=1, active=1), on_trace_ready=on_ready)
    prof.start()
    prof.step()  # warm-up -> record
    with omniprof.record_function("recorded"):
        pass
    with pytest.raises(Boom, match="callback failed"):
        prof.step()
    assert not prof._session.running
    path = tmp_path / "after.json"
    prof.export_chrome_trace(path)
    assert "recorded" in {e["name"] for e in events(load_trace(path), "user_annotation")}
    # Stopped: another profiler may run, and this one starts again.
    with omniprof.profile():
        pass
    prof.on_trace_ready = None
    prof.start()
    prof.step()
    prof.step()
    prof.stop()
    assert prof.key_averages()[0].key == "ProfilerStep*"


def test_a_raising_callback_propagates_from_stop(tmp_path: Path) -> None:
    def on_ready(prof: omniprof.profile) -> None:
        raise Boom("at stop")

    with pytest.raises(Boom):
        with omniprof.profile(on_trace_ready=on_ready) as prof:
            with omniprof.record_function("kept"):
                pass
    assert [r.key for r in prof.key_averages()] == ["kept"]
    prof.export_chrome_trace(tmp_path / "kept.json")
    with omniprof.profile():
        pass


def test_the_handler_writes_gzip_and_names_the_worker(tmp_path: Path) -> None:
    handler = omniprof.tensorboard_trace_handler(str(tmp_path), use_gzip=True)
    assert "_" in handler.worker_name
    with omniprof.profile(on_trace_ready=handler):
        with omniprof.record_function("x"):
            pass
    (written,) = handler.written
    assert written.endswith(".pt.trace.json.gz")
    assert load_trace(Path(written))["traceEvents"]


def test_actions_are_torch_profilers_for_code_that_compares_or_prints_them() -> None:
    import torch
    from torch.profiler import ProfilerAction as TorchAction

    theirs = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    ours = omniprof.schedule(wait=1, warmup=1, active=2, repeat=1)
    for step in range(6):
        t, o = theirs(step), ours(step)
        assert (str(o), repr(o), o.name, o.value) == (str(t), repr(t), t.name, t.value)
        assert o == t and t == o and hash(o) == hash(t) and {t: step}[o] == step
        assert o != TorchAction((t.value + 1) % 4) and o != t.value
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        with module.profile(schedule=module.schedule(wait=0, warmup=1, active=1)) as prof:
            actions = [prof.current_action]
            prof.step()
            actions.append(prof.current_action)
        actions.append(prof.current_action)  # stopped: the last one kept
        assert [str(a) for a in actions] == ["ProfilerAction.WARMUP"] + ["ProfilerAction.RECORD_AND_SAVE"] * 2, name
        assert actions == [TorchAction.WARMUP, A.RECORD_AND_SAVE, TorchAction.RECORD_AND_SAVE], name


def test_a_callable_schedule_takes_its_actions_as_under_torch_profiler() -> None:
    # Any callable returning a ProfilerAction: steps 1 and 2 recorded, twice.
    import torch
    from torch.profiler import ProfilerAction as TorchAction

    def schedule(step: int) -> Any:
        return {1: TorchAction.RECORD, 2: TorchAction.RECORD_AND_SAVE, 4: TorchAction.WARMUP, 5: TorchAction.RECORD_AND_SAVE}.get(step, TorchAction.NONE)

    steps: Dict[str, List[List[str]]] = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        cycles: List[List[str]] = []

        def handler(prof: Any, cycles: List[List[str]] = cycles) -> None:
            cycles.append(sorted(e.key for e in prof.key_averages() if e.key.startswith("ProfilerStep")))

        with module.profile(activities=[module.ProfilerActivity.CPU], schedule=schedule, on_trace_ready=handler) as prof:
            for _ in range(7):
                torch.ones(4).add_(1)
                prof.step()
        steps[name] = cycles
    assert steps["omniprof"] == steps["torch"] == [["ProfilerStep*"], ["ProfilerStep*"]]

    def per_cycle(prof_module: Any) -> List[int]:
        # The ProfilerStep events of each cycle's trace: steps 1 and 2, then 5.
        seen: List[int] = []

        def handler(prof: Any) -> None:
            seen.append(sum(1 for e in prof.events() if e.name == "ProfilerStep*"))

        with prof_module.profile(activities=[prof_module.ProfilerActivity.CPU], schedule=schedule, on_trace_ready=handler) as prof:
            for _ in range(7):
                prof.step()
        return seen

    assert per_cycle(omniprof) == per_cycle(torch.profiler) == [2, 1]


def test_steps_before_a_start_run_the_schedule_as_under_torch_profiler() -> None:
    # A loop that steps a scheduled profile it never started records under torch.profiler,
    # whose steps take the schedule's transitions (raising here would end the program).
    import torch

    seen: Dict[str, Any] = {}
    for name, module in [("torch", torch.profiler), ("omniprof", omniprof)]:
        cycles: List[List[str]] = []

        def handler(prof: Any, cycles: List[List[str]] = cycles) -> None:
            cycles.append(sorted(e.trace_name for e in prof.events() if e.name.startswith(("work", "ProfilerStep"))))

        sched = module.schedule(wait=1, warmup=1, active=2, repeat=1)
        prof = module.profile(activities=[module.ProfilerActivity.CPU], schedule=sched, on_trace_ready=handler)
        actions = [str(prof.current_action)]
        for i in range(6):
            with torch.profiler.record_function(f"work-{i}"):
                torch.ones(4).add_(1)
            prof.step()
            actions.append(str(prof.current_action))
        prof.stop()
        unscheduled = module.profile(activities=[module.ProfilerActivity.CPU])
        before = str(unscheduled.current_action)
        for _ in range(3):
            unscheduled.step()
        seen[name] = (cycles, actions, prof.step_num, before, unscheduled.step_num, str(unscheduled.current_action))
    assert seen["omniprof"] == seen["torch"]
    assert seen["torch"][0] == [["ProfilerStep#2", "ProfilerStep#3", "work-2", "work-3"]]
    assert seen["torch"][3:] == ("ProfilerAction.RECORD", 3, "ProfilerAction.RECORD")


def test_a_schedule_returning_device_stopped_is_refused_as_under_torch_profiler() -> None:
    import torch
    from torch.profiler import ProfilerAction as TorchAction

    assert [(a.name, a.value) for a in omniprof.ProfilerAction] == [(a.name, a.value) for a in TorchAction]

    def schedule(step: int) -> Any:
        return TorchAction.DEVICE_STOPPED if step == 1 else TorchAction.NONE

    messages = []
    for module in (torch.profiler, omniprof):
        with module.profile(activities=[module.ProfilerActivity.CPU], schedule=schedule) as prof:
            with pytest.raises(ValueError) as raised:
                prof.step()
            messages.append(str(raised.value))
    assert messages[0] == messages[1]
    assert "DEVICE_STOPPED is set internally" in messages[1]


def test_a_callable_schedule_that_raises_or_returns_no_action_raises_from_step() -> None:
    def raising(step: int) -> Any:
        if step == 2:
            raise RuntimeError("schedule broke at 2")
        return omniprof.ProfilerAction.NONE

    prof = omniprof.profile(schedule=raising, on_trace_ready=lambda p: None)
    prof.start()
    prof.step()
    with pytest.raises(RuntimeError, match="schedule broke at 2"):
        prof.step()
    prof.stop()
    prof = omniprof.profile(schedule=lambda step: "record", on_trace_ready=lambda p: None)
    with pytest.raises(TypeError, match="the schedule returned 'record', not a ProfilerAction"):
        prof.start()
    with pytest.raises(TypeError, match="callable taking a step number"):
        omniprof.profile(schedule=3, on_trace_ready=lambda p: None)


def test_the_commands_read_a_trace_handlers_directory_of_cycles_as_one_ranks_steps(tmp_path: Path) -> None:
    # torch.profiler's default repeat=0: one trace per cycle in one directory; each of
    # omniprof's claims the same rank, as every trace of a process does.
    with omniprof.profile(
        schedule=omniprof.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=omniprof.tensorboard_trace_handler(str(tmp_path / "tb")),
    ) as prof:
        for _ in range(12):
            with omniprof.record_function("train_step"):
                pass
            prof.step()
    files = sorted((tmp_path / "tb").iterdir())
    assert len(files) == 3
    for command in [["summary"], ["ranks", "--format", "json"], ["report", "-o", str(tmp_path / "r.html")]]:
        out = subprocess.run([str(cli()), *command, str(tmp_path / "tb")], capture_output=True, text=True)
        assert out.returncode == 0, (command, out.stderr)
        assert "note: rank 0 has 3 traces" in out.stderr, out.stderr
    table = summary(tmp_path / "tb")
    assert "ProfilerStep*" in table and "train_step" in table
    ranks = subprocess.run([str(cli()), "ranks", "--format", "json", str(tmp_path / "tb")], capture_output=True, text=True)
    (rank,) = json.loads(ranks.stdout)["ranks"]
    assert [s["number"] for s in rank["profile"]["steps"]] == [2, 3, 6, 7, 10, 11]
