"""Shared helpers of the SQL-engine checks: where the CLI is, and how a missing tool fails."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


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
