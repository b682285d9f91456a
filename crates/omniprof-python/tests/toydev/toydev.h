// toydev.h: what the toydev device library (device.cpp) offers its Python module
// (toydev.cpp): device selection, the knobs of the tests and the stubs' call counts.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace toydev {

int device_count();
int current();
void set_device(int device);
// Waits for one device's stream, or every device's when `device` is negative.
void synchronize(int device);
// Whether the device clocks ignore idle time (events then measure only kernels).
void set_strict_clock(bool on);
// How long each add/mul kernel spins before it computes, in microseconds.
void set_kernel_us(int64_t us);
// 0: stubs work; 1: every call throws; 2: disabled (as PyTorch's default stubs); 3: elapsed
// blocks until release_hang().
void set_stub_mode(int mode);
void release_hang();
// How many times each stub was called since the last reset.
std::map<std::string, int64_t> stub_calls();
void reset_stub_calls();
// 0: the Kineto profiler works; 1: configure returns null; 2: configure throws.
void set_profiler_mode(int mode);
// How many sessions the Kineto profiler's configure made since the library loaded.
int64_t profiler_sessions();

}  // namespace toydev
