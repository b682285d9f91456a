// omniprof's Python tracer (python_tracer.cpp): records Python calls as frames while a
// session with stacks records.

#pragma once

#include <cstddef>
#include <cstdint>

#include "table.h"

namespace omniprof::python_tracer {

// Frames recorded per thread at most: deeper calls are counted (cut_frames()), not recorded.
constexpr size_t kMaxDepth = 1024;

// Starts tracing every Python thread, recording through `table`. Takes the GIL itself, from
// any thread; throws nothing.
void start(const Table* table) noexcept;

// The capture window opened: each thread begins the frames on its stack that were not
// recorded (pushed during a warm-up, when the recorder does not record) at its next event.
// Lock-free; any thread.
void window_opened() noexcept;

// Stops tracing (frames still open end with the trace's window). Takes the GIL itself.
void stop() noexcept;

// Frames not recorded because their thread's stack was deeper than the tracer records, since
// the process started.
uint64_t cut_frames() noexcept;

}  // namespace omniprof::python_tracer
