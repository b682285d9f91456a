/*
 * omniprof_kineto_adapter.h: any libkineto::IActivityProfiler as a Kineto-ABI plugin.
 *
 * A PyTorch PrivateUse1 backend that profiles its device for Kineto implements
 * libkineto::IActivityProfiler (PyTorch's torch/include/kineto/IActivityProfiler.h) and
 * registers it with REGISTER_PRIVATEUSE1_PROFILER. This header turns that same class into a
 * plugin of the C ABI in omniprof_plugin.h, which omniprof loads from
 * KINETO_PLUGIN_LIB_DIR_PATH (and `omniprof plugins check` checks), with one line in one
 * source file of the library:
 *
 *     #include <omniprof_kineto_adapter.h>
 *     OMNIPROF_EXPORT_KINETO_PROFILER(MyActivityProfiler)
 *
 * Build it as C++20 against PyTorch's headers (torch/include and torch/include/kineto, as
 * torch.utils.cpp_extension does) and link libtorch_cpu, which defines the Kineto classes
 * the adapter uses (libkineto::Config, GenericTraceActivity::metadataJson). omniprof's Python
 * package uses the same adapter for a factory registered with REGISTER_PRIVATEUSE1_PROFILER,
 * so such a backend's profiler records in omniprof's sessions without any plugin file.
 *
 * What is mapped (docs/plugins.md says it for vendors):
 *   - profilerQuery: the profiler's name() and availableActivities(), each Kineto
 *     ActivityType that has an ABI type (kTypes below); the profiler is made by the factory
 *     once, at the first query, and kept for the life of the library.
 *   - profilerCreate: configure(types, Config) with the types the host enabled that the
 *     profiler offers; a null session or an exception fails the call.
 *   - profilerStart / profilerStop: start() / stop(), each also noting the time, which bounds
 *     the window processTrace is given.
 *   - correlation pushes and pops: pushCorrelationId / popCorrelationId (and the user ones).
 *   - profilerProcessEvents: processTrace(logger, getLinkedActivity, start, end) with a
 *     logger that hands each activity to the host's trace builder (type, times, device and
 *     resource, name, metadata, flow, counter values), then the activities of
 *     getTraceBuffer(), getDeviceInfo() and getResourceInfos(), as Kineto takes them from
 *     its child profilers. getLinkedActivity(id) answers for any host op id: an activity
 *     linked to it is the work of the op whose correlation id the host pushed (the event's
 *     eventId). Session errors() after processing fail the call, naming them.
 *   - Not carried (the ABI has no place for them): getMetadata() and getDeviceProperties()
 *     of the session, toggleCollectionDynamic.
 * Every exception stays on this side: the call returns -1 and OmniprofPlugin_lastError()
 * says what was thrown.
 *
 * One adapter per shared library: the state lives in an unnamed namespace, so two libraries
 * that both include this header (a plugin and omniprof's observer, say) never share it.
 */
#ifndef OMNIPROF_KINETO_ADAPTER_H
#define OMNIPROF_KINETO_ADAPTER_H

#include <Config.h>
#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "omniprof_plugin.h"

