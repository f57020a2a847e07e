// `windows` (WDDM) and `wsl2` (the same Windows driver, reached through WSL2's GPU paravirtualisation).
// What rests on what (NVIDIA's documents, read 2026-11; results/frameworks/windows/README.md quotes them):
// - Managed memory has no demand paging: concurrentManagedAccess is 0 on Windows, WSL included (CUDA
//   Programming Guide 13.x, 2.4 "Limited unified memory support" and 4.1.3 "Unified Memory on Windows,
//   WSL, and Tegra"): managed memory is first allocated in host memory and migrated to the GPU when the
//   GPU begins executing, GPU memory cannot be oversubscribed, the CPU may not touch it while a kernel
//   runs. cudaMemPrefetchAsync and AccessedBy/PreferredLocation with a GPU target require
//   concurrentManagedAccess (CUDA runtime API, cudaMemPrefetchAsync, cudaMemAdvise); ReadMostly is
//   accepted but "read-duplication will not occur" (cudaMemAdvise). PreferredLocation=CPU there is not
//   documented: refused as not modelled. Assumed: the migration at launch moves the data a kernel uses
//   whole, at the host link's bulk migration rate (managed_memory.prefetch_to_gpu).
// - Sysmem fallback (driver 536.40 and later, NVIDIA KB 5490 "System Memory Fallback for Stable
//   Diffusion"): device allocations made when GPU memory is nearly full go to shared system memory
//   instead of failing; "CUDA - Sysmem Fallback Policy" set to "Prefer No Sysmem Fallback" turns it off
//   (driver 546.01 and later). On by default (it shipped on, with no switch, in 536.40). Assumed, as
//   NVIDIA does not say: the allocation that does not fit goes to system memory and stays there (first
//   fit in allocation order, no later migration), and kernels read and write it over the link at the
//   zero-copy rate of PreferredLocation=CPU managed memory (managed_memory.remote_read_bandwidth). In
//   WSL2 NVIDIA says nothing; users report that allocations past VRAM succeed there and that the
//   policy switch is not respected (microsoft/WSL#11050): on by default, `sysmem-fallback=off` accepted
//   and said to be unverified. PyTorch's cudaMallocAsync backend (ComfyUI's default) is reported to fail
//   instead of falling back (kijai/ComfyUI-DynamiCrafterWrapper#67): use sysmem-fallback=off for it.
// Options: sysmem-fallback=prefer|off (prefer).
#include "core/error.hpp"
#include "policies/platforms/platforms.hpp"

namespace tiersim::strategy {
namespace {

class WindowsDriver final : public Platform {
 public:
  WindowsDriver(config::Section& o, bool wsl2) : wsl2_(wsl2) {
    if (o.has("sysmem-fallback")) {
      const std::string v = o.text("sysmem-fallback");
      if (v != "prefer" && v != "off") o.fail("sysmem-fallback", "must be 'prefer' or 'off', not '" + v + "'");
      fallback_ = v == "prefer";
    }
  }

  void apply_managed(placement::Placement& p, const std::string& flag, Resolved& resolved) const override {
    if (!p.managed.enabled) return;
    const std::string where = wsl2_ ? "WSL2" : "Windows";
    if (p.managed.prefetch > 0)
      throw InputError("", 0, flag,
                       "cudaMemPrefetchAsync needs concurrentManagedAccess, which is 0 on " + where +
                           " (CUDA runtime API, cudaMemPrefetchAsync): managed prefetch is not available there");
    bool read_mostly = false;
    for (std::size_t t = 0; t < p.managed.advice.size(); ++t) {
      const std::uint8_t a = p.managed.advice[t];
      if (a & placement::kSysmemFallback) continue;
      if (a & placement::kAccessedByGpu)
        throw InputError("", 0, flag,
                         "AccessedBy a GPU needs concurrentManagedAccess, which is 0 on " + where +
                             " (CUDA runtime API, cudaMemAdvise)");
      if (a & placement::kPreferCpu)
        throw InputError("", 0, flag,
                         "PreferredLocation=CPU without concurrentManagedAccess (" + where +
                             ") is not documented by NVIDIA and not modelled");
      if (a & placement::kReadMostly) {
        read_mostly = true;
        p.managed.advice[t] = static_cast<std::uint8_t>(a & ~placement::kReadMostly);
      }
    }
    p.managed.demand_paging = false;
    resolved.emplace_back("managed (" + where + ")",
                          "no demand paging: migrated to the GPU whole at kernel launch; cannot exceed GPU memory");
    if (read_mostly)
      resolved.emplace_back("read-mostly", "no effect: read duplication does not occur without concurrentManagedAccess");
  }
  bool sysmem_fallback() const override { return fallback_; }

 private:
  bool wsl2_;
  bool fallback_ = true;
};

}  // namespace

std::unique_ptr<Platform> make_windows_platform(config::Section& o) { return std::make_unique<WindowsDriver>(o, false); }
std::unique_ptr<Platform> make_wsl2_platform(config::Section& o) { return std::make_unique<WindowsDriver>(o, true); }

}  // namespace tiersim::strategy
