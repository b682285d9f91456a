"""On-demand tracing of a running PyTorch program: with ``OMNIPROF_ONDEMAND=1``, ``import
omniprof`` serves triggers, and ``omniprof trigger --pid PID --iterations 3`` traces three
optimizer steps of a training loop that never mentions a profiler, PyTorch ops included.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import assert_loads_in_perfetto, cli, load_trace

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    if os.environ.get("OMNIPROF_PY_ALLOW_NO_TORCH"):
        pytest.skip("torch is not installed (OMNIPROF_PY_ALLOW_NO_TORCH is set)", allow_module_level=True)
    raise

# A training loop that runs until killed; it says when its first iteration has ended (before
# that, an iteration-based trigger falls back to a time-based trace, as Kineto's does). It
# imports omniprof before torch: its ops are traced all the same.
TRAINING = """
import sys, omniprof, torch
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
def train_step():
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
train_step()
print("ready", flush=True)
while True:
    train_step()
"""

DEADLINE_S = 120


def trigger(allowed: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([str(cli()), "trigger", *args], capture_output=True, text=True,
                          env=dict(os.environ, KINETO_ONDEMAND_TRACE_DIR=str(allowed)))


def trace_training(tmp_path: Path, config_text: str) -> Path:
    """Triggers a 3-iteration trace of the training loop with `config_text`; its path."""
    allowed = tmp_path.resolve()
    config = allowed / "trigger.conf"
    config.write_text(config_text)
    env = dict(os.environ, OMNIPROF_ONDEMAND="1", KINETO_ONDEMAND_TRACE_DIR=str(allowed))
    child = subprocess.Popen([sys.executable, "-c", TRAINING], env=env, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        started = time.monotonic()
        while str(child.pid) not in trigger(allowed, "--list").stdout:
            assert time.monotonic() - started < DEADLINE_S, "the program never listed itself"
            assert child.poll() is None, "the training loop exited"
            time.sleep(0.1)
        out = trigger(allowed, "--pid", str(child.pid), "--output-dir", str(allowed),
                      "--config", str(config), "--iterations", "3")
        assert out.returncode == 0, out.stdout + out.stderr
        path = Path(out.stdout.strip())
        assert path.is_file() and path.parent == allowed, out.stdout
        assert child.poll() is None, "the program goes on after the trace"
    finally:
        child.kill()
        child.wait()
    return path


def test_a_training_loop_is_traced_by_iterations_with_its_pytorch_ops(tmp_path: Path) -> None:
    path = trace_training(tmp_path, "ACTIVITIES_WARMUP_PERIOD_SECS=0\n")
    events = load_trace(path)["traceEvents"]
    names = {e["name"] for e in events if e.get("ph") == "X"}
    assert "aten::addmm" in names and "autograd::engine::evaluate_function: AddmmBackward0" in names
    # The window opens and closes in the post hooks of optimizer steps k and k + 3: steps
    # k + 1 and k + 2 lie inside it, step k + 3 begins inside and is cut at its end.
    steps = [e for e in events if e.get("ph") == "X" and e["name"] == "Optimizer.step#SGD.step"]
    assert [e["args"].get("finished", True) for e in steps] == [True, True, False], steps
    assert_loads_in_perfetto(path)


def test_an_on_demand_trace_asking_for_stacks_records_the_programs_python_frames(tmp_path: Path) -> None:
    path = trace_training(tmp_path, "ACTIVITIES_WARMUP_PERIOD_SECS=0\nPROFILE_WITH_STACK=1\n")
    events = load_trace(path)["traceEvents"]
    frames = {e["name"] for e in events if e.get("cat") == "python_function"}
    # Called at its definition's line; the one running when the window opened, at its line then.
    assert "<string>(6): train_step" in frames, sorted(frames)[:20]
    assert "nn.Module: Sequential_0" in frames
    addmm = [e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm"]
    assert addmm and all(": train_step;" in e["args"]["Call stack"] for e in addmm)
    assert_loads_in_perfetto(path)
