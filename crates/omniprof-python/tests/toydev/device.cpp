// toydev: a small PrivateUse1 device for the tests of omniprof's PrivateUse1 paths: its
// profiler stubs (against the legacy profiler's `use_device`) and its Kineto profiler
// (against torch.profiler, through omniprof's Kineto adapter, as a plugin file and through
// PyTorch's registry).
//
// Each device has one stream, served by a worker thread in launch order: a kernel is a task
// on that queue, and so is an event record, which takes its timestamp when the worker
// reaches it (as a CUDA event does when the stream gets there). Memory is host memory.
// The ops: empty (memory_format and strided), copies to, from and within the device
// (`_copy_from`, blocking), and float32 `add`/`mul` of same-shaped contiguous tensors, whose
// kernels first spin for `set_kernel_us` microseconds so that every op has a known device
// time.
//
// ProfilerStubs are registered for PrivateUse1 (torch/csrc/profiler/stubs/base.h): record,
// elapsed, onEachDevice, synchronize, enabled, mark, rangePush and rangePop, each call
// counted (`stub_calls`), and `set_stub_mode` makes them misbehave for the bad-input tests:
// "throw" (every call throws, enabled() stays true), "disabled" (enabled() false and every
// call throws, as PyTorch's default stubs), "hang" (elapsed blocks until `release_hang`).
//
// A libkineto::IActivityProfiler ("toydev") is registered with REGISTER_PRIVATEUSE1_PROFILER
// and exported as a Kineto-ABI plugin with OMNIPROF_EXPORT_KINETO_PROFILER: while one of its
// sessions runs, each add/mul records its launch (a privateuse1_runtime event on the
// launching thread) and its kernel (a kernel event on the device's stream, with its real
// start and end), linked to the host op whose correlation id was pushed on the launching
// thread, and to each other by a flow. `set_profiler_mode` makes configure return null or
// throw for the bad-input tests.
//
// This file is a plain shared library (no Python), so that omniprof's CLI can load it as a
// plugin; toydev.cpp is the Python module over it (toydev.h).

// PyTorch's wheels are built with Kineto; its PrivateUse1 profiler registry is declared only
// then.
#ifndef USE_KINETO
#define USE_KINETO 1
#endif

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/profiler/stubs/base.h>
#include <torch/library.h>

#include <omniprof_kineto_adapter.h>

#include "toydev.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

namespace {

constexpr int kDevices = 2;

// Whether a device clock ignores idle time (see Stream::run): events then measure exactly the
// kernels' work between them, whatever the host's scheduling.
std::atomic<bool> strict_clock{false};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One device's stream: a FIFO of tasks run by its worker thread.
class Stream {
 public:
  Stream() : worker_([this] { run(); }) { worker_.detach(); }

  void launch(std::function<void()> task) {
    std::vector<std::function<void()>> ran;
    {
      std::lock_guard<std::mutex> g(mu_);
      tasks_.push_back(std::move(task));
      queued_++;
      ran.swap(ran_);
    }
    cv_.notify_all();
  }

  // Waits until every task launched so far has run.
  void synchronize() {
    std::vector<std::function<void()>> ran;
    std::unique_lock<std::mutex> g(mu_);
    uint64_t target = queued_;
    cv_.wait(g, [&] { return done_ >= target; });
    ran.swap(ran_);
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> g(mu_);
        if (tasks_.empty()) {
          cv_.wait(g, [&] { return !tasks_.empty(); });
          // Woken from idle: the device clock catches up with the host's, unless strict.
          if (!strict_clock.load()) {
            clock_ns = std::max(clock_ns, now_ns());
          }
        }
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
      {
        // What the task holds (tensors) is released by the next launching or synchronizing
        // thread, never here: a tensor's last release may need the GIL, which a thread
        // waiting for this stream may hold.
        std::lock_guard<std::mutex> g(mu_);
        ran_.push_back(std::move(task));
        done_++;
      }
      cv_.notify_all();
    }
  }

 public:
  // The device's clock, read and advanced by its worker only (in tasks): it moves by exactly
  // each kernel's time while the stream is busy.
  int64_t clock_ns = now_ns();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::function<void()>> ran_;
  uint64_t queued_ = 0;
  uint64_t done_ = 0;
  std::thread worker_;
};

Stream& stream(int device) {
  // Never destroyed: the workers run for the process's life.
  static Stream* streams = new Stream[kDevices];
  return streams[device];
}

thread_local int current_device = 0;
std::atomic<int64_t> kernel_us{0};

// ---- device guard -----------------------------------------------------------------------

struct Guard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(c10::DeviceType::PrivateUse1, current_device);
  }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) current_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) current_device = d.index();
  }
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return kDevices; }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);

