// `um-accessedby`: PreferredLocation=CPU + AccessedBy=GPU on the weights: remote reads without mapping faults.
#include "policies/managed_placement.hpp"
#include "policies/policies.hpp"

namespace tiersim::policies {
namespace {
class AccessedBy final : public Policy {
 public:
  placement::Placement place(const trace::Header& header, const hw::HardwareProfile& hw,
                             const PolicyOptions& options) const override {
    return managed_placement(header, hw, options, placement::kPreferCpu | placement::kAccessedByGpu, false,
                             "um-accessedby");
  }
};
}  // namespace

std::unique_ptr<Policy> make_um_accessedby() { return std::make_unique<AccessedBy>(); }

}  // namespace tiersim::policies
