// `resident`: every tensor in the compute GPU's memory; the baseline every other policy is compared with.
#include "policies/policies.hpp"

namespace tiersim::policies {
namespace {
class Resident final : public Policy {
 public:
  placement::Placement place(const trace::Header& header, const hw::HardwareProfile& hw,
                             const PolicyOptions& options) const override {
    reject_unread_options(options, "resident", {});
    placement::Placement p;
    p.device.assign(header.tensors.size(), placement::kComputeGpu);
    p.exec = options.exec;
    finalize(header, hw, p, "resident");
    return p;
  }
};
}  // namespace

std::unique_ptr<Policy> make_resident() { return std::make_unique<Resident>(); }

}  // namespace tiersim::policies
