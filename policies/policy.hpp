#pragma once
// The allocation strategies behind one interface. Each lives in its own file and is listed, with a
// one-line description, in the registry (registry.cpp); `sim policies` prints the list.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hardware/profile.hpp"
#include "placement/placement.hpp"
#include "trace/trace.hpp"

namespace tiersim::policies {

struct PolicyOptions {
  std::optional<std::string> split;        // DisTorch allocation string (bytes, ratio, fraction)
  std::optional<int> layers;               // `layers`: transformer layers kept on the compute GPU
  std::optional<double> offload_bytes;     // virtual-VRAM mode: bytes moved off the compute GPU
  std::optional<placement::DeviceId> donor;  // where offloaded weights go without --split (cpu if unset)
  placement::ExecutionOptions exec;
  // Unified-memory policies only.
  std::optional<std::string> allocator;    // "caching" (default) or "per-tensor" (cudaMallocManaged/cudaFree each)
  std::optional<std::string> um_scope;     // "all" (default: weights, KV cache, activations) or "weights"
};

class Policy {
 public:
  virtual ~Policy() = default;
  // Decides the device of every tensor; throws InputError for bad options and CapacityError when
  // the model cannot fit under this policy.
  virtual placement::Placement place(const trace::Header& header, const hw::HardwareProfile& hw,
                                     const PolicyOptions& options) const = 0;
};

struct PolicyInfo {
  std::string name;
  std::string description;
  std::unique_ptr<Policy> (*make)();
};

const std::vector<PolicyInfo>& all_policies();

// Which options a policy reads. Policies call this first, so that an option given to a policy that
// would ignore it is an error, never silently dropped.
struct AcceptedOptions {
  bool split = false, layers = false, offload = false, donor = false, managed = false;
};
void reject_unread_options(const PolicyOptions& options, const std::string& policy, AcceptedOptions accepted);
// Throws InputError naming the unknown policy and the known ones.
std::unique_ptr<Policy> make_policy(const std::string& name);

}  // namespace tiersim::policies
