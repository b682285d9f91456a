"""PyTorch's PrivateUse1 profiler stubs, bridged: per-op device time on toydev (a PrivateUse1
device of the tests' own, ``toydev/device.cpp``) under omniprof against the legacy
profiler's ``use_device``, the device rows of the trace, and stubs that fail, hang or are not
enabled, and no PrivateUse1 backend at all. (toydev's Kineto profiler, which
``ProfilerActivity.PrivateUse1`` uses, is tested in test_privateuse1_kineto.py.)

toydev's add and mul kernels spin for a fixed time, and its clocks run strict in the
comparisons (an event reads the device clock, which moves by exactly each kernel's time), so
an op's device time is the same under both profilers however the host is scheduled.

torch is required: without it these tests fail, unless ``OMNIPROF_PY_ALLOW_NO_TORCH`` is set,
which skips them with the reason.
"""

import json
import os
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import omniprof

from conftest import require_torch

torch = require_torch()

import toydev_device
from toydev_device import workload

KERNEL_US = 200


@pytest.fixture
def toydev() -> Iterator[Any]:
    """toydev, with working stubs, strict clocks and KERNEL_US kernels; its stub counts reset."""
    ext = toydev_device.load()
    ext.set_stub_mode(toydev_device.OK)
    ext.set_strict_clock(True)
    ext.set_kernel_us(KERNEL_US)
    ext.reset_stub_calls()
    yield ext
    ext.set_stub_mode(toydev_device.OK)
    ext.set_strict_clock(False)
    ext.set_kernel_us(0)
    settle(ext)


def settle(ext: Any) -> None:
    """Waits until no stub call has come for 200 ms (at most 30 s): a timing thread a test
    abandoned at its deadline finishes its calls here, not in the next test's counts."""
    deadline = time.monotonic() + 30
    last, quiet_since = ext.stub_calls(), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < 0.2:
        time.sleep(0.02)
        now = ext.stub_calls()
        if now != last:
            last, quiet_since = now, time.monotonic()


def per_op(rows: Any) -> Dict[str, Tuple[int, float, float]]:
    """(count, self device time, device time) of each row, in µs."""
    return {r.key: (r.count, r.self_device_time_total, r.device_time_total) for r in rows}


