"""A PyTorch PrivateUse1 backend's Kineto profiler in omniprof, against PyTorch's profilers.

toydev (``toydev/device.cpp``, a PrivateUse1 device of the tests' own) registers profiler
stubs and a ``libkineto::IActivityProfiler`` with ``REGISTER_PRIVATEUSE1_PROFILER``, and
exports the same profiler class as a Kineto-ABI plugin through the plugin SDK's adapter
(``omniprof_kineto_adapter.h``). One workload is profiled four ways:

1. ``torch.autograd.profiler.profile(use_device="toydev")``: PyTorch's legacy profiler, device
   time per op from the stubs;
2. ``torch.profiler.profile(activities=[CPU, PrivateUse1])``: Kineto with toydev's profiler;
3. ``omniprof.profile(use_device="toydev")``: omniprof's stubs bridge;
4. ``omniprof.profile(activities=[CPU, PrivateUse1])``: toydev's profiler read from PyTorch's
   registry (no plugin file), and in a fresh process the same profiler loaded as a plugin file
   from ``KINETO_PLUGIN_LIB_DIR_PATH``.

(3) matches (1) per op, and (4) records the device events (2) records: the same names and
counts, on the same device rows, each linked to the same op by its External id.

torch is required: without it these tests fail, unless ``OMNIPROF_PY_ALLOW_NO_TORCH`` is set,
which skips them with the reason.
"""

import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import omniprof

from conftest import cli, every_attribute, require_torch

torch = require_torch()

import toydev_device
from toydev_device import workload

KERNEL_US = 200

# The device events of a trace, each as (category, name, its row, the op it is linked to);
# the row is the device's index for device work and "host" for a launch on the op's thread.
DeviceEvents = Counter


@pytest.fixture
def toydev() -> Iterator[Any]:
    """toydev with working stubs and profiler, strict clocks and KERNEL_US kernels."""
    ext = toydev_device.load()
    ext.set_stub_mode(toydev_device.OK)
    ext.set_profiler_mode(toydev_device.PROFILER_OK)
    ext.set_strict_clock(True)
    ext.set_kernel_us(KERNEL_US)
    yield ext
    ext.set_profiler_mode(toydev_device.PROFILER_OK)
    ext.set_strict_clock(False)
    ext.set_kernel_us(0)


def device_events(trace: Dict[str, Any]) -> DeviceEvents:
    events = trace["traceEvents"]
    ops = {e["args"]["External id"]: e["name"] for e in events if e.get("cat") == "cpu_op"}
    found: DeviceEvents = Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "privateuse1_runtime"):
            row = e["pid"] if e["cat"] == "kernel" else "host"
            found[(e["cat"], e["name"], row, ops.get(e["args"].get("External id")))] += 1
    return found


def exported(prof: Any, path: Path) -> Dict[str, Any]:
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())


def device_time_per_op(rows: Any) -> Dict[str, Tuple[int, float]]:
    return {r.key: (r.count, r.self_device_time_total) for r in rows}


# The plugin-file way, in a fresh process: the library loaded from KINETO_PLUGIN_LIB_DIR_PATH
# before the first session, and the registry's profiler of the same name then left out.
PLUGIN_FILE_SCRIPT = """
import json, sys, warnings
sys.path.insert(0, {tests!r})
import torch, omniprof
import test_privateuse1_kineto as t
import toydev_device
ext = toydev_device.load()
ext.set_strict_clock(True)
ext.set_kernel_us(t.KERNEL_US)
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    with omniprof.profile(activities=["CPU", "PrivateUse1"]) as prof:
        toydev_device.workload()
trace = t.exported(prof, __import__("pathlib").Path({out!r}))
print(json.dumps({{
    "events": [[list(k), v] for k, v in t.device_events(trace).items()],
    "backends": [b["name"] for b in trace["backends"]],
    "errors": trace.get("backend_errors", []),
    "warnings": [str(w.message) for w in caught],
    "registry_profiler": omniprof._native.privateuse1_profiler(),
}}))
"""


def events(prof: Any) -> List[Any]:
    """A profile's events (PyTorch's legacy profiler has no `events()`)."""
    return prof.function_events if isinstance(prof, torch.autograd.profiler.profile) else prof.events()


def kernels(prof: Any) -> Counter:
    """Each event with kernels: its name and its kernels' names and devices."""
    return Counter(
        (e.name, tuple((k.name, k.device) for k in e.kernels)) for e in events(prof) if e.kernels
    )


