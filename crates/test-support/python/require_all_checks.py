"""A pytest plugin: with ``OMNIPROF_REQUIRE_ALL_CHECKS`` set (``bash .ci/run`` sets it, after
installing every tool), a skipped test fails the run, as a skipped check fails ``cargo test``
(``crates/test-support/src/skip.rs``). The Python and SQL suites' conftests load it, so
``OMNIPROF_PY_ALLOW_*`` and ``OMNIPROF_HTA_SKIP`` only ever skip outside CI.
"""

import os
from typing import Any, List

import pytest

REQUIRE_ALL_ENV = "OMNIPROF_REQUIRE_ALL_CHECKS"

_skipped: List[str] = []


def pytest_runtest_logreport(report: Any) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if os.environ.get(REQUIRE_ALL_ENV) and _skipped and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if os.environ.get(REQUIRE_ALL_ENV) and _skipped:
        terminalreporter.write_line(
            f"error: {len(_skipped)} tests skipped with {REQUIRE_ALL_ENV} set, where every "
            "check must run:",
            red=True,
        )
        for line in _skipped:
            terminalreporter.write_line(f"  {line}")
