// `um`: plain managed memory: pages migrate to the GPU on first touch and are evicted FIFO when it is full.
#include "policies/managed_placement.hpp"
#include "policies/policies.hpp"

namespace tiersim::policies {
namespace {
class DemandPaging final : public Policy {
 public:
  placement::Placement place(const trace::Header& header, const hw::HardwareProfile& hw,
                             const PolicyOptions& options) const override {
    return managed_placement(header, hw, options, placement::kAdviseNone, false, "um");
  }
};
}  // namespace

std::unique_ptr<Policy> make_um() { return std::make_unique<DemandPaging>(); }

}  // namespace tiersim::policies
