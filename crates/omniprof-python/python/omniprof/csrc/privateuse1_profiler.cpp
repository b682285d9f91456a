// The Kineto profiler of a PyTorch PrivateUse1 backend, for omniprof's sessions.
//
// A backend registers a factory of its libkineto::IActivityProfiler with
// REGISTER_PRIVATEUSE1_PROFILER (torch/csrc/profiler/standalone/privateuse1_profiler.h);
// PyTorch hands it to Kineto only. libtorch exports the registry but no way to read the
// factory back: `hasFactory()` is public, `factory_` private. This file reads it through an
// explicit template instantiation, the one place C++ lets a program name a private member
// (access checking does not apply to the names in an explicit instantiation), under the
// registry's own mutex, then serves it through omniprof_kineto_adapter.h as a plugin entry
// point: omniprof's native module (src/privateuse1.rs) registers it as it registers a plugin
// library's. The member's name and type come from the header of the torch this is built
// against, so a torch that renamed them fails this build, not a run.

// PyTorch's wheels are built with Kineto; the registry is declared only then.
#ifndef USE_KINETO
#define USE_KINETO 1
#endif

// A PyTorch older than the PrivateUse1 profiler registry (2.11 has none): no backend can have
// registered a profiler, and the entry point is always null.
#if __has_include(<torch/csrc/profiler/standalone/privateuse1_profiler.h>)
#define OMNIPROF_HAS_PRIVATEUSE1_REGISTRY 1
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <mutex>

#include "omniprof_kineto_adapter.h"
#include "privateuse1_profiler.h"
#include "table.h"

namespace {

using Registry = torch::profiler::impl::PrivateUse1ProfilerRegistry;
using FactoryMember = torch::profiler::impl::PrivateUse1ProfilerFactory Registry::*;
using MutexMember = std::mutex Registry::*;

// `get(Tag{})` returns the member pointer an explicit instantiation of Expose bound to Tag.
template <typename Tag, typename Tag::Member M>
struct Expose {
  friend typename Tag::Member get(Tag) { return M; }
};

struct FactoryTag {
  using Member = FactoryMember;
  friend Member get(FactoryTag);
};
struct MutexTag {
  using Member = MutexMember;
  friend Member get(MutexTag);
};

template struct Expose<FactoryTag, &Registry::factory_>;
template struct Expose<MutexTag, &Registry::mutex_>;

// A copy of the registered factory, or an empty one.
torch::profiler::impl::PrivateUse1ProfilerFactory registered_factory() {
  Registry& registry = Registry::instance();
  std::lock_guard<std::mutex> g(registry.*get(MutexTag{}));
  return registry.*get(FactoryTag{});
}

int register_profiler(const void* registry) {
  return ::omniprof_kineto_adapter::register_profiler(
      static_cast<const KinetoPlugin_Registry*>(registry), registered_factory());
}

const char* last_error() { return ::omniprof_kineto_adapter::last_error_text(); }

const omniprof::KinetoEntryPoint entry_point{omniprof::kKinetoEntryPointVersion,
                                             register_profiler, last_error};

}  // namespace

namespace omniprof::privateuse1 {

const KinetoEntryPoint* profiler_entry_point() {
  return Registry::instance().hasFactory() ? &entry_point : nullptr;
}

}  // namespace omniprof::privateuse1

#else

#include "privateuse1_profiler.h"

namespace omniprof::privateuse1 {

const KinetoEntryPoint* profiler_entry_point() { return nullptr; }

}  // namespace omniprof::privateuse1

#endif
