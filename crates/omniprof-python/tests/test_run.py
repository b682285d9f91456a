"""``omniprof run [options] -- COMMAND``: unmodified Python programs (real processes, real
PyTorch), profiled through the ``sitecustomize`` the command puts first on ``PYTHONPATH``;
a ``torchrun`` job of two gloo ranks on the CPU; exit statuses passed through; Ctrl-C and
SIGTERM mid-run still leave traces; commands that are not Python, or not there.
"""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Optional

from conftest import cli, load_trace, require_torch

require_torch()

# A training loop that knows nothing of omniprof: ten optimizer steps, each in a user range
# naming its step, so that which steps a trace holds can be read off it.
TRAIN = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
for step in range(10):
    with torch.profiler.record_function(f"train_step_{step}"):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
print("trained", flush=True)
"""

# The same job, as two gloo ranks under torchrun.
TRAIN_DDP = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 16), torch.randn(8, 4)
for step in range(8):
    with torch.profiler.record_function(f"train_step_{step}"):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
# Both ranks done before the group goes: destroying it while the other rank still runs its
# collectives sometimes aborts gloo ("terminate called without an active exception"), with
# or without a profiler.
dist.barrier()
dist.destroy_process_group()
print("rank", dist.get_rank() if dist.is_initialized() else "done", flush=True)
"""

# Steps until killed; says when two have ended.
FOREVER = """
import torch
model = torch.nn.Linear(16, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 16)
step = 0
while True:
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()
    step += 1
    if step == 2:
        print("ready", flush=True)
"""

TIMEOUT_S = 120


