// omniprof's Python tracer (`with_stack=True`): a CPython profile function that records each
// Python and built-in function call as a frame, through the recorder's C table (table.h), so
// the trace holds `python_function` events and each op its `Call stack`.
//
// Started and stopped by the observer's attach and detach (observer.cpp), so it runs only
// while a session's capture window is open, on every Python thread: the ones that exist at
// the start (each gets the profile function, and the frames already on its stack are
// recorded at its first event) and the ones started meanwhile (through threading's profile
// hook). A thread that already has a profile function of its own (cProfile, a running
// torch.profiler with stacks) is left to it.
//
// Names follow PyTorch's Python tracer: `file.py(LINE): function` with the path cut after
// the longest prefix torch.profiler.python_tracer._prefix_regex() gives (site-packages,
// sys.path), LINE where the frame was when it was entered; `repr()` of a built-in function;
// `nn.Module: Class_N` for a call of nn.Module.__call__, N counting the instances of that
// class in the order the session first saw them. Each name is made once per session and
// cached by what identifies it (the code object, the built-in's method definition, the
// module instance): the hot path is a lookup in a direct-mapped cache (in a hash map on a
// miss) and a recorder call, and keeps no Python object. Everything here runs under the GIL,
// which guards the caches.
//
// With a schedule the tracer starts at the warm-up, when the recorder does not record yet, and
// the window opens later, inside a `step()` call: each thread begins the frames on its stack
// that were not recorded at its first event in the window, so that what runs in the window has
// the program's callers (as PyTorch's tracer, which starts with the window, records the frames
// on each thread's stack then).
//
// Frames are kept on a per-thread stack of their own, so returns always match their calls:
// a return whose frame is deeper than the top ends the frames above it too (they were cut
// short by an exception), one whose frame is not there is ignored (it began before the
// tracer). Deeper than kMaxDepth frames are not recorded, and counted (cut_frames()).

#include "python_tracer.h"

