// `um-cpu`: PreferredLocation=CPU on the weights: they stay in host memory and every read crosses the link.
#include "policies/managed_placement.hpp"
#include "policies/policies.hpp"

namespace tiersim::policies {
namespace {
class PreferCpu final : public Policy {
 public:
  placement::Placement place(const trace::Header& header, const hw::HardwareProfile& hw,
                             const PolicyOptions& options) const override {
    return managed_placement(header, hw, options, placement::kPreferCpu, false, "um-cpu");
  }
};
}  // namespace

std::unique_ptr<Policy> make_um_cpu() { return std::make_unique<PreferCpu>(); }

}  // namespace tiersim::policies
