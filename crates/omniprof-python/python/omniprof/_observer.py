"""The PyTorch op observer: ``csrc/observer.cpp``, built against the installed torch on first
use (``torch.utils.cpp_extension.load``, cached under ``TORCH_EXTENSIONS_DIR``) and installed
as omniprof's ``pytorch`` backend: every session (``profile()`` or an on-demand trace) then
registers it as a global ``RecordFunction`` callback while its capture window is open. It
also hands over PyTorch's PrivateUse1 profiler stubs, installed as the ``pytorch stubs``
backend (src/stubs.rs), for the sessions that select ``ProfilerActivity.PrivateUse1``, and
the Kineto profiler a PrivateUse1 backend registered with ``REGISTER_PRIVATEUSE1_PROFILER``,
installed as a plugin entry point (src/privateuse1.rs) once a backend registered one.

It is built only once the program has imported torch (a program that never does pays
nothing), and the first build, which takes tens of seconds, says so once on stderr, naming
the cache. No torch: nothing happens. Torch but no C++ compiler or ninja: one warning naming
what to install, and sessions record without PyTorch ops.

The observer puts omniprof's reporter where PyTorch keeps its own profiler's state (the
thread's debug info): on the thread that starts a session, which makes torch.compile's
compiled-region ranges appear, and with ``profile_memory`` on each thread that runs ops, to
receive the allocator's reports. Since torch.profiler refuses to start on a thread where that
slot is taken, ``torch.autograd.profiler._enable_profiler`` is wrapped to take the reporter
out of the calling thread first: a torch.profiler session then gets that thread's reports,
and the reporter comes back at the thread's next op once it stopped.
"""

import importlib.util
import os
import shutil
import sys
from types import ModuleType
from typing import Any, Optional

from . import _native, _warn

_SOURCES = [
    os.path.join(os.path.dirname(__file__), "csrc", name)
    for name in ("observer.cpp", "python_tracer.cpp", "privateuse1_profiler.cpp")
]
_NAME = "omniprof_observer"
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


def _announce_first_build(cpp_extension: ModuleType) -> None:
    """Says, on stderr, that the observer is being built when no build is cached yet."""
    try:
        directory = cpp_extension._get_build_directory(_NAME, verbose=False)
    except Exception:  # a private helper of torch's: without it, say nothing
        return
    if not any(f.startswith(_NAME) and f.endswith(".so") for f in os.listdir(directory)):
        sys.stderr.write(
            "omniprof: building the PyTorch op observer (once; it takes tens of seconds); "
            f"the build is cached in {directory} (set TORCH_EXTENSIONS_DIR to move it)\n"
        )
        sys.stderr.flush()


def _build() -> Optional[ModuleType]:
    # Only a program that has imported torch runs PyTorch ops to observe.
    if sys.modules.get("torch") is None or importlib.util.find_spec("torch") is None:
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
        _announce_first_build(cpp_extension)
        # NDEBUG as in torch's own build: the headers' debug-only checks read state that
        # only a debug build of torch keeps (RecordFunction::inputs() would always throw).
        # torch/include/kineto: the Kineto headers PyTorch's PrivateUse1 profiler registry
        # includes by bare name.
        kineto = os.path.join(os.path.dirname(sys.modules["torch"].__file__), "include", "kineto")
        return cpp_extension.load(
            name=_NAME,
            sources=_SOURCES,
            extra_cflags=["-O2", "-DNDEBUG"],
            extra_include_paths=[kineto],
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
    """The built observer, building it on first call; None without torch (imported) or a
    compiler."""
    global _module
    if _module is None:
        built = _build()
        if built is None and sys.modules.get("torch") is None:
            return None  # tried again once the program imports torch
        _module = built or False
    return _module or None


_installed = False
_wrapped_enable = False


def install() -> None:
    """Builds the observer (once) and makes it a backend of every session from now on, and
    makes torch.profiler's start take omniprof's reporter out of its thread."""
    global _installed
    if _installed:
        return
    observer = module()
    if observer is None:
        return
    # Named capsules (observer.cpp), the only thing the native module takes for them.
    _native.install_torch_observer(observer.entry_points())
    stubs_api = getattr(observer, "stubs_api", None)
    if stubs_api is not None:  # an observer built from this package's sources has it
        _native.install_torch_stubs(stubs_api())
    _wrap_torch_enable()
    _installed = True


_privateuse1_done = False


def install_privateuse1_profiler() -> None:
    """Installs the Kineto profiler a PrivateUse1 backend registered with PyTorch
    (``REGISTER_PRIVATEUSE1_PROFILER``), once one did: asked at every start until then, since
    a backend may be imported after the first session. Warns about a profiler the plugin
    loader rejected."""
    global _privateuse1_done
    if _privateuse1_done or not _installed:
        return
    entry = getattr(module(), "privateuse1_profiler", None)
    if entry is None:
        _privateuse1_done = True
        return
    capsule = entry()
    if capsule is None:
        return
    _privateuse1_done = True
    for message in _native.install_privateuse1_profiler(capsule):
        _warn.warn(message)


def _wrap_torch_enable() -> None:
    """Wraps the functions PyTorch's profilers start with (``_enable_profiler`` of
    torch.profiler, emit_nvtx and emit_itt; ``_enable_profiler_legacy`` of the legacy
    profiler), where their modules look them up, so that each first takes omniprof's reporter
    out of the calling thread."""
    global _wrapped_enable
    if _wrapped_enable:
        return
    import importlib

    observer = module()
    for module_name, name in (
        ("torch.autograd.profiler", "_enable_profiler"),
        ("torch.autograd.profiler_legacy", "_enable_profiler_legacy"),
    ):
        try:
            owner = importlib.import_module(module_name)
        except ImportError:
            continue
        enable = getattr(owner, name, None)
        if enable is None:
            continue

        def enable_without_reporter(*args: object, __enable: Any = enable, **kwargs: object) -> object:
            if observer is not None:
                observer.remove_reporter()
            return __enable(*args, **kwargs)

        setattr(owner, name, enable_without_reporter)
    _wrapped_enable = True

def stack_frames_cut() -> "tuple[int, int]":
    """(Python frames the tracer left out for depth since the process started, the depth it
    records per thread); (0, 0) without the observer."""
    observer = module() if _installed else None
    if observer is None:
        return 0, 0
    return int(observer.stack_frames_cut()), int(observer.max_stack_depth)


def announce_start() -> Optional[bool]:
    """Makes the flag PyTorch's own code checks before it emits its annotations
    (``torch.autograd.profiler._is_profiler_enabled``: torch.compile's compiled-region and
    AOTAutograd ranges) read as enabled while a session records, as torch.profiler does.
    Returns what it was (``None`` when PyTorch's ops are not observed), for
    ``announce_stop``."""
    if not _installed:
        return None
    import torch.autograd.profiler as autograd_profiler

    before = bool(autograd_profiler._is_profiler_enabled)
    autograd_profiler._is_profiler_enabled = True
    return before


def announce_stop(before: Optional[bool]) -> None:
    """Gives the flag back the value ``announce_start`` found, unless a torch.profiler
    session that started meanwhile still runs on this thread (it clears the flag itself)."""
    if before is None:
        return
    import torch
    import torch.autograd.profiler as autograd_profiler

    if not torch.autograd._profiler_enabled():
        autograd_profiler._is_profiler_enabled = before
