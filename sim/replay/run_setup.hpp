#pragma once
// What a placement is run against: the hardware, the framework's runtime profile, and the run options
// that belong to neither (whether the process meets each sequence length for the first time).
#include "hardware/profile.hpp"
#include "runtime/runtime_profile.hpp"

namespace tiersim::replay {

struct RunSetup {
  const hw::HardwareProfile& hw;
  const runtime::RuntimeProfile& runtime;
  // sim --lengths fresh: every step meets a new sequence length (a first generate in a new process)
  // and pays the runtime's new_length_attention once; warm (false): lengths run before.
  bool fresh_lengths = false;
};

}  // namespace tiersim::replay
