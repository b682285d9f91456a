"""A real multi-rank job: dist_job.py trains on four gloo processes (CPU), omniprof profiling
every rank, rank 2 sleeping in two steps. Each trace carries its rank in
``distributedInfo`` as torch.profiler writes it; ``omniprof summary DIR`` counts every rank's
all-reduce calls; ``omniprof ranks DIR`` names rank 2 as the slowest; HTA reads the same
ranks and step times. A two-rank run through ``tensorboard_trace_handler`` (one trace per
cycle and rank in one directory) is read as each rank's steps by ``summary``, ``ranks`` and
``report``.

torch is required: without it these tests fail, unless ``OMNIPROF_PY_ALLOW_NO_TORCH`` is set.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import omniprof

from conftest import HERE, cli, load_trace, missing, require_torch

torch = require_torch()

WORLD = 4
STEPS = 4
SLOW_RANK = 2
SLOW_STEPS = [2, 4]
SLEEP_MS = 150
#: ProfilerStep numbers of the active steps (step 0 is the warm-up).
ACTIVE = list(range(1, STEPS + 1))


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The traces of one run of dist_job.py."""
    out = tmp_path_factory.mktemp("job")
    # Builds the op observer once here, so that the four ranks find it built.
    with omniprof.profile():
        torch.ones(1).add(1)
    assert omniprof._observer.module() is not None, "the op observer did not build (needs a C++ compiler and ninja)"
    run = subprocess.run(
        [
            sys.executable,
            str(HERE / "dist_job.py"),
            str(out),
            f"--world={WORLD}",
            f"--steps={STEPS}",
            f"--slow-rank={SLOW_RANK}",
            f"--slow-steps={','.join(map(str, SLOW_STEPS))}",
            f"--sleep-ms={SLEEP_MS}",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, f"dist_job.py failed:\n{run.stderr[-4000:]}"
    return out


def omniprof_cli(*args: str) -> str:
    out = subprocess.run([str(cli()), *args], capture_output=True, text=True)
    assert out.returncode == 0, f"omniprof {' '.join(args)} failed: {out.stderr}"
    return out.stdout


def test_each_rank_s_trace_carries_its_rank_as_torch_profiler_writes_it(job: Path) -> None:
    for rank in range(WORLD):
        trace = load_trace(job / f"rank{rank}.pt.trace.json")
        info = trace["distributedInfo"]
        assert (info["backend"], info["rank"], info["world_size"]) == ("gloo", rank, WORLD)
        assert info["pg_count"] >= 1
        steps = sorted(e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
        assert steps == [f"ProfilerStep#{n}" for n in ACTIVE]


def test_the_summary_of_the_job_counts_every_rank_s_all_reduce(job: Path) -> None:
    doc = json.loads(omniprof_cli("summary", str(job), "--format", "json", "--row-limit", "-1"))
    rows = {r["name"]: r for r in doc["rows"] if not r["on_device"]}
    assert rows["c10d::allreduce_"]["count"] == WORLD * STEPS
    assert rows["ProfilerStep*"]["count"] == WORLD * STEPS
    by_rank = json.loads(omniprof_cli("summary", str(job), "--by-rank", "--format", "json", "--row-limit", "-1"))
    assert [r["rank"] for r in by_rank["ranks"]] == list(range(WORLD))
    for r in by_rank["ranks"]:
        counts = {row["name"]: row["count"] for row in r["summary"]["rows"]}
        assert counts["c10d::allreduce_"] == STEPS


def test_the_cross_rank_report_names_the_rank_that_slept(job: Path) -> None:
    doc = json.loads(omniprof_cli("ranks", str(job), "--format", "json"))
    assert [r["profile"]["rank"] for r in doc["ranks"]] == list(range(WORLD))
    assert [s["number"] for s in doc["steps"]] == ACTIVE
    assert doc["straggler"]["rank"] == SLOW_RANK
    for step in doc["steps"]:
        if step["number"] in SLOW_STEPS:
            # The all-reduce ends the step together on every rank, so that the step times
            # are alike; the sleeper is the rank with the most time outside it.
            assert step["slowest"] == SLOW_RANK, step
            # A quarter of the sleep: the others' own delays on a loaded machine eat into it.
            assert step["lag_ns"] > SLEEP_MS * 1_000_000 // 4, step
    for r in doc["ranks"]:
        assert r["profile"]["source"] == "host"
        b = r["profile"]["breakdown"]
        assert b["communication_ns"] > 0 and b["computation_ns"] > 0
    # The others wait for the sleeper in their all-reduce: communication; the sleeper idles.
    # It slept SLEEP_MS in each slow step; a quarter of that total is the margin, since four
    # processes on a loaded machine also wait for one another's scheduling.
    comm = [r["profile"]["breakdown"]["communication_ns"] for r in doc["ranks"]]
    idle = [r["profile"]["breakdown"]["idle_ns"] for r in doc["ranks"]]
    others = [i for i in range(WORLD) if i != SLOW_RANK]
    margin = SLEEP_MS * 1_000_000 * len(SLOW_STEPS) // 4
    assert min(comm[i] for i in others) > comm[SLOW_RANK] + margin, comm
    assert idle[SLOW_RANK] > max(idle[i] for i in others) + margin, idle
    text = omniprof_cli("ranks", str(job))
    assert f"Slowest rank: rank {SLOW_RANK} (slowest in " in text


HTA_STEPS = r"""
import json, sys
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
names = a.t.symbol_table.get_sym_table()
out = {}
for rank, df in a.t.get_all_traces().items():
    steps = df[df["name"].map(lambda i: names[i].startswith("ProfilerStep#"))]
    out[int(rank)] = {names[n]: int(d) for n, d in zip(steps["name"], steps["dur"])}
print(json.dumps(out))
"""


def test_hta_reads_the_same_ranks_and_step_times(job: Path) -> None:
    skip = os.environ.get("OMNIPROF_HTA_SKIP")
    if skip:
        pytest.skip(f"HTA check: {skip}")
    python = os.environ.get("OMNIPROF_HTA_PYTHON")
    if python is None:
        missing("HTA is not installed here and OMNIPROF_HTA_PYTHON is unset (pip install holistictraceanalysis)")
    run = subprocess.run([str(python), "-c", HTA_STEPS, str(job)], capture_output=True, text=True)
    assert run.returncode == 0, f"HTA failed:\n{run.stderr[-4000:]}"
    hta: Dict[str, Dict[str, int]] = json.loads(run.stdout.strip().splitlines()[-1])
    doc = json.loads(omniprof_cli("ranks", str(job), "--format", "json"))
    assert sorted(hta) == [str(r["profile"]["rank"]) for r in doc["ranks"]]
    for r in doc["ranks"]:
        base = r["profile"]["base_time_ns"]
        steps: List[Dict[str, Any]] = r["profile"]["steps"]
        theirs = hta[str(r["profile"]["rank"])]
        assert sorted(theirs) == sorted(f"ProfilerStep#{s['number']}" for s in steps)
        for s in steps:
            # HTA rounds each start up and each end down to whole microseconds of the
            # file's times, the end computed as a float sum (which may land just below a
            # whole microsecond, one less).
            start_us = -(-(s["start_ns"] - base) // 1000)
            end_us = (s["end_ns"] - base) // 1000
            assert theirs[f"ProfilerStep#{s['number']}"] in (end_us - start_us, end_us - start_us - 1)


def test_a_trace_handlers_directory_of_a_two_rank_job_is_read_as_each_ranks_cycles(tmp_path: Path) -> None:
    # torch.profiler's default repeat=0 through tensorboard_trace_handler: each rank writes
    # one trace per cycle into one directory (two ranks, two cycles of one warm-up and two
    # active steps: steps 1, 2 and 4, 5 recorded).
    out = tmp_path / "tb"
    with omniprof.profile():
        torch.ones(1).add(1)
    run = subprocess.run(
        [sys.executable, str(HERE / "dist_job.py"), str(out), "--world=2", "--steps=2", "--cycles=2"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, f"dist_job.py failed:\n{run.stderr[-4000:]}"
    files = sorted(p.name for p in out.iterdir())
    assert [f.split(".")[0] for f in files] == ["rank0", "rank0", "rank1", "rank1"], files
    page = tmp_path / "tb.html"
    for command in [["summary", "--format", "json"], ["ranks", "--format", "json"], ["report", "-o", str(page)]]:
        done = subprocess.run([str(cli()), *command, str(out)], capture_output=True, text=True)
        assert done.returncode == 0, (command, done.stderr)
        for rank in range(2):
            assert f"note: rank {rank} has 2 traces" in done.stderr, (command, done.stderr)
    doc = json.loads(omniprof_cli("ranks", str(out), "--format", "json"))
    assert [[s["number"] for s in r["profile"]["steps"]] for r in doc["ranks"]] == [[1, 2, 4, 5]] * 2
    summary = json.loads(omniprof_cli("summary", str(out), "--format", "json", "--row-limit", "-1"))
    rows = {r["name"]: r for r in summary["rows"] if not r["on_device"]}
    assert rows["c10d::allreduce_"]["count"] == 2 * 4
    # The report's step view: rank 0's steps from both its traces.
    html = page.read_text()
    start = html.index('<script type="application/json" id="model">') + len('<script type="application/json" id="model">')
    model = json.loads(html[start : html.index("</script>", start)])
    assert [s["number"] for s in model["steps"]["steps"]] == [1, 2, 4, 5]