// ---- allocator --------------------------------------------------------------------------

void free_block(void* p) { std::free(p); }

struct Allocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = std::malloc(n == 0 ? 1 : n);
    return {p, p, &free_block, c10::Device(c10::DeviceType::PrivateUse1, current_device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

Allocator allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator);

// ---- what the Kineto profiler's sessions record -------------------------------------

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One kernel as a session saw it: its launch on a host thread and its run on a stream.
struct KernelRecord {
  std::string name;
  int device = 0;
  int32_t thread = 0;
  int64_t launch_start = 0, launch_end = 0;
  int64_t start = 0, end = 0;
  uint64_t op = 0;     // the correlation id pushed on the launching thread, 0 if none
  uint32_t flow = 0;   // links the launch to the kernel
};

// What one session recorded; kernels still running when it stops add to it later, and are
// dropped at processTrace if they ended past the window.
struct Recording {
  std::mutex mu;
  std::vector<KernelRecord> kernels;
};

std::mutex sessions_mu;
// The recordings of the sessions that run (between start and stop), by session.
std::map<const void*, std::shared_ptr<Recording>> running;
// Per thread, per session: the correlation ids pushed and not popped.
thread_local std::map<const void*, std::vector<uint64_t>> pushed;
std::atomic<uint32_t> next_flow{1};

// The thread's system id, as profilers name host threads.
int32_t thread_id() { return static_cast<int32_t>(syscall(SYS_gettid)); }

// ---- ops --------------------------------------------------------------------------------

int device_of(const c10::optional<at::Device>& d) {
  return d && d->has_index() ? d->index() : current_device;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                               c10::optional<at::Layout>, c10::optional<at::Device> device,
                               c10::optional<bool>,
                               c10::optional<at::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_of(device)));
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, &allocator, ks, c10::dtype_or_default(dtype),
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         c10::optional<at::ScalarType> dtype, c10::optional<at::Layout>,
                         c10::optional<at::Device> device, c10::optional<bool>) {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_of(device)));
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, &allocator, ks,
                                           c10::dtype_or_default(dtype));
}

// Copies between the host and a device or within a device, contiguous of one dtype; waits
// for the device's stream first (a blocking copy).
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool) {
  TORCH_CHECK(self.is_contiguous() && dst.is_contiguous(), "toydev copies contiguous tensors");
  TORCH_CHECK(self.scalar_type() == dst.scalar_type(), "toydev copies within a dtype");
  TORCH_CHECK(self.nbytes() == dst.nbytes(), "toydev copies same-sized tensors");
  for (const at::Tensor* t : {&self, &dst}) {
    if (t->device().type() == c10::DeviceType::PrivateUse1) {
      stream(t->device().index()).synchronize();
    }
  }
  std::memcpy(dst.data_ptr(), self.data_ptr(), self.nbytes());
  return dst;
}

// An elementwise kernel on the current stream of `a`'s device: spins kernel_us, then runs.
at::Tensor binary(const at::Tensor& a, const at::Tensor& b, float alpha, bool multiply) {
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat,
              "toydev add/mul take float32");
  TORCH_CHECK(a.sizes() == b.sizes() && a.is_contiguous() && b.is_contiguous(),
              "toydev add/mul take contiguous tensors of one shape");
  int device = a.device().index();
  at::Tensor out = empty_memory_format(a.sizes(), at::kFloat, c10::nullopt,
                                       a.device(), c10::nullopt, c10::nullopt);
  int64_t spin = kernel_us.load();
  Stream* s = &stream(device);
  // Each running session gets this kernel, linked to the op its thread pushed for it. Its
  // launch is the host's work from here until the kernel is queued.
  int64_t launch_start = unix_ns();
  std::vector<std::pair<std::shared_ptr<Recording>, KernelRecord>> seen;
  {
    std::lock_guard<std::mutex> g(sessions_mu);
    for (auto& [session, recording] : running) {
      KernelRecord k;
      k.name = multiply ? "toydev_mul_kernel" : "toydev_add_kernel";
      k.device = device;
      k.thread = thread_id();
      auto ids = pushed.find(session);
      k.op = ids != pushed.end() && !ids->second.empty() ? ids->second.back() : 0;
      k.flow = next_flow++;
      seen.emplace_back(recording, std::move(k));
    }
  }
  int64_t launch_end = unix_ns();
  for (auto& [recording, k] : seen) {
    k.launch_start = launch_start;
    k.launch_end = launch_end;
  }
  s->launch([a, b, out, alpha, multiply, spin, s, seen]() mutable {
    int64_t started = unix_ns();
    int64_t until = now_ns() + spin * 1000;
    while (now_ns() < until) {
    }
    s->clock_ns += spin * 1000;
    const float* x = a.data_ptr<float>();
    const float* y = b.data_ptr<float>();
    float* z = out.data_ptr<float>();
    for (int64_t i = 0; i < out.numel(); i++) {
      z[i] = multiply ? x[i] * y[i] : x[i] + alpha * y[i];
    }
    int64_t ended = unix_ns();
    for (auto& [recording, k] : seen) {
      k.start = started;
      k.end = ended;
      std::lock_guard<std::mutex> g(recording->mu);
      recording->kernels.push_back(k);
    }
  });
  return out;
}

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return binary(a, b, alpha.toFloat(), false);
}

