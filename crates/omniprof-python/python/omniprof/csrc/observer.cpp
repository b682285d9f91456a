// omniprof's PyTorch op observer: a global RecordFunction callback that records every op,
// autograd node, TorchScript function and torch.profiler.record_function range through
// omniprof's recorder.
//
// Built against the installed torch on first use by torch.utils.cpp_extension (see
// omniprof/_observer.py). Python hands `attach`, `detach` and `window_opened` below, in a
// named capsule (`entry_points`), to omniprof's native module, which makes the observer a backend
// (src/observer.rs): every session, synchronous or on-demand, attaches it when its capture
// window opens and detaches it when it closes. The callbacks call the recorder's C function table directly, with no
// Python on the path, and keep no state of their own per thread: an op or autograd node
// begins and ends on one thread, innermost first, so it is pushed on the recorder's
// per-thread stack keyed by its RecordFunction and popped at its end. A user range may end
// on another thread (async ops), so it lives in its ObserverContext and is ended there.
//
// It also hands omniprof PyTorch's PrivateUse1 profiler stubs (`stubs_api` below): the
// legacy profiler's per-op device time (`use_device`) comes from them, and omniprof's
// bridge (src/stubs.rs) calls them from the recorder's callbacks of the sessions that ask.
//
// What a session asks besides the ops (attach's flags): input shapes; FLOPs, counted by
// PyTorch's own functions at op start; and allocator reports, received by a reporter put in
// the debug info of each thread that runs ops (see Reporter below), recorded as `[memory]`
// instants.
//
// Each op's and user range's RecordFunction handle is recorded as its `Record function id`
// whenever PyTorch gave it one: PyTorch numbers RecordFunctions only while a callback asks
// for ids, as its execution trace observer does while it records (an op's `rf_id` there),
// so reading the handle costs one load and a branch per op, and the id is packed only then.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/core/ScalarTypeToTypeMeta.h>
#include <c10/util/Exception.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/csrc/profiler/stubs/base.h>
#include <torch/csrc/profiler/util.h>

#include "privateuse1_profiler.h"
#include "python_tracer.h"
#include "table.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using omniprof::Table;
using omniprof::kRangeSlotSize;
using omniprof::kTableVersion;
namespace packed = omniprof::packed;

// A user range.
struct Context : at::ObserverContext {
  alignas(8) unsigned char range[kRangeSlotSize];
};

// What `attach` is asked to record besides the ops (its `flags`).
constexpr uint8_t kShapes = 1;
constexpr uint8_t kMemory = 2;
constexpr uint8_t kFlops = 4;
constexpr uint8_t kStack = 8;
constexpr uint8_t kModules = 16;
constexpr uint8_t kOverloads = 32;
// With kShapes and kMemory: each tensor input's storage too (for the memory timeline).
constexpr uint8_t kStorages = 64;

// Written only while no callback is registered (by `attach`, one session at a time).
const Table* table = nullptr;
bool record_shapes = false;
bool record_flops = false;
bool record_memory = false;
bool record_stack = false;
bool record_modules = false;
bool record_overloads = false;
bool record_storages = false;
// Whether an op needs more than its name and key (push_op_with_details) whatever its
// handle: one test on the common path instead of three.
bool record_details = false;
std::optional<at::CallbackHandle> handle;
// Whether the callbacks are removed while collection of ops is switched off
// (set_ops_collected): attached all the same.
bool ops_paused = false;

// Whether allocator reports are recorded now: read by the reporter on any thread.
std::atomic<bool> memory_on{false};

// The allocator reports PyTorch makes (c10::reportMemoryUsageToProfiler) go to the
// MemoryReportingInfoBase found under DebugInfoKind::PROFILER_STATE in the calling thread's
// ThreadLocalDebugInfo. PyTorch reads that slot as a ProfilerStateBase in other places too
// (profilerEnabled(), torch.profiler's "already enabled" check, and `_RecordFunctionFast`,
// which records torch.compile's regions only where a state is present), so the reporter is
// one: with a Disabled config it tells PyTorch that no profiler of its own runs. One instance
// serves every thread; it outlives them all (never destroyed), and records allocations only
// while `memory_on`. It is put on the thread that attaches (every session) and, with memory
// asked for, on each thread at its first op.
struct Reporter final : torch::profiler::impl::ProfilerStateBase {
  Reporter()
      : ProfilerStateBase(torch::profiler::impl::ProfilerConfig(
            torch::profiler::impl::ProfilerState::Disabled)) {}

  void reportMemoryUsage(void* ptr, int64_t bytes, size_t total_allocated,
                         size_t total_reserved, c10::Device device) override {
    if (memory_on.load(std::memory_order_relaxed)) {
      table->memory(reinterpret_cast<uintptr_t>(ptr), bytes, total_allocated, total_reserved,
                    static_cast<int32_t>(device.type()), device.index(), 0);
    }
  }

  void reportOutOfMemory(int64_t bytes, size_t total_allocated, size_t total_reserved,
                         c10::Device device) override {
    if (memory_on.load(std::memory_order_relaxed)) {
      table->memory(0, bytes, total_allocated, total_reserved,
                    static_cast<int32_t>(device.type()), device.index(), 1);
    }
  }

  bool memoryProfilingEnabled() const override {
    return memory_on.load(std::memory_order_relaxed);
  }

  torch::profiler::impl::ActiveProfilerType profilerType() override {
    return torch::profiler::impl::ActiveProfilerType::NONE;
  }
};

const std::shared_ptr<Reporter>& reporter() {
  static auto* shared = new std::shared_ptr<Reporter>(std::make_shared<Reporter>());
  return *shared;
}

// Puts the reporter in this thread's debug info unless a profiler state (PyTorch's, or the
// reporter itself) is already there: a torch.profiler session keeps its own reports.
void install_reporter() noexcept {
  try {
    if (c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) == nullptr) {
      c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, reporter());
    }
  } catch (...) {
    // Not installed: this thread's allocations are not recorded.
  }
}

