"""``ProfilerActivity.CUDA`` through the CUPTI backend (crates/omniprof-cupti).

Without a GPU (CI), the real CUPTI sits out and says why; a simulated CUPTI and CUDA driver
(crates/omniprof-cupti/tests/sim, compiled here against the CUPTI headers PyTorch's CUDA
wheels install) then stand in for them in a child process, so that the Python side's wiring
(the backend linked into the module, ``supported_activities``, a kernel in the trace under
its user range) is checked end to end. On a GPU, ``gpu/cuda_check.py`` compares with
torch.profiler (docs/cuda.md).
"""

import json
import math
import os
import subprocess
import sys
import sysconfig
import textwrap
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

import omniprof
from omniprof import _cuda, _native

from conftest import REPO, missing, require_torch

torch = require_torch()

SIM = REPO / "crates" / "omniprof-cupti" / "tests" / "sim"


def test_without_a_gpu_cuda_sits_out_with_its_reason_and_the_trace_goes_on() -> None:
    reason = _native.cuda_unavailable_reason()
    if reason is None:
        pytest.fail("CUPTI can record here: this test is for machines without a GPU (see gpu/cuda_check.py)")
    assert reason.startswith("CUPTI sits out: ")
    assert "CUDA" not in {a.name for a in omniprof.supported_activities()}
    acts = [omniprof.ProfilerActivity.CPU, omniprof.ProfilerActivity.CUDA]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with omniprof.profile(activities=acts) as prof:
            torch.ones(4).add_(1)
    said = [str(w.message) for w in caught if "ProfilerActivity.CUDA" in str(w.message)]
    assert said == [f"omniprof: ProfilerActivity.CUDA was selected, but {reason}; the trace has no CUDA timeline"]
    assert "aten::add_" in {e.name for e in prof.events()}


def test_cuda_beside_a_running_torch_profiler_is_refused_and_torchs_trace_is_kept() -> None:
    tp = torch.profiler
    with tp.profile(activities=[tp.ProfilerActivity.CPU]) as theirs:
        torch.ones(4).mul_(2)
        with pytest.raises(omniprof.ProfilerError) as refused:
            with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU, omniprof.ProfilerActivity.CUDA]):
                pass
        torch.ones(4).mul_(3)
    assert str(refused.value) == (
        "omniprof: ProfilerActivity.CUDA was selected while torch.profiler is recording in this "
        "process; CUPTI serves one profiler at a time, and two would corrupt each other's records. "
        "Stop torch.profiler first, or profile without ProfilerActivity.CUDA"
    )
    assert [e.name for e in theirs.events() if e.name == "aten::mul_"] == ["aten::mul_", "aten::mul_"]
    # CPU alone does not touch CUPTI: it may run beside torch.profiler.
    with tp.profile(activities=[tp.ProfilerActivity.CPU]):
        with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU]) as ours:
            torch.ones(4).mul_(2)
    assert "aten::mul_" in {e.name for e in ours.events()}


def test_enable_cuda_sync_events_is_acted_on_and_other_experimental_flags_still_warn() -> None:
    from torch._C._profiler import _ExperimentalConfig

    acts = [omniprof.ProfilerActivity.CPU, omniprof.ProfilerActivity.CUDA]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        omniprof.profile(activities=acts, experimental_config=_ExperimentalConfig(enable_cuda_sync_events=True))
        omniprof.profile(activities=acts, experimental_config=_ExperimentalConfig(profile_all_threads=True))
    said = [str(w.message) for w in caught if "experimental_config" in str(w.message)]
    assert said == ["omniprof does not support experimental_config yet; it is ignored"]


def test_key_averages_rows_have_torchs_device_type() -> None:
    def workload() -> None:
        torch.ones(8, 8).mm(torch.ones(8, 8)).relu_()

    with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU]) as ours:
        workload()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as theirs:
        workload()
    mine = {r.key: r.device_type for r in ours.key_averages()}
    torchs = {r.key: r.device_type for r in theirs.key_averages()}
    assert mine == torchs
    assert set(mine.values()) == {torch.autograd.DeviceType.CPU}


