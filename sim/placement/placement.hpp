#pragma once
// Where every tensor lives and how each is used there (its path): the output of a strategy
// (policies/: placement rule x memory kind x offload path) and the input of both engines.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hardware/profile.hpp"
#include "trace/trace.hpp"

namespace tiersim::placement {

using DeviceId = int;                 // -2 is the disk, -1 the host (cpu), N >= 0 is cuda:N
inline constexpr DeviceId kDisk = -2;  // weights read from a file on each use (accelerate's disk offload)
inline constexpr DeviceId kCpu = -1;
inline constexpr DeviceId kComputeGpu = 0;

std::string device_name(DeviceId d);
// Parses "cpu" or "cuda:N" ("disk" too when `disk` allows it); throws std::invalid_argument otherwise.
DeviceId parse_device(std::string_view text, bool disk = false);

// How a tensor is used where it lives.
enum class Path : std::uint8_t {
  Local,    // read in place: on the compute GPU, or KV cache and activations where their layer runs
  Copy,     // a weight copied to the compute GPU when used (from host memory or another GPU)
  Execute,  // its layer runs where it lives: on the CPU (llama.cpp), or on the GPU that holds it (pipeline)
  Managed,  // CUDA managed memory: the driver moves it (ManagedSpec)
};
enum class HostMemory { Pinned, Pageable };

// How copied weights are copied (the offload path's options).
struct CopyOptions {
  int prefetch = 0;                           // layers ahead that copies are issued; 0 = on demand
  HostMemory host_memory = HostMemory::Pinned;
  bool sync = false;                          // the host waits for each copy (a synchronous .to())
  // On demand, on a copy stream rather than the compute stream: the copy for the next module can run
  // while the current one computes (ComfyUI's offload streams, cast_bias_weight), no look-ahead.
  bool stream = false;
  // With `stream`: offload streams taken in turn; a cast waits for the one this many back to be used.
  int streams = 2;
};

// How layers that run where their weights live are run (the execute offload path's options).
struct ExecuteOptions {
  // CPU threads running host-resident layers (llama.cpp's -t); 0: the host's physical cores when the
  // profile has measured CPU kernels (llama.cpp's default), else the whole CPU's roofline.
  int threads = 0;
  // ggml's op offload (GGML_OP_OFFLOAD_MIN_BATCH): in a step of at least this many tokens, a layer homed
  // on the CPU runs on the compute GPU instead, its host weights (and KV cache) copied over for each
  // step. 0: off (llama.cpp --no-op-offload).
  int op_offload_batch = 0;
  // llama.cpp --no-kv-offload: the KV cache lives in host memory, yet a GPU layer's attention runs on the GPU
  // (flash attention, llama.cpp's default, resolves on: its node goes to the layer's device, not the cache's);
  // ggml_backend_sched copies the step's new keys and values to the host, the CPU stores them (two SET_ROWS),
  // and the cached keys and values the attention reads (256-cell padded views) are copied in per layer.
  bool kv_copied_in = false;
};

// The CPU threads host-resident layers run with: the execute path's, else the host's physical cores where
// the profile measured its CPU kernels (llama.cpp's default -t), else 0 (the whole CPU's roofline).
inline int cpu_threads(const ExecuteOptions& x, const hw::HardwareProfile& hw) {
  return x.threads > 0 ? x.threads : hw.host.kernels ? hw.host.kernels->cores : 0;
}

// cudaMemAdvise hints on a managed tensor (bit flags, as the driver combines them).
enum ManagedAdvice : std::uint8_t {
  kAdviseNone = 0,
  kPreferCpu = 1,      // PreferredLocation = CPU: stays in host memory, the GPU reads it remotely
  kAccessedByGpu = 2,  // AccessedBy = GPU: always mapped, no mapping faults; remote after eviction
  kReadMostly = 4,     // ReadMostly: GPU reads make read-only duplicates; writes invalidate them
  // Not advice: a device allocation the Windows driver placed in shared system memory (sysmem
  // fallback). Always mapped, read and written over the link, never migrated; set with kPreferCpu and
  // kAccessedByGpu, which give the driver model exactly that behaviour.
  kSysmemFallback = 8,
};

// Tensors in CUDA managed memory (cudaMallocManaged), for the unified-memory policies.
struct ManagedSpec {
  bool enabled = false;
  std::vector<bool> managed;                  // by tensor id
  std::vector<std::uint8_t> advice;           // by tensor id, ManagedAdvice flags
  bool caching_allocator = true;              // false: cudaMallocManaged/cudaFree for every tensor
  int prefetch = 0;                           // cudaMemPrefetchAsync of weights this many layers ahead
  // The GPU maps the managed weights' host pages from the start: they were filled by cudaMemcpy (loaded) or by GPU
  // kernels and then moved to host memory, so no first touch of theirs pays a mapping fault. false: the CPU wrote
  // them itself, and each PreferredLocation=CPU block's first GPU touch maps it.
  bool weights_mapped = false;
  // false on Windows and WSL2 (no concurrentManagedAccess): no GPU page faults; managed data the GPU
  // uses is migrated whole when a kernel is launched, and the footprint cannot exceed GPU memory.
  bool demand_paging = true;
  // By tensor id (empty: none): bytes at the start of a sysmem-fallback tensor that stayed in VRAM (the
  // activation workspace is one tensor in a trace, but many allocations in a run: those made while VRAM
  // had room stay there, the rest fall back). Accesses within the prefix are local.
  std::vector<double> vram_prefix;
  // Under the per-tensor allocator (caching_allocator false): the cudaMallocManaged/cudaFree pairs one prefill and one
  // decode step make, where the framework's allocations are modelled (transformers generate:
  // model::inference_allocations); 0: one pair per trace op (assumed).
  double allocations_per_prefill = 0;
  double allocations_per_decode = 0;
  // What the advice on those calls adds to one prefill and one decode step (managed::advised_cycle_extra over the
  // modelled calls' sizes); without modelled calls the step plan prices each op's fresh activations instead.
  double advised_seconds_per_prefill = 0;
  double advised_seconds_per_decode = 0;
};

struct Placement {
  std::vector<DeviceId> device;               // by tensor id: its home (managed tensors: the host)
  std::vector<Path> path;                     // by tensor id
  CopyOptions copy;
  ExecuteOptions execute;
  // By layer: where its KV cache lives (and its attention runs) when the rule says so: llama.cpp keeps
  // it on the layer's -ngl device, or on the CPU with --no-kv-offload. A layer not here keeps its KV
  // cache where its Execute-path weights are (the compute GPU if none).
  std::map<std::int32_t, DeviceId> kv_home;
  // The rule placed some weights one by one (llama.cpp's -ot): a layer's ops then run where the weight
  // each reads lives (a weightless op where the op before it ran), not the layer whole in one place.
  bool per_tensor = false;
  // By tensor id, for copied weights in host memory: true where that weight is pageable although
  // copy.host_memory says pinned (ComfyUI pins offloaded weights only within its RAM budget). Empty:
  // every copy from host memory is copy.host_memory.
  std::vector<bool> pageable;
  ManagedSpec managed;
  // The KV cache the framework allocates, as a multiple of the trace's KV tensors (which hold the run's
  // own tokens): llama.cpp allocates its whole context (-c) when it loads. Memory and capacity only;
  // attention reads what the trace's ops read.
  double kv_allocation_scale = 1.0;
  std::vector<std::pair<std::string, std::string>> resolved;  // policy settings as applied, for reports
};

// The host memory a weight is copied from (copy.host_memory unless `pageable` marks it).
inline HostMemory host_memory_of(const Placement& p, std::uint32_t tensor) {
  return !p.pageable.empty() && p.pageable[tensor] ? HostMemory::Pageable : p.copy.host_memory;
}

// Bytes of each kind that a placement puts on one device.
struct DeviceUsage {
  double weights = 0, kv = 0, activations = 0;
  double total() const { return weights + kv + activations; }
};
// Bytes a placement puts on `d` outside managed memory.
DeviceUsage usage_on(const trace::Header& header, const Placement& p, DeviceId d);
// Bytes of managed tensors (resident wherever the driver puts them), sysmem-fallback tensors included.
DeviceUsage managed_usage(const trace::Header& header, const Placement& p);
// Bytes of the device allocations placed in shared system memory by the sysmem fallback (their
// VRAM-resident prefixes not counted).
DeviceUsage sysmem_usage(const trace::Header& header, const Placement& p);
// Bytes of the managed tensors the driver pages (the memory kind's; sysmem-fallback tensors excluded).
DeviceUsage paged_managed_usage(const trace::Header& header, const Placement& p);
// A sysmem-fallback tensor's bytes that stayed in VRAM (0 for any other tensor).
inline double vram_prefix_of(const Placement& p, std::uint32_t tensor) {
  return p.managed.vram_prefix.empty() ? 0.0 : p.managed.vram_prefix[tensor];
}
double weight_bytes(const trace::Header& header);
double offloaded_weight_bytes(const trace::Header& header, const Placement& p);  // weights not on cuda:0
// The activation workspace a GPU other than the compute GPU needs when it runs layers (0 otherwise).
double workspace_on(const trace::Header& header, const Placement& p, DeviceId d);
// Whether any layer runs on a GPU other than the compute GPU (a pipeline split).
bool has_pipeline(const Placement& p);
// Largest per-layer sum of copied weight bytes: the staging buffer one copied layer needs on cuda:0.
double largest_copied_layer(const trace::Header& header, const Placement& p);
// The staging the compute GPU must have room for: prefetch + 1 copied layers (the one definition the
// capacity check, managed memory's share and the analytic peak use).
double staging_bound(const trace::Header& header, const Placement& p);
// The most transient activation bytes (trace kind tmp) the compute GPU holds at once, as the trace's generator derived
// them from its own forward (header meta `transient_peak`; 0 without it, or when the transients are managed ranges):
// what the capacity checks made before a run add (the run itself counts the values as its ops make them).
double transient_bound(const trace::Header& header, const Placement& p);
// Bytes on cuda:0 that do not change during a run: the placement's tensors outside managed memory and
// the reserve (staging and managed blocks come and go on top).
double static_bytes_on_compute_gpu(const trace::Header& header, const hw::HardwareProfile& hw, const Placement& p);

// Puts KV cache where its layer runs (on the compute GPU unless the layer executes elsewhere) and
// activations on the compute GPU; managed tensors stay where the driver has them. Idempotent.
void place_kv_and_activations(const trace::Header& header, Placement& p);
// Puts KV cache where its layer runs (and activations on the compute GPU), then checks every device's
// capacity (a GPU that executes layers also holds their KV cache and an activation workspace) and
// throws CapacityError naming what needs how much. Strategies call this last.
void finalize(const trace::Header& header, const hw::HardwareProfile& hw, Placement& p, const std::string& policy);

// Peak bytes of the devices whose contents do not change during a run: the donor GPUs (cuda:1..,
// with their reserve once they hold anything) and the host (managed memory excluded). Both engines
// report these the same way.
void add_static_peaks(const trace::Header& header, const hw::HardwareProfile& hw, const Placement& p,
                      std::map<std::string, double>& peaks);

// GPU memory left for managed blocks: memory less the reserve, the static non-managed bytes on
// cuda:0 and the staging buffers of copied layers.
double managed_gpu_capacity(const trace::Header& header, const hw::HardwareProfile& hw, const Placement& p);

const char* to_string(Path p);
const char* to_string(HostMemory m);

}  // namespace tiersim::placement
