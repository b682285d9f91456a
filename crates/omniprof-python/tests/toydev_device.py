"""The toydev PrivateUse1 device, built on first use with ``torch.utils.cpp_extension.load``
(cached under ``TORCH_EXTENSIONS_DIR``) and installed as ``torch.toydev``: PrivateUse1
renamed to ``toydev``, with the device module the legacy profiler synchronizes at its exit.

Two builds: the device library (``toydev/device.cpp``: ops, profiler stubs, the Kineto
profiler, registered with PyTorch and exported as a Kineto-ABI plugin through
``omniprof_kineto_adapter.h``), which needs no Python so that omniprof's CLI can load it as a
plugin, and the Python module over it (``toydev/toydev.cpp``)."""

import os
from types import ModuleType
from typing import Optional

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
_DEVICE_SOURCE = os.path.join(_HERE, "toydev", "device.cpp")
_MODULE_SOURCE = os.path.join(_HERE, "toydev", "toydev.cpp")
# The plugin SDK's headers (omniprof_kineto_adapter.h, omniprof_plugin.h).
SDK_INCLUDE = os.path.join(_HERE, "..", "..", "omniprof-plugin-sys", "include")
_DEVICE_NAME = "omniprof_toydev_device"
_module: Optional[ModuleType] = None
_library: Optional[str] = None

NAME = "toydev"
OK, THROW, DISABLED, HANG = 0, 1, 2, 3
# The Kineto profiler's modes (set_profiler_mode).
PROFILER_OK, CONFIGURE_NULL, CONFIGURE_THROWS = 0, 1, 2


class _DeviceModule:
    """``torch.toydev``: what PyTorch looks up on a PrivateUse1 backend's module."""

    def __init__(self, ext: ModuleType) -> None:
        self._ext = ext

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return int(self._ext.device_count())

    def current_device(self) -> int:
        return int(self._ext.current_device())

    def set_device(self, device: int) -> None:
        self._ext.set_device(device)

    def synchronize(self, device: int = -1) -> None:
        self._ext.synchronize(device)

    def is_initialized(self) -> bool:
        return True

    def _is_in_bad_fork(self) -> bool:
        return False

    def manual_seed_all(self, seed: int) -> None:
        pass


def load() -> ModuleType:
    """Builds (once) and installs toydev; returns the extension module."""
    global _module
    if _module is None:
        import torch.utils.cpp_extension as cpp_extension

        from omniprof import _observer

        _observer._put_ninja_on_path()
        torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
        kineto_include = os.path.join(os.path.dirname(torch.__file__), "include", "kineto")
        flags = ["-O2", "-DNDEBUG"]
        # The library: loaded here (its registrations run), found by the module through its
        # rpath, and loadable without Python (torch's own libraries through the rpath).
        cpp_extension.load(
            name=_DEVICE_NAME,
            sources=[_DEVICE_SOURCE],
            extra_cflags=flags,
            extra_include_paths=[SDK_INCLUDE, kineto_include],
            extra_ldflags=["-Wl,--as-needed", f"-Wl,-rpath,{torch_lib}"],
            is_python_module=False,
        )
        build_dir = cpp_extension._get_build_directory(_DEVICE_NAME, verbose=False)
        global _library
        _library = os.path.join(build_dir, f"{_DEVICE_NAME}.so")
        ext = cpp_extension.load(
            name="omniprof_toydev",
            sources=[_MODULE_SOURCE],
            extra_cflags=flags,
            extra_ldflags=[f"-L{build_dir}", f"-l:{_DEVICE_NAME}.so", f"-Wl,-rpath,{build_dir}"],
        )
        if torch._C._get_privateuse1_backend_name() != NAME:
            torch.utils.rename_privateuse1_backend(NAME)
        torch._register_device_module(NAME, _DeviceModule(ext))
        _module = ext
    return _module


def workload(device: str = NAME) -> None:
    """8 adds and 8 muls, then an add inside a record_function range, on `device`: the
    workload the PrivateUse1 tests profile."""
    a = torch.ones(16).to(device)
    b = torch.full((16,), 2.0).to(device)
    torch.toydev.synchronize()
    for _ in range(8):
        c = a + b
        c = c * b
    with torch.autograd.profiler.record_function("toy_step"):
        c = c + a
    torch.toydev.synchronize()


def library() -> str:
    """The device library's path (a Kineto-ABI plugin); builds toydev first if needed."""
    load()
    assert _library is not None
    return _library
