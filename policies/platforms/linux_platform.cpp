// `linux`: the nvidia-uvm driver on x86 + PCIe. Managed memory is paged on demand (GPU faults,
// migration by VA block, oversubscription with FIFO eviction: shared/docs/uvm.md, sim/managed/); a
// device allocation that does not fit in VRAM fails with out-of-memory (the Linux driver has no
// sysmem fallback), which tiersim reports as "does not fit".
#include "policies/platforms/platforms.hpp"

namespace tiersim::strategy {
namespace {

class LinuxPlatform final : public Platform {
 public:
  void apply_managed(placement::Placement&, const std::string&, Resolved&) const override {}
  bool sysmem_fallback() const override { return false; }
};

}  // namespace

std::unique_ptr<Platform> make_linux_platform(config::Section&) { return std::make_unique<LinuxPlatform>(); }

}  // namespace tiersim::strategy