// Takes the reporter out of this thread's debug info when it is the newest entry (PyTorch
// can only pop the newest); returns whether no reporter of ours is left in front.
bool remove_reporter() noexcept {
  try {
    if (c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) !=
        reporter().get()) {
      return true;
    }
    if (c10::ThreadLocalDebugInfo::_peek(c10::DebugInfoKind::PROFILER_STATE).get() ==
        reporter().get()) {
      c10::ThreadLocalDebugInfo::_pop(c10::DebugInfoKind::PROFILER_STATE);
      return true;
    }
  } catch (...) {
    // Another kind of debug info is newer: the reporter stays, inert once memory is off.
  }
  return false;
}

// A user range's input sizes, flattened for the recorder: input i has ranks[i] sizes in
// `dims`, one input after another.
struct Dims {
  std::vector<int64_t> dims;
  std::vector<size_t> ranks;
};

// The sizes of a user range's inputs (a tensor's; [] for anything else); none when they
// cannot be read. Reused per thread.
const Dims& range_dims(const at::RecordFunction& fn) {
  thread_local Dims in;
  in.dims.clear();
  in.ranks.clear();
  try {
    for (const c10::IValue& input : fn.inputs()) {
      if (input.isTensor() && input.toTensor().defined()) {
        auto sizes = input.toTensor().sizes();
        in.dims.insert(in.dims.end(), sizes.begin(), sizes.end());
        in.ranks.push_back(sizes.size());
      } else {
        in.ranks.push_back(0);
      }
    }
  } catch (...) {
    in.dims.clear();
    in.ranks.clear();
  }
  return in;
}

// The words an op's details are packed into (table.h): on the packing call's stack while
// they fit, as every op's do but those with hundreds of inputs; on the heap beyond. A
// thread-local vector would cost a TLS lookup per access from this shared library.
class Words {
 public:
  Words() = default;
  Words(const Words&) = delete;
  Words& operator=(const Words&) = delete;

  // Room for `count` more words, written through the pointer returned and kept by `commit`
  // with the pointer past the last one written: one capacity check for a whole input, and
  // stores through a local pointer, which the compiler need not reload `len_` after (a store
  // through `data_` may alias it: both are unsigned longs).
  __attribute__((always_inline)) uint64_t* reserve(size_t count) {
    if (len_ + count > cap_) grow(len_ + count);
    return data_ + len_;
  }

  __attribute__((always_inline)) void commit(const uint64_t* end) {
    len_ = static_cast<size_t>(end - data_);
  }

  __attribute__((always_inline)) void push(uint64_t word) {
    uint64_t* out = reserve(1);
    *out = word;
    commit(out + 1);
  }

  // Pushes a tag and the one word its kind carries.
  __attribute__((always_inline)) void push(uint64_t tag, uint64_t word) {
    uint64_t* out = reserve(2);
    out[0] = tag;
    out[1] = word;
    commit(out + 2);
  }

  // Appends the bytes of `text`, (size + 7) / 8 words, the last one padded with zeros.
  void append_bytes(std::string_view text) {
    size_t count = (text.size() + 7) / 8;
    if (len_ + count > cap_) grow(len_ + count);
    if (count > 0) {
      data_[len_ + count - 1] = 0;
      std::memcpy(data_ + len_, text.data(), text.size());
    }
    len_ += count;
  }

  uint64_t& operator[](size_t i) { return data_[i]; }
  const uint64_t* data() const { return data_; }
  size_t size() const { return len_; }
  void truncate(size_t len) { len_ = len; }

 private:
  __attribute__((noinline)) void grow(size_t need) {
    size_t cap = std::max(need, cap_ * 2);
    if (data_ == inline_) {
      heap_.assign(inline_, inline_ + len_);
    }
    heap_.resize(cap);
    data_ = heap_.data();
    cap_ = cap;
  }

  uint64_t inline_[256];
  uint64_t* data_ = inline_;
  size_t len_ = 0;
  size_t cap_ = 256;
  std::vector<uint64_t> heap_;
};

