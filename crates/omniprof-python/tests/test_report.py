"""``prof.export_report(path)``: the page ``omniprof report`` writes, made from the trace in
memory by the same Rust model and page (one implementation): its operators equal the CLI's
report of the exported trace, row for row."""
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Dict

import omniprof
from conftest import cli

MODEL = re.compile(r'<script type="application/json" id="model">(.*?)</script>', re.S)


def model_of(page: Path) -> Dict[str, Any]:
    found = MODEL.search(page.read_text())
    assert found, f"{page} holds no model"
    return json.loads(found.group(1))


def test_export_report_writes_the_page_the_cli_writes_of_the_same_trace(tmp_path: Path) -> None:
    with omniprof.profile() as prof:
        for step in range(3):
            with omniprof.record_function("<script>alert(1)</script>"):
                with omniprof.record_function(f"work-{step % 2}"):
                    sum(range(10000))
    page = tmp_path / "report.html"
    prof.export_report(page)
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(trace)
    cli_page = tmp_path / "cli.html"
    out = subprocess.run(
        [str(cli()), "report", str(trace), "-o", str(cli_page)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    ours, theirs = model_of(page), model_of(cli_page)
    assert ours["operators"] == theirs["operators"]
    assert ours["steps"] == theirs["steps"]
    names = [r["name"] for r in ours["operators"]["rows"]]
    assert names.count("<script>alert(1)</script>") == 1
    assert {"work-0", "work-1"} <= set(names)
    # The name is in the model as JSON text, never as markup of the page.
    assert "<script>alert(1)</script>" not in page.read_text()


def test_export_report_before_a_trace_exists_is_a_profiler_error(tmp_path: Path) -> None:
    prof = omniprof.profile()
    try:
        prof.export_report(tmp_path / "report.html")
    except omniprof.ProfilerError as e:
        assert "export_report" in str(e)
    else:
        raise AssertionError("export_report before any trace did not raise")
    assert not (tmp_path / "report.html").exists()