def test_four_ways_one_backend_omniprof_records_what_pytorchs_profilers_record(
    toydev: Any, tmp_path: Path
) -> None:
    with torch.autograd.profiler.profile(use_device="toydev") as legacy:
        workload()
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
    ) as kineto:
        workload()
    with omniprof.profile(use_device="toydev") as stubs:
        workload()
    with omniprof.profile(
        activities=[omniprof.ProfilerActivity.CPU, omniprof.ProfilerActivity.PrivateUse1]
    ) as registry:
        workload()

    # (1) and (3): the same device time per op, from the stubs.
    theirs = device_time_per_op(legacy.key_averages())
    ours = device_time_per_op(stubs.key_averages())
    for op in ("aten::add", "aten::mul", "toy_step"):
        assert ours[op][0] == theirs[op][0]
        assert ours[op][1] == pytest.approx(theirs[op][1], rel=0.05), op
    assert ours["aten::add"][1] == pytest.approx(9 * KERNEL_US, rel=0.05)

    # (2) and (4): the same device events, linked to the same ops.
    expected = device_events(exported(kineto, tmp_path / "torch.json"))
    assert expected == Counter(
        {
            ("kernel", "toydev_add_kernel", 0, "aten::add"): 9,
            ("kernel", "toydev_mul_kernel", 0, "aten::mul"): 8,
            ("privateuse1_runtime", "toydevLaunchKernel", "host", "aten::add"): 9,
            ("privateuse1_runtime", "toydevLaunchKernel", "host", "aten::mul"): 8,
        }
    )
    trace = exported(registry, tmp_path / "registry.json")
    assert device_events(trace) == expected
    assert trace.get("backend_errors", []) == []
    assert omniprof._native.privateuse1_profiler() == "toydev"
    # The stubs left the device to the profiler: no op was timed through them.
    assert not any(e.get("cat") == "gpu_user_annotation" for e in trace["traceEvents"])
    # Device time per op from the kernels each op launched.
    rows = device_time_per_op(registry.key_averages())
    assert rows["aten::add"][0] == 9 and rows["aten::add"][1] >= 9 * KERNEL_US

    # Each op's event lists the kernels it launched (`FunctionEvent.kernels`), as under
    # PyTorch's profilers: from the device timeline, (2) and (4), and one per op timed
    # through the stubs, (1) and (3).
    assert kernels(kineto) == Counter(
        {("aten::add", (("toydev_add_kernel", 0),)): 9, ("aten::mul", (("toydev_mul_kernel", 0),)): 8}
    )
    assert kernels(registry) == kernels(kineto)
    assert kernels(stubs) == kernels(legacy)
    assert sum(kernels(legacy).values()) >= 17
    for prof in (kineto, registry, legacy, stubs):
        durations = [k.duration for e in events(prof) if e.name == "aten::add" for k in e.kernels]
        assert len(durations) == 9 and min(durations) >= KERNEL_US * 0.95, durations

    # (4) again, from the plugin file.
    script = PLUGIN_FILE_SCRIPT.format(tests=str(Path(__file__).parent), out=str(tmp_path / "file.json"))
    env = dict(os.environ, KINETO_PLUGIN_LIB_DIR_PATH=str(Path(toydev_device.library()).parent))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert Counter({tuple(k): v for k, v in got["events"]}) == expected
    assert got["errors"] == [] and got["warnings"] == []
    # Recorded once: by the plugin file, not also by the registry's copy of the profiler.
    assert got["backends"].count("toydev") == 1 and got["registry_profiler"] is None


