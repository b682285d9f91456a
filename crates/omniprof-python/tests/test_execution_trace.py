"""PyTorch's execution trace observer (``execution_trace_observer=``) under omniprof.profile:
started and stopped with the recording, as torch.profiler does, with a schedule too; each op
and user range carries its ``Record function id`` (its node's ``rf_id``), so HTA's
``correlate_execution_trace`` and Chakra's ``chakra_trace_link`` join the execution trace to
omniprof's trace, every op to its node, as many as to torch.profiler's trace of the same work
in the same process.
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import omniprof
from conftest import missing, require_torch

torch = require_torch()

from torch.profiler import ExecutionTraceObserver  # noqa: E402

# Records the same steps under torch.profiler, then omniprof, each with a schedule (Chakra's
# linker needs the `ProfilerStep#` ranges) and an execution trace observer, in one fresh
# process: torch.profiler's `External id`s equal the handles only in the process's first
# execution trace session, so it goes first; omniprof's join holds in any.
RECORD = r"""
import sys
import torch
import omniprof
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

out = sys.argv[1]
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
x = torch.randn(8, 16)

def work():
    with torch.profiler.record_function("forward"):
        y = model(x).softmax(dim=1)
    return y.sum().item()

work()
for name, profiler, cpu in (
    ("torch", profile, ProfilerActivity.CPU),
    ("omniprof", omniprof.profile, omniprof.ProfilerActivity.CPU),
):
    et = ExecutionTraceObserver().register_callback(f"{out}/{name}.et.json")
    save = lambda prof: prof.export_chrome_trace(f"{out}/{name}/trace.json")
    with profiler(activities=[cpu], schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                  on_trace_ready=save, execution_trace_observer=et) as prof:
        for _ in range(3):
            work()
            prof.step()
"""

# HTA's join: each cpu_op and user_annotation row's name and its execution trace node's name
# (None where it has none), over every step (by default HTA drops the last one, whose ops the
# execution trace holds too: then it finds no overlap and joins nothing). HTA's wheel ships
# et_replay under param_bench, where HTA's own import does not look.
HTA_JOIN = r"""
import json, sys
import param_bench
sys.path.insert(0, list(param_bench.__path__)[0])
import pandas as pd
from hta.common.execution_trace import correlate_execution_trace, load_execution_trace
from hta.trace_analysis import TraceAnalysis

analyzer = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
et = load_execution_trace(sys.argv[2])
rank = list(analyzer.t.get_all_traces())[0]
correlate_execution_trace(analyzer.t, rank, et)
df = analyzer.t.get_trace(rank)
names = analyzer.t.symbol_table.get_sym_table()
ids = analyzer.t.symbol_table.get_sym_id_map()
host = df[df["cat"].isin([ids.get("cpu_op"), ids.get("user_annotation")])]
rows = []
for _, row in host.iterrows():
    node = row["et_node"] if "et_node" in host.columns else None
    rows.append([names[row["name"]], None if node is None or pd.isna(node) else et.nodes[int(node)].name])
