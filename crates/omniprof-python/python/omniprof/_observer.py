"""The PyTorch op observer: ``csrc/observer.cpp``, built against the installed torch on first
use (``torch.utils.cpp_extension.load``, cached under ``TORCH_EXTENSIONS_DIR``) and installed
as omniprof's ``pytorch`` backend: every session (``profile()`` or an on-demand trace) then
registers it as a global ``RecordFunction`` callback while its capture window is open.

No torch: nothing happens. Torch but no C++ compiler or ninja: one warning naming what to
install, and sessions record without PyTorch ops.
"""

import importlib.util
import os
import shutil
import sys
from types import ModuleType
from typing import Optional

from . import _native, _warn

_SOURCE = os.path.join(os.path.dirname(__file__), "csrc", "observer.cpp")
# The built module, False once building failed (so it is tried, and warned about, once).
_module: "Optional[ModuleType] | bool" = None


def _put_ninja_on_path() -> None:
    """torch runs ``ninja`` from PATH. A ninja installed by pip into this interpreter's
    environment is not on it when the environment is not activated: add its directory."""
    if shutil.which("ninja") is not None:
        return
    for candidate in (os.path.dirname(sys.executable), _pip_ninja_dir()):
        if candidate and os.access(os.path.join(candidate, "ninja"), os.X_OK):
            os.environ["PATH"] = candidate + os.pathsep + os.environ.get("PATH", "")
            return


def _pip_ninja_dir() -> Optional[str]:
    try:
        import ninja  # type: ignore[import-not-found]
    except ImportError:
        return None
    return getattr(ninja, "BIN_DIR", None)


def _build() -> Optional[ModuleType]:
    if importlib.util.find_spec("torch") is None:
        return None
    import torch.utils.cpp_extension as cpp_extension

    _put_ninja_on_path()

    missing = []
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        missing.append("a C++ compiler (e.g. apt install g++)")
    try:
        cpp_extension.verify_ninja_availability()
    except RuntimeError:
        missing.append("ninja (pip install ninja)")
    try:
        if missing:
            raise RuntimeError("missing " + " and ".join(missing))
        # NDEBUG as in torch's own build: the headers' debug-only checks read state that
        # only a debug build of torch keeps (RecordFunction::inputs() would always throw).
        return cpp_extension.load(
            name="omniprof_observer", sources=[_SOURCE], extra_cflags=["-O2", "-DNDEBUG"]
        )
    except Exception as e:  # any build failure: warn once, keep profiling
        advice = (
            f"Install {' and '.join(missing)} and profile again."
            if missing
            # Built but not loadable, or the compiler refused it: a stale or broken build
            # is rebuilt from scratch once it is removed.
            else "Removing the omniprof_observer build under TORCH_EXTENSIONS_DIR "
            "(default ~/.cache/torch_extensions) makes the next session build it anew."
        )
        _warn.warn(
            "omniprof: PyTorch ops are not recorded: building the op observer failed "
            f"({e}). {advice}"
        )
        return None


def module() -> Optional[ModuleType]:
    """The built observer, building it on first call; None without torch or a compiler."""
    global _module
    if _module is None:
        _module = _build() or False
    return _module or None


_installed = False


def install() -> None:
    """Builds the observer (once) and makes it a backend of every session from now on."""
    global _installed
    if _installed:
        return
    observer = module()
    if observer is not None:
        _native.install_torch_observer(*observer.entry_points())
    _installed = True