namespace omniprof_kineto_adapter {
namespace {

using libkineto::ActivityType;

/* Makes the profiler the adapter serves. */
using Factory = std::function<std::unique_ptr<libkineto::IActivityProfiler>()>;

/* Each Kineto activity type that has an ABI type, and that type. */
struct TypePair {
  ActivityType kineto;
  KinetoPlugin_ProfileEventType abi;
};
constexpr TypePair kTypes[] = {
    {ActivityType::CPU_OP, KINETO_PLUGIN_PROFILE_EVENT_TYPE_CPU_OP},
    {ActivityType::USER_ANNOTATION, KINETO_PLUGIN_PROFILE_EVENT_TYPE_USER_ANNOTATION},
    {ActivityType::GPU_USER_ANNOTATION, KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_USER_ANNOTATION},
    {ActivityType::GPU_MEMCPY, KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_MEMCPY},
    {ActivityType::GPU_MEMSET, KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_MEMSET},
    {ActivityType::CONCURRENT_KERNEL, KINETO_PLUGIN_PROFILE_EVENT_TYPE_CONCURRENT_KERNEL},
    {ActivityType::EXTERNAL_CORRELATION, KINETO_PLUGIN_PROFILE_EVENT_TYPE_EXTERNAL_CORRELATION},
    {ActivityType::CUDA_RUNTIME, KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_RUNTIME},
    {ActivityType::CUDA_DRIVER, KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_DRIVER},
    {ActivityType::CPU_INSTANT_EVENT, KINETO_PLUGIN_PROFILE_EVENT_TYPE_CPU_INSTANT_EVENT},
    {ActivityType::PYTHON_FUNCTION, KINETO_PLUGIN_PROFILE_EVENT_TYPE_PYTHON_FUNCTION},
    {ActivityType::OVERHEAD, KINETO_PLUGIN_PROFILE_EVENT_TYPE_OVERHEAD},
    {ActivityType::MTIA_RUNTIME, KINETO_PLUGIN_PROFILE_EVENT_TYPE_MTIA_RUNTIME},
    {ActivityType::MTIA_CCP_EVENTS, KINETO_PLUGIN_PROFILE_EVENT_TYPE_MTIA_CCP_EVENTS},
    {ActivityType::MTIA_INSIGHT, KINETO_PLUGIN_PROFILE_EVENT_TYPE_MTIA_INSIGHT},
    {ActivityType::CUDA_SYNC, KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_SYNC},
    {ActivityType::GLOW_RUNTIME, KINETO_PLUGIN_PROFILE_EVENT_TYPE_GLOW_RUNTIME},
    {ActivityType::CUDA_PROFILER_RANGE, KINETO_PLUGIN_PROFILE_EVENT_TYPE_CUDA_PROFILER_RANGE},
    {ActivityType::HPU_OP, KINETO_PLUGIN_PROFILE_EVENT_TYPE_HPU_OP},
    {ActivityType::XPU_RUNTIME, KINETO_PLUGIN_PROFILE_EVENT_TYPE_XPU_RUNTIME},
    {ActivityType::COLLECTIVE_COMM, KINETO_PLUGIN_PROFILE_EVENT_TYPE_COLLECTIVE_COMM},
    {ActivityType::HARDWARE_COUNTERS, KINETO_PLUGIN_PROFILE_EVENT_TYPE_GPU_PM_COUNTER},
    {ActivityType::PRIVATEUSE1_RUNTIME, KINETO_PLUGIN_PROFILE_EVENT_TYPE_PRIVATEUSE1_RUNTIME},
    {ActivityType::PRIVATEUSE1_DRIVER, KINETO_PLUGIN_PROFILE_EVENT_TYPE_PRIVATEUSE1_DRIVER},
};

inline KinetoPlugin_ProfileEventType abi_type(ActivityType t) {
  for (const TypePair& p : kTypes) {
    if (p.kineto == t) return p.abi;
  }
  return KINETO_PLUGIN_PROFILE_EVENT_TYPE_INVALID;
}

inline bool kineto_type(KinetoPlugin_ProfileEventType t, ActivityType* out) {
  for (const TypePair& p : kTypes) {
    if (p.abi == t) {
      *out = p.kineto;
      return true;
    }
  }
  return false;
}

/* The text of the last failure on this thread, for OmniprofPlugin_lastError. */
inline std::string& last_error() {
  thread_local std::string text;
  return text;
}

/* Runs f, turning an exception into -1 and its text into last_error(). */
template <typename F>
int guarded(const char* call, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    last_error() = std::string(call) + " threw: " + e.what();
  } catch (...) {
    last_error() = std::string(call) + " threw a non-standard exception";
  }
  return -1;
}

inline int fail(std::string why) {
  last_error() = std::move(why);
  return -1;
}

/* True when a struct of `given` bytes holds at least the `needed` this header knows. */
inline bool big_enough(size_t given, size_t needed) { return given >= needed; }

/* The one profiler this library's adapter serves, made at the first query. */
struct Adapter {
  std::mutex mu;
  Factory factory;
  std::unique_ptr<libkineto::IActivityProfiler> profiler;
};

inline Adapter& adapter() {
  static Adapter* a = new Adapter();  // never destroyed: sessions may outlive static teardown
  return *a;
}

/* Made (once) and returned, or null with last_error() set. */
inline libkineto::IActivityProfiler* profiler() {
  Adapter& a = adapter();
  std::lock_guard<std::mutex> g(a.mu);
  if (!a.profiler) {
    if (!a.factory) {
      last_error() = "no IActivityProfiler factory was given to the adapter";
      return nullptr;
    }
    a.profiler = a.factory();
    if (!a.profiler) last_error() = "the IActivityProfiler factory returned null";
  }
  return a.profiler.get();
}

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/* One trace of the profiler: what profilerCreate hands out as the handle. */
struct Session {
  std::unique_ptr<libkineto::IActivityProfilerSession> session;
  int64_t started_ns = 0;
  int64_t stopped_ns = 0;
};

inline Session* session_of(KinetoPlugin_ProfilerHandle* h) { return reinterpret_cast<Session*>(h); }

/* What getLinkedActivity returns for a host op id: an activity whose correlationId() is that
 * id, so that an activity linked to it names its op. */
struct HostOp final : libkineto::ITraceActivity {
  explicit HostOp(int64_t id) : id_(id) {}
  int64_t deviceId() const override { return 0; }
  int64_t resourceId() const override { return 0; }
  int32_t getThreadId() const override { return 0; }
  int64_t timestamp() const override { return 0; }
  int64_t duration() const override { return 0; }
  int64_t correlationId() const override { return id_; }
  int flowType() const override { return 0; }
  int64_t flowId() const override { return 0; }
  bool flowStart() const override { return false; }
  ActivityType type() const override { return ActivityType::CPU_OP; }
  const std::string name() const override { return ""; }
  const libkineto::ITraceActivity* linkedActivity() const override { return nullptr; }
  const libkineto::TraceSpan* traceSpan() const override { return nullptr; }
  void log(libkineto::ActivityLogger&) const override {}
  const std::string metadataJson() const override { return ""; }

