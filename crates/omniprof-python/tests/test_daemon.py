"""``omniprof daemon`` in place of dynolog: a PyTorch training loop that never imports
omniprof, started with ``KINETO_USE_DAEMON=1``, polls the daemon with PyTorch's built-in
Kineto client; ``omniprof trigger --pid PID --iterations 3`` reaches it through the daemon,
torch's own Kineto writes the trace of exactly three optimizer steps, and ``omniprof
summary`` reads it. A loop that imports omniprof polls the same daemon by the same wire and
is traced by omniprof.

Each test has its own socket directory (``KINETO_IPC_SOCKET_DIR``) and runtime directory, so
tests do not meet each other or a real dynolog. Kineto polls on its own 5-second timer (its
first poll as torch loads): the tests wait for the process to be listed, then for the
trace; they never sleep a guessed time.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List

from conftest import cli, require_torch, summary

require_torch()

DEADLINE_S = 120

# A training loop that runs until killed, and says when its first optimizer step is done
# (Kineto counts iterations from there: an earlier iteration request falls back to time).
# Each step waits 10 ms, as for its data: Kineto checks the iteration count on a thread of
# its own, and a loop of sub-millisecond steps runs past the last one before it stops.
LOOP = """
import time, torch
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
    time.sleep(0.01)
"""


@contextmanager
def daemon(tmp_path: Path) -> Iterator[Dict[str, str]]:
    """Runs ``omniprof daemon`` in this test's directories; yields the environment that
    reaches it (for the traced process and for ``omniprof trigger``)."""
    # Kineto's client binds DIR/dynoconfigclient<uuid>, 52 bytes of a socket path's 107:
    # pytest's directory is too long for it.
    ipc = tempfile.mkdtemp(prefix="kipc")
    (tmp_path / "xdg").mkdir(mode=0o700)
    (tmp_path / "out").mkdir()
    env = dict(os.environ, KINETO_IPC_SOCKET_DIR=ipc,
               XDG_RUNTIME_DIR=str(tmp_path / "xdg"),
               KINETO_ONDEMAND_TRACE_DIR=str((tmp_path / "out").resolve()))
    env.pop("OMNIPROF_ONDEMAND", None)
    with open(tmp_path / "daemon.err", "w") as err:
        proc = subprocess.Popen([str(cli()), "daemon", "--no-rpc"], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        assert banner.startswith("omniprof daemon: serving"), banner + (tmp_path / "daemon.err").read_text()
        yield env
    finally:
        proc.terminate()
        status = proc.wait(timeout=30)
        shutil.rmtree(ipc, ignore_errors=True)
        assert status == 0, (tmp_path / "daemon.err").read_text()


def trigger(env: Dict[str, str], *args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([str(cli()), "trigger", *args], capture_output=True, text=True, env=env)


def trace_loop(env: Dict[str, str], source: str) -> "tuple[Path, str]":
    """Starts `source` with KINETO_USE_DAEMON=1, waits until the daemon lists it, triggers a
    3-iteration trace through the daemon; the trace's path and the process's list row."""
    child = subprocess.Popen([sys.executable, "-c", source], stdout=subprocess.PIPE, text=True,
                             env=dict(env, KINETO_USE_DAEMON="1"))
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        started = time.monotonic()
        while True:
            rows = [r for r in trigger(env, "--list").stdout.splitlines()
                    if r.split()[:1] == [str(child.pid)]]
            if rows:
                break
            assert time.monotonic() - started < DEADLINE_S, "the daemon never listed the process"
            assert child.poll() is None, "the training loop exited"
            time.sleep(0.1)
        out_dir = env["KINETO_ONDEMAND_TRACE_DIR"]
        out = trigger(env, "--pid", str(child.pid), "--iterations", "3", "--output-dir", out_dir)
        assert out.returncode == 0, out.stdout + out.stderr
        path = Path(out.stdout.strip())
        assert path.is_file() and str(path.parent) == out_dir, out.stdout
        assert path.name.endswith(f"_{child.pid}.pt.trace.json"), path
        assert child.poll() is None, "the program goes on after the trace"
    finally:
        child.kill()
        child.wait()
    return path, rows[0]


def steps(events: List[dict]) -> int:
    """The optimizer steps a trace holds (PyTorch's annotation of ``optimizer.step()``)."""
    return sum(1 for e in events if e.get("ph") == "X" and e["name"] == "Optimizer.step#SGD.step")


def test_a_plain_pytorch_loop_is_traced_by_its_own_kineto_through_the_daemon(tmp_path: Path) -> None:
    with daemon(tmp_path) as env:
        path, row = trace_loop(env, LOOP)
    assert "Kineto via daemon" in row, row
    trace = json.loads(path.read_text())
    # Torch's Kineto wrote it: its trace names itself and marks its iteration start.
    assert trace["traceName"] == str(path)
    names = {e.get("name") for e in trace["traceEvents"]}
    assert "Iteration Start: PyTorch Profiler" in names
    assert steps(trace["traceEvents"]) == 3
    table = summary(path)
    assert "aten::addmm" in table and "Optimizer.step#SGD.step" in table, table


def test_an_omniprof_process_is_triggered_through_the_same_daemon_by_the_same_wire(tmp_path: Path) -> None:
    with daemon(tmp_path) as env:
        path, row = trace_loop(env, "import omniprof\n" + LOOP)
    # Torch's Kineto polls from the same process; the daemon hands the request to omniprof.
    assert "omniprof via daemon" in row, row
    events = json.loads(path.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert "Iteration Start: omniprof" in names and "Iteration Start: PyTorch Profiler" not in names
    assert steps(events) == 3
    assert "aten::addmm" in summary(path)