at::Tensor mul(const at::Tensor& a, const at::Tensor& b) { return binary(a, b, 1, true); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_copy_from", copy_from);
  m.impl("add.Tensor", add);
  m.impl("mul.Tensor", mul);
}

// ---- profiler stubs ---------------------------------------------------------------------

// An event: its timestamp once its stream reached it.
struct Event {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int64_t ns = 0;

  int64_t wait() {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return done; });
    return ns;
  }
};

enum Mode { kOk = 0, kThrow = 1, kDisabled = 2, kHang = 3 };
std::atomic<int> mode{kOk};

// The hang mode's gate: elapsed waits here until release_hang.
std::mutex hang_mu;
std::condition_variable hang_cv;
bool hang_released = false;

std::mutex calls_mu;
std::map<std::string, int64_t> calls;

void count(const char* what) {
  std::lock_guard<std::mutex> g(calls_mu);
  calls[what]++;
}

void check(const char* what) {
  count(what);
  int m = mode.load();
  if (m == kThrow) {
    throw std::runtime_error(std::string("toydev stubs fail on purpose (") + what + ")");
  }
  if (m == kDisabled) {
    throw std::runtime_error("toydev used in profiler but not enabled.");
  }
}

struct Stubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    check("record");
    if (device) *device = static_cast<c10::DeviceIndex>(current_device);
    auto e = std::make_shared<Event>();
    if (cpu_ns) *cpu_ns = c10::getTime();
    Stream* s = &stream(current_device);
    s->launch([e, s] {
      std::lock_guard<std::mutex> g(e->mu);
      e->ns = s->clock_ns;
      e->done = true;
      e->cv.notify_all();
    });
    if (event) *event = e;
  }

  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* a,
                const torch::profiler::impl::ProfilerVoidEventStub* b) const override {
    check("elapsed");
    if (mode.load() == kHang) {
      std::unique_lock<std::mutex> g(hang_mu);
      hang_cv.wait(g, [] { return hang_released; });
    }
    auto* start = static_cast<Event*>(a->get());
    auto* end = static_cast<Event*>(b->get());
    return static_cast<float>(end->wait() - start->wait()) / 1000.0f;
  }

  void mark(const char*) const override { check("mark"); }
  void rangePush(const char*) const override { check("rangePush"); }
  void rangePop() const override { check("rangePop"); }
  bool enabled() const override {
    count("enabled");
    return mode.load() != kDisabled;
  }
  void onEachDevice(std::function<void(int)> op) const override {
    check("onEachDevice");
    int before = current_device;
    for (int d = 0; d < kDevices; d++) {
      current_device = d;
      op(d);
    }
    current_device = before;
  }
  void synchronize() const override {
    check("synchronize");
    stream(current_device).synchronize();
  }
};

Stubs stubs;

struct RegisterStubs {
  RegisterStubs() { torch::profiler::impl::registerPrivateUse1Methods(&stubs); }
};
RegisterStubs register_stubs;

// ---- the Kineto profiler ----------------------------------------------------------------

enum ProfilerMode { kProfilerOk = 0, kConfigureNull = 1, kConfigureThrows = 2 };
std::atomic<int> profiler_mode{kProfilerOk};
std::atomic<int64_t> sessions_made{0};

class ToySession final : public libkineto::IActivityProfilerSession {
 public:
  explicit ToySession(std::set<libkineto::ActivityType> types)
      : types_(std::move(types)), recording_(std::make_shared<Recording>()) {}

  ~ToySession() override { stop(); }

