// `um-readmostly`: ReadMostly on the weights: GPU reads make read-only duplicates, evictions write nothing back.
#include "policies/managed_placement.hpp"
#include "policies/policies.hpp"

namespace tiersim::policies {
namespace {
class ReadMostly final : public Policy {
 public:
  placement::Placement place(const trace::Header& header, const hw::HardwareProfile& hw,
                             const PolicyOptions& options) const override {
    return managed_placement(header, hw, options, placement::kReadMostly, false, "um-readmostly");
  }
};
}  // namespace

std::unique_ptr<Policy> make_um_readmostly() { return std::make_unique<ReadMostly>(); }

}  // namespace tiersim::policies
