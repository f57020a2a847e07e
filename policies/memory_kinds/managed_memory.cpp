// `managed`: CUDA managed memory (cudaMallocManaged), as the seeds' CUDAPluggableAllocator gives every
// allocation, with cudaMemAdvise hints on the weights. Options:
//   prefer-cpu, accessed-by, read-mostly   advice on managed weights (PreferredLocation=CPU, AccessedBy=GPU,
//                                          ReadMostly), combinable as the driver combines them
//   scope=all|weights|offloaded            all (default): every tensor the placement keeps on the compute GPU
//                                          (weights, KV cache, activations); weights: only its weights;
//                                          offloaded: only the weights it puts in host memory (which are then
//                                          read in place rather than copied)
//   allocator=caching|per-tensor           per-tensor: cudaMallocManaged and cudaFree for every tensor (each
//                                          cudaFree waits for the device), as the seeds' allocator does
//   prefetch=N                             cudaMemPrefetchAsync of managed weights N layers ahead
//   advise=weights|all                     which managed tensors get the advice: the weights (default), or
//                                          every one, KV cache and activations too, as the seeds' allocator
//                                          applies its mode to every allocation
//   filled=copy|gpu|cpu                    how PreferredLocation=CPU weights got their contents: copy (default),
//                                          cudaMemcpy from host memory as tensor.copy_() does when a checkpoint is
//                                          loaded; gpu, written by GPU kernels (random initialisation, as the
//                                          validation harness does) and then prefetched to host memory: in both
//                                          the GPU maps the pages and its first touch costs what a mapped read
//                                          does; cpu, written by the CPU itself (memset, a NumPy view): the GPU's
//                                          first touch of each block pays a mapping fault
//                                          (experiments/validate/managed_first_read.cu on the H100,
//                                          results/calib/h100-s10: 0.92-1.24 s per GiB against 21-24 ms)
// The driver, not the strategy, then decides where each block is (sim/managed/managed_memory.hpp).
#include "core/error.hpp"
#include "policies/memory_kinds/kinds.hpp"

namespace tiersim::strategy {
namespace {

enum class Scope { All, Weights, Offloaded };

class ManagedMemory final : public MemoryKind {
 public:
  explicit ManagedMemory(config::Section& o) {
    if (o.has("prefer-cpu") && o.flag("prefer-cpu")) advice_ |= placement::kPreferCpu;
    if (o.has("accessed-by") && o.flag("accessed-by")) advice_ |= placement::kAccessedByGpu;
    if (o.has("read-mostly") && o.flag("read-mostly")) advice_ |= placement::kReadMostly;
    if (o.has("scope")) {
      const std::string s = o.text("scope");
      if (s == "all") scope_ = Scope::All;
      else if (s == "weights") scope_ = Scope::Weights;
      else if (s == "offloaded") scope_ = Scope::Offloaded;
      else o.fail("scope", "must be 'all', 'weights' or 'offloaded', not '" + s + "'");
    }
    if (o.has("allocator")) {
      const std::string a = o.text("allocator");
      if (a != "caching" && a != "per-tensor") o.fail("allocator", "must be 'caching' or 'per-tensor', not '" + a + "'");
      caching_ = a == "caching";
    }
    if (o.has("prefetch")) prefetch_ = o.integer("prefetch", 0, 1000);
    if (o.has("filled")) {
      const std::string f = o.text("filled");
      if (f != "copy" && f != "gpu" && f != "cpu") o.fail("filled", "must be 'copy', 'gpu' or 'cpu', not '" + f + "'");
      filled_ = f;
    }
    if (o.has("advise")) {
      const std::string a = o.text("advise");
      if (a != "weights" && a != "all") o.fail("advise", "must be 'weights' or 'all', not '" + a + "'");
      advise_all_ = a == "all";
    }
  }

  void apply(const trace::Header& header, const hw::HardwareProfile& hw, placement::Placement& p,
             Resolved& resolved) const override {
    if (!hw.managed_memory)
      throw InputError(hw.origin, 0, "managed_memory",
                       "managed memory needs the profile's managed_memory section (see calib/profiles/SCHEMA.md)");
    p.managed.enabled = true;
    p.managed.managed.assign(header.tensors.size(), false);
    p.managed.advice.assign(header.tensors.size(), placement::kAdviseNone);
    p.managed.caching_allocator = caching_;
    p.managed.prefetch = prefetch_;
    p.managed.weights_mapped = filled_ != "cpu";
    for (const auto& t : header.tensors) {
      // A transient activation stays device memory, allocated and freed by its ops (the caching allocator reuses its
      // blocks): a managed range of its own for the whole run would count every value at once.
      if (t.kind == trace::TensorKind::Transient) continue;
      const bool weight = t.kind == trace::TensorKind::Weight;
      const bool on_gpu = p.device[t.id] == placement::kComputeGpu;
      const bool take = scope_ == Scope::All         ? on_gpu
                        : scope_ == Scope::Weights   ? on_gpu && weight
                                                     : weight && p.device[t.id] == placement::kCpu;
      if (!take) continue;
      p.managed.managed[t.id] = true;
      p.path[t.id] = placement::Path::Managed;
      p.device[t.id] = placement::kCpu;  // home: host pages, until the driver migrates them
      if (weight || advise_all_) p.managed.advice[t.id] = advice_;
    }
    std::string what = scope_ == Scope::All       ? "weights, KV cache, activations"
                       : scope_ == Scope::Weights ? "weights"
                                                  : "offloaded weights";
    resolved.emplace_back("managed", what + ", " + (caching_ ? "caching allocator" : "cudaMallocManaged per tensor") +
                                         (advise_all_ && advice_ ? ", advice on every managed tensor" : ""));
    if (prefetch_ > 0) resolved.emplace_back("managed prefetch", std::to_string(prefetch_) + " layer(s) ahead");
    if (filled_ == "cpu") resolved.emplace_back("managed weights", "written by the CPU: mapped at the GPU's first touch");
    if (filled_ == "gpu") resolved.emplace_back("managed weights", "written by GPU kernels, then in host memory: mapped");
  }
  bool takes_offloaded() const override { return scope_ == Scope::Offloaded; }

 private:
  std::uint8_t advice_ = placement::kAdviseNone;
  Scope scope_ = Scope::All;
  bool caching_ = true;
  int prefetch_ = 0;
  bool advise_all_ = false;
  std::string filled_ = "copy";
};

}  // namespace

std::unique_ptr<MemoryKind> make_managed_memory(config::Section& o) { return std::make_unique<ManagedMemory>(o); }

}  // namespace tiersim::strategy