print(json.dumps(rows))
"""


def tool_python(variable: str, package: str, install: str) -> str:
    python = os.environ.get(variable)
    if python is None:
        missing(f"{variable} is unset: an interpreter with {package} ({install})")
    return python


def et_nodes(path: Path) -> List[Dict[str, Any]]:
    return json.loads(path.read_text())["nodes"]


def rf_id(node: Dict[str, Any]) -> int:
    return next(a["value"] for a in node["attrs"] if a["name"] == "rf_id")


def host_events(path: Path) -> List[Dict[str, Any]]:
    events = json.loads(path.read_text())["traceEvents"]
    return [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("et")
    for name in ("torch", "omniprof"):
        (out / name).mkdir()
    run = subprocess.run([sys.executable, "-c", RECORD, str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-4000:]
    return out


def is_step(name: str) -> bool:
    return name.startswith("ProfilerStep#")


def test_every_op_carries_its_record_function_id_and_takes_it_as_its_external_id(recorded: Path) -> None:
    handles = {rf_id(n) for n in et_nodes(recorded / "omniprof.et.json")} - {0}
    # omniprof's step ranges are its own, no RecordFunction: no id, as no node (torch.profiler
    # makes its steps RecordFunctions, which its execution trace records).
    ops = [e for e in host_events(recorded / "omniprof" / "trace.json") if not is_step(e["name"])]
    assert len(ops) >= 10
    for op in ops:
        assert op["args"]["Record function id"] in handles, op
        assert op["args"]["External id"] == op["args"]["Record function id"], op
    # Kineto's place for it: right after `External id`.
    assert all(list(op["args"])[:2] == ["External id", "Record function id"] for op in ops)
    # The same ops torch.profiler gave handles to in its session.
    torch_ops = [e for e in host_events(recorded / "torch" / "trace.json") if not is_step(e["name"])]
    assert sorted(op["name"] for op in ops) == sorted(op["name"] for op in torch_ops)
    assert all(op["args"]["Record function id"] > 0 for op in torch_ops)


def hta_join(trace_dir: Path, et: Path) -> List[Tuple[str, Optional[str]]]:
    python = tool_python("OMNIPROF_HTA_PYTHON", "holistictraceanalysis", "pip install holistictraceanalysis")
    out = subprocess.run([python, "-c", HTA_JOIN, str(trace_dir), str(et)], capture_output=True, text=True)
    assert out.returncode == 0, f"HTA failed:\n{out.stderr[-4000:]}"
    return [tuple(row) for row in json.loads(out.stdout.strip().splitlines()[-1])]


def test_hta_joins_every_op_to_its_execution_trace_node_as_for_torch_profiler(recorded: Path) -> None:
    ours = [row for row in hta_join(recorded / "omniprof", recorded / "omniprof.et.json") if not is_step(row[0])]
    theirs = [row for row in hta_join(recorded / "torch", recorded / "torch.et.json") if not is_step(row[0])]
    assert len(ours) >= 10
    # Every op joined, to a node of its own name.
    assert [name for name, node in ours if node != name] == []
    assert sum(node is not None for _, node in ours) == sum(node is not None for _, node in theirs)
    assert sorted(ours) == sorted(theirs)


def chakra_link(python: str, et: Path, trace: Path, output: Path) -> List[Dict[str, Any]]:
    # mlc-chakra depends on HTA, whose wheel ships et_replay (which the linker imports) under
    # param_bench.
    where = subprocess.run(
        [python, "-c", "import param_bench; print(list(param_bench.__path__)[0])"],
        capture_output=True,
        text=True,
    )
    assert where.returncode == 0, where.stderr
    env = dict(os.environ, PYTHONPATH=where.stdout.strip())
    link = Path(python).parent / "chakra_trace_link"
    run = subprocess.run(
        [str(link), "--rank", "0", "--chakra-host-trace", str(et), "--chakra-device-trace", str(trace),
         "--output-file", str(output)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0, f"chakra_trace_link failed:\n{run.stderr[-4000:]}"
    return json.loads(output.read_text())["nodes"]


def test_chakra_trace_link_joins_every_op_as_for_torch_profiler(recorded: Path, tmp_path: Path) -> None:
    python = tool_python("OMNIPROF_CHAKRA_PYTHON", "mlc-chakra's chakra_trace_link", "pip install mlc-chakra")
    ours = chakra_link(python, recorded / "omniprof.et.json", recorded / "omniprof" / "trace.json", tmp_path / "o.json")
    theirs = chakra_link(python, recorded / "torch.et.json", recorded / "torch" / "trace.json", tmp_path / "t.json")
    # A node the linker joined to an op gets the op's timing.
    joined = sorted(n["name"] for n in ours if "inclusive_dur" in n)
    ops = host_events(recorded / "omniprof" / "trace.json")
    assert joined == sorted(op["name"] for op in ops if not is_step(op["name"]))
    assert joined == sorted(n["name"] for n in theirs if "inclusive_dur" in n)


def test_the_observer_records_the_scheduled_recording_steps_only(tmp_path: Path) -> None:
    et = ExecutionTraceObserver().register_callback(str(tmp_path / "et.json"))
    running = []
    traces = []
    schedule = omniprof.schedule(wait=1, warmup=1, active=2, repeat=1)

    def save(prof: omniprof.profile) -> None:
        path = tmp_path / f"trace{len(traces)}.json"
        prof.export_chrome_trace(str(path))
        traces.append(path)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with omniprof.profile(
            activities=[omniprof.ProfilerActivity.CPU],
            schedule=schedule,
            on_trace_ready=save,
            execution_trace_observer=et,
        ) as prof:
            for step in range(6):
                with torch.profiler.record_function(f"work{step}"):
                    torch.ones(4).add(step)
                running.append(et.is_running())
                prof.step()
    # Running in the recording steps only; finalized (unregistered) when the block ended.
    assert running == [False, False, True, True, False, False]
    assert not et.is_registered
    nodes = et_nodes(tmp_path / "et.json")
    assert sorted(n["name"] for n in nodes if n["name"].startswith("work")) == ["work2", "work3"]
    assert len(traces) == 1
    ids = {e["args"]["Record function id"] for e in host_events(traces[0]) if "Record function id" in e["args"]}
    assert ids == {rf_id(n) for n in nodes} - {0}
    # The trace's own ProfilerStep ranges are no RecordFunction: no id, as none is in the ET.
    steps = [e for e in host_events(traces[0]) if e["name"].startswith("ProfilerStep#")]
    assert [e["name"] for e in steps] == ["ProfilerStep#2", "ProfilerStep#3"]
    assert all("Record function id" not in e["args"] for e in steps)


def test_without_an_observer_no_op_carries_a_record_function_id(tmp_path: Path) -> None:
    with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU], record_shapes=True) as prof:
        with torch.profiler.record_function("work"):
            torch.ones(4).add(1)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    ops = host_events(tmp_path / "trace.json")
    assert len(ops) >= 3
    assert [op for op in ops if "Record function id" in op["args"]] == []


def test_enable_pytorch_execution_trace_makes_an_observer_as_torch_profiler_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENABLE_PYTORCH_EXECUTION_TRACE", "1")
    with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU]) as prof:
        with torch.profiler.record_function("work"):
            torch.ones(4).add(1)
    et = prof.execution_trace_observer
    assert isinstance(et, ExecutionTraceObserver) and not et.is_registered
    path = Path(et.get_output_file_path())
    try:
        assert path.name.endswith(".et.json")
        assert "work" in [n["name"] for n in et_nodes(path)]
    finally:
        path.unlink()