 private:
  int64_t id_;
};

/* Splits Kineto's metadata JSON (`"k": v, "k2": v2`, braces optional) into its pairs, each
 * value raw JSON as the trace builder takes it. Stops at the first thing that is not a pair. */
inline std::vector<std::pair<std::string, std::string>> metadata_pairs(const std::string& json) {
  std::vector<std::pair<std::string, std::string>> pairs;
  size_t i = 0, n = json.size();
  auto skip_space = [&] {
    while (i < n && (json[i] == ' ' || json[i] == '\n' || json[i] == '\t' || json[i] == '\r' ||
                     json[i] == ',' || json[i] == '{' || json[i] == '}'))
      i++;
  };
  // The end of the string that starts at json[at] (a quote): the index past its closing quote.
  auto string_end = [&](size_t at) {
    size_t j = at + 1;
    while (j < n && json[j] != '"') j += json[j] == '\\' ? 2 : 1;
    return j < n ? j + 1 : std::string::npos;
  };
  for (;;) {
    skip_space();
    if (i >= n || json[i] != '"') break;
    size_t key_end = string_end(i);
    if (key_end == std::string::npos) break;
    std::string key = json.substr(i + 1, key_end - i - 2);
    i = key_end;
    while (i < n && (json[i] == ' ' || json[i] == ':')) i++;
    size_t start = i;
    int depth = 0;
    while (i < n) {
      char c = json[i];
      if (c == '"') {
        size_t e = string_end(i);
        if (e == std::string::npos) return pairs;
        i = e;
        continue;
      }
      if (c == '[' || c == '{') depth++;
      if (c == ']' || c == '}') {
        if (depth == 0) break;
        depth--;
      }
      if (c == ',' && depth == 0) break;
      i++;
    }
    size_t end = i;
    while (end > start && (json[end - 1] == ' ' || json[end - 1] == '\n')) end--;
    if (end == start) break;
    pairs.emplace_back(std::move(key), json.substr(start, end - start));
  }
  return pairs;
}

/* Kineto's ActivityLogger over the host's trace builder: what processTrace logs becomes
 * builder calls. A failed builder call is not fatal: the host counts and names what it
 * refused. An activity of a Kineto type with no ABI type (kTypes) is left out. */
class BuilderLogger final : public libkineto::ActivityLogger {
 public:
  explicit BuilderLogger(const KinetoPlugin_TraceBuilder* b) : b_(b) {}

  void handleDeviceInfo(const libkineto::DeviceInfo& info, int64_t) override {
    KinetoPlugin_ProfileDeviceInfo d{};
    d.unpaddedStructSize = KINETO_PLUGIN_PROFILE_DEVICE_INFO_UNPADDED_STRUCT_SIZE;
    d.deviceId = info.id;
    d.sortIndex = info.sortIndex;
    d.pName = info.name.c_str();
    d.pLabel = info.label.c_str();
    b_->addDeviceInfo(b_->pTraceBuilderHandle, &d);
  }

