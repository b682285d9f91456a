"""A dynamic plugin taking part in a trace taken from Python: the C sample plugin
(``plugins/sample-c``), built here with ``cc`` and found through ``KINETO_PLUGIN_LIB_DIR_PATH``,
contributes its device events, and the correlation ids it is pushed are those of the PyTorch
ops the observer records, so its work links to the op that was running.

The plugin directory is read once per process, so the profiled workload runs in a child
interpreter.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    if os.environ.get("OMNIPROF_PY_ALLOW_NO_TORCH"):
        pytest.skip("torch is not installed (OMNIPROF_PY_ALLOW_NO_TORCH is set)", allow_module_level=True)
    raise

# The flags the Rust tests build the C plugins with (crates/test-support/src/plugins.rs).
C_FLAGS = ["-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-fvisibility=hidden"]

WORKLOAD = """
import sys, torch, omniprof
with omniprof.profile() as prof:
    x = torch.ones(8)
    for _ in range(3):
        x = torch.relu(x.add(1))
prof.export_chrome_trace(sys.argv[1])
"""


def build_plugin(source: Path, out: Path) -> Path:
    cc = shutil.which(os.environ.get("CC", "cc"))
    assert cc is not None, "a C compiler (cc) is needed to build the plugins"
    subprocess.run(
        [cc, *C_FLAGS, "-I", str(REPO / "crates/omniprof-plugin-sys/include"), "-o", str(out),
         str(source)],
        check=True,
    )
    return out


def build_sample(out_dir: Path) -> Path:
    return build_plugin(REPO / "plugins/sample-c/sample_plugin.c", out_dir / "libsample_plugin.so")


def test_a_plugin_in_the_plugin_dir_links_its_work_to_the_pytorch_op_running(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    build_sample(plugins)
    trace_path = tmp_path / "with_plugin.pt.trace.json"
    env = dict(os.environ, KINETO_PLUGIN_LIB_DIR_PATH=str(plugins))
    subprocess.run([sys.executable, "-c", WORKLOAD, str(trace_path)], check=True, env=env)

    events = json.loads(trace_path.read_text())["traceEvents"]
    ops = {e["args"]["External id"]: e["name"] for e in events
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    assert any(name.startswith("aten::") for name in ops.values()), "no PyTorch ops were observed"

    launch = [e for e in events if e.get("name") == "sampleLaunchKernel"]
    kernel = [e for e in events if e.get("name") == "sample_kernel"]
    assert len(launch) == 1 and len(kernel) == 1, "the plugin's launch and kernel are in the trace"
    args = launch[0]["args"]
    # Every observed op was pushed to the plugin's session and popped again.
    assert args["pushed_correlations"] >= len(ops) > 0
    assert args["pushed_correlations"] == args["popped_correlations"]
    # The last id it was pushed is a PyTorch op of this trace: its work links to that op.
    assert ops.get(args["last_pushed_correlation"], "").startswith("aten::"), args
    assert kernel[0]["pid"] == 3, "the kernel sits on the plugin's device row"


def test_a_backend_that_fails_is_a_runtime_warning_naming_it(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    build_plugin(REPO / "plugins/broken/create_error.c", plugins / "libcreate_error.so")
    env = dict(os.environ, KINETO_PLUGIN_LIB_DIR_PATH=str(plugins))
    workload = (
        "import warnings, omniprof\n"
        "warnings.simplefilter('always')\n"
        "with omniprof.profile() as prof:\n"
        "    pass\n"
        "print(len(prof.key_averages()))\n"
    )
    run = subprocess.run([sys.executable, "-c", workload], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    warned = [line for line in run.stderr.splitlines() if "omniprof: backend failed:" in line]
    assert len(warned) == 1, run.stderr
    assert "RuntimeWarning" in warned[0] and "CreateError" in warned[0], warned[0]
    # Attributed to the user's `with` line, whose exit stopped the profiler.
    assert warned[0].startswith("<string>:3: "), warned[0]