#include <Python.h>
#include <frameobject.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace omniprof::python_tracer {
namespace {

struct Slot {
  const void* key;  // the frame, or the built-in function object
  uint32_t name;
  bool c_call;
  bool recorded;
  alignas(8) unsigned char frame[kFrameSize];
};

struct ThreadStack {
  uint64_t generation = 0;
  // The last window whose frames this thread has begun (window_opened()).
  uint64_t window = 0;
  std::vector<Slot> slots;
};

struct PairHash {
  size_t operator()(const std::pair<const void*, int>& k) const noexcept {
    return std::hash<const void*>()(k.first) ^ (static_cast<size_t>(k.second) * 0x9e3779b97f4a7c15ull);
  }
};

// What a function's frames are called, and what the code object looked like when named: a
// freed code object's address reused by another is then noticed, and named anew.
struct CodeName {
  uint32_t name;
  int first_line;
  PyObject* filename;
  PyObject* function;
};

// Session state: written by start/stop and the profile function, all under the GIL.
const Table* table = nullptr;
bool active = false;
std::atomic<uint64_t> generation{0};
std::atomic<uint64_t> cut{0};
std::atomic<uint64_t> window{0};
std::vector<std::string> prefixes;
PyCodeObject* module_call_code = nullptr;
PyObject* previous_thread_hook = nullptr;
std::unordered_map<PyCodeObject*, CodeName> function_names;
std::unordered_map<std::pair<const void*, int>, CodeName, PairHash> line_names;
std::unordered_map<const void*, uint32_t> builtin_names;
std::unordered_map<const void*, uint32_t> module_names;
std::unordered_map<const void*, uint32_t> module_counts;

// Direct-mapped caches in front of `function_names` and `builtin_names`, by the key's
// Fibonacci hash: a hit is one multiply and one line read, where a map's lookup divides by its
// bucket count and follows two pointers (its hash table was 1.2 % of an `x.add_(1)` loop's
// time under all flags). Filled from the maps, emptied with them; a function's entry is
// checked against its code object as the map's is.
struct CachedCode {
  PyCodeObject* code = nullptr;
  CodeName named{};
};
struct CachedBuiltin {
  const void* key = nullptr;
  uint32_t name = 0;
};
constexpr size_t kCachedCodes = 128;
constexpr size_t kCachedBuiltins = 256;
CachedCode cached_codes[kCachedCodes];
CachedBuiltin cached_builtins[kCachedBuiltins];

template <size_t N>
size_t cache_slot(const void* key) {
  static_assert((N & (N - 1)) == 0, "a power of two");
  constexpr int kShift = 64 - __builtin_ctzll(N);
  return static_cast<size_t>((reinterpret_cast<uintptr_t>(key) * 0x9e3779b97f4a7c15ull) >> kShift);
}

void forget_cached_names() {
  std::fill(std::begin(cached_codes), std::end(cached_codes), CachedCode{});
  std::fill(std::begin(cached_builtins), std::end(cached_builtins), CachedBuiltin{});
}

// Frames on the stacks of other threads at the start, outermost first, by thread: recorded
// by each at its first event (a thread cannot leave them before that event).
std::unordered_map<PyThreadState*, std::vector<std::pair<const void*, uint32_t>>> pending;

// This thread's stack. From a shared library an access to a thread_local is a call into the
// dynamic linker (__tls_get_addr), three per access for one with a destructor (its guard,
// its wrapper, the object): the profile function reads a plain pointer instead, once per
// event, and hands the stack down. `owner` frees it at the thread's exit. (Not in the
// initial-exec model, which would save that one call: a library loaded late takes such
// variables from glibc's small static TLS reserve, and would fail to load once it is spent.)
thread_local ThreadStack* current = nullptr;

struct Owner {
  std::unique_ptr<ThreadStack> stack;
  ~Owner() { current = nullptr; }
};
thread_local Owner owner;

__attribute__((noinline)) ThreadStack& new_stack() {
  owner.stack = std::make_unique<ThreadStack>();
  current = owner.stack.get();
  return *current;
}

inline ThreadStack& this_thread() {
  ThreadStack* stack = current;
  return stack != nullptr ? *stack : new_stack();
}

std::string utf8(PyObject* text) {
  Py_ssize_t len = 0;
  const char* s = text != nullptr ? PyUnicode_AsUTF8AndSize(text, &len) : nullptr;
  if (s == nullptr) {
    PyErr_Clear();
    return "?";
  }
  return std::string(s, static_cast<size_t>(len));
}

uint32_t intern(const std::string& text, int64_t module) {
  return table->frame_name(text.data(), text.size(), module);
}

std::string trimmed(std::string path) {
  for (const std::string& prefix : prefixes) {
    if (path.compare(0, prefix.size(), prefix) == 0) {
      return path.substr(prefix.size());
    }
  }
  return path;
}

// Whether `named` was made for `code` (and not for a freed code object at its address).
bool names(const CodeName& named, PyCodeObject* code) {
  return named.first_line == code->co_firstlineno && named.filename == code->co_filename &&
         named.function == code->co_name;
}

CodeName make_name(PyCodeObject* code, int line) {
  std::string text = trimmed(utf8(code->co_filename)) + "(" + std::to_string(line) +
                     "): " + utf8(code->co_name);
  return CodeName{intern(text, -1), code->co_firstlineno, code->co_filename, code->co_name};
}

uint32_t name_at_line(PyCodeObject* code, int line) {
  auto key = std::make_pair(static_cast<const void*>(code), line);
  auto it = line_names.find(key);
  if (it == line_names.end() || !names(it->second, code)) {
    it = line_names.insert_or_assign(key, make_name(code, line)).first;
  }
  return it->second.name;
}

// The name of an nn.Module call's frame: the module is the frame's `self`.
uint32_t module_name(PyFrameObject* frame, PyCodeObject* code) {
  PyObject* locals = PyFrame_GetLocals(frame);
  PyObject* self = locals != nullptr ? PyDict_GetItemString(locals, "self") : nullptr;
  uint32_t name;
  if (self == nullptr) {
    PyErr_Clear();
    name = name_at_line(code, PyFrame_GetLineNumber(frame));
  } else {
    auto it = module_names.find(self);
    if (it != module_names.end()) {
      name = it->second;
    } else {
      PyTypeObject* type = Py_TYPE(self);
      uint32_t id = module_counts[type]++;
      PyObject* cls = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__name__");
      std::string text = "nn.Module: " + utf8(cls) + "_" + std::to_string(id);
      Py_XDECREF(cls);
      name = intern(text, id);
      module_names.emplace(self, name);
    }
  }
  Py_XDECREF(locals);
  return name;
}

uint32_t function_name(PyFrameObject* frame) {
  PyCodeObject* code = PyFrame_GetCode(frame);
  uint32_t name;
  if (code == module_call_code) {
    name = module_name(frame, code);
  } else if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
    // A generator is entered again at each resumption, at the line it resumes from.
    name = name_at_line(code, PyFrame_GetLineNumber(frame));
  } else {
    // A function is always entered at the same line: one name per code object.
    CachedCode& cached = cached_codes[cache_slot<kCachedCodes>(code)];
    if (cached.code == code && names(cached.named, code)) {
      name = cached.named.name;
    } else {
      auto it = function_names.find(code);
      if (it == function_names.end() || !names(it->second, code)) {
        it = function_names
                 .insert_or_assign(code, make_name(code, PyFrame_GetLineNumber(frame)))
                 .first;
      }
      cached = CachedCode{code, it->second};
      name = it->second.name;
    }
  }
  Py_DECREF(code);
  return name;
}