uint64_t bits(double value) {
  uint64_t out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

// Appends a list PyTorch's profiler writes the values of (its "ScalarList": ints or floats,
// at most 30 of them); false for any other list.
bool pack_scalar_list(Words& words, const c10::IValue& input) {
  bool ints = input.isIntList();
  // A bool list (convolution_backward's output_mask) is PyTorch's ScalarList too.
  bool bools = !ints && input.isBoolList();
  if (!ints && !bools && !input.isDoubleList()) {
    return false;
  }
  c10::ArrayRef<c10::IValue> list = input.toListRef();
  if (list.size() > 30) {
    return false;
  }
  uint64_t* out = words.reserve(1 + list.size());
  uint64_t kind = ints ? packed::kIntList : bools ? packed::kBoolList : packed::kDoubleList;
  *out++ = kind | (static_cast<uint64_t>(list.size()) << 8);
  for (const c10::IValue& value : list) {
    *out++ = ints    ? static_cast<uint64_t>(value.toInt())
             : bools ? static_cast<uint64_t>(value.toBool())
                     : bits(value.toDouble());
  }
  words.commit(out);
  return true;
}

// Appends a tensor (table.h): its dtype, sizes and, when strided, strides; with kStorages,
// its storage too (the memory timeline counts the storages ops read that
// were there before the window, as torch.profiler does). Read from its TensorImpl, once
// each, before any word is written (a word's store may alias the sizes, both 64-bit).
void pack_tensor(Words& words, const at::Tensor& t) {
  if (!t.defined()) {
    words.push(packed::kOther);
    return;
  }
  const c10::TensorImpl& impl = *t.unsafeGetTensorImpl();
  c10::IntArrayRef sizes = impl.sizes();
  bool strided = impl.layout() == at::kStrided && !impl.is_nested();
  c10::IntArrayRef strides = strided ? impl.strides() : c10::IntArrayRef();
  bool storage = record_storages && impl.has_storage();
  size_t rank = sizes.size();
  uint64_t* out = words.reserve(2 + 2 * rank + 3);
  out[0] = packed::kTensor |
           (static_cast<uint64_t>(static_cast<uint8_t>(c10::typeMetaToScalarType(impl.dtype()))) << 8) |
           (static_cast<uint64_t>(strided) << 16) | (static_cast<uint64_t>(storage) << 17);
  out[1] = rank;
  out += 2;
  for (size_t i = 0; i < rank; i++) {
    out[i] = static_cast<uint64_t>(sizes[i]);
  }
  out += rank;
  for (size_t i = 0; i < strides.size(); i++) {
    out[i] = static_cast<uint64_t>(strides[i]);
  }
  out += strides.size();
  if (storage) {
    // Read without the access checks, which throw for a fake tensor's storage: only the
    // address is wanted, never the bytes.
    c10::StorageImpl* s = impl.storage().unsafeGetStorageImpl();
    c10::Device device = s->device();
    *out++ = reinterpret_cast<uint64_t>(s->_mutable_data_ptr_no_checks().get());
    *out++ = s->nbytes();
    *out++ = static_cast<uint64_t>(static_cast<uint8_t>(device.type())) |
             (static_cast<uint64_t>(static_cast<uint8_t>(device.index())) << 8);
  }
  words.commit(out);
}

// Appends one input as torch.profiler describes it with record_shapes (table.h): a tensor's
// dtype, sizes and strides, each of a tensor list's; a scalar's or short scalar list's value;
// nothing of anything else.
void pack_input(Words& words, const c10::IValue& input) {
  if (input.isTensor()) {
    pack_tensor(words, input.toTensor());
  } else if (input.isNone()) {
    // Before the list tests, which are calls into PyTorch (optional inputs are often None).
    words.push(packed::kOther);
  } else if (input.isBool()) {
    words.push(packed::kBool, input.toBool() ? 1 : 0);
  } else if (input.isInt()) {
    words.push(packed::kInt, static_cast<uint64_t>(input.toInt()));
  } else if (input.isDouble()) {
    words.push(packed::kDouble, bits(input.toDouble()));
  } else if (input.isScalar()) {
    std::string text = torch::profiler::impl::ivalueToStr(input, false);
    words.push(packed::kScalarText | (static_cast<uint64_t>(text.size()) << 8));
    words.append_bytes(text);
  } else if (input.isList() && pack_scalar_list(words, input)) {
    // Packed.
  } else if (input.isTensorList()) {
    c10::ArrayRef<c10::IValue> list = input.toListRef();
    words.push(packed::kTensorList | (static_cast<uint64_t>(list.size()) << 8));
    for (const c10::IValue& tensor : list) {
      pack_tensor(words, tensor.toTensor());
    }
  } else {
    words.push(packed::kOther);
  }
}

// Out of line, so the common paths (ops without shapes) keep a small frame.
__attribute__((noinline)) std::unique_ptr<at::ObserverContext> begin_user(
    const at::RecordFunction& fn) {
  auto ctx = std::make_unique<Context>();
  uint8_t begun;
  if (record_shapes) {
    const Dims& in = range_dims(fn);
    begun = table->begin_user(fn.name(), fn.handle(), in.dims.data(), in.ranks.data(),
                              in.ranks.size(), ctx->range);
  } else {
    begun = table->begin_user(fn.name(), fn.handle(), nullptr, nullptr, 0, ctx->range);
  }
  if (!begun) {
    return nullptr;
  }
  return ctx;
}

// ---- FLOPs ------------------------------------------------------------------------------
//
// PyTorch's own FLOP formulas (torch/csrc/profiler/util.h) count the ops whose arguments
// `saveExtraArgs` saves, which it chooses by name: its profiler saves them at the same point
// (the start callback, the only place inputs can be read), so the counts are PyTorch's
// exactly. For any other op `saveExtraArgs` copies the name into a std::string, compares it
// with each of its names and saves nothing, the count then being 0: about 400 instructions
// an op, paid by nearly every op. So it is called only for the ops it saves arguments of.
// PyTorch's headers do not list their names: they are learned from `saveExtraArgs` itself,
// once per process, by offering it every operator name the dispatcher knows with inputs each
// formula reads (see `learn_flop_names`).

// The names `saveExtraArgs` saved arguments of when offered them, split for a quick compare:
// what they all begin with ("aten::"), then each one's rest, and by the byte that follows the
// prefix in a name, which rests begin with it (bit i: rests[i]; at most 64 names).
struct FlopNames {
  std::string prefix;
  std::vector<std::string> rests;
  uint64_t by_first_byte[256] = {};
};
const FlopNames* flop_names = nullptr;

// Whether `saveExtraArgs` saved anything in the probe's start callback (below): written and
// read on the attaching thread only.
bool probe_saved = false;
// PyTorch's count in the probe (what `computeFlops` gave of what was saved).
uint64_t probe_flops = 0;

std::unique_ptr<at::ObserverContext> probe_start(const at::RecordFunction& fn) {
  auto args = torch::profiler::impl::saveExtraArgs(fn);
  probe_saved = !args.empty();
  probe_flops = probe_saved ? torch::profiler::impl::computeFlops(fn.name(), args) : 0;
  return nullptr;
}

void probe_end(const at::RecordFunction&, at::ObserverContext*) {}

// Drops the warnings a probe may raise (PyTorch warns of inputs its formula cannot read): a
// probe's name is no op a user ran.
struct SilentWarnings final : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

// ---- FLOPs without saveExtraArgs --------------------------------------------------------
//
// `saveExtraArgs` builds a std::stringstream, a std::string and a map of IValues per counted
// op, and `computeFlops` looks its arguments up by name: some 7,700 instructions per
// `torch.mm`, half of what all flags cost it. For PyTorch's seven ops (util.cpp's formulas:
// the product of the operands' sizes, less the shared dimension and batch, times 2 for the
// matrix products; the input's element count for add and mul; the output's size times the
// kernel's for conv2d) the count is computed here from the inputs' sizes. Only inputs PyTorch
// reads without a warning are: anything else (an input missing or not a tensor, a nested
// tensor, a convolution's argument of an unexpected size) goes to PyTorch's own path, which
// warns as it does under torch.profiler. Each formula is checked once per process against
// PyTorch's `computeFlops` on sample inputs (`learn_flop_names`), and used only if they agree.

enum FastFlops : uint8_t { kNoFormula, kMM, kAddMM, kBMM, kBAddBMM, kElementwise, kConv2d };

// An op's inputs, as RecordFunction::inputs gives them.
using Inputs = c10::ArrayRef<const c10::IValue>;

// PyTorch's seven ops, sorted by name, with their formulas.
constexpr std::pair<std::string_view, FastFlops> kFormulas[] = {
    {"aten::add", kElementwise}, {"aten::addmm", kAddMM}, {"aten::baddbmm", kBAddBMM},
    {"aten::bmm", kBMM},         {"aten::conv2d", kConv2d}, {"aten::mm", kMM},
    {"aten::mul", kElementwise},
};

FastFlops formula_of(std::string_view name) {
  for (const auto& [known, formula] : kFormulas) {
    if (name == known) return formula;
  }
  return kNoFormula;
}

// Bit `f` set: formula `f` agreed with PyTorch's on every sample (written by `attach`, once
// per process, before any callback that reads it is registered).
uint8_t verified_formulas = 0;

// The sizes of input `i` when it is a tensor PyTorch's formula reads (not nested).
bool sizes_of(Inputs inputs, size_t i, c10::IntArrayRef& out) {
  if (i >= inputs.size() || !inputs[i].isTensor()) return false;
  const at::Tensor& t = inputs[i].toTensor();
  if (!t.defined() || t.is_nested()) return false;
  out = t.sizes();
  return true;
}

uint64_t product(c10::IntArrayRef sizes) {
  uint64_t out = 1;
  for (int64_t d : sizes) out *= static_cast<uint64_t>(d);
  return out;
}

// 2·m·k·n as util.cpp computes it (unsigned, wrapping): every size of the first operand but
// the shared one (nor the batch, for a batched product), then every size of the second.
uint64_t gemm_flops(c10::IntArrayRef mat1, c10::IntArrayRef mat2, bool batched) {
  if (mat1.empty()) return 0;
  int64_t batch = mat1.front();
  int64_t overlap = mat1.back();
  if ((batched && batch == 0) || overlap == 0) return 0;
  uint64_t flops = product(mat1) / static_cast<uint64_t>(overlap);
  if (batched) flops /= static_cast<uint64_t>(batch);
  return flops * product(mat2) * 2;
}

// A two-int list (conv2d's stride, padding or dilation).
bool pair_of(Inputs inputs, size_t i, int64_t out[2]) {
  if (i >= inputs.size() || !inputs[i].isIntList()) return false;
  c10::ArrayRef<c10::IValue> list = inputs[i].toListRef();
  if (list.size() != 2) return false;
  out[0] = list[0].toInt();
  out[1] = list[1].toInt();
  return true;
}

// conv2d (input, weight, bias, stride, padding, dilation, groups): 2 · batch · output
// height · output width · kernel height · kernel width · in channels · out channels / groups.
bool conv2d_flops(Inputs inputs, uint64_t& out) {
  c10::IntArrayRef input, weight;
  int64_t stride[2], padding[2], dilation[2];
  if (inputs.size() < 7 || !sizes_of(inputs, 0, input) || !sizes_of(inputs, 1, weight) ||
      input.size() != 4 || weight.size() != 4 || !pair_of(inputs, 3, stride) ||
      !pair_of(inputs, 4, padding) || !pair_of(inputs, 5, dilation) || !inputs[6].isInt() ||
      inputs[6].toInt() == 0 || stride[0] * stride[1] == 0) {
    return false;
  }
  int64_t spans[2];
  for (int i = 0; i < 2; i++) {
    spans[i] = input[2 + i] + 2 * padding[i] - dilation[i] * (weight[2 + i] - 1) - 1;
    if (spans[i] < 0 || stride[i] < 0) return false;  // No convolution: PyTorch's, whatever it is.
  }
  uint64_t out_h = static_cast<uint64_t>(spans[0] / stride[0] + 1);
  uint64_t out_w = static_cast<uint64_t>(spans[1] / stride[1] + 1);
  out = 2 * static_cast<uint64_t>(input[0]) * out_h * out_w * static_cast<uint64_t>(weight[2]) *
        static_cast<uint64_t>(weight[3]) * static_cast<uint64_t>(input[1]) *
        static_cast<uint64_t>(weight[0]) / static_cast<uint64_t>(inputs[6].toInt());
  return true;
}

// The count of formula `f` for these inputs; false where PyTorch's own path must decide.
bool fast_flops(FastFlops f, Inputs inputs, uint64_t& out) {
  c10::IntArrayRef a, b, c;
  switch (f) {
    case kMM:
      if (!sizes_of(inputs, 0, a) || !sizes_of(inputs, 1, b)) return false;
      out = gemm_flops(a, b, false);
      return true;
    case kBMM:
      if (!sizes_of(inputs, 0, a) || !sizes_of(inputs, 1, b)) return false;
      out = gemm_flops(a, b, true);
      return true;
    case kAddMM:
    case kBAddBMM:
      if (!sizes_of(inputs, 0, c) || !sizes_of(inputs, 1, a) || !sizes_of(inputs, 2, b)) {
        return false;
      }
      out = gemm_flops(a, b, f == kBAddBMM);
      return true;
    case kElementwise:
      if (!sizes_of(inputs, 0, a)) return false;
      out = product(a);
      return true;
    case kConv2d:
      return conv2d_flops(inputs, out);
    case kNoFormula:
      break;
  }
  return false;
}

// PyTorch's count for `name` with these inputs, through the probe (its own RecordFunction,
// which no other callback sees); 0 when it saved nothing.
uint64_t pytorch_flops(const std::string& name, const std::vector<c10::IValue>& inputs) {
  at::StepCallbacks probe(at::RecordFunction::currentThreadId(), at::RecordScope::FUNCTION);
  probe.callbacks_.push_back({probe_start, probe_end});
  probe.needs_inputs_ = true;
  probe_flops = 0;
  {
    at::RecordFunction fn(std::move(probe));
    c10::ArrayRef<const c10::IValue> args(inputs.data(), inputs.size());
    fn.before(std::string_view(name), args);
  }
  return probe_flops;
}

// Checks each formula against PyTorch's on sample inputs (odd sizes, a strided and padded
// convolution, groups): bit f of the result set where every sample agreed.
uint8_t verify_formulas() {
  auto t = [](std::initializer_list<int64_t> sizes) { return c10::IValue(at::empty(sizes)); };
  auto ints = [](std::vector<int64_t> v) { return c10::IValue(v); };
  std::vector<std::pair<std::string, std::vector<c10::IValue>>> samples = {
      {"aten::mm", {t({6, 5}), t({5, 4})}},
      {"aten::addmm", {t({6, 4}), t({6, 5}), t({5, 4}), c10::IValue(1), c10::IValue(1)}},
      {"aten::bmm", {t({3, 6, 5}), t({3, 5, 4})}},
      {"aten::baddbmm", {t({3, 6, 4}), t({3, 6, 5}), t({3, 5, 4}), c10::IValue(1), c10::IValue(1)}},
      {"aten::add", {t({7, 3}), t({7, 3}), c10::IValue(1)}},
      {"aten::mul", {t({2, 3, 5}), c10::IValue(2.0)}},
      {"aten::conv2d",
       {t({2, 6, 11, 9}), t({4, 3, 3, 2}), c10::IValue(), ints({2, 1}), ints({1, 0}), ints({1, 2}),
        c10::IValue(2)}},
      {"aten::conv2d",
       {t({1, 3, 8, 8}), t({5, 3, 1, 1}), c10::IValue(), ints({1, 1}), ints({0, 0}), ints({1, 1}),
        c10::IValue(1)}},
  };
  // Every formula's bit, none for kNoFormula.
  uint8_t agreed = static_cast<uint8_t>(~(1u << kNoFormula));
  for (const auto& [name, inputs] : samples) {
    FastFlops f = formula_of(name);
    uint64_t ours = 0;
    Inputs args(inputs.data(), inputs.size());
    if (!fast_flops(f, args, ours) || ours == 0 || ours != pytorch_flops(name, inputs)) {
      agreed &= static_cast<uint8_t>(~(1u << f));
    }
  }
  return agreed;
}

// Offers `saveExtraArgs` each operator name the dispatcher knows, in a RecordFunction of its
// own (no other callback sees it) whose inputs are seven 4-d tensors: every formula's
// arguments are the sizes of its first tensors and, for a convolution, its inputs 3 to 6,
// so an op PyTorch counts FLOPs of saves arguments for these. Recording and warnings are off
// on this thread meanwhile, so neither the probe's tensors nor its names reach a profiler.
std::vector<std::string> learn_flop_names() {
  at::RecordFunctionGuard no_recording(false);
  SilentWarnings silent;
  c10::WarningUtils::WarningHandlerGuard no_warnings(&silent);
  std::vector<c10::IValue> inputs(7, c10::IValue(at::empty({1, 1, 1, 1})));
  c10::ArrayRef<const c10::IValue> args(inputs.data(), inputs.size());
  std::vector<std::string> offered;
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
    offered.push_back(op.name);
  }
  std::sort(offered.begin(), offered.end());
  offered.erase(std::unique(offered.begin(), offered.end()), offered.end());
  std::vector<std::string> names;
  for (const std::string& name : offered) {
    at::StepCallbacks probe(at::RecordFunction::currentThreadId(), at::RecordScope::FUNCTION);
    probe.callbacks_.push_back({probe_start, probe_end});
    probe.needs_inputs_ = true;
    probe_saved = false;
    {
      at::RecordFunction fn(std::move(probe));
      fn.before(std::string_view(name), args);
    }
    if (probe_saved) {
      names.push_back(name);
    }
  }
  verified_formulas = verify_formulas();
  return names;
}

