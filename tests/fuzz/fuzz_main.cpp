// One libFuzzer harness per entry point of fuzz_targets.hpp; TIERSIM_FUZZ_TARGET (set by CMake)
// names which.
#include <cstring>

#include "fuzz/fuzz_targets.hpp"

namespace {
int (*const kRun)(const std::uint8_t*, std::size_t) = [] {
  for (const auto& t : tiersim::fuzz::kTargets)
    if (std::strcmp(t.name, TIERSIM_FUZZ_TARGET) == 0) return t.run;
  __builtin_trap();
}();
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return kRun(data, size); }
