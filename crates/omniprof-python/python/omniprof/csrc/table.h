// The recorder's C function table, as omniprof's native module hands it to the observer and
// the Python tracer; mirrors `RecorderTable` in src/observer.rs (same order, same types).

#pragma once

#include <cstddef>
#include <cstdint>

namespace omniprof {

// What an op carries besides its name (push_op_packed), packed as the numbers it is, in
// 64-bit words: the recorder keeps the words as they are and writes torch.profiler's text of
// them (`Record function id`, `Input Dims`, `Input Strides`, `Input type`, `Concrete Inputs`,
// `flops`, `Module Hierarchy`, `Overload Name`) when the session stops, so no op pays for text
// or allocations while it runs. Unpacked by src/op_details.rs, which mirrors this layout:
//   word 0          the op's RecordFunction handle (0: PyTorch gave it none, as it does
//                   unless a callback such as its execution trace observer needs ids)
//   word 1          the op's FLOP count (0: not counted)
//   word 2          bits 0..55: L, the byte length of its module hierarchy (0: none), as
//                   PyTorch writes it ("TOP(Model)::forward.linear(Linear)::forward."); bits
//                   56..63: its RecordScope when that is TORCHSCRIPT_FUNCTION (else 0)
//   (L + 7) / 8     words holding those bytes
//   next word       N, its inputs (0: not described)
//   then N inputs, each a tag word (its kind in the low 8 bits) and what the kind carries
//   (below), and last
//   next word       O, the byte length of its overload name (0: none or the default), as
//                   PyTorch's OperatorName has it ("Tensor" of aten::add.Tensor)
//   (O + 7) / 8     words holding those bytes
//   next word       C, its collective fields (0: none; a record_param_comms op's, as
//                   PyTorch's saveNcclMeta gives them), then C fields, each a key's byte
//                   length K, (K + 7) / 8 words of its bytes, the byte length V of the JSON
//                   text PyTorch writes for its value, and (V + 7) / 8 words of that text
// The input kinds:
namespace packed {
// Where word 2 keeps the op's RecordScope, above its module hierarchy's length.
constexpr int kScopeShift = 56;
// Nothing described: an undefined tensor, None, a string, a long list.
constexpr uint64_t kOther = 0;
// Tag bits 8..15: the dtype (a c10::ScalarType, named by dtype_name); bit 16: strided; bit
// 17: its storage follows (attach's kStorages). Then the rank R, R sizes, when strided
// R strides, and with the storage three words: its data pointer, its byte size, and its
// device (the c10::DeviceType in bits 0..7, the index as an int8 in bits 8..15).
constexpr uint64_t kTensor = 1;
// Then 0 or 1.
constexpr uint64_t kBool = 2;
// Then the value (an int64).
constexpr uint64_t kInt = 3;
// Then the value's bits (a double).
constexpr uint64_t kDouble = 4;
// Tag bits 8..: the count C (at most 30); then C int64s, doubles' bits, or (kBoolList) 0s
// and 1s.
constexpr uint64_t kIntList = 5;
constexpr uint64_t kDoubleList = 6;
// A list of tensors: tag bits 8..: its length C; then C tensors (kTensor, or kOther for an
// undefined one), each as above.
constexpr uint64_t kTensorList = 7;
// Another scalar (complex, symbolic), as PyTorch's text: tag bits 8..: its byte length B;
// then (B + 7) / 8 words holding the bytes.
constexpr uint64_t kScalarText = 8;
constexpr uint64_t kBoolList = 9;
}  // namespace packed

struct Table {
  uint32_t version;
  uint32_t range_slot_size;
  void (*push_op)(const char* name, const void* key);
  // push_op, with what `words` (`count` of them) pack as above.
  void (*push_op_packed)(const char* name, const void* key, const uint64_t* words,
                         size_t count);
  // Ends an op, with autograd's numbers for it: its sequence number (negative: none, and
  // the others are ignored), the forward op's thread on a backward node (0 otherwise) and
  // PyTorch's id of this thread. One entry for every op, so that one function's code ends
  // them all.
  void (*pop_op)(const void* key, int64_t sequence_number, uint64_t forward_thread,
                 uint64_t thread);
  // Begins a user range; `record_id` is its RecordFunction handle (0: none), written as
  // `Record function id`.
  uint8_t (*begin_user)(const char* name, uint64_t record_id, const int64_t* dims,
                        const size_t* ranks, size_t inputs, void* out);
  void (*end_user)(void* range);
  void (*memory)(uint64_t addr, int64_t bytes, uint64_t total_allocated,
                 uint64_t total_reserved, int32_t device_type, int32_t device_index,
                 uint8_t out_of_memory);
  // Interns a Python frame's name (`len` bytes of UTF-8): a function's when `module` < 0,
  // else an nn.Module call's with that module id. Returns the name's id.
  uint32_t (*frame_name)(const char* text, size_t len, int64_t module);
  // Begins a frame named `name` on this thread, writing it into `out` (kFrameSize bytes);
  // returns 0 when nothing records (then `out` must not be ended).
  uint8_t (*begin_frame)(uint32_t name, void* out);
  // begin_frame, for a frame that was running when the capture window opened (pushed during
  // a warm-up): begun at the window's start.
  uint8_t (*begin_frame_at_window_start)(uint32_t name, void* out);
  // Ends a frame `begin_frame` wrote, on the thread that began it.
  void (*end_frame)(const void* frame);
  // Names the dtype `code` (a c10::ScalarType) as a tensor's `Input type` is written
  // (`len` bytes of UTF-8, PyTorch's TypeMeta name: "float", "long int"); attach names every
  // one before the first op.
  void (*dtype_name)(uint8_t code, const char* text, size_t len);
};

// The running PyTorch's PrivateUse1 profiler stubs (torch/csrc/profiler/stubs/base.h), as
// omniprof's native module calls them (`StubsApi` in src/stubs.rs, same order, same types).
// A call that can fail returns 0 on success, else 1 with the exception's message in `error`
// (`error_len` bytes, NUL-terminated); no exception leaves it.
struct StubsApi {
  uint32_t version;
  // 1 when PyTorch's PrivateUse1 stubs say they are enabled (its default ones do not).
  uint8_t (*enabled)();
  // Writes the PrivateUse1 backend's name (lower case, as torch.utils.rename_privateuse1_backend
  // set it) into `out`, NUL-terminated; returns its length.
  size_t (*device_name)(char* out, size_t len);
  // ProfilerStubs::record: `event` receives an owned event to pass to `release` once.
  int32_t (*record)(int32_t* device, void** event, int64_t* cpu_ns, char* error,
                    size_t error_len);
  int32_t (*elapsed)(const void* start, const void* end, float* us, char* error,
                     size_t error_len);
  void (*release)(void* event);
  int32_t (*on_each_device)(void (*op)(void* context, int32_t device), void* context,
                            char* error, size_t error_len);
  int32_t (*synchronize)(char* error, size_t error_len);
  int32_t (*mark)(const char* name, char* error, size_t error_len);
  int32_t (*range_push)(const char* name, char* error, size_t error_len);
  int32_t (*range_pop)(char* error, size_t error_len);
};

constexpr uint32_t kStubsApiVersion = 1;

constexpr uint32_t kTableVersion = 16;

// The observer's entry points, as omniprof's native module takes them (`EntryPoints` in
// src/observer.rs): in a capsule named kEntryPointsCapsule, so that nothing but this struct
// (no integer, no other capsule) is taken for them. `version` is the recorder table's
// (kTableVersion) this observer was built for; it comes first, so a struct of another layout
// is refused before its functions are read. Neither function throws.
struct EntryPoints {
  uint32_t version;
  // Registers the callback with the recorder's table: 0 attached, 1 already attached, 2 the
  // table's version is not kTableVersion, 3 PyTorch refused it.
  int32_t (*attach)(const Table* table, uint8_t flags);
  void (*detach)();
  // The capture window opened (after an attach at the warm-up, or with the attach):
  // allocations are reported from then on, and what was begun before it, while the recorder
  // did not record, is begun again in it.
  void (*window_opened)();
  // Collection of ops switched off (0) or back on while attached: the callbacks are removed
  // and registered again. Returns 0, or 1 when PyTorch refused them again.
  uint8_t (*set_ops_collected)(uint8_t on);
};

// The Kineto profiler a PrivateUse1 backend registered with PyTorch
// (REGISTER_PRIVATEUSE1_PROFILER), as a plugin entry point of omniprof's C ABI
// (omniprof_kineto_adapter.h): `KinetoEntryPoint` in src/privateuse1.rs, same order, same
// types. Neither function throws.
struct KinetoEntryPoint {
  uint32_t version;
  // KinetoPlugin_register over the registry's factory.
  int (*register_profiler)(const void* registry);
  // OmniprofPlugin_lastError: this thread's last failure of a call into the profiler.
  const char* (*last_error)();
};

constexpr uint32_t kKinetoEntryPointVersion = 1;

// The capsules' names (`ENTRY_POINTS_CAPSULE` in src/observer.rs, `STUBS_API_CAPSULE` in
// src/stubs.rs, `KINETO_ENTRY_POINT_CAPSULE` in src/privateuse1.rs). Each struct's `version`
// comes first as well.
constexpr const char* kEntryPointsCapsule = "omniprof.observer.entry_points";
constexpr const char* kStubsApiCapsule = "omniprof.observer.stubs_api";
constexpr const char* kKinetoEntryPointCapsule = "omniprof.observer.privateuse1_profiler";
constexpr uint32_t kRangeSlotSize = 32;
constexpr size_t kFrameSize = 16;

}  // namespace omniprof