// Learns the names PyTorch counts FLOPs of, once per process (called by `attach`, one
// session at a time: never concurrently). Left unlearned when the probe fails, so that
// every op is then offered to `saveExtraArgs`.
void learn_flop_names_once() noexcept {
  if (flop_names != nullptr) {
    return;
  }
  try {
    auto names = learn_flop_names();
    auto split = std::make_unique<FlopNames>();
    if (!names.empty()) {
      split->prefix = names.front();
      for (const std::string& name : names) {
        size_t common = 0;
        while (common < split->prefix.size() && split->prefix[common] == name[common]) {
          common++;
        }
        split->prefix.resize(common);
      }
      for (const std::string& name : names) {
        split->rests.push_back(name.substr(split->prefix.size()));
      }
    }
    if (split->rests.size() > 64) {
      return;  // More than the masks hold: unlearned, counted as before.
    }
    for (size_t i = 0; i < split->rests.size(); i++) {
      // An empty rest (one name is the prefix) begins with the NUL that ends it.
      split->by_first_byte[static_cast<unsigned char>(split->rests[i].c_str()[0])] |=
          uint64_t{1} << i;
    }
    flop_names = split.release();
  } catch (...) {
    // Unlearned: counted as before.
  }
}

// Whether op `name` is one PyTorch counts FLOPs of: the common prefix, then the rests that
// begin with the byte after it, byte by byte (inline: most names differ within a few bytes,
// and a call to strcmp per op costs more than the compare).
bool counts_flops(const char* name) {
  const FlopNames* names = flop_names;
  if (names == nullptr) {
    return true;
  }
  const char* rest = name;
  for (char c : names->prefix) {
    if (*rest != c) {
      return false;  // The name's NUL ends it here too: the prefix holds none.
    }
    rest++;
  }
  for (uint64_t candidates = names->by_first_byte[static_cast<unsigned char>(*rest)];
       candidates != 0; candidates &= candidates - 1) {
    const char* a = rest;
    const char* b = names->rests[__builtin_ctzll(candidates)].c_str();
    while (*a == *b) {
      if (*a == '\0') {
        return true;
      }
      a++;
      b++;
    }
  }
  return false;
}

