"""What omniprof does around CUDA sessions, where the Python side knows more than the native
backend (``omniprof-cupti``): where pip put ``libcupti``, whether torch.profiler is recording,
and how to wait for the GPU.

The backend itself records through CUPTI's activity API, which is one per process: CUPTI
keeps one set of buffer callbacks and one set of enabled kinds. So a session that asks for
CUDA while torch.profiler records is refused, instead of each taking the other's records.
"""

import glob
import os
import sys
from typing import List, Optional

from . import _native

# Read by the backend (crates/omniprof-cupti/src/library.rs) when it first looks for CUPTI.
_SEARCH_PATH_ENV = "OMNIPROF_CUPTI_SEARCH_PATH"


def cupti_dirs() -> List[str]:
    """The ``lib`` directories of the ``nvidia`` wheels on ``sys.path`` that hold a
    ``libcupti``: where PyTorch's CUDA wheels have pip put it (``nvidia/cu13/lib``,
    ``nvidia/cuda_cupti/lib``), searched as PyTorch searches them."""
    found: List[str] = []
    for entry in sys.path:
        if not entry or not os.path.isdir(os.path.join(entry, "nvidia")):
            continue
        for lib in sorted(glob.glob(os.path.join(entry, "nvidia", "*", "lib", "libcupti.so*"))):
            folder = os.path.dirname(lib)
            if folder not in found:
                found.append(folder)
    return found


def set_search_path() -> None:
    """Tells the backend where pip's CUPTI is, unless the user already said."""
    if _SEARCH_PATH_ENV not in os.environ:
        dirs = cupti_dirs()
        if dirs:
            os.environ[_SEARCH_PATH_ENV] = os.pathsep.join(dirs)


def unavailable_reason() -> Optional[str]:
    """Why CUDA activity cannot be recorded here, or ``None``."""
    return _native.cuda_unavailable_reason()


def torch_profiler_running() -> bool:
    """Whether a torch.profiler (Kineto or legacy) session runs in this process."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch._C._autograd._profiler_enabled())
    except (AttributeError, RuntimeError):
        return False


def refusal() -> Optional[str]:
    """The message refusing a CUDA session now, or ``None`` when it may start."""
    if not torch_profiler_running():
        return None
    return (
        "omniprof: ProfilerActivity.CUDA was selected while torch.profiler is recording in "
        "this process; CUPTI serves one profiler at a time, and two would corrupt each "
        "other's records. Stop torch.profiler first, or profile without "
        "ProfilerActivity.CUDA"
    )


def synchronize() -> None:
    """Waits for the GPU, as torch.profiler does when it stops, so that work launched in
    the window finishes inside it. Nothing when CUDA is not initialized."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except (AttributeError, RuntimeError):
        pass