uint32_t builtin_name(PyObject* fn) {
  // Keyed like PyTorch's: a bound built-in's name is the repr of the first one seen.
  const void* key = PyCFunction_Check(fn)
                        ? static_cast<const void*>(reinterpret_cast<PyCFunctionObject*>(fn)->m_ml)
                        : static_cast<const void*>(Py_TYPE(fn));
  CachedBuiltin& cached = cached_builtins[cache_slot<kCachedBuiltins>(key)];
  if (cached.key == key) {
    return cached.name;
  }
  auto it = builtin_names.find(key);
  if (it != builtin_names.end()) {
    cached = CachedBuiltin{key, it->second};
    return it->second;
  }
  PyObject* repr = PyObject_Repr(fn);
  uint32_t name = intern(repr != nullptr ? utf8(repr) : std::string("<built-in function>"), -1);
  if (repr == nullptr) {
    PyErr_Clear();
  }
  Py_XDECREF(repr);
  builtin_names.emplace(key, name);
  cached = CachedBuiltin{key, name};
  return name;
}

void push(ThreadStack& stack, const void* key, bool c_call, uint32_t name) {
  Slot slot;
  slot.key = key;
  slot.name = name;
  slot.c_call = c_call;
  slot.recorded = false;
  if (stack.slots.size() < kMaxDepth) {
    slot.recorded = table->begin_frame(name, slot.frame) != 0;
  } else {
    cut.fetch_add(1, std::memory_order_relaxed);
  }
  stack.slots.push_back(slot);
}

// Ends the frame `key` and any above it; nothing when it is not on the stack.
void pop(ThreadStack& stack, const void* key, bool c_call) {
  auto& slots = stack.slots;
  for (size_t i = slots.size(); i-- > 0;) {
    if (slots[i].key == key && slots[i].c_call == c_call) {
      while (slots.size() > i) {
        if (slots.back().recorded) {
          table->end_frame(slots.back().frame);
        }
        slots.pop_back();
      }
      return;
    }
  }
}

// A thread's first event in this session: forget the last session's frames, record the ones
// the start found on its stack.
void enter_session(ThreadStack& stack) {
  stack.slots.clear();
  stack.generation = generation.load(std::memory_order_relaxed);
  auto it = pending.find(PyThreadState_Get());
  if (it != pending.end()) {
    for (const auto& [frame, name] : it->second) {
      push(stack, frame, false, name);
    }
    pending.erase(it);
  }
}