// The op's FLOPs by PyTorch's formulas; 0 for an op it counts none of.
// Counted before the op is pushed, so the count's cost is not part of the op's time.
__attribute__((noinline)) uint64_t op_flops(const at::RecordFunction& fn, const char* name) {
  if (!counts_flops(name)) {
    return 0;
  }
  try {
    FastFlops f = formula_of(name);
    uint64_t count = 0;
    if ((verified_formulas >> f & 1) != 0 && fast_flops(f, fn.inputs(), count)) {
      return count;
    }
    auto args = torch::profiler::impl::saveExtraArgs(fn);
    return args.empty() ? 0 : torch::profiler::impl::computeFlops(name, args);
  } catch (...) {
    // An op whose arguments PyTorch cannot read gets no count, as under torch.profiler.
    return 0;
  }
}

// An op with more than its name: its RecordFunction handle, its inputs (record_shapes),
// FLOPs (with_flops), the TorchScript modules it runs in (with_modules) and its overload
// name (capture_overload_names), packed as numbers (table.h). `name` is `fn.name()`, read
// once by the caller.
__attribute__((noinline)) void push_op_with_details(const at::RecordFunction& fn,
                                                    const char* name) {
  uint64_t id = fn.handle();
  uint64_t flops = record_flops ? op_flops(fn, name) : 0;
  Words words;
  uint64_t* head = words.reserve(3);
  head[0] = id;
  head[1] = flops;
  head[2] = 0;
  words.commit(head + 3);
  if (record_modules) {
    // As torch.profiler's with_modules: each module and method, each followed by ".",
    // written into the words as they are (no string of its own: a thread-local one cost a
    // TLS lookup per access from this shared library, four an op even for eager code,
    // whose hierarchy is empty), from the vector PyTorch returns (moved into one declared
    // outside the `try`, it cost two more destructions an op).
    try {
      const std::vector<std::string> modules = torch::jit::currentModuleHierarchy();
      size_t len = 0;
      for (const std::string& entry : modules) {
        len += entry.size() + 1;
      }
      if (len > 0) {
        size_t count = (len + 7) / 8;
        uint64_t* out = words.reserve(count);
        out[count - 1] = 0;
        char* bytes = reinterpret_cast<char*>(out);
        for (const std::string& entry : modules) {
          std::memcpy(bytes, entry.data(), entry.size());
          bytes += entry.size();
          *bytes++ = '.';
        }
        words.commit(out + count);
        words[2] = len;
      }
    } catch (...) {
      // No hierarchy: the op's module stays empty.
    }
  }
  size_t count_at = words.size();
  words.push(0);
  if (record_shapes) {
    try {
      const auto& inputs = fn.inputs();
      for (const c10::IValue& input : inputs) {
        pack_input(words, input);
      }
      words[count_at] = inputs.size();
    } catch (...) {
      // A failed read describes no input, as torch.profiler then writes none.
      words.truncate(count_at + 1);
      words[count_at] = 0;
    }
  }
  size_t overload_at = words.size();
  words.push(0);
  if (record_overloads) {
    // As torch.profiler captures it: an ATen op's overload ("Tensor" of aten::add.Tensor),
    // empty for the default overload and for what is no operator.
    const auto& op = fn.operator_name();
    if (op && !op->overload_name.empty()) {
      words[overload_at] = op->overload_name.size();
      words.append_bytes(op->overload_name);
    }
  }
  size_t collective_at = words.size();
  words.push(0);
  if (fn.isNcclMeta()) {
    // A collective's fields (c10d's record_param_comms), which torch.profiler writes on the
    // op with any flags: PyTorch's own keys and JSON texts.
    try {
      const auto fields = torch::profiler::impl::saveNcclMeta(fn);
      for (const auto& [key, value] : fields) {
        words.push(key.size());
        words.append_bytes(key);
        words.push(value.size());
        words.append_bytes(value);
      }
      words[collective_at] = fields.size();
    } catch (...) {
      // Unreadable: the op carries no collective fields.
      words.truncate(collective_at + 1);
      words[collective_at] = 0;
    }
  }
  if (fn.scope() == at::RecordScope::TORCHSCRIPT_FUNCTION) {
    // Where PyTorch's trace keeps no scope, FunctionEvent.scope reads it from here.
    words[2] |= static_cast<uint64_t>(fn.scope()) << packed::kScopeShift;
  }
  if (words[0] == 0 && words[1] == 0 && words[2] == 0 && words[count_at] == 0 &&
      words[overload_at] == 0 && words[collective_at] == 0) {
    table->push_op(name, &fn);
  } else {
    table->push_op_packed(name, &fn, words.data(), words.size());
  }
}