def test_device_events_answer_device_type_flows_and_metadata_as_under_torch_profiler(toydev: Any, tmp_path: Path) -> None:
    # Code that reads a backend's kernels from events() (their device type, the flow from
    # their launch, the activity's metadata) reads the same under both profilers.
    from torch.profiler import _ExperimentalConfig

    def described(module: Any, expose: bool) -> Counter:
        config = _ExperimentalConfig(expose_kineto_event_metadata=True) if expose else None
        with module.profile(
            activities=[module.ProfilerActivity.CPU, module.ProfilerActivity.PrivateUse1], experimental_config=config
        ) as prof:
            workload()
        device_events = [e for e in prof.events() if e.name.startswith("toydev")]
        launches = {e.flow_id for e in device_events if e.flow_start}
        found: Counter = Counter()
        for e in device_events:
            metadata = dict(e.metadata or {})
            # toydev numbers its flows and correlations over the process, and both profilers
            # run here: each must be the flow that joins the kernel to its launch.
            assert metadata.pop("correlation", e.flow_id) == e.flow_id
            assert e.flow_id in launches
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                legacy = e.event_metadata
            found[(e.name, str(e.device_type), e.flow_type, e.flow_start, repr(sorted(metadata.items())), getattr(legacy, "stream", None))] += 1
        return found

    for expose in (False, True):
        expected = described(torch.profiler, expose)
        assert described(omniprof, expose) == expected
    # Every other attribute of every event and row, less the device times of each session.
    device_times = tuple(
        f"{prefix}{kind}_time{suffix}"
        for prefix in ("", "self_")
        for kind in ("device", "cuda")
        for suffix in ("", "_str", "_total", "_total_str")
    )
    profiles = []
    for module in (torch.profiler, omniprof):
        with module.profile(activities=[module.ProfilerActivity.CPU, module.ProfilerActivity.PrivateUse1]) as prof:
            workload()
        profiles.append(prof)
    theirs, ours = profiles
    assert every_attribute(ours.events(), device_times) == every_attribute(theirs.events(), device_times)
    rows_besides = (*device_times, "on_device")
    assert every_attribute(ours.key_averages(), rows_besides) == every_attribute(theirs.key_averages(), device_times)
    # And torch.profiler's trace of it, read back in this process: the device is the one the
    # backend named itself (the file says only `privateuse1_runtime`), as `use_device` is.
    theirs.export_chrome_trace(str(tmp_path / "toydev.json"))
    loaded = omniprof.load_trace(tmp_path / "toydev.json")
    assert every_attribute(loaded.events(), device_times) == every_attribute(theirs.events(), device_times)
    assert every_attribute(loaded.key_averages(), rows_besides) == every_attribute(theirs.key_averages(), device_times)
    assert "Self TOYDEV" in loaded.key_averages().table()
    kernel = ("toydev_add_kernel", "DeviceType.TOYDEV", 2, False, "[('device', 0), ('stream', 7)]", 7)
    assert expected[kernel] == 9
    assert expected[("toydevLaunchKernel", "DeviceType.CPU", 2, True, "[]", None)] == 17


def test_omniprof_summary_of_pytorchs_trace_gives_each_op_pytorchs_device_time(
    toydev: Any, tmp_path: Path
) -> None:
    """PyTorch's own table as the reference for which op device time belongs to: ``omniprof
    summary`` of the trace a Kineto session with toydev's profiler exported gives each host
    row the calls, self device time and device total of that session's ``key_averages()``."""
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
    ) as kineto:
        workload()
    path = tmp_path / "torch.json"
    kineto.export_chrome_trace(str(path))
    theirs = {
        r.key: (r.count, r.self_device_time_total, r.device_time_total)
        for r in kineto.key_averages()
        if r.device_type == torch.autograd.DeviceType.CPU
    }
    out = subprocess.run(
        [str(cli()), "summary", str(path), "--format", "json", "--row-limit", "-1"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    ours = {
        r["name"]: (r["count"], r["self_device_time_total_us"], r["device_time_total_us"])
        for r in json.loads(out.stdout)["rows"]
        if not r["on_device"]
    }
    assert sorted(ours) == sorted(theirs)
    for name, (count, own, total) in theirs.items():
        assert ours[name][0] == count, name
        assert ours[name][1:] == pytest.approx((own, total), abs=0.002), name
    assert theirs["aten::add"][1] >= 9 * KERNEL_US and theirs["aten::mul"][1] >= 8 * KERNEL_US


def test_omniprof_plugins_check_passes_the_adapted_profiler(toydev: Any) -> None:
    library = toydev_device.library()
    run = subprocess.run([str(cli()), "plugins", "check", library], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    verdict = [line.split() for line in run.stdout.splitlines() if library in line]
    assert len(verdict) == 1 and verdict[0][1] == "toydev" and verdict[0][-1] == "PASS"


def recorded_with(toydev: Any, mode: int, tmp_path: Path) -> Tuple[Dict[str, Any], List[str], Any]:
    toydev.set_profiler_mode(mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with omniprof.profile(activities=["CPU", "PrivateUse1"]) as prof:
            workload()
    return exported(prof, tmp_path / "trace.json"), [str(w.message) for w in caught], prof


@pytest.mark.parametrize(
    "mode, why",
    [
        (toydev_device.CONFIGURE_NULL, "toydev: configure returned no session"),
        (toydev_device.CONFIGURE_THROWS, "configure threw: toydev configure fails on purpose"),
    ],
)
def test_a_profiler_whose_configure_fails_leaves_the_device_out_and_is_named(
    toydev: Any, tmp_path: Path, mode: int, why: str
) -> None:
    trace, caught, prof = recorded_with(toydev, mode, tmp_path)
    expected = f"toydev: configure failed: profilerCreate returned -1: {why}"
    assert trace["backend_errors"] == [expected]
    assert caught == [f"omniprof: backend failed: {expected}"]
    assert device_events(trace) == Counter()
    # The host side is whole.
    assert device_time_per_op(prof.key_averages())["aten::add"] == (9, 0)