// Begins the frames on this thread's stack that were pushed while the recorder did not
// record, outermost first, at the window's start (they were running then). Done for this
// window once a begin succeeds (or nothing waits); while the recorder has not started yet
// (the window opens just before it), tried again at the next event.
void begin_unrecorded(ThreadStack& stack) {
  uint64_t now = window.load(std::memory_order_relaxed);
  size_t depth = std::min(stack.slots.size(), kMaxDepth);
  for (size_t i = 0; i < depth; i++) {
    Slot& slot = stack.slots[i];
    if (slot.recorded) {
      continue;
    }
    if (table->begin_frame_at_window_start(slot.name, slot.frame) == 0) {
      return;
    }
    slot.recorded = true;
  }
  stack.window = now;
}

int profile(PyObject*, PyFrameObject* frame, int what, PyObject* arg) {
  if (!active) {
    return 0;
  }
  ThreadStack& stack = this_thread();
  if (stack.generation != generation.load(std::memory_order_relaxed)) {
    enter_session(stack);
  }
  if (stack.window != window.load(std::memory_order_relaxed)) {
    begin_unrecorded(stack);
  }
  switch (what) {
    case PyTrace_CALL:
      push(stack, frame, false, function_name(frame));
      break;
    case PyTrace_RETURN:
      pop(stack, frame, false);
      break;
    case PyTrace_C_CALL:
      push(stack, arg, true, builtin_name(arg));
      break;
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
      pop(stack, arg, true);
      break;
    default:
      break;
  }
  return 0;
}

// The frames from `frame` outwards, named at their current lines, outermost first.
std::vector<std::pair<const void*, uint32_t>> frames_from(PyFrameObject* frame) {
  std::vector<std::pair<const void*, uint32_t>> out;
  Py_XINCREF(frame);
  while (frame != nullptr && out.size() < kMaxDepth) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    uint32_t name = code == module_call_code ? module_name(frame, code)
                                             : name_at_line(code, PyFrame_GetLineNumber(frame));
    Py_DECREF(code);
    out.emplace_back(frame, name);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  return {out.rbegin(), out.rend()};
}

bool has_foreign_profiler(PyThreadState* thread) {
  return thread->c_profilefunc != nullptr && thread->c_profilefunc != profile;
}

// threading's profile hook, called in each thread started during the session at its first
// event (its `run`): installs the profile function there and records the thread's frames.
PyObject* thread_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (active && nargs >= 1 && PyFrame_Check(args[0])) {
    // Replaces threading's trampoline to this hook on this thread.
    PyEval_SetProfile(profile, nullptr);
    ThreadStack& stack = this_thread();
    stack.slots.clear();
    stack.generation = generation.load(std::memory_order_relaxed);
    for (const auto& [frame, name] : frames_from(reinterpret_cast<PyFrameObject*>(args[0]))) {
      push(stack, frame, false, name);
    }
  }
  if (PyErr_Occurred()) {
    PyErr_Clear();
  }
  Py_RETURN_NONE;
}

PyMethodDef thread_hook_def = {"omniprof_thread_hook", reinterpret_cast<PyCFunction>(
                                                            reinterpret_cast<void*>(thread_hook)),
                               METH_FASTCALL, nullptr};

void load_prefixes() {
  prefixes.clear();
  PyObject* tracer = PyImport_ImportModule("torch.profiler.python_tracer");
  PyObject* list = tracer != nullptr ? PyObject_CallMethod(tracer, "_prefix_regex", nullptr)
                                     : nullptr;
  if (list != nullptr && PyList_Check(list)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
      prefixes.push_back(utf8(PyList_GET_ITEM(list, i)));
    }
  }
  Py_XDECREF(list);
  Py_XDECREF(tracer);
  PyErr_Clear();
}

