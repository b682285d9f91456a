// The Kineto profiler a PrivateUse1 backend registered with PyTorch, as omniprof's plugin
// entry point (privateuse1_profiler.cpp).

#pragma once

#include "table.h"

namespace omniprof::privateuse1 {

// The entry point over the registered factory; null while no backend registered one.
const KinetoEntryPoint* profiler_entry_point();

}  // namespace omniprof::privateuse1
