"""The suites' rule that CI runs every check: with OMNIPROF_REQUIRE_ALL_CHECKS set, a skipped
test fails the pytest run (crates/test-support/python/require_all_checks.py)."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

PLUGIN_DIR = REPO / "crates" / "test-support" / "python"


def run_suite(tmp_path: Path, require_all: bool) -> subprocess.CompletedProcess:
    """pytest over a suite of one passing and one skipped test, with the plugin loaded."""
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(PLUGIN_DIR)!r})\n"
        "from require_all_checks import pytest_runtest_logreport, pytest_sessionfinish, "
        "pytest_terminal_summary\n"
    )
    (tmp_path / "test_suite.py").write_text(
        "import pytest\n\n"
        "def test_runs():\n    pass\n\n"
        "def test_skips():\n    pytest.skip('no such tool here')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMNIPROF_REQUIRE_ALL_CHECKS"}
    if require_all:
        env["OMNIPROF_REQUIRE_ALL_CHECKS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )


def test_a_skip_fails_the_run_when_every_check_is_required(tmp_path: Path) -> None:
    out = run_suite(tmp_path, require_all=True)
    assert out.returncode == 1, out.stdout
    assert "error: 1 tests skipped with OMNIPROF_REQUIRE_ALL_CHECKS set" in out.stdout
    assert "test_suite.py::test_skips: Skipped: no such tool here" in out.stdout


def test_a_skip_is_only_a_skip_otherwise(tmp_path: Path) -> None:
    out = run_suite(tmp_path, require_all=False)
    assert out.returncode == 0, out.stdout
    assert "1 passed, 1 skipped" in out.stdout