def omniprof_run(**kwargs: Any) -> Tuple[Any, List[str]]:
    """The workload under omniprof.profile(use_device="toydev"), and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with omniprof.profile(use_device="toydev", **kwargs) as prof:
            workload()
    return prof, [str(w.message) for w in caught]


def exported(prof: Any, tmp_path: Path) -> Dict[str, Any]:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())


def backend_errors(trace: Dict[str, Any]) -> List[str]:
    return list(trace.get("backend_errors", []))


def test_device_time_per_op_matches_the_legacy_profiler_on_the_same_workload(toydev: Any) -> None:
    workload()  # the first run of each op is not profiled by either
    with torch.autograd.profiler.profile(use_device="toydev") as theirs:
        workload()
    legacy = per_op(theirs.key_averages())
    ours, caught = omniprof_run()
    mine = per_op(ours.key_averages())
    assert caught == []

    for name in ("aten::add", "aten::mul", "toy_step"):
        assert mine[name][0] == legacy[name][0], name
    assert (legacy["aten::add"][0], legacy["aten::mul"][0]) == (9, 8)
    for name in ("aten::add", "aten::mul"):
        assert legacy[name][1] == pytest.approx(legacy[name][0] * KERNEL_US, rel=0.05), name
        for column in (1, 2):
            assert mine[name][column] == pytest.approx(legacy[name][column], rel=0.05), name
    # A range's device time spans what it encloses: its own is what is left (nothing here).
    assert mine["toy_step"][2] == pytest.approx(legacy["toy_step"][2], rel=0.05)
    assert legacy["toy_step"][2] == pytest.approx(KERNEL_US, rel=0.05)
    assert (mine["toy_step"][1], legacy["toy_step"][1]) == (0, 0)

    # The device is named as PyTorch names it, in the rows and the table.
    assert {r.use_device for r in ours.key_averages()} == {"toydev"}
    header = ours.key_averages().table().splitlines()[1]
    assert "Self TOYDEV" in header and "TOYDEV total" in header


def test_the_trace_draws_each_op_on_its_devices_row_linked_by_external_id(
    toydev: Any, tmp_path: Path
) -> None:
    def two_devices() -> None:
        workload("toydev:0")
        torch.toydev.set_device(1)
        try:
            workload("toydev:1")
        finally:
            torch.toydev.set_device(0)

    # use_device: the stubs alone (ProfilerActivity.PrivateUse1 would leave the device to
    # toydev's Kineto profiler, test_privateuse1_kineto.py).
    with omniprof.profile(use_device="toydev") as prof:
        two_devices()
    trace = exported(prof, tmp_path)
    events = trace["traceEvents"]
    assert backend_errors(trace) == []
    assert trace["device_type"] == "toydev"
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert (names[0], names[1]) == ("toydev 0", "toydev 1")

    host = {e["args"]["External id"]: e for e in events if e.get("cat") in ("cpu_op", "user_annotation")}
    drawn = [e for e in events if e.get("cat") == "gpu_user_annotation"]
    # Every timed op and range once, on the device it ran on, under its own name and time.
    timed = [e for e in host.values() if e["name"] in ("aten::add", "aten::mul", "toy_step")]
    assert Counter(e["name"] for e in drawn) == Counter(e["name"] for e in timed)
    assert Counter(e["pid"] for e in drawn) == {0: 18, 1: 18}
    for e in drawn:
        op = host[e["args"]["External id"]]
        assert op["name"] == e["name"]
        assert op["args"]["device_time_us"] == e["args"]["device_time_us"]
    # The ops' device time is counted once: the drawing makes no row of its own.
    rows = per_op(prof.key_averages())
    assert rows["aten::add"][0] == 18 and rows["aten::mul"][0] == 16
    assert rows["aten::add"][1] == pytest.approx(18 * KERNEL_US, rel=0.05)


def test_a_session_that_does_not_select_privateuse1_never_calls_the_stubs(toydev: Any) -> None:
    with omniprof.profile() as prof:
        workload()
    calls = toydev.stub_calls()
    assert {k: v for k, v in calls.items() if k != "enabled"} == {}
    # Its device time (every activity, by default) is toydev's Kineto profiler's kernels.
    count, self_device, _ = per_op(prof.key_averages())["aten::add"]
    assert count == 9 and self_device >= 9 * KERNEL_US


def test_stubs_that_throw_leave_the_ops_without_device_time_and_are_named(
    toydev: Any, tmp_path: Path
) -> None:
    toydev.set_stub_mode(toydev_device.THROW)
    prof, caught = omniprof_run()
    trace = exported(prof, tmp_path)
    ranges = sum(1 for e in trace["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation"))
    # Each op and range tried twice (its start and its end), each try failed.
    expected = (
        f"pytorch stubs: {2 * ranges} call(s) to the toydev profiler stubs failed, first: "
        "toydev stubs fail on purpose (record)"
    )
    assert backend_errors(trace) == [expected]
    assert caught == [f"omniprof: backend failed: {expected}"]
    rows = per_op(prof.key_averages())
    assert (rows["aten::add"], rows["aten::mul"]) == ((9, 0, 0), (8, 0, 0))
    assert not any(e.get("cat") == "gpu_user_annotation" for e in trace["traceEvents"])


def test_an_elapsed_that_never_returns_costs_the_ops_their_device_time_not_the_trace(
    toydev: Any, tmp_path: Path
) -> None:
    toydev.set_stub_mode(toydev_device.HANG)
    try:
        prof, caught = omniprof_run(config="OMNIPROF_STUBS_ELAPSED_TIMEOUT_MSECS=300")
    finally:
        # The abandoned timing thread finishes once elapsed returns.
        toydev.release_hang()
    trace = exported(prof, tmp_path)
    ranges = sum(1 for e in trace["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation"))
    expected = (
        "pytorch stubs: 1 call(s) to the toydev profiler stubs failed, first: elapsed did not "
        f"return within 300 ms: device time resolved for 0 of {ranges} ranges, the rest have none"
    )
    assert backend_errors(trace) == [expected]
    assert caught == [f"omniprof: backend failed: {expected}"]
    rows = per_op(prof.key_averages())
    assert (rows["aten::add"], rows["aten::mul"]) == ((9, 0, 0), (8, 0, 0))


def test_stubs_not_enabled_leave_privateuse1_unrecorded_with_one_warning(toydev: Any) -> None:
    toydev.set_stub_mode(toydev_device.DISABLED)
    omniprof.profiler._warned.discard("activity:PrivateUse1")
    first, caught = omniprof_run()
    _, again = omniprof_run()
    assert len(caught) == 1 and again == []
    assert caught[0].startswith(
        "omniprof: ProfilerActivity.PrivateUse1 was selected, but nothing here records it"
    )
    assert "registerPrivateUse1Methods" in caught[0] and "REGISTER_PRIVATEUSE1_PROFILER" in caught[0]
    assert {k: v for k, v in toydev.stub_calls().items() if k != "enabled"} == {}
    assert per_op(first.key_averages())["aten::add"] == (9, 0, 0)


def test_without_a_privateuse1_backend_privateuse1_is_unrecorded_with_one_warning() -> None:
    script = (
        "import warnings, torch, omniprof\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    for _ in range(2):\n"
        "        with omniprof.profile(activities=['CPU', 'PrivateUse1']) as prof:\n"
        "            torch.ones(4).add(1)\n"
        "print(repr([str(w.message) for w in caught]))\n"
        "print(sorted(r.key for r in prof.key_averages()))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    caught, keys = out.stdout.strip().splitlines()[-2:]
    messages = eval(caught)
    assert len(messages) == 1
    assert messages[0].startswith(
        "omniprof: ProfilerActivity.PrivateUse1 was selected, but nothing here records it"
    )
    assert "aten::add" in eval(keys)