def cupti_headers() -> List[str]:
    """The include directories of the CUPTI headers and cuda.h: ``OMNIPROF_CUPTI_INCLUDE``, else the
    first of ``tests/sim/include-dirs.txt``'s directories (the list the Rust tests read too) holding
    each, its relative lines under this interpreter's site-packages."""
    named = os.environ.get("OMNIPROF_CUPTI_INCLUDE")
    if named:
        return named.split(os.pathsep)
    site = sysconfig.get_paths()["purelib"]
    lines = (line.strip() for line in (SIM / "include-dirs.txt").read_text().splitlines())
    listed = [line for line in lines if line and not line.startswith("#")]
    # Relative lines first, for each site-packages, then the absolute ones, as the Rust side orders them.
    candidates = [os.path.join(site, d) for d in listed if not os.path.isabs(d)] + [d for d in listed if os.path.isabs(d)]

    def first(header: str) -> Optional[str]:
        return next((d for d in candidates if os.path.isfile(os.path.join(d, header))), None)

    cupti, cuda = first("cupti_activity.h"), first(os.path.join("crt", "host_defines.h"))
    if cupti is None or cuda is None:
        missing(f"no CUPTI headers with cuda.h in {SIM / 'include-dirs.txt'}'s directories under {site} (pip install torch brings them)")
    return [cupti, cuda]


def build_simulated(out: Path) -> Dict[str, str]:
    includes = [arg for d in cupti_headers() for arg in ("-I", d)]
    for source, name in (("cupti.c", "libcupti.so"), ("cuda.c", "libcuda.so.1")):
        subprocess.run(
            [os.environ.get("CC", "cc"), str(SIM / source), *includes, "-shared", "-fPIC", "-pthread",
             f"-Wl,-soname,{name}", "-o", str(out / name)],
            check=True,
        )
    return {"LD_LIBRARY_PATH": str(out), "OMNIPROF_CUPTI_LIBRARY": str(out / "libcupti.so")}


CHILD = textwrap.dedent(
    """
    import ctypes, json, os, sys, warnings
    import omniprof
    from omniprof import _native
    out = {"reason": _native.cuda_unavailable_reason(),
           "supported": sorted(a.name for a in omniprof.supported_activities())}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for device in ("XPU", "HPU", "PrivateUse1"):
            with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU, omniprof.ProfilerActivity[device]]):
                pass
    said = [str(w.message) for w in caught if "ProfilerActivity" in str(w.message)]
    out["warned"] = [message.split(":")[1].strip() for message in said]
    sim = ctypes.CDLL(os.environ["OMNIPROF_CUPTI_LIBRARY"], mode=os.RTLD_NOLOAD)
    name = ctypes.c_char_p(b"_ZN2at6native6kernelIfEEvPT_i")
    acts = [omniprof.ProfilerActivity.CPU, omniprof.ProfilerActivity.CUDA]
    with omniprof.profile(activities=acts) as prof:
        with omniprof.record_function("step"):
            sim.sim_launch(211, name, 7, 3000)
    prof.export_chrome_trace(sys.argv[1])
    print(json.dumps(out))
    """
)


def test_a_simulated_cupti_records_a_kernel_through_the_python_api(tmp_path: Path) -> None:
    env = dict(os.environ, **build_simulated(tmp_path))
    trace_path = tmp_path / "trace.json"
    done = subprocess.run([sys.executable, "-c", CHILD, str(trace_path)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    said: Dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    # As torch.profiler.supported_activities() on a CUDA machine with no other device: CPU
    # and CUDA. CUPTI records CUDA's kernels, not XPU's, HPU's or a PrivateUse1 backend's, so
    # asking for those says nothing records them.
    nothing = "ProfilerActivity.{} was selected, but nothing here records it"
    assert said == {
        "reason": None,
        "supported": ["CPU", "CUDA"],
        "warned": [nothing.format(device) for device in ("XPU", "HPU", "PrivateUse1")],
    }
    events = json.loads(trace_path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert [(k["name"], k["pid"], k["tid"]) for k in kernels] == [("void at::native::kernel<float>(float*, int)", 0, 7)]
    projected = [e for e in events if e.get("cat") == "gpu_user_annotation"]
    # The range spans its one kernel (the writer may widen it by a nanosecond each side, so
    # that the kernel nests in it after rounding). Timestamps near 5e12 µs read as floats
    # are only good to about a nanosecond themselves: the bound allows a float step on each.
    assert [p["name"] for p in projected] == ["step"]
    one_ns = 0.001 + 2 * math.ulp(kernels[0]["ts"])
    assert projected[0]["ts"] == pytest.approx(kernels[0]["ts"], abs=one_ns)
    assert projected[0]["dur"] == pytest.approx(kernels[0]["dur"], abs=0.0021)
    launches = [e for e in events if e.get("cat") == "cuda_runtime"]
    assert [e["name"] for e in launches] == ["cudaLaunchKernel"]
    assert launches[0]["args"]["correlation"] == kernels[0]["args"]["correlation"]
    meta = json.loads(trace_path.read_text())
    assert meta["device_type"] == "CUDA"
    assert [p["name"] for p in meta["deviceProperties"]] == ["Simulated GPU"]
