"""Recording from Python, the key averages and the exported trace."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import omniprof
from conftest import assert_loads_in_perfetto, events, load_trace, summary


def test_nested_ranges_on_three_threads(tmp_path: Path) -> None:
    barrier = threading.Barrier(3)

    def work(i: int) -> None:
        barrier.wait()
        for _ in range(5):
            with omniprof.record_function(f"outer-{i}"):
                with omniprof.record_function("middle"):
                    with omniprof.record_function("inner"):
                        omniprof.instant("mark")

    with omniprof.profile() as prof:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rows = {r.key: r for r in prof.key_averages()}
    assert {k: r.count for k, r in rows.items()} == {
        "outer-0": 5, "outer-1": 5, "outer-2": 5, "middle": 15, "inner": 15,
    }
    for k in ("outer-0", "outer-1", "outer-2"):
        assert rows[k].cpu_time_total >= rows[k].self_cpu_time_total > 0
        assert rows[k].is_user_annotation
    assert rows["middle"].cpu_time_total >= rows["inner"].cpu_time_total

    path = tmp_path / "threads.json"
    prof.export_chrome_trace(path)
    trace = load_trace(path)
    ranges = events(trace, "user_annotation")
    by_tid = {}
    for e in ranges:
        by_tid.setdefault(e["tid"], []).append(e)
    assert len(by_tid) == 3, "one row per thread"
    for tid, evs in by_tid.items():
        outers = [e for e in evs if e["name"].startswith("outer-")]
        assert len({e["name"] for e in outers}) == 1, "each thread records its own outer"
        for e in evs:
            if e["name"] == "outer-0" or e["name"].startswith("outer-"):
                continue
            assert any(
                o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"] for o in outers
            ), f"{e['name']} on {tid} lies inside an outer range"
    assert len(events(trace, "cpu_instant_event")) == 15
    assert_loads_in_perfetto(path)
    pftrace = tmp_path / "threads.pftrace"
    prof.export_chrome_trace(pftrace)
    assert pftrace.stat().st_size * 2 < path.stat().st_size
    loaded = assert_loads_in_perfetto(pftrace)
    assert loaded["slices"] >= len(ranges) + 15


def test_decorator_records_each_call_and_keeps_the_function() -> None:
    @omniprof.record_function("decorated")
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    assert add.__name__ == "add" and add.__doc__ == "Adds."
    with omniprof.profile() as prof:
        assert add(1, 2) == 3
        assert add(2, 3) == 5
    assert [(r.key, r.count) for r in prof.key_averages()] == [("decorated", 2)]


def test_nothing_is_recorded_outside_a_profiler() -> None:
    with omniprof.record_function("before"):
        pass
    with omniprof.profile() as prof:
        with omniprof.record_function("during"):
            pass
    with omniprof.record_function("after"):
        pass
    assert [r.key for r in prof.key_averages()] == ["during"]


def test_a_range_object_names_its_range_in_every_later_session() -> None:
    # Names are interned at each entry, as transient names: ids from two sessions back are
    # retired, so an id taken when the object was made would name another range by now.
    kept = omniprof.record_function("kept")
    for session in range(4):
        with omniprof.profile() as prof:
            with omniprof.record_function(f"fresh_{session}"):
                pass
            with kept:
                pass
        assert sorted(r.key for r in prof.key_averages()) == ["fresh_%d" % session, "kept"]


def test_table_is_the_clis_summary_of_the_exported_file(tmp_path: Path) -> None:
    with omniprof.profile() as prof:
        for i in range(20):
            with omniprof.record_function("step"):
                for j in range(i % 4 + 1):
                    with omniprof.record_function(f"op-{j}"):
                        sum(range(1000 * (j + 1)))
    for name in ("trace.json", "trace.json.gz"):
        path = tmp_path / name
        prof.export_chrome_trace(path)
        averages = prof.key_averages()
        assert averages.table() == summary(path)
        assert str(averages) == summary(path)
        assert averages.table(sort_by="self_cpu_time_total", row_limit=3) == summary(
            path, "--sort-by", "self_cpu_time_total", "--row-limit", "3"
        )
        assert averages.table(sort_by="count", row_limit=-1) == summary(
            path, "--sort-by", "count", "--row-limit", "-1"
        )
        assert prof.key_averages(group_by_input_shape=True).table() == summary(
            path, "--group-by-shapes"
        )
    rows = prof.key_averages()
    assert len(rows) == 5 and rows[0].key == "step" and rows[-1].key == "op-3"
    step = rows[0]
    assert step.count == 20
    assert abs(step.cpu_time - step.cpu_time_total / 20) < 1e-9
    assert step.self_device_time_total == 0.0 and step.device_time_total == 0.0
    # Not grouped by shapes: none, as PyTorch's rows say it.
    assert step.input_shapes == ""


def test_metadata_and_args_reach_the_file(tmp_path: Path) -> None:
    with omniprof.profile() as prof:
        prof.add_metadata("run", "nightly")
        prof.add_metadata_json("sizes", '{"batch": 32}')
        with omniprof.record_function("with_args", "lr=0.1"):
            pass
    path = tmp_path / "meta.json"
    prof.export_chrome_trace(path)
    trace = load_trace(path)
    assert trace["run"] == "nightly" and trace["sizes"] == {"batch": 32}
    (r,) = [e for e in events(trace, "user_annotation") if e["name"] == "with_args"]
    assert r["args"]["args"] == "lr=0.1"


def test_activities_select_types() -> None:
    with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU, "kernel", "gpu_pm_counter"]) as prof:
        with omniprof.record_function("cpu"):
            pass
    assert [r.key for r in prof.key_averages()] == ["cpu"]
    # Device activities only: the host ranges are not recorded.
    with omniprof.profile(activities=[omniprof.ProfilerActivity.CUDA]) as prof:
        with omniprof.record_function("cpu"):
            pass
    assert len(prof.key_averages()) == 0


def test_profiler_activity_has_the_members_of_the_native_table_in_its_order() -> None:
    # The enum is written out in Python for type checkers; the native module's table, which
    # says what each member selects, is the one definition it must match.
    members = [(m.name, m.value) for m in omniprof.ProfilerActivity]
    names = omniprof._native.PROFILER_ACTIVITIES
    assert members == [(name, name) for name in names]
    assert names == ("CPU", "CUDA", "XPU", "MTIA", "HPU", "PrivateUse1")


def test_a_stopped_profile_starts_again() -> None:
    prof = omniprof.profile()
    for name in ("first", "second"):
        prof.start()
        with omniprof.record_function(name):
            pass
        prof.stop()
        assert [r.key for r in prof.key_averages()] == [name]


WITHOUT_TORCH = """
import sys, warnings
sys.modules["torch"] = None  # as if torch were not installed: its import fails
warnings.simplefilter("error")  # any warning fails the run
import omniprof
from omniprof import _observer
with omniprof.profile() as prof:
    with omniprof.record_function("mine"):
        pass
assert [(r.key, r.count) for r in prof.key_averages()] == [("mine", 1)], list(prof.key_averages())
assert _observer.module() is None
"""


def test_without_torch_only_omniprofs_ranges_are_recorded_with_no_warning() -> None:
    run = subprocess.run([sys.executable, "-c", WITHOUT_TORCH], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "omniprof" not in run.stderr, run.stderr


def test_a_foreign_traces_malformed_report_entry_is_a_warning_and_left_out(tmp_path: Path) -> None:
    path = tmp_path / "foreign.json"
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
    header = {"schemaVersion": 1, "dropped_events": "many", "backend_errors": ["gpu: stop failed: lost"]}
    path.write_text(json.dumps({**header, "traceEvents": [op]}))
    expected = 'foreign.json: trace metadata "dropped_events" should be a whole number from 0, not "many"'
    with pytest.warns(RuntimeWarning, match=expected):
        trace = omniprof.load_trace(str(path))
    assert trace.dropped_events == 0
    assert trace.backend_errors == ["gpu: stop failed: lost"]
    assert trace.activity_count == 1
