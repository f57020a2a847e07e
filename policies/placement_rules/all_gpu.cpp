// `all-gpu`: every tensor on the compute GPU, the baseline (preset `resident`, and under managed memory
// the `um*` presets: the memory kind then decides where the driver keeps them).
#include "policies/placement_rules/rules.hpp"

namespace tiersim::strategy {
namespace {

class AllGpu final : public PlacementRule {
 public:
  std::vector<placement::DeviceId> place(const trace::Header& header, const hw::HardwareProfile&, const Completion&,
                                         Resolved&) const override {
    return std::vector<placement::DeviceId>(header.tensors.size(), placement::kComputeGpu);
  }
  bool may_offload() const override { return false; }
};

}  // namespace

std::unique_ptr<PlacementRule> make_all_gpu(config::Section&) { return std::make_unique<AllGpu>(); }

}  // namespace tiersim::strategy