  void start() override {
    std::lock_guard<std::mutex> g(sessions_mu);
    running[this] = recording_;
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    std::lock_guard<std::mutex> g(sessions_mu);
    running.erase(this);
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  void pushCorrelationId(uint64_t id) override { pushed[this].push_back(id); }
  void popCorrelationId() override {
    auto& ids = pushed[this];
    if (!ids.empty()) ids.pop_back();
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) { return nullptr; }, 0, INT64_MAX);
  }

  // Every kernel that ended by `end`, as Kineto's device profilers log theirs: its launch on
  // the host thread (privateuse1_runtime) and its run on the device's stream (kernel), both
  // linked to the op that launched it, joined by a flow.
  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t end) override {
    std::vector<KernelRecord> kernels;
    {
      std::lock_guard<std::mutex> g(recording_->mu);
      kernels.swap(recording_->kernels);
    }
    int32_t pid = static_cast<int32_t>(getpid());
    for (const KernelRecord& k : kernels) {
      if (k.end > end) continue;
      const libkineto::ITraceActivity* op =
          k.op ? linked(static_cast<int32_t>(k.op)) : nullptr;
      if (types_.count(libkineto::ActivityType::PRIVATEUSE1_RUNTIME)) {
        libkineto::GenericTraceActivity call;
        call.activityType = libkineto::ActivityType::PRIVATEUSE1_RUNTIME;
        call.activityName = "toydevLaunchKernel";
        call.startTime = k.launch_start;
        call.endTime = k.launch_end;
        call.device = pid;
        call.resource = k.thread;
        call.threadId = k.thread;
        call.id = static_cast<int32_t>(k.flow);
        call.linked = op;
        call.flow.id = k.flow;
        call.flow.type = libkineto::kLinkAsyncCpuGpu;
        call.flow.start = 1;
        call.addTypedMetadata("correlation", int64_t{k.flow});
        logger.handleGenericActivity(call);
      }
      if (types_.count(libkineto::ActivityType::CONCURRENT_KERNEL)) {
        libkineto::GenericTraceActivity kernel;
        kernel.activityType = libkineto::ActivityType::CONCURRENT_KERNEL;
        kernel.activityName = k.name;
        kernel.startTime = k.start;
        kernel.endTime = k.end;
        kernel.device = k.device;
        kernel.resource = kStream;
        kernel.id = static_cast<int32_t>(k.flow);
        kernel.linked = op;
        kernel.flow.id = k.flow;
        kernel.flow.type = libkineto::kLinkAsyncCpuGpu;
        kernel.flow.start = 0;
        kernel.addTypedMetadata("device", int64_t{k.device});
        kernel.addTypedMetadata("stream", int64_t{kStream});
        kernel.addTypedMetadata("correlation", int64_t{k.flow});
        logger.handleGenericActivity(kernel);
      }
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  static constexpr int kStream = 7;

 private:
  std::set<libkineto::ActivityType> types_;
  std::shared_ptr<Recording> recording_;
};

class ToyProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return types_;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& types, const libkineto::Config&) override {
    int mode = profiler_mode.load();
    if (mode == kConfigureThrows) throw std::runtime_error("toydev configure fails on purpose");
    if (mode == kConfigureNull) return nullptr;
    std::set<libkineto::ActivityType> ours;
    for (auto t : types) {
      if (types_.count(t)) ours.insert(t);
    }
    if (ours.empty()) return nullptr;
    sessions_made++;
    return std::make_unique<ToySession>(std::move(ours));
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"toydev"};
  std::set<libkineto::ActivityType> types_{libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                                            libkineto::ActivityType::CONCURRENT_KERNEL};
};

}  // namespace

// What PyTorch's torch.profiler reaches through Kineto, and omniprof through its registry.
REGISTER_PRIVATEUSE1_PROFILER(ToyProfiler);

// What omniprof loads from KINETO_PLUGIN_LIB_DIR_PATH: the same class.
OMNIPROF_EXPORT_KINETO_PROFILER(ToyProfiler)

// ---- the Python module's API (toydev.h) -------------------------------------------------

namespace toydev {

int device_count() { return kDevices; }
int current() { return current_device; }
void set_device(int d) {
  TORCH_CHECK(d >= 0 && d < kDevices, "no toydev device ", d);
  current_device = d;
}
void synchronize(int d) {
  if (d < 0) {
    for (int i = 0; i < kDevices; i++) stream(i).synchronize();
  } else {
    stream(d).synchronize();
  }
}
void set_strict_clock(bool on) { strict_clock.store(on); }
void set_kernel_us(int64_t us) { kernel_us.store(us); }
void set_stub_mode(int m) { mode.store(m); }
void release_hang() {
  {
    std::lock_guard<std::mutex> g(hang_mu);
    hang_released = true;
  }
  hang_cv.notify_all();
}
std::map<std::string, int64_t> stub_calls() {
  std::lock_guard<std::mutex> g(calls_mu);
  return calls;
}
void reset_stub_calls() {
  std::lock_guard<std::mutex> g(calls_mu);
  calls.clear();
}
void set_profiler_mode(int m) { profiler_mode.store(m); }
int64_t profiler_sessions() { return sessions_made.load(); }

}  // namespace toydev
