"""The flight recorder with real PyTorch: a training loop under ``omniprof.flight_recorder``
writes a dump for a step made slow on purpose, for a hang and for an exception, each named
for its reason and step and holding that step's PyTorch ops, and none for normal steps; the
environment switch does the same for a program that never imports omniprof, and
``omniprof trigger --pid P --dump`` asks a running one for its window; a profiling session
inside the recorder gets its own trace; a dump directory that is a link is refused with one
warning while training goes on.
"""

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import omniprof
from conftest import cli, events, load_trace, require_torch, summary

torch = require_torch()

# Each normal step sleeps this long, so that the median is steady on a loaded machine and
# only the step made slow on purpose is slow (five times the median and more).
NORMAL_S = 0.03
SLOW_S = 0.6


def training() -> Tuple[Any, Any]:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def step(extra: str = "", sleep_s: float = NORMAL_S) -> None:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if extra:
            with omniprof.record_function(extra):
                torch.mm(torch.randn(4, 4), torch.randn(4, 4))
                time.sleep(sleep_s)
        else:
            time.sleep(sleep_s)
        optimizer.step()  # ends the step (the optimizer hook)

    return step, model


def next_step() -> int:
    """The number the next step to end will have (ending one to learn it, before the
    recorder starts)."""
    return omniprof.step() + 1


def dumps(directory: Path) -> List[str]:
    return sorted(p.name for p in directory.iterdir())


def names_within_step(trace: Dict[str, Any], step: int) -> List[str]:
    """The names of the events inside ``ProfilerStep#<step>``'s span."""
    spans = [e for e in trace["traceEvents"] if e.get("name") == f"ProfilerStep#{step}"]
    assert len(spans) == 1, f"ProfilerStep#{step} in the dump: {len(spans)}"
    start, end = spans[0]["ts"], spans[0]["ts"] + spans[0]["dur"]
    return [e["name"] for e in trace["traceEvents"]
            if e.get("ph") == "X" and start <= e["ts"] <= end]


def test_a_slow_step_writes_one_dump_named_for_it_holding_its_ops_and_normal_steps_none(
    tmp_path: Path,
) -> None:
    step, _ = training()
    first = next_step()
    with omniprof.flight_recorder(dump_dir=tmp_path, slow_factor=5.0, warmup_steps=5) as rec:
        for n in range(16):
            step("slow_part", SLOW_S) if n == 12 else step()
        assert rec.flush(60)
    slow = first + 12
    pid = os.getpid()
    assert dumps(tmp_path) == [f"flight_slow_step_step{slow}_rank0_pid{pid}_1.pt.trace.json"]
    trace = load_trace(tmp_path / dumps(tmp_path)[0])
    inside = names_within_step(trace, slow)
    assert "slow_part" in inside
    for op in ("aten::linear", "aten::mm", "Optimizer.step#SGD.step"):
        assert op in inside, f"{op} not in step {slow}: {sorted(set(inside))}"
    assert trace["flight_reason"] == "slow_step" and trace["flight_step"] == slow
    assert trace["flight_overwritten_records"] == 0
    # A normal Kineto-format trace: the summary reads it.
    assert "aten::linear" in summary(tmp_path / dumps(tmp_path)[0])


def test_a_hang_writes_a_dump_for_the_step_that_never_ended(tmp_path: Path) -> None:
    step, _ = training()
    first = next_step()
    with omniprof.flight_recorder(dump_dir=tmp_path, hang_after_s=1.0) as rec:
        for _ in range(3):
            step()
        hung = first + 3
        with omniprof.record_function("stuck"):
            torch.mm(torch.randn(4, 4), torch.randn(4, 4))
            deadline = time.monotonic() + 30
            while rec.stats()["dumps_written"] == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
        assert rec.flush(60)
    names = dumps(tmp_path)
    assert len(names) == 1 and names[0].startswith(f"flight_hang_step{hung}_rank0_"), names
    trace = load_trace(tmp_path / names[0])
    stuck = [e for e in trace["traceEvents"] if e.get("name") == "stuck"]
    assert len(stuck) == 1 and stuck[0]["args"]["finished"] is False
    assert "aten::mm" in names_within_step(trace, hung)


def test_an_exception_escaping_the_recorder_writes_a_failure_dump_with_its_step(
    tmp_path: Path,
) -> None:
    step, model = training()
    first = next_step()
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes"):
        with omniprof.flight_recorder(dump_dir=tmp_path):
            for _ in range(3):
                step()
            model(torch.randn(8, 5))  # the wrong width: raises inside aten::linear
    names = dumps(tmp_path)
    assert len(names) == 1 and names[0].startswith(f"flight_failure_step{first + 3}_"), names
    trace = load_trace(tmp_path / names[0])
    assert "aten::linear" in names_within_step(trace, first + 3)


def test_a_profiling_session_inside_the_recorder_gets_its_own_trace(tmp_path: Path) -> None:
    step, _ = training()
    with omniprof.flight_recorder() as rec:
        step("before")
        with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU]) as prof:
            step("inside")
        step("after")
        window = rec.dump(tmp_path / "window.json")
    session_names = {e.name for e in prof.events()}
    assert "inside" in session_names and "aten::linear" in session_names
    assert not {"before", "after"} & session_names
    names = {e["name"] for e in load_trace(tmp_path / "window.json")["traceEvents"]}
    assert {"before", "inside", "after", "aten::linear"} <= names
    assert window["overwritten"] == 0 and window["cut_short"] is False


