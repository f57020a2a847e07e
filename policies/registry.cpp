// The one list of strategy parts, by family. A new part adds its factory to its family's header and a
// row here; the registry test builds every row with no options and composes it on a small model.
#include "policies/memory_kinds/kinds.hpp"
#include "policies/offload_paths/paths.hpp"
#include "policies/placement_rules/rules.hpp"
#include "policies/platforms/platforms.hpp"

namespace tiersim::strategy {

const std::vector<PartInfo<PlacementRule>>& placement_rules() {
  static const std::vector<PartInfo<PlacementRule>> list{
      {"all-gpu", "every tensor on the compute GPU", "", make_all_gpu},
      {"distorch.bytes", "ComfyUI-MultiGPU DisTorch V2 bytes split, filled from the model's tail",
       "--split \"cuda:0,2.5gb;cpu,*\" | offload=SIZE (virtual VRAM; default 4 GiB) | donor=cpu|cuda:N; text_encoder; dynamic-vram=off|on", make_distorch_bytes},
      {"distorch.ratio", "DisTorch V2 ratio split (shares of the model, normalised)",
       "--split \"cuda:0,80%;cpu,20%\" | offload=SIZE | donor=cpu|cuda:N; text_encoder; dynamic-vram=off|on", make_distorch_ratio},
      {"distorch.fraction", "DisTorch V2 fraction split (fraction of each device's memory)",
       "--split \"cuda:0,0.8;cpu,0.5\" | offload=SIZE | donor=cpu|cuda:N; text_encoder; dynamic-vram=off|on", make_distorch_fraction},
      {"layers", "the first N transformer layers on the compute GPU, the rest on the donor",
       "layers=N (default: the most that fit), donor=cpu|cuda:N", make_first_layers},
      {"accelerate.auto", "HF from_pretrained(device_map=\"auto\"): accelerate's balanced budgets, then its walk",
       "max_memory=0=20GiB;1=24GiB;cpu=64GiB (default: free GPU memory, host RAM)", make_accelerate_auto},
      {"accelerate.balanced", "device_map=\"balanced\" (the same as auto)", "max_memory=...", make_accelerate_balanced},
      {"accelerate.balanced_low_0", "device_map=\"balanced_low_0\": GPU 0 keeps only what the others cannot hold",
       "max_memory=...", make_accelerate_balanced_low_0},
      {"accelerate.sequential", "device_map=\"sequential\": fill each device in turn, budgets as given",
       "max_memory=...", make_accelerate_sequential},
      {"comfy.lowvram", "ComfyUI's native partial loading (--disable-dynamic-vram): its budget, largest weights stay",
       "version=current|2025-07, free=SIZE, memory-required=SIZE, minimum-memory-required=SIZE, reserve-vram=SIZE, "
       "async-offload=N (2), pin=on|off, novram, dynamic-vram=off|on (on is refused: not modelled)",
       make_comfy_lowvram},
      {"llamacpp.ngl", "llama.cpp's -ngl N: the last N slots (the output layer first) on the GPU(s), the token "
                       "embedding on the cpu",
       "ngl=N (all), output-first=on|off (on), ts=P0,P1,... (-ts; default: free memory); kv-offload=on|off (on; off = --no-kv-offload); ot=REGEX=CPU|CUDAn,... (-ot, --override-tensor); fit=on|off (on: llama.cpp's --fit), ctx=N (-c; 0: training context), fit-target=MiB[,MiB...] (1024), fit-ctx=N (4096)", make_llamacpp_ngl},
      {"device_map", "an explicit device map, module name -> device, as model.hf_device_map writes it",
       "file=PATH (JSON)", make_explicit_device_map},
  };
  return list;
}

const std::vector<PartInfo<MemoryKind>>& memory_kinds() {
  static const std::vector<PartInfo<MemoryKind>> list{
      {"device", "GPU tensors in device memory (cudaMalloc through the framework's allocator)", "", make_device_memory},
      {"managed", "CUDA managed memory (cudaMallocManaged) with cudaMemAdvise on the weights",
       "prefer-cpu, accessed-by, read-mostly; scope=all|weights|offloaded (all); allocator=caching|per-tensor "
       "(caching); prefetch=N (0); advise=weights|all (weights); filled=copy|gpu|cpu (copy: weights loaded with cudaMemcpy, mapped; cpu: written by the CPU, a mapping fault at each block's first GPU touch)",
       make_managed_memory},
  };
  return list;
}

const std::vector<PartInfo<OffloadPath>>& offload_paths() {
  static const std::vector<PartInfo<OffloadPath>> list{
      {"copy", "weights off the compute GPU are copied to it when their layer runs",
       "host=pinned|pageable or the bare word (pinned); prefetch=N (0: on demand); stream (on demand on a copy "
       "stream); sync; peer=copy|execute (copy)",
       make_copy_path},
      {"execute", "layers run where their weights are: on the CPU, or on the GPU that holds them",
       "threads=N (CPU threads, llama.cpp -t; default: the host's physical cores); op-offload=N (steps of at least "
       "N tokens run CPU layers on the GPU with their weights copied, ggml's op offload; 0 = off, default); "
       "host=pinned|pageable (pinned)",
       make_execute_path},
  };
  return list;
}

const std::vector<PartInfo<Platform>>& platforms() {
  static const std::vector<PartInfo<Platform>> list{
      {"linux", "the Linux driver: managed memory paged on demand (oversubscription allowed); VRAM overflow fails",
       "", make_linux_platform},
      {"windows", "the Windows (WDDM) driver: managed memory without demand paging (no oversubscription); device "
                  "allocations past VRAM fall back to shared system memory",
       "sysmem-fallback=prefer|off (prefer)", make_windows_platform},
      {"wsl2", "WSL2 on the Windows driver: as windows (the fallback policy switch reported not to apply)",
       "sysmem-fallback=prefer|off (prefer)", make_wsl2_platform},
  };
  return list;
}

}  // namespace tiersim::strategy
