#pragma once
// The ten policy names of earlier versions, as presets of strategy parts, and the flags they take
// (--split, --layers, --offload-gb, --donor, --offload-exec, --prefetch, --host-memory, --allocator,
// --um-scope, --um-filled), each turned into an option of the part that reads it. A preset with its flags gives the
// numbers it gave before parts existed (tests/golden).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policies/strategy/strategy.hpp"

namespace tiersim::strategy {

struct PresetInfo {
  std::string name;
  std::string description;
  // The runtime profile a run of this preset uses when --runtime is not given ("" for the default):
  // the llama.cpp preset runs under llama.cpp's host costs, not eager PyTorch's.
  std::string runtime = "";
  // The micro-batch a generated prompt is split into when --ubatch is not given (0: one step): llama.cpp's
  // default -ub 512.
  std::uint32_t ubatch = 0;
};
const std::vector<PresetInfo>& presets();

// The preset's parts; InputError naming --policy for an unknown name.
StrategySpec preset_spec(const std::string& name);

struct LegacyFlags {
  std::optional<std::string> split;
  std::optional<int> layers;
  std::optional<int> ngl;                  // llama.cpp's -ngl
  std::optional<double> offload_bytes;   // virtual VRAM, bytes
  std::optional<std::string> donor;
  std::optional<std::string> offload_exec;  // copy | cpu
  std::optional<int> prefetch;
  std::optional<std::string> host_memory;   // pinned | pageable
  std::optional<std::string> allocator;     // managed memory
  std::optional<std::string> um_scope;      // managed memory
  std::optional<std::string> um_filled;     // managed memory
  std::optional<int> threads;               // the execute path's CPU threads (llama.cpp's -t)
  std::vector<std::string> override_tensor; // llama.cpp's -ot REGEX=BUFT (each may hold several, ','-separated)
  bool no_kv_offload = false;               // llama.cpp's --no-kv-offload
  std::optional<std::string> fit;           // llama.cpp's --fit on|off
  std::optional<std::uint32_t> ctx_size;    // llama.cpp's -c
  std::optional<std::string> fit_target;    // llama.cpp's --fit-target (MiB per GPU)
  std::optional<std::uint32_t> fit_ctx;     // llama.cpp's --fit-ctx
};
// Adds the flags to the parts that read them (a part that does not read one rejects it when composed).
void apply_flags(StrategySpec& spec, const LegacyFlags& flags);

}  // namespace tiersim::strategy
