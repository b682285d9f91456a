// omniprof's PyTorch op observer: a global RecordFunction callback that records every op,
// autograd node and torch.profiler.record_function range through omniprof's recorder.
//
// Built against the installed torch on first use by torch.utils.cpp_extension (see
// omniprof/_observer.py). Python hands the addresses of `attach` and `detach` below to
// omniprof's native module, which makes the observer a backend (src/observer.rs): every
// session, synchronous or on-demand, attaches it when its capture window opens and detaches
// it when it closes. The callbacks call the recorder's C function table directly, with no
// Python on the path, and keep no state of their own per thread: an op or autograd node
// begins and ends on one thread, innermost first, so it is pushed on the recorder's
// per-thread stack keyed by its RecordFunction and popped at its end. A user range may end
// on another thread (async ops), so it lives in its ObserverContext and is ended there.

#include <ATen/record_function.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace {

// Mirrors omniprof-python's `RecorderTable` (src/observer.rs).
struct Table {
  uint32_t version;
  uint32_t range_slot_size;
  void (*push_op)(const char* name, const void* key);
  void (*push_op_with_shapes)(const char* name, const void* key, const int64_t* dims,
                              const size_t* ranks, size_t inputs);
  void (*pop_op)(const void* key);
  uint8_t (*begin_user)(const char* name, const int64_t* dims, const size_t* ranks,
                        size_t inputs, void* out);
  void (*end_user)(void* range);
};
constexpr uint32_t kTableVersion = 4;
constexpr uint32_t kRangeSlotSize = 32;

// A user range.
struct Context : at::ObserverContext {
  alignas(8) unsigned char range[kRangeSlotSize];
};

// Written only while no callback is registered (by `attach`, one session at a time).
const Table* table = nullptr;
bool record_shapes = false;
std::optional<at::CallbackHandle> handle;

// One thread's input shapes of the op starting, flattened for the recorder.
struct Shapes {
  std::vector<int64_t> dims;
  std::vector<size_t> ranks;
};

// The input shapes of `fn`, like torch.profiler: a tensor's sizes, [] for anything else;
// none when the op has no inputs to give. Reused per thread, so recording shapes allocates
// nothing after warm-up.
const Shapes& input_shapes(const at::RecordFunction& fn) {
  thread_local Shapes shapes;
  shapes.dims.clear();
  shapes.ranks.clear();
  try {
    for (const c10::IValue& input : fn.inputs()) {
      if (input.isTensor() && input.toTensor().defined()) {
        auto sizes = input.toTensor().sizes();
        shapes.dims.insert(shapes.dims.end(), sizes.begin(), sizes.end());
        shapes.ranks.push_back(sizes.size());
      } else {
        shapes.ranks.push_back(0);
      }
    }
  } catch (...) {
    shapes.dims.clear();
    shapes.ranks.clear();
  }
  return shapes;
}

// Out of line, so the common paths (ops without shapes) keep a small frame.
__attribute__((noinline)) std::unique_ptr<at::ObserverContext> begin_user(
    const at::RecordFunction& fn) {
  auto ctx = std::make_unique<Context>();
  uint8_t begun;
  if (record_shapes) {
    const Shapes& s = input_shapes(fn);
    begun = table->begin_user(fn.name(), s.dims.data(), s.ranks.data(), s.ranks.size(),
                              ctx->range);
  } else {
    begun = table->begin_user(fn.name(), nullptr, nullptr, 0, ctx->range);
  }
  if (!begun) {
    return nullptr;
  }
  return ctx;
}

__attribute__((noinline)) void push_op_with_shapes(const at::RecordFunction& fn) {
  const Shapes& s = input_shapes(fn);
  table->push_op_with_shapes(fn.name(), &fn, s.dims.data(), s.ranks.data(), s.ranks.size());
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    return begin_user(fn);
  }
  if (record_shapes) {
    push_op_with_shapes(fn);
  } else {
    table->push_op(fn.name(), &fn);
  }
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (ctx != nullptr) {
    table->end_user(static_cast<Context*>(ctx)->range);
  } else if (fn.scope() != at::RecordScope::USER_SCOPE) {
    table->pop_op(&fn);
  }
}

// What `attach` returns; mirrored by src/observer.rs.
enum AttachStatus : int32_t { kAttached = 0, kAlreadyAttached = 1, kTableMismatch = 2, kFailed = 3 };

// Registers the callbacks recording through `t` (with input shapes when `shapes`). Called by
// the session engine, one session at a time, so the globals it writes are never written
// concurrently; no C++ exception leaves it (its caller is Rust).
int32_t attach(const Table* t, uint8_t shapes) noexcept {
  if (handle) {
    return kAlreadyAttached;
  }
  if (t->version != kTableVersion || t->range_slot_size > kRangeSlotSize) {
    return kTableMismatch;
  }
  try {
    table = t;
    record_shapes = shapes != 0;
    handle = at::addGlobalCallback(
        at::RecordFunctionCallback(on_start, on_end)
            .needsInputs(record_shapes)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                     at::RecordScope::USER_SCOPE}));
    return kAttached;
  } catch (...) {
    return kFailed;
  }
}

// Removes the callbacks (if registered). Ops begun before keep their end callback, which
// ends their range as usual.
void detach() noexcept {
  if (handle) {
    try {
      at::removeCallback(*handle);
    } catch (...) {
      // Nothing to undo: the handle is dropped either way.
    }
    handle.reset();
  }
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def(
      "entry_points",
      [] {
        return pybind11::make_tuple(reinterpret_cast<uintptr_t>(&attach),
                                    reinterpret_cast<uintptr_t>(&detach));
      },
      "The addresses of attach(table, shapes) and detach(), for omniprof's native module.");
  m.def("registered", [] { return handle.has_value(); },
        "Whether the callback is registered.");
  m.def("torch_has_callbacks", [] { return at::hasGlobalCallbacks(); },
        "Whether PyTorch has any global RecordFunction callback registered.");
}