// Autograd's numbers of an op (RecordFunction::seqNr and the thread ids).
struct Numbers {
  int64_t sequence_number = -1;
  uint64_t forward_thread = 0;
  uint64_t thread = 0;
};

// The engine's range around a backward node (`autograd::engine::evaluate_function: Node`)
// has no numbers of its own; torch.profiler gives it its node's.
bool evaluates_a_node(const char* name) {
  static constexpr char kPrefix[] = "autograd::engine::evaluate_function: ";
  // Every aten op's name begins with "a" too: "au" rules them out before the compare.
  return name[0] == 'a' && name[1] == 'u' &&
         std::strncmp(name, kPrefix, sizeof(kPrefix) - 1) == 0;
}

// The numbers of the last backward node that ended on this thread since the engine's range
// around it began.
thread_local Numbers last_node;

// Ends an op. Autograd's numbers are read here, at the end: the engine sets a backward
// node's forward thread after the start callbacks ran.
void pop_op(const at::RecordFunction& fn) {
  Numbers n{fn.seqNr(), fn.forwardThreadId(), fn.threadId()};
  if (n.sequence_number < 0 && evaluates_a_node(fn.name())) {
    n = std::exchange(last_node, Numbers{});
  } else if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    last_node = n;
  }
  table->pop_op(&fn, n.sequence_number, n.forward_thread, n.thread);
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (record_memory) {
    // A thread that runs ops while recording reports its allocations: the reporter is put
    // in place at its first op (cheap once there: the lookup finds it first).
    install_reporter();
  }
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    return begin_user(fn);
  }
  // The name is read once: RecordFunction::name() is a call into PyTorch.
  const char* name = fn.name();
  if (evaluates_a_node(name)) {
    last_node = Numbers{};
  }
  if (record_details || fn.handle() != 0 || fn.isNcclMeta() ||
      fn.scope() == at::RecordScope::TORCHSCRIPT_FUNCTION) {
    push_op_with_details(fn, name);
  } else {
    table->push_op(name, &fn);
  }
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (ctx != nullptr) {
    table->end_user(static_cast<Context*>(ctx)->range);
  } else if (fn.scope() != at::RecordScope::USER_SCOPE) {
    pop_op(fn);
  }
}

