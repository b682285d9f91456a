// omniprof's PyTorch op observer: a global RecordFunction callback that records every op,
// autograd node and torch.profiler.record_function range through omniprof's recorder.
//
// Built against the installed torch on first use by torch.utils.cpp_extension (see
// omniprof/_observer.py). Python passes the address of the recorder's C function table
// (omniprof._native.recorder_table(), src/observer.rs); from then on the callbacks call it
// directly, with no Python on the path. Each op's range lives in its ObserverContext, so an
// op whose end callback runs on another thread (async ops) is ended there correctly.

#include <ATen/record_function.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

namespace {

// Mirrors omniprof-python's `RecorderTable` (src/observer.rs).
struct Table {
  uint32_t version;
  uint32_t range_slot_size;
  uint32_t (*intern)(const char* name, size_t name_len);
  uint8_t (*begin)(uint8_t user, uint32_t name, const int64_t* dims, const size_t* ranks, size_t inputs,
                   void* out);
  void (*end)(void* range);
};
constexpr uint32_t kTableVersion = 1;
constexpr uint32_t kRangeSlotSize = 32;

// An op's range. Contexts are recycled through a per-thread free list, so an op costs no
// malloc/free pair once warm; one freed on another thread (an async end) joins that
// thread's list. At most kMaxFree per thread are kept, and left behind when a thread exits.
struct Context : at::ObserverContext {
  alignas(8) unsigned char range[kRangeSlotSize];
  Context* next_free = nullptr;
  static void* operator new(size_t size);
  static void operator delete(void* p);
};
constexpr uint32_t kMaxFree = 256;
struct FreeContexts {
  Context* head = nullptr;
  uint32_t count = 0;
};
thread_local FreeContexts free_contexts;

void* Context::operator new(size_t size) {
  FreeContexts& list = free_contexts;
  if (list.head == nullptr) {
    return ::operator new(size);
  }
  Context* c = list.head;
  list.head = c->next_free;
  --list.count;
  return c;
}

void Context::operator delete(void* p) {
  FreeContexts& list = free_contexts;
  if (list.count >= kMaxFree) {
    ::operator delete(p);
    return;
  }
  // The object is destroyed: its storage is reused as a list node.
  auto c = static_cast<Context*>(p);
  c->next_free = list.head;
  list.head = c;
  ++list.count;
}

// A per-thread cache of interned names keyed by the name's address, so the common case (an
// op's schema name, whose address never changes) costs a compare instead of hashing. The
// text is compared too: a dynamic name (a record_function string) may reuse an address.
struct CachedName {
  const char* ptr = nullptr;
  size_t len = 0;
  uint32_t id = 0;
  char text[52];
};
constexpr size_t kNameSlots = 256;
thread_local CachedName names[kNameSlots];

// Written only while no callback is registered (register/unregister run under the GIL).
const Table* table = nullptr;
bool record_shapes = false;
std::optional<at::CallbackHandle> handle;
// Start callbacks run on this thread: lets a test see that nothing fires after the session.
thread_local uint64_t calls = 0;

uint32_t name_id(const char* name) {
  size_t len = std::strlen(name);
  CachedName& slot = names[(reinterpret_cast<uintptr_t>(name) >> 3) % kNameSlots];
  if (slot.ptr == name && slot.len == len && std::memcmp(slot.text, name, len) == 0) {
    return slot.id;
  }
  uint32_t id = table->intern(name, len);
  if (len <= sizeof(slot.text)) {
    slot.ptr = name;
    slot.len = len;
    slot.id = id;
    std::memcpy(slot.text, name, len);
  }
  return id;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  ++calls;
  // Reused per thread, so recording shapes allocates nothing after warm-up.
  thread_local std::vector<int64_t> dims;
  thread_local std::vector<size_t> ranks;
  dims.clear();
  ranks.clear();
  if (record_shapes) {
    try {
      for (const c10::IValue& input : fn.inputs()) {
        // Like torch.profiler: a tensor's sizes, [] for anything else.
        if (input.isTensor() && input.toTensor().defined()) {
          auto sizes = input.toTensor().sizes();
          dims.insert(dims.end(), sizes.begin(), sizes.end());
          ranks.push_back(sizes.size());
        } else {
          ranks.push_back(0);
        }
      }
    } catch (...) {
      // Inputs unavailable (an op that has none to give): the op is recorded without them.
      dims.clear();
      ranks.clear();
    }
  }
  auto ctx = std::make_unique<Context>();
  uint8_t user = fn.scope() == at::RecordScope::USER_SCOPE ? 1 : 0;
  if (!table->begin(user, name_id(fn.name()), dims.data(), ranks.data(), ranks.size(),
                    ctx->range)) {
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

void register_observer(uintptr_t table_address, bool shapes) {
  if (handle) {
    throw std::runtime_error("the omniprof observer is already registered");
  }
  auto t = reinterpret_cast<const Table*>(table_address);
  if (t->version != kTableVersion || t->range_slot_size > kRangeSlotSize) {
    throw std::runtime_error(
        "omniprof's native module and its observer disagree on the recorder table "
        "(rebuild: remove the omniprof_observer build under TORCH_EXTENSIONS_DIR)");
  }
  table = t;
  record_shapes = shapes;
  handle = at::addGlobalCallback(
      at::RecordFunctionCallback(on_start, on_end)
          .needsInputs(shapes)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                   at::RecordScope::USER_SCOPE}));
}

void unregister_observer() {
  if (handle) {
    at::removeCallback(*handle);
    handle.reset();
  }
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("register", &register_observer,
        "Registers the global RecordFunction callback recording through the table at "
        "the given address.");
  m.def("unregister", &unregister_observer, "Removes the callback (if registered).");
  m.def("registered", [] { return handle.has_value(); },
        "Whether the callback is registered.");
  m.def("calls_on_this_thread", [] { return calls; },
        "Start callbacks run on the calling thread so far.");
}
