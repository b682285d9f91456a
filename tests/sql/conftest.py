"""Shared helpers of the SQL-engine checks: where the CLI is, and how a missing tool fails."""

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# With OMNIPROF_REQUIRE_ALL_CHECKS set, a skipped test fails the run (the plugin's doc says why).
sys.path.insert(0, str(REPO / "crates" / "test-support" / "python"))
from require_all_checks import (  # noqa: E402,F401  (pytest finds the hooks by name here)
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)


def missing(what: str) -> None:
    """Fails (or, with OMNIPROF_PY_ALLOW_MISSING_TOOLS, skips) because ``what`` is missing."""
    if os.environ.get("OMNIPROF_PY_ALLOW_MISSING_TOOLS"):
        pytest.skip(f"{what} (OMNIPROF_PY_ALLOW_MISSING_TOOLS is set)")
    pytest.fail(f"{what}; set OMNIPROF_PY_ALLOW_MISSING_TOOLS=1 to skip instead", pytrace=False)


def cli() -> Path:
    """The omniprof CLI: OMNIPROF_CLI, else target/debug or target/release."""
    env = os.environ.get("OMNIPROF_CLI")
    candidates = [Path(env)] if env else [REPO / "target" / p / "omniprof" for p in ("debug", "release")]
    for c in candidates:
        if c.is_file():
            return c
    missing(f"no omniprof CLI at {', '.join(map(str, candidates))} (cargo build -p omniprof-cli)")
    raise AssertionError("unreachable")