  void handleResourceInfo(const libkineto::ResourceInfo& info, int64_t) override {
    KinetoPlugin_ProfileResourceInfo r{};
    r.unpaddedStructSize = KINETO_PLUGIN_PROFILE_RESOURCE_INFO_UNPADDED_STRUCT_SIZE;
    r.deviceId = static_cast<int32_t>(info.deviceId);
    r.resourceId = static_cast<int32_t>(info.id);
    r.displayOrder = static_cast<int32_t>(info.sortIndex);
    r.pName = info.name.c_str();
    b_->addResourceInfo(b_->pTraceBuilderHandle, &r);
  }

  void handleOverheadInfo(const OverheadInfo&, int64_t) override {}
  void handleTraceSpan(const libkineto::TraceSpan&) override {}
  void handleTraceStart(const std::unordered_map<std::string, std::string>&,
                        const std::string&) override {}
  void finalizeMemoryTrace(const std::string&, const libkineto::Config&) override {}
  void finalizeTrace(const libkineto::Config&,
                     std::unique_ptr<libkineto::ActivityBuffers>, int64_t) override {}

  void handleGenericActivity(const libkineto::GenericTraceActivity& a) override {
    handleActivity(a);
  }

  void handleActivity(const libkineto::ITraceActivity& a) override {
    KinetoPlugin_ProfileEventType type = abi_type(a.type());
    if (type == KINETO_PLUGIN_PROFILE_EVENT_TYPE_INVALID) return;
    KinetoPlugin_ProfileEvent e{};
    e.unpaddedStructSize = KINETO_PLUGIN_PROFILE_EVENT_UNPADDED_STRUCT_SIZE;
    e.eventType = type;
    e.startTimeUtcNs = a.timestamp();
    e.endTimeUtcNs = a.timestamp() + a.duration();
    const libkineto::ITraceActivity* op = a.linkedActivity();
    e.eventId = op ? op->correlationId() : 0;
    e.deviceId = static_cast<int32_t>(a.deviceId());
    e.resourceId = static_cast<int32_t>(a.resourceId());
    if (b_->addEvent(b_->pTraceBuilderHandle, &e) != 0) return;
    std::string name = a.name();
    b_->setLastEventName(b_->pTraceBuilderHandle, name.c_str());
    for (const auto& [key, value] : metadata_pairs(a.metadataJson())) {
      b_->addLastEventMetadata(b_->pTraceBuilderHandle, key.c_str(), value.c_str());
    }
    for (const auto& [series, value] : a.counterValues()) {
      std::string number = std::to_string(value);
      b_->addLastEventMetadata(b_->pTraceBuilderHandle, series.c_str(), number.c_str());
    }
    if (a.flowType() != 0 && a.flowId() != 0) {
      KinetoPlugin_ProfileEventFlow f{};
      f.unpaddedStructSize = KINETO_PLUGIN_PROFILE_EVENT_FLOW_UNPADDED_STRUCT_SIZE;
      f.flowType = static_cast<KinetoPlugin_ProfileEventFlowType>(a.flowType());
      f.flowId = static_cast<uint32_t>(a.flowId());
      f.isStartPoint = a.flowStart();
      b_->setLastEventFlow(b_->pTraceBuilderHandle, &f);
    }
  }

  /* The activity standing for host op `id`, alive as long as this logger. */
  const libkineto::ITraceActivity* host_op(int32_t id) {
    auto it = ops_.find(id);
    if (it == ops_.end()) it = ops_.emplace(id, std::make_unique<HostOp>(id)).first;
    return it->second.get();
  }

