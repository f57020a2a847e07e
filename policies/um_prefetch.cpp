// `um-prefetch`: managed memory plus cudaMemPrefetchAsync of the weights --prefetch N layers ahead on a copy stream.
#include "policies/managed_placement.hpp"
#include "policies/policies.hpp"

namespace tiersim::policies {
namespace {
class ManagedPrefetch final : public Policy {
 public:
  placement::Placement place(const trace::Header& header, const hw::HardwareProfile& hw,
                             const PolicyOptions& options) const override {
    return managed_placement(header, hw, options, placement::kAdviseNone, true, "um-prefetch");
  }
};
}  // namespace

std::unique_ptr<Policy> make_um_prefetch() { return std::make_unique<ManagedPrefetch>(); }

}  // namespace tiersim::policies
