// omniprof's PyTorch op observer: a global RecordFunction callback that records every op,
// autograd node and torch.profiler.record_function range through omniprof's recorder.
//
// Built against the installed torch on first use by torch.utils.cpp_extension (see
// omniprof/_observer.py). Python hands the addresses of `attach` and `detach` below to
// omniprof's native module, which makes the observer a backend (src/observer.rs): every
// session, synchronous or on-demand, attaches it when its capture window opens and detaches
// it when it closes. The callbacks call the recorder's C function table directly, with no
// Python on the path. Each op's range lives in its ObserverContext, so an op whose end
// callback runs on another thread (async ops) is ended there correctly.

#include <ATen/record_function.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace {

// Mirrors omniprof-python's `RecorderTable` (src/observer.rs).
struct Table {
  uint32_t version;
  uint32_t range_slot_size;
  uint32_t (*intern)(const char* name, size_t name_len, uint8_t user);
  uint8_t (*begin)(uint8_t user, uint32_t name, void* out);
  uint8_t (*begin_with_shapes)(uint8_t user, uint32_t name, const int64_t* dims,
                               const size_t* ranks, size_t inputs, void* out);
  void (*end)(void* range);
};
constexpr uint32_t kTableVersion = 3;
constexpr uint32_t kRangeSlotSize = 32;

// A per-thread cache of interned names keyed by the name's address, so the common case (an
// op's schema name, whose address never changes) costs a compare instead of hashing. The
// text is compared too: a dynamic name (a record_function string) may reuse an address. A
// user range's id is good for its session and the next only (see `intern` in
// src/observer.rs), so a thread drops its cache when it sees a new attachment.
struct CachedName {
  const char* ptr = nullptr;
  uint32_t len = 0;
  uint32_t id = 0;
  // The name and its terminating NUL.
  char text[48] = {};
};
constexpr size_t kNameSlots = 256;

struct Context;

// Everything a callback keeps per thread, in one thread_local: in a library loaded at run
// time each thread_local access is a call into the dynamic loader, so a callback makes one.
// Constant-initialized (every member has a constant initializer) and trivially destructible,
// so no access pays an initialization check.
struct ThreadState {
  // Recycled contexts, so an op costs no malloc/free pair once warm. At most kMaxFree are
  // kept, and left behind when the thread exits.
  Context* free_head = nullptr;
  uint32_t free_count = 0;
  // Start callbacks run on this thread: lets a test see that nothing fires after a session.
  uint64_t calls = 0;
  // The attachment the cached names were interned under.
  uint32_t names_generation = 0;
  CachedName names[kNameSlots];
};
constexpr uint32_t kMaxFree = 256;
thread_local ThreadState thread_state;

// This thread's state, looked up once: the compiler would otherwise repeat the loader call
// after each call it cannot see into, rather than keep the address in a register. The empty
// asm hides where the pointer came from, so it can only be kept.
ThreadState* this_thread() {
  ThreadState* t = &thread_state;
  asm("" : "+r"(t));
  return t;
}

// An op's range. One freed on another thread than its start (an async end) joins that
// thread's free list.
struct Context : at::ObserverContext {
  alignas(8) unsigned char range[kRangeSlotSize];
  Context* next_free = nullptr;

  static Context* make(ThreadState& t) {
    if (t.free_head == nullptr) {
      return new Context;
    }
    Context* c = t.free_head;
    t.free_head = c->next_free;
    --t.free_count;
    return new (c) Context;
  }

  static void operator delete(void* p) {
    ThreadState* t = this_thread();
    if (t->free_count >= kMaxFree) {
      ::operator delete(p);
      return;
    }
    // The object is destroyed: its storage is reused as a list node.
    auto c = static_cast<Context*>(p);
    c->next_free = t->free_head;
    t->free_head = c;
    ++t->free_count;
  }
};

// Written only while no callback is registered (by `attach`, one session at a time).
const Table* table = nullptr;
bool record_shapes = false;
// Counts attachments, from 1: a thread's cached names from an earlier one are dropped.
uint32_t generation = 0;
std::optional<at::CallbackHandle> handle;

uint32_t name_id(ThreadState& t, const char* name, uint8_t user) {
  if (t.names_generation != generation) {
    t.names_generation = generation;
    for (CachedName& cached : t.names) {
      cached.ptr = nullptr;
    }
  }
  CachedName& slot = t.names[(reinterpret_cast<uintptr_t>(name) >> 3) % kNameSlots];
  // Comparing the terminating NUL too tells a longer name apart; strncmp stops at the first
  // difference, so a shorter one is never read past its end.
  if (slot.ptr == name && std::strncmp(slot.text, name, slot.len + 1) == 0) {
    return slot.id;
  }
  size_t len = std::strlen(name);
  uint32_t id = table->intern(name, len, user);
  if (len < sizeof(slot.text)) {
    slot.ptr = name;
    slot.len = static_cast<uint32_t>(len);
    slot.id = id;
    std::memcpy(slot.text, name, len + 1);
  }
  return id;
}

// One thread's input shapes of the op starting, flattened for the recorder's `begin`.
struct Shapes {
  std::vector<int64_t> dims;
  std::vector<size_t> ranks;
};

// The input shapes of `fn` into `dims` and `ranks`, like torch.profiler: a tensor's sizes, []
// for anything else; none when the op has no inputs to give.
void input_shapes(const at::RecordFunction& fn, std::vector<int64_t>& dims,
                  std::vector<size_t>& ranks) {
  dims.clear();
  ranks.clear();
  try {
    for (const c10::IValue& input : fn.inputs()) {
      if (input.isTensor() && input.toTensor().defined()) {
        auto sizes = input.toTensor().sizes();
        dims.insert(dims.end(), sizes.begin(), sizes.end());
        ranks.push_back(sizes.size());
      } else {
        ranks.push_back(0);
      }
    }
  } catch (...) {
    dims.clear();
    ranks.clear();
  }
}

// Begins `fn`'s range with its input shapes into `out`; whether it records. Out of line, so
// the common path (no shapes) keeps a small frame.
__attribute__((noinline)) uint8_t begin_with_shapes(const at::RecordFunction& fn, uint8_t user,
                                                    uint32_t name, void* out) {
  // Reused per thread, so recording shapes allocates nothing after warm-up.
  thread_local Shapes shapes;
  Shapes* s = &shapes;
  asm("" : "+r"(s));  // one loader call, as in this_thread()
  input_shapes(fn, s->dims, s->ranks);
  return table->begin_with_shapes(user, name, s->dims.data(), s->ranks.data(), s->ranks.size(),
                                   out);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  ThreadState* t = this_thread();
  ++t->calls;
  uint8_t user = fn.scope() == at::RecordScope::USER_SCOPE ? 1 : 0;
  uint32_t name = name_id(*t, fn.name(), user);
  std::unique_ptr<Context> ctx(Context::make(*t));
  uint8_t begun = record_shapes ? begin_with_shapes(fn, user, name, ctx->range)
                                : table->begin(user, name, ctx->range);
  if (!begun) {
    return nullptr;
  }
  return ctx;
}

void on_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  // No context: nothing was recorded at the start.
  if (ctx != nullptr) {
    table->end(static_cast<Context*>(ctx)->range);
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
    ++generation;
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
  m.def("calls_on_this_thread", [] { return thread_state.calls; },
        "Start callbacks run on the calling thread so far.");
}