 private:
  const KinetoPlugin_TraceBuilder* b_;
  std::unordered_map<int32_t, std::unique_ptr<HostOp>> ops_;
};

/* ---- the C ABI functions ---------------------------------------------------------------- */

inline int profiler_query(KinetoPlugin_ProfilerQuery_Params* p) {
  return guarded("profilerQuery", [&] {
    if (!p || !big_enough(p->unpaddedStructSize,
                          KINETO_PLUGIN_PROFILER_QUERY_PARAMS_UNPADDED_STRUCT_SIZE))
      return fail("profilerQuery: params struct missing or too small");
    libkineto::IActivityProfiler* prof = profiler();
    if (!prof) return -1;
    const std::string& name = prof->name();
    if (p->pProfilerName && p->profilerNameMaxLen > 0) {
      size_t len = std::min(name.size(), p->profilerNameMaxLen);
      std::memcpy(p->pProfilerName, name.data(), len);
      p->pProfilerName[len] = '\0';
    }
    size_t slot = 0;
    for (ActivityType t : prof->availableActivities()) {
      KinetoPlugin_ProfileEventType abi = abi_type(t);
      if (abi == KINETO_PLUGIN_PROFILE_EVENT_TYPE_INVALID) continue;
      if (slot < p->supportedActivityTypesMaxLen && p->pSupportedActivityTypes)
        p->pSupportedActivityTypes[slot++] = abi;
    }
    return 0;
  });
}

inline int profiler_create(KinetoPlugin_ProfilerCreate_Params* p) {
  return guarded("configure", [&] {
    if (!p || !big_enough(p->unpaddedStructSize,
                          KINETO_PLUGIN_PROFILER_CREATE_PARAMS_UNPADDED_STRUCT_SIZE))
      return fail("profilerCreate: params struct missing or too small");
    libkineto::IActivityProfiler* prof = profiler();
    if (!prof) return -1;
    const std::set<ActivityType>& offered = prof->availableActivities();
    std::set<ActivityType> types;
    for (size_t i = 0; p->pEnabledActivityTypes && i < p->enabledActivityTypesMaxLen; i++) {
      ActivityType t;
      if (kineto_type(p->pEnabledActivityTypes[i], &t) && offered.count(t)) types.insert(t);
    }
    libkineto::Config config;
    auto session = prof->configure(types, config);
    if (!session) return fail(prof->name() + ": configure returned no session");
    auto* s = new Session();
    s->session = std::move(session);
    p->pProfilerHandle = reinterpret_cast<KinetoPlugin_ProfilerHandle*>(s);
    return 0;
  });
}

inline int profiler_destroy(KinetoPlugin_ProfilerDestroy_Params* p) {
  return guarded("profilerDestroy", [&] {
    if (!p || !p->pProfilerHandle) return fail("profilerDestroy: no handle");
    delete session_of(p->pProfilerHandle);
    return 0;
  });
}

inline int profiler_start(KinetoPlugin_ProfilerStart_Params* p) {
  return guarded("start", [&] {
    if (!p || !p->pProfilerHandle) return fail("profilerStart: no handle");
    Session* s = session_of(p->pProfilerHandle);
    s->started_ns = now_ns();
    s->session->start();
    return 0;
  });
}

inline int profiler_stop(KinetoPlugin_ProfilerStop_Params* p) {
  return guarded("stop", [&] {
    if (!p || !p->pProfilerHandle) return fail("profilerStop: no handle");
    Session* s = session_of(p->pProfilerHandle);
    s->session->stop();
    s->stopped_ns = now_ns();
    return 0;
  });
}

inline int profiler_push(KinetoPlugin_ProfilerPushCorrelationId_Params* p) {
  return guarded("pushCorrelationId", [&] {
    if (!p || !p->pProfilerHandle) return -1;
    session_of(p->pProfilerHandle)->session->pushCorrelationId(p->correlationId);
    return 0;
  });
}

inline int profiler_pop(KinetoPlugin_ProfilerPopCorrelationId_Params* p) {
  return guarded("popCorrelationId", [&] {
    if (!p || !p->pProfilerHandle) return -1;
    session_of(p->pProfilerHandle)->session->popCorrelationId();
    return 0;
  });
}

inline int profiler_push_user(KinetoPlugin_ProfilerPushUserCorrelationId_Params* p) {
  return guarded("pushUserCorrelationId", [&] {
    if (!p || !p->pProfilerHandle) return -1;
    session_of(p->pProfilerHandle)->session->pushUserCorrelationId(p->userCorrelationId);
    return 0;
  });
}

inline int profiler_pop_user(KinetoPlugin_ProfilerPopUserCorrelationId_Params* p) {
  return guarded("popUserCorrelationId", [&] {
    if (!p || !p->pProfilerHandle) return -1;
    session_of(p->pProfilerHandle)->session->popUserCorrelationId();
    return 0;
  });
}

inline int profiler_process_events(KinetoPlugin_ProfilerProcessEvents_Params* p) {
  return guarded("processTrace", [&] {
    if (!p || !p->pProfilerHandle || !p->pTraceBuilder)
      return fail("profilerProcessEvents: no handle or trace builder");
    if (!big_enough(p->pTraceBuilder->unpaddedStructSize,
                    KINETO_PLUGIN_TRACE_BUILDER_UNPADDED_STRUCT_SIZE))
      return fail("profilerProcessEvents: the host's trace builder is too small");
    Session* s = session_of(p->pProfilerHandle);
    BuilderLogger logger(p->pTraceBuilder);
    int64_t end = s->stopped_ns ? s->stopped_ns : now_ns();
    s->session->processTrace(
        logger, [&logger](int32_t id) { return logger.host_op(id); }, s->started_ns, end);
    if (std::unique_ptr<libkineto::CpuTraceBuffer> buffer = s->session->getTraceBuffer()) {
      for (const auto& activity : buffer->activities) {
        if (activity) logger.handleGenericActivity(*activity);
      }
    }
    if (auto device = s->session->getDeviceInfo()) logger.handleDeviceInfo(*device, s->started_ns);
    for (const libkineto::ResourceInfo& r : s->session->getResourceInfos())
      logger.handleResourceInfo(r, s->started_ns);
    std::vector<std::string> errors = s->session->errors();
    if (!errors.empty()) {
      std::string text = "the session reported " + std::to_string(errors.size()) + " error(s): ";
      for (size_t i = 0; i < errors.size(); i++) text += (i ? "; " : "") + errors[i];
      return fail(text);
    }
    return 0;
  });
}

/* Registers the profiler `factory` makes with the host's registry (KinetoPlugin_register's
 * body). */
inline int register_profiler(const KinetoPlugin_Registry* registry, Factory factory) {
  return guarded("KinetoPlugin_register", [&] {
    if (!registry || !big_enough(registry->unpaddedStructSize,
                                 KINETO_PLUGIN_REGISTRY_UNPADDED_STRUCT_SIZE))
      return fail("KinetoPlugin_register: registry struct missing or too small");
    {
      Adapter& a = adapter();
      std::lock_guard<std::mutex> g(a.mu);
      a.factory = std::move(factory);
    }
    KinetoPlugin_ProfilerInterface iface{};
    iface.unpaddedStructSize = KINETO_PLUGIN_PROFILER_INTERFACE_UNPADDED_STRUCT_SIZE;
    iface.profilerCreate = profiler_create;
    iface.profilerDestroy = profiler_destroy;
    iface.profilerQuery = profiler_query;
    iface.profilerStart = profiler_start;
    iface.profilerStop = profiler_stop;
    iface.profilerPushCorrelationId = profiler_push;
    iface.profilerPopCorrelationId = profiler_pop;
    iface.profilerPushUserCorrelationId = profiler_push_user;
    iface.profilerPopUserCorrelationId = profiler_pop_user;
    iface.profilerProcessEvents = profiler_process_events;
    return registry->registerProfiler(registry->pRegistryHandle, &iface);
  });
}

/* The text of this thread's last failure, for OmniprofPlugin_lastError. */
inline const char* last_error_text() { return last_error().c_str(); }

}  // namespace
}  // namespace omniprof_kineto_adapter

/* Exports ProfilerClass (default-constructible, derived from libkineto::IActivityProfiler)
 * as this library's plugin: defines KinetoPlugin_register and OmniprofPlugin_lastError. */
#define OMNIPROF_EXPORT_KINETO_PROFILER(ProfilerClass)                                      \
  extern "C" OMNIPROF_PLUGIN_EXPORT int KinetoPlugin_register(                             \
      const struct KinetoPlugin_Registry* registry) {                                       \
    static_assert(std::is_base_of_v<libkineto::IActivityProfiler, ProfilerClass>,          \
                  #ProfilerClass " must derive from libkineto::IActivityProfiler");         \
    return ::omniprof_kineto_adapter::register_profiler(                                   \
        registry, []() -> std::unique_ptr<libkineto::IActivityProfiler> {                  \
          return std::make_unique<ProfilerClass>();                                         \
        });                                                                                 \
  }                                                                                         \
  extern "C" OMNIPROF_PLUGIN_EXPORT const char* OmniprofPlugin_lastError(void) {           \
    return ::omniprof_kineto_adapter::last_error_text();                                   \
  }

#endif /* OMNIPROF_KINETO_ADAPTER_H */
