// The toydev Python module: the device library (device.cpp) to Python, through toydev.h.
// Kept apart so that the library itself needs no Python and loads as a plugin anywhere.

#include <torch/extension.h>

#include "toydev.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("device_count", &toydev::device_count);
  m.def("current_device", &toydev::current);
  m.def("set_device", &toydev::set_device);
  m.def("synchronize", &toydev::synchronize, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("set_strict_clock", &toydev::set_strict_clock,
        "Whether the device clocks ignore idle time (events then measure only kernels).");
  m.def("set_kernel_us", &toydev::set_kernel_us,
        "How long each add/mul kernel spins before it computes, in microseconds.");
  m.def("set_stub_mode", &toydev::set_stub_mode,
        "0: stubs work; 1: every call throws; 2: disabled (as PyTorch's default stubs); "
        "3: elapsed blocks until release_hang().");
  m.def("release_hang", &toydev::release_hang);
  m.def("stub_calls", &toydev::stub_calls, "How many times each stub was called since the last reset.");
  m.def("reset_stub_calls", &toydev::reset_stub_calls);
  m.def("set_profiler_mode", &toydev::set_profiler_mode,
        "0: the Kineto profiler works; 1: its configure returns null; 2: its configure throws.");
  m.def("profiler_sessions", &toydev::profiler_sessions,
        "How many sessions the Kineto profiler made since the library loaded.");
}
