"""The toydev PrivateUse1 device (``toydev/toydev.cpp``), built on first use with
``torch.utils.cpp_extension.load`` (cached under ``TORCH_EXTENSIONS_DIR``) and installed as
``torch.toydev``: PrivateUse1 renamed to ``toydev``, with the device module the legacy
profiler synchronizes at its exit."""

import os
from types import ModuleType
from typing import Optional

import torch

_SOURCE = os.path.join(os.path.dirname(__file__), "toydev", "toydev.cpp")
_module: Optional[ModuleType] = None

NAME = "toydev"
OK, THROW, DISABLED, HANG = 0, 1, 2, 3


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
        ext = cpp_extension.load(name="omniprof_toydev", sources=[_SOURCE], extra_cflags=["-O2", "-DNDEBUG"])
        if torch._C._get_privateuse1_backend_name() != NAME:
            torch.utils.rename_privateuse1_backend(NAME)
        torch._register_device_module(NAME, _DeviceModule(ext))
        _module = ext
    return _module