def test_a_dump_dir_that_is_a_link_is_refused_with_one_warning_and_training_goes_on(
    tmp_path: Path,
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    step, _ = training()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with omniprof.flight_recorder(dump_dir=link, min_interval_s=0) as rec:
            for _ in range(3):
                step()
                rec.trigger()
                rec.flush(60)
            assert rec.stats()["dumps_written"] == 0
    messages = [str(w.message) for w in caught if "flight recorder" in str(w.message)]
    assert len(messages) == 1 and "is a symbolic link" in messages[0], messages
    assert dumps(target) == []


# A training loop that never mentions omniprof: under `python -m omniprof` with the switch
# on, it is recorded. After its third step it raises (argument `raise`), exits with status 3
# (`exit`), or says it is ready and trains until killed.
PROGRAM = """
import sys, torch
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
n = 0
while True:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    n += 1
    if n == 3:
        if sys.argv[1:] == ["raise"]:
            raise ValueError("failed on purpose")
        if sys.argv[1:] == ["exit"]:
            sys.exit(3)
        print("ready", flush=True)
"""


def run_switched_on(tmp_path: Path, *args: str) -> "subprocess.Popen[str]":
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    # Its steps take a millisecond, so that noise alone can triple one: slow steps are not
    # what these tests are about.
    env = dict(os.environ, OMNIPROF_FLIGHT_RECORDER=str(tmp_path / "dumps"),
               OMNIPROF_FLIGHT_SLOW_FACTOR="1000")
    return subprocess.Popen([sys.executable, "-m", "omniprof", str(script), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_environment_switch_writes_a_failure_dump_for_a_program_that_raises(
    tmp_path: Path,
) -> None:
    child = run_switched_on(tmp_path, "raise")
    _, err = child.communicate(timeout=300)
    assert child.returncode == 1 and "ValueError: failed on purpose" in err, err
    names = dumps(tmp_path / "dumps")
    assert len(names) == 1 and names[0].startswith("flight_failure_step3_rank0_"), names
    trace = load_trace(tmp_path / "dumps" / names[0])
    assert events(trace, "cpu_op"), "no PyTorch op in the dump"
    assert "aten::linear" in names_within_step(trace, 2)


def test_an_exit_with_an_error_under_python_m_omniprof_writes_a_failure_dump(
    tmp_path: Path,
) -> None:
    child = run_switched_on(tmp_path, "exit")
    _, err = child.communicate(timeout=300)
    assert child.returncode == 3, err
    names = dumps(tmp_path / "dumps")
    assert len(names) == 1 and names[0].startswith("flight_failure_step3_rank0_"), names


# One rank of a two-rank job sharing a dump directory: steps of 30 ms, rank 1's step 12 made
# slow; each rank trains on long enough for the other's recorder to read the directory.
RANK_PROGRAM = """
import os, time, torch, omniprof
model = torch.nn.Linear(16, 16)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
with omniprof.flight_recorder(dump_dir=os.environ["DUMPS"], slow_factor=5.0, warmup_steps=5):
    for step in range(150):
        optimizer.zero_grad()
        model(torch.randn(8, 16)).sum().backward()
        slow = step == 12 and os.environ["RANK"] == "1"
        time.sleep(0.6 if slow else 0.03)
        optimizer.step()
"""


def test_a_slow_step_on_one_rank_has_every_rank_dump_that_step(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(RANK_PROGRAM)
    dumps_dir = tmp_path / "dumps"
    ranks = [
        subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, RANK=str(r), WORLD_SIZE="2", DUMPS=str(dumps_dir)))
        for r in (0, 1)
    ]
    for r in ranks:
        _, err = r.communicate(timeout=300)
        assert r.returncode == 0, err
    names = dumps(dumps_dir)
    assert [n.split("_pid")[0] for n in names] == [
        "flight_peer_step12_rank0", "flight_slow_step_step12_rank1"
    ], names
    for name in names:
        assert "aten::linear" in names_within_step(load_trace(dumps_dir / name), 12)
    # The two ranks' dumps of the step, side by side.
    out = subprocess.run([str(cli()), "ranks", *(str(dumps_dir / n) for n in names)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "rank 0" in out.stdout and "rank 1" in out.stdout, out.stdout


def test_omniprof_trigger_dump_asks_a_running_program_for_its_window(tmp_path: Path) -> None:
    child = run_switched_on(tmp_path)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        out = subprocess.run([str(cli()), "trigger", "--pid", str(child.pid), "--dump"],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        path = Path(out.stdout.strip())
        assert path.parent == tmp_path / "dumps"
        assert path.name.startswith("flight_request_step") and f"_pid{child.pid}_" in path.name
        trace = load_trace(path)
        assert trace["flight_reason"] == "request"
        assert any(e["name"] == "aten::linear" for e in events(trace, "cpu_op"))
    finally:
        child.kill()
        child.wait()