void load_module_call_code() {
  module_call_code = nullptr;
  PyObject* nn = PyImport_ImportModule("torch.nn");
  PyObject* module = nn != nullptr ? PyObject_GetAttrString(nn, "Module") : nullptr;
  PyObject* call = module != nullptr ? PyObject_GetAttrString(module, "__call__") : nullptr;
  PyObject* code = call != nullptr ? PyObject_GetAttrString(call, "__code__") : nullptr;
  if (code != nullptr && PyCode_Check(code)) {
    // The class lives as long as torch.nn, that is for the process: a borrowed pointer.
    module_call_code = reinterpret_cast<PyCodeObject*>(code);
  }
  Py_XDECREF(code);
  Py_XDECREF(call);
  Py_XDECREF(module);
  Py_XDECREF(nn);
  PyErr_Clear();
}

// Calls threading.setprofile(hook) and keeps what was there (threading.getprofile()), or puts
// that back when `hook` is null.
void set_thread_hook(PyObject* hook) {
  PyObject* threading = PyImport_ImportModule("threading");
  if (threading == nullptr) {
    PyErr_Clear();
    return;
  }
  if (hook != nullptr) {
    Py_XDECREF(previous_thread_hook);
    previous_thread_hook = PyObject_CallMethod(threading, "getprofile", nullptr);
    PyObject* done = PyObject_CallMethod(threading, "setprofile", "O", hook);
    Py_XDECREF(done);
  } else {
    PyObject* previous = previous_thread_hook != nullptr ? previous_thread_hook : Py_None;
    PyObject* done = PyObject_CallMethod(threading, "setprofile", "O", previous);
    Py_XDECREF(done);
    Py_CLEAR(previous_thread_hook);
  }
  Py_DECREF(threading);
  PyErr_Clear();
}

// Runs `body` with the GIL, from any thread; nothing once the interpreter is gone.
template <typename F>
void with_gil(F body) {
  if (!Py_IsInitialized()) {
    return;
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  body();
  PyGILState_Release(gil);
}

}  // namespace

void start(const Table* t) noexcept {
  with_gil([t] {
    table = t;
    generation.fetch_add(1, std::memory_order_relaxed);
    function_names.clear();
    line_names.clear();
    builtin_names.clear();
    forget_cached_names();
    module_names.clear();
    module_counts.clear();
    pending.clear();
    load_prefixes();
    load_module_call_code();
    // Set before any profile function, so that its calls are not recorded.
    PyObject* hook = PyCFunction_New(&thread_hook_def, nullptr);
    if (hook != nullptr) {
      set_thread_hook(hook);
      Py_DECREF(hook);
    }
    active = true;
    PyThreadState* self = PyThreadState_Get();
    for (PyThreadState* thread = PyInterpreterState_ThreadHead(self->interp); thread != nullptr;
         thread = PyThreadState_Next(thread)) {
      if (has_foreign_profiler(thread)) {
        continue;
      }
      PyFrameObject* top = PyThreadState_GetFrame(thread);
      if (top != nullptr) {
        pending[thread] = frames_from(top);
        Py_DECREF(top);
      }
      PyThreadState_Swap(thread);
      PyEval_SetProfile(profile, nullptr);
      PyThreadState_Swap(self);
    }
    PyErr_Clear();
  });
}

void stop() noexcept {
  with_gil([] {
    if (!active) {
      return;
    }
    PyThreadState* self = PyThreadState_Get();
    for (PyThreadState* thread = PyInterpreterState_ThreadHead(self->interp); thread != nullptr;
         thread = PyThreadState_Next(thread)) {
      if (thread->c_profilefunc == profile) {
        PyThreadState_Swap(thread);
        PyEval_SetProfile(nullptr, nullptr);
        PyThreadState_Swap(self);
      }
    }
    // Unset after every profile function, so that its calls are not recorded.
    active = false;
    set_thread_hook(nullptr);
    pending.clear();
    PyErr_Clear();
  });
}

void window_opened() noexcept { window.fetch_add(1, std::memory_order_relaxed); }

uint64_t cut_frames() noexcept { return cut.load(std::memory_order_relaxed); }

}  // namespace omniprof::python_tracer