def run(tmp_path: Path, *args: str, script: Optional[str] = None,
        env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    """``omniprof run ARGS`` (with ``python SCRIPT`` after ``--`` when a script is given)."""
    command = [str(cli()), "run", *args]
    if script is not None:
        path = tmp_path / "script.py"
        path.write_text(script)
        command += ["--", sys.executable, str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env=dict(os.environ, **(env or {})), cwd=tmp_path)


def step_ranges(trace_path: Path) -> List[str]:
    """The names of the trace's ``ProfilerStep#N`` and ``train_step_N`` ranges, in order."""
    events = load_trace(trace_path)["traceEvents"]
    names = [e for e in events if e.get("ph") == "X" and re.match(r"ProfilerStep#|train_step_", e["name"])]
    return [e["name"] for e in sorted(names, key=lambda e: (e["ts"], -e["dur"]))]


def names(trace_path: Path, cat: str = "cpu_op") -> List[str]:
    """The names of the trace's events of category ``cat``."""
    return [e["name"] for e in load_trace(trace_path)["traceEvents"] if e.get("cat") == cat]


def traces(run_dir: Path) -> List[Path]:
    return sorted(run_dir.glob("*.pt.trace.json"))


def test_steps_3_to_5_of_an_unmodified_script_are_exactly_the_trace(tmp_path: Path) -> None:
    out = run(tmp_path, "--steps", "3:5", "-o", "out", script=TRAIN)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("trained\n"), "the program's output comes first, unchanged"
    run_dir = tmp_path / "out"
    [trace] = traces(run_dir)
    assert re.fullmatch(r"pid\d+\.pt\.trace\.json", trace.name)
    assert step_ranges(trace) == [
        "ProfilerStep#3", "train_step_3", "ProfilerStep#4", "train_step_4", "ProfilerStep#5", "train_step_5",
    ]
    assert "aten::addmm" in names(trace)
    # Each step holds its whole optimizer step: the step ends after the optimizer's range.
    assert names(trace, "user_annotation").count("Optimizer.step#SGD.step") == 3
    assert (run_dir / "report.html").is_file()
    assert f"omniprof run: 1 trace in {run_dir}" in out.stderr
    assert "omniprof run: 1 process profiled, 3 steps recorded, 1 trace written" in out.stderr
    # The job summary: `summary`'s table of the trace.
    assert "Self CPU time total" in out.stdout and "aten::addmm" in out.stdout


def test_a_torchrun_job_gives_one_trace_per_rank_the_job_summary_and_the_report(tmp_path: Path) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(TRAIN_DDP)
    command = [str(cli()), "run", "--steps", "3:5", "-o", "job", "--", sys.executable, "-m",
               "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert out.returncode == 0, out.stderr
    run_dir = tmp_path / "job"
    found = traces(run_dir)
    assert [re.sub(r"pid\d+", "pidN", t.name) for t in found] == [
        "rank0-pidN.pt.trace.json", "rank1-pidN.pt.trace.json",
    ], "one trace per rank, none of the launcher"
    for trace in found:
        assert step_ranges(trace) == [
            "ProfilerStep#3", "train_step_3", "ProfilerStep#4", "train_step_4", "ProfilerStep#5", "train_step_5",
        ]
        info = load_trace(trace)["distributedInfo"]
        assert info["backend"] == "gloo" and info["world_size"] == 2
        assert trace.name.startswith(f"rank{info['rank']}-")
    assert "2 traces (rank 0, rank 1): rows summed over all of them" in out.stdout
    assert "slowest rank" in out.stdout.lower(), "the ranks report follows the summary"
    assert (run_dir / "report.html").is_file()


def test_the_exit_status_of_the_command_is_passed_through(tmp_path: Path) -> None:
    out = run(tmp_path, "--", sys.executable, "-c", "import sys; sys.exit(3)")
    assert out.returncode == 3
    assert "omniprof run: no trace was written: its processes ended before recording anything" in out.stderr


def test_a_program_that_never_reaches_the_steps_says_how_many_it_ran(tmp_path: Path) -> None:
    out = run(tmp_path, "--steps", "20:22", "-o", "out", script=TRAIN)
    assert out.returncode == 0, out.stderr
    assert (
        "omniprof run: no trace was written: the program ended before step 20: it ran 10 steps"
        in out.stderr
    )
    assert not (tmp_path / "out").exists(), "a run that wrote nothing leaves no directory"


def test_commands_that_are_missing_or_not_python_are_said_plainly(tmp_path: Path) -> None:
    missing = run(tmp_path, "--", "no-such-command-omniprof")
    assert missing.returncode == 127
    assert missing.stderr == "error: cannot run `no-such-command-omniprof`: no such command\n"
    not_python = run(tmp_path, "--", "sh", "-c", "echo hello; exit 4")
    assert not_python.returncode == 4
    assert not_python.stdout == "hello\n"
    assert "started no Python process that imported omniprof" in not_python.stderr
    assert "Traceback" not in missing.stderr + not_python.stderr


def test_the_program_imports_what_it_would_without_omniprof_run(tmp_path: Path) -> None:
    """Its own PYTHONPATH and sitecustomize stay; the run's directory is not on its path."""
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("MARK = 'the program sitecustomize'\n")
    probe = textwrap.dedent("""
        import json, sys, sitecustomize
        print(json.dumps({"mark": getattr(sitecustomize, "MARK", None),
                          "path": [p for p in sys.path if "omniprof-run" in p]}))
    """)
    out = run(tmp_path, "--", sys.executable, "-c", probe, env={"PYTHONPATH": str(own)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"mark": "the program sitecustomize", "path": []}


def interrupted(tmp_path: Path, sig: int) -> "subprocess.CompletedProcess[str]":
    """``omniprof run`` of an endless loop, sent ``sig`` once two steps have ended."""
    (tmp_path / "forever.py").write_text(FOREVER)
    child = subprocess.Popen([str(cli()), "run", "-o", "out", "--", sys.executable, "forever.py"],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        child.send_signal(sig)
        stdout, stderr = child.communicate(timeout=TIMEOUT_S)
    finally:
        child.kill()
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def test_ctrl_c_mid_run_still_leaves_the_trace_of_what_ran(tmp_path: Path) -> None:
    out = interrupted(tmp_path, signal.SIGINT)
    assert out.returncode == 128 + signal.SIGINT, out.stderr
    assert "omniprof run: forwarded SIGINT to the command" in out.stderr
    [trace] = traces(tmp_path / "out")
    assert "aten::addmm" in names(trace)


def test_sigterm_mid_run_still_leaves_the_trace_of_what_ran(tmp_path: Path) -> None:
    out = interrupted(tmp_path, signal.SIGTERM)
    assert out.returncode == 128 + signal.SIGTERM, out.stderr
    [trace] = traces(tmp_path / "out")
    assert "aten::addmm" in names(trace)


# A DataLoader whose worker starts a new interpreter (the spawn start method).
LOADER = """
import torch
from torch.utils.data import DataLoader, TensorDataset
if __name__ == "__main__":
    data = TensorDataset(torch.randn(32, 16), torch.randn(32, 4))
    loader = DataLoader(data, batch_size=8, num_workers=1, multiprocessing_context="spawn")
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
"""


def test_dataloader_workers_are_traced_only_when_asked(tmp_path: Path) -> None:
    plain = run(tmp_path, "-o", "plain", script=LOADER)
    assert plain.returncode == 0, plain.stderr
    [main] = traces(tmp_path / "plain")
    assert re.fullmatch(r"pid\d+\.pt\.trace\.json", main.name)
    asked = run(tmp_path, "--dataloader-workers", "-o", "asked", script=LOADER)
    assert asked.returncode == 0, asked.stderr
    found = sorted(re.sub(r"\d+", "N", t.name) for t in traces(tmp_path / "asked"))
    assert found == ["pidN.pt.trace.json", "worker-pidN.pt.trace.json"]
    worker = next((tmp_path / "asked").glob("worker-*"))
    assert "aten::stack" in names(worker), "the worker's collation is in its trace"
    assert "omniprof run: 1 trace of DataLoader workers, left out of the summary and report" in asked.stderr


def window_span_s(tmp_path: Path, script: str) -> float:
    """How long the ops of ``--delay 0.5 --duration 1``'s trace of ``script`` span, in s.
    The window closes at the first step, or the first look at the clock, past its end: a
    little later than 1 s, more so on a loaded machine."""
    out = run(tmp_path, "--delay", "0.5", "--duration", "1", "-o", "out", script=script)
    assert out.returncode == 0, out.stderr
    [trace] = traces(tmp_path / "out")
    events = [e for e in load_trace(trace)["traceEvents"] if e.get("cat") == "cpu_op"]
    assert "aten::addmm" in {e["name"] for e in events}
    return (max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)) / 1e6


# Ops for four seconds, with no optimizer and no omniprof.step(); a few hundred a second, so
# that the trace stays small.
INFERENCE = """
import time, torch
model, x = torch.nn.Linear(16, 4), torch.randn(8, 16)
end = time.monotonic() + 4
while time.monotonic() < end:
    model(x)
    time.sleep(0.005)
"""


def test_a_time_window_of_a_program_without_steps_holds_its_duration(tmp_path: Path) -> None:
    assert 0.5 < window_span_s(tmp_path, INFERENCE) < 1.25


def test_a_time_window_of_a_training_loop_holds_its_duration(tmp_path: Path) -> None:
    """The window is due while the program still starts up (its optimizer's construction
    imports torch._dynamo, seconds without an op): it opens at the first step instead."""
    script = FOREVER.replace("while True:", "import time\nend = time.monotonic() + 4\nwhile time.monotonic() < end:")
    assert 0.5 < window_span_s(tmp_path, script) < 1.25


def test_a_python_without_omniprof_runs_unprofiled_and_says_what_it_needs(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    out = run(tmp_path, "--", str(tmp_path / "bare" / "bin" / "python"), "-c", "print('hi')")
    assert out.returncode == 0 and out.stdout == "hi\n", out.stderr
    assert re.search(
        r"warning: .*bare/bin/python(3)? \(pid \d+\): cannot import omniprof: No module named 'omniprof' "
        r"\(install omniprof into that Python's environment to profile it\)", out.stderr), out.stderr
    assert "started no Python process that imported omniprof" in out.stderr


# Sixteen optimizer steps, the thirteenth slow on purpose: past the flight recorder's ten
# warm-up steps, three times the median and more.
SLOW_STEP = """
import time, torch
model = torch.nn.Linear(16, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 16)
for step in range(16):
    optimizer.zero_grad()
    model(x).sum().backward()
    if step == 12:
        time.sleep(0.5)
    optimizer.step()
print("trained", flush=True)
"""


def test_the_flight_recorder_dumps_a_slow_step_into_the_run_directory(tmp_path: Path) -> None:
    out = run(tmp_path, "--flight-recorder", "--seconds", "10", "-o", "out", script=SLOW_STEP)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("trained\n")
    run_dir = tmp_path / "out"
    [dump] = traces(run_dir)
    assert re.fullmatch(r"flight_slow_step_step12_rank0_pid\d+_1\.pt\.trace\.json", dump.name)
    assert f"omniprof run: 1 flight recorder dump in {run_dir}:\n  {dump.name}\n" in out.stderr
    assert "aten::addmm" in names(dump)
    assert load_trace(dump)["flight_reason"] == "slow_step"
    assert load_trace(dump)["flight_window_s"] == 10
    # The end's summary and report, as of traces.
    assert "Self CPU time total" in out.stdout
    assert (run_dir / "report.html").is_file()


def test_a_flight_recorder_that_nothing_triggered_says_so(tmp_path: Path) -> None:
    out = run(tmp_path, "--flight-recorder", "--dump-dir", "dumps", "-o", "out", script=TRAIN)
    assert out.returncode == 0, out.stderr
    assert (
        "omniprof run: no flight recorder dump was written: nothing triggered one: no step was "
        "slow, and nothing hung, failed or asked (`omniprof trigger --pid P --dump`)"
    ) in out.stderr
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "dumps").exists(), "the flight recorder makes its directory at its first dump"


# A spawned DataLoader worker says whether its flight recorder still runs.
LOADER_PROBE = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from omniprof import _flight

def probe(_):
    print("worker:", _flight.switched_on() is not None, flush=True)

if __name__ == "__main__":
    data = TensorDataset(torch.randn(16, 4))
    for _ in DataLoader(data, batch_size=8, num_workers=1, multiprocessing_context="spawn", worker_init_fn=probe):
        pass
    print("main:", _flight.switched_on() is not None, flush=True)
"""


def test_a_spawned_dataloader_worker_stops_its_flight_recorder(tmp_path: Path) -> None:
    """It imports torch, which starts the recorder, before it knows it is a worker."""
    out = run(tmp_path, "--flight-recorder", "-o", "out", script=LOADER_PROBE)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "worker: False\nmain: True\n"