// Names every dtype a tensor can have for the recorder, which writes a tensor's `Input type`
// from its code (table.h): PyTorch's own names, as `Tensor::dtype().name()` gives them.
void name_dtypes(const Table* t) {
  for (int code = 0; code < static_cast<int>(c10::ScalarType::NumOptions); code++) {
    try {
      auto name = c10::scalarTypeToTypeMeta(static_cast<c10::ScalarType>(code)).name();
      t->dtype_name(static_cast<uint8_t>(code), name.data(), name.size());
    } catch (...) {
      // A code with no dtype (Undefined): no tensor has it.
    }
  }
}

// What `attach` returns; mirrored by src/observer.rs.
enum AttachStatus : int32_t { kAttached = 0, kAlreadyAttached = 1, kTableMismatch = 2, kFailed = 3 };

// Registers the op callbacks, asking for inputs where attach's flags need them.
void register_callbacks() {
  handle = at::addGlobalCallback(
      at::RecordFunctionCallback(on_start, on_end)
          .needsInputs(record_shapes)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                   at::RecordScope::TORCHSCRIPT_FUNCTION, at::RecordScope::USER_SCOPE}));
}

// Registers the callbacks recording through `t`, with what `flags` asks (kShapes, kMemory,
// kFlops; FLOPs need the shapes' inputs, so they imply kShapes; kStack starts the Python
// tracer; kModules records TorchScript's module hierarchy, kOverloads each op's overload
// name). Called by the session engine, one session at a time, so the globals it writes are
// never written concurrently; no C++ exception leaves it (its caller is Rust).
int32_t attach(const Table* t, uint8_t flags) noexcept {
  if (handle || ops_paused) {
    return kAlreadyAttached;
  }
  if (t->version != kTableVersion || t->range_slot_size > kRangeSlotSize) {
    return kTableMismatch;
  }
  try {
    table = t;
    record_flops = (flags & kFlops) != 0;
    record_shapes = (flags & kShapes) != 0 || record_flops;
    record_memory = (flags & kMemory) != 0;
    record_stack = (flags & kStack) != 0;
    record_modules = (flags & kModules) != 0;
    record_overloads = (flags & kOverloads) != 0;
    record_storages = (flags & kStorages) != 0 && record_memory;
    record_details = record_shapes || record_modules || record_overloads;
    // Allocations are reported from the window's opening (window_opened), as PyTorch's
    // profiler reports none during a warm-up: the allocator keeps a block's size only while
    // a reporter listens, so one allocated then and freed in the window would be reported
    // freed here and not under torch.profiler.
    memory_on.store(false, std::memory_order_relaxed);
    if (record_shapes) {
      name_dtypes(t);
    }
    if (record_flops) {
      learn_flop_names_once();
    }
    // Also what tells PyTorch's `_RecordFunctionFast` (torch.compile's compiled-region ranges)
    // that a profiler listens on this thread, memory or not.
    install_reporter();
    register_callbacks();
    if (record_stack) {
      omniprof::python_tracer::start(t);
    }
    return kAttached;
  } catch (...) {
    memory_on.store(false, std::memory_order_relaxed);
    return kFailed;
  }
}

// Removes the callbacks (if registered). Ops begun before keep their end callback, which
// ends their range as usual.
void detach() noexcept {
  memory_on.store(false, std::memory_order_relaxed);
  ops_paused = false;
  if (std::exchange(record_stack, false)) {
    omniprof::python_tracer::stop();
  }
  remove_reporter();
  if (handle) {
    try {
      at::removeCallback(*handle);
    } catch (...) {
      // Nothing to undo: the handle is dropped either way.
    }
    handle.reset();
  }
}

// Collection of ops switched off (`on` 0) or back on, between attach and detach (PyTorch's
// toggle_collection_dynamic): the callbacks are removed, so that an op costs what it costs
// under PyTorch then, nothing, and registered again. Ops begun before keep their end
// callback. Returns 0, or 1 when PyTorch refused the callbacks again (no op is recorded).
uint8_t set_ops_collected(uint8_t on) noexcept {
  try {
    if (on == 0 && handle) {
      at::removeCallback(*handle);
      handle.reset();
      ops_paused = true;
    } else if (on != 0 && ops_paused) {
      register_callbacks();
      ops_paused = false;
    }
    return 0;
  } catch (...) {
    return 1;
  }
}

// ---- PyTorch's PrivateUse1 profiler stubs, for omniprof's bridge (src/stubs.rs) ----------

// Writes what failed into `error` (NUL-terminated, cut to fit); returns 1.
int32_t failed(char* error, size_t len, const char* what) noexcept {
  if (len > 0) {
    size_t n = std::min(std::strlen(what), len - 1);
    std::memcpy(error, what, n);
    error[n] = '\0';
  }
  return 1;
}

// Runs `call`, turning any exception into a message.
template <typename F>
int32_t guarded(char* error, size_t len, F&& call) noexcept {
  try {
    call();
    return 0;
  } catch (const std::exception& e) {
    return failed(error, len, e.what());
  } catch (...) {
    return failed(error, len, "unknown C++ exception");
  }
}

const torch::profiler::impl::ProfilerStubs* pu1() {
  return torch::profiler::impl::privateuse1Stubs();
}

uint8_t stubs_enabled() noexcept {
  try {
    return pu1()->enabled() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

size_t stubs_device_name(char* out, size_t len) noexcept {
  try {
    std::string name = c10::get_privateuse1_backend(true);
    size_t n = len > 0 ? std::min(name.size(), len - 1) : 0;
    std::memcpy(out, name.data(), n);
    if (len > 0) out[n] = '\0';
    return n;
  } catch (...) {
    if (len > 0) out[0] = '\0';
    return 0;
  }
}

int32_t stubs_record(int32_t* device, void** event, int64_t* cpu_ns, char* error,
                     size_t len) noexcept {
  return guarded(error, len, [&] {
    c10::DeviceIndex index = 0;
    torch::profiler::impl::ProfilerVoidEventStub stub;
    pu1()->record(device ? &index : nullptr, event ? &stub : nullptr, cpu_ns);
    if (device) *device = index;
    if (event) *event = stub ? new torch::profiler::impl::ProfilerVoidEventStub(std::move(stub)) : nullptr;
  });
}

int32_t stubs_elapsed(const void* start, const void* end, float* us, char* error,
                      size_t len) noexcept {
  using Stub = torch::profiler::impl::ProfilerVoidEventStub;
  return guarded(error, len, [&] {
    *us = pu1()->elapsed(static_cast<const Stub*>(start), static_cast<const Stub*>(end));
  });
}

void stubs_release(void* event) noexcept {
  try {
    delete static_cast<torch::profiler::impl::ProfilerVoidEventStub*>(event);
  } catch (...) {
    // A backend's event destructor that throws leaks nothing more than itself.
  }
}

int32_t stubs_on_each_device(void (*op)(void*, int32_t), void* context, char* error,
                             size_t len) noexcept {
  return guarded(error, len, [&] { pu1()->onEachDevice([&](int d) { op(context, d); }); });
}

int32_t stubs_synchronize(char* error, size_t len) noexcept {
  return guarded(error, len, [&] { pu1()->synchronize(); });
}

int32_t stubs_mark(const char* name, char* error, size_t len) noexcept {
  return guarded(error, len, [&] { pu1()->mark(name); });
}

int32_t stubs_range_push(const char* name, char* error, size_t len) noexcept {
  return guarded(error, len, [&] { pu1()->rangePush(name); });
}

int32_t stubs_range_pop(char* error, size_t len) noexcept {
  return guarded(error, len, [&] { pu1()->rangePop(); });
}

const omniprof::StubsApi stubs_api{
    omniprof::kStubsApiVersion, stubs_enabled, stubs_device_name, stubs_record,
    stubs_elapsed, stubs_release, stubs_on_each_device, stubs_synchronize,
    stubs_mark, stubs_range_push, stubs_range_pop,
};

// The capture window opened: allocations are reported from now on, and the Python tracer
// begins what it pushed during the warm-up.
void window_opened() noexcept {
  memory_on.store(record_memory, std::memory_order_relaxed);
  if (record_stack) {
    omniprof::python_tracer::window_opened();
  }
}

const omniprof::EntryPoints entry_points{kTableVersion, attach, detach, window_opened,
                                          set_ops_collected};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // Capsules, not addresses: omniprof's native module takes nothing else, so no integer or
  // other object a Python program passes it is called as a function table. Both structs
  // are static: they outlive every capsule, which therefore has no destructor.
  m.def(
      "entry_points",
      [] { return pybind11::capsule(&entry_points, omniprof::kEntryPointsCapsule); },
      "attach, detach, window_opened and set_ops_collected (an EntryPoints, table.h) in a "
      "capsule named "
      "omniprof.observer.entry_points, for omniprof's native module.");
  m.def(
      "stubs_api", [] { return pybind11::capsule(&stubs_api, omniprof::kStubsApiCapsule); },
      "The StubsApi over PyTorch's PrivateUse1 profiler stubs (table.h) in a capsule named "
      "omniprof.observer.stubs_api, for omniprof's native module.");
  m.def(
      "privateuse1_profiler",
      []() -> pybind11::object {
        const omniprof::KinetoEntryPoint* entry = omniprof::privateuse1::profiler_entry_point();
        if (entry == nullptr) return pybind11::none();
        return pybind11::capsule(entry, omniprof::kKinetoEntryPointCapsule);
      },
      "The Kineto profiler a PrivateUse1 backend registered with PyTorch "
      "(REGISTER_PRIVATEUSE1_PROFILER), as a plugin entry point (a KinetoEntryPoint, "
      "table.h) in a capsule named omniprof.observer.privateuse1_profiler; None while no "
      "backend registered one.");
  m.attr("max_stack_depth") = omniprof::python_tracer::kMaxDepth;
  m.def("stack_frames_cut", [] { return omniprof::python_tracer::cut_frames(); },
        "Python frames not recorded, since the process started, because their thread's "
        "stack was deeper than the tracer records.");
  m.def(
      "flop_op_names",
      []() -> pybind11::object {
        if (flop_names == nullptr) return pybind11::none();
        std::vector<std::string> names;
        for (const std::string& rest : flop_names->rests) names.push_back(flop_names->prefix + rest);
        std::sort(names.begin(), names.end());
        pybind11::list out;
        for (const std::string& name : names) out.append(name);
        return out;
      },
      "The names of the ops PyTorch counts FLOPs of, sorted, as learned from its "
      "saveExtraArgs by the first session with_flops; None before one.");
  m.def(
      "fast_flop_op_names",
      []() {
        pybind11::list names;
        for (const auto& [name, formula] : kFormulas) {
          if ((verified_formulas >> formula & 1) != 0) names.append(std::string(name));
        }
        return names;
      },
      "The ops whose FLOPs the observer counts itself, its formula having agreed with "
      "PyTorch's on every sample (checked by the first session with_flops), sorted.");
  m.def("registered", [] { return handle.has_value(); },
        "Whether the callback is registered.");
  m.def("torch_has_callbacks", [] { return at::hasGlobalCallbacks(); },
        "Whether PyTorch has any global RecordFunction callback registered.");
  m.def("remove_reporter", [] { return remove_reporter(); },
        "Takes omniprof's allocator reporter out of this thread's debug info (before a "
        "torch.profiler session starts here); False when it could not.");
  m.def("reporter_installed",
        [] {
          return c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) ==
                 reporter().get();
        },
        "Whether this thread's allocator reports go to omniprof's reporter.");
}
