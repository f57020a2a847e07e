// The one list of policies. A new policy adds its factory to policies.hpp and a row here; the
// registry test builds every row on a small model.
#include "core/error.hpp"
#include "policies/policies.hpp"

namespace tiersim::policies {

const std::vector<PolicyInfo>& all_policies() {
  static const std::vector<PolicyInfo> list{
      {"resident", "everything in the compute GPU's memory (fails clearly if it does not fit)", make_resident},
      {"bytes", "DisTorch bytes split, e.g. --split \"cuda:0,2.5gb;cpu,*\"", make_bytes_split},
      {"ratio", "DisTorch ratio split, e.g. --split \"cuda:0,80%;cpu,20%\"", make_ratio_split},
      {"fraction", "DisTorch fraction-of-device-memory split, e.g. --split \"cuda:0,0.8;cpu,0.5\"",
       make_fraction_split},
      {"layers", "first N transformer layers on the GPU, the rest offloaded (--layers N; accelerate / -ngl)",
       make_layers},
      {"um", "CUDA managed memory, demand paging (oversubscription allowed)", make_um},
      {"um-cpu", "managed memory, weights PreferredLocation=CPU: read over the link every time", make_um_cpu},
      {"um-accessedby", "managed memory, weights PreferredLocation=CPU + AccessedBy=GPU (no mapping faults)",
       make_um_accessedby},
      {"um-readmostly", "managed memory, weights ReadMostly: read-only duplicates on the GPU", make_um_readmostly},
      {"um-prefetch", "managed memory + cudaMemPrefetchAsync of the next N layers' weights (--prefetch N, default 1)",
       make_um_prefetch},
  };
  return list;
}

void reject_unread_options(const PolicyOptions& o, const std::string& policy, AcceptedOptions a) {
  auto reject = [&](bool given, bool accepted, const char* key, const char* hint) {
    if (given && !accepted) throw InputError("", 0, key, "policy '" + policy + "' does not use this option; " + hint);
  };
  reject(o.split.has_value(), a.split, "--split", "it is for bytes, ratio and fraction");
  reject(o.layers.has_value(), a.layers, "--layers", "it is for the layers policy");
  reject(o.offload_bytes.has_value(), a.offload, "--offload-gb", "it is for bytes, ratio and fraction");
  reject(o.donor.has_value(), a.donor, "--donor", "it applies only where the policy chooses the donor (not with --split)");
  reject(o.allocator.has_value(), a.managed, "--allocator", "it is for the unified-memory policies (um*)");
  reject(o.um_scope.has_value(), a.managed, "--um-scope", "it is for the unified-memory policies (um*)");
}

std::unique_ptr<Policy> make_policy(const std::string& name) {
  std::string known;
  for (const auto& info : all_policies()) {
    if (info.name == name) return info.make();
    known += (known.empty() ? "" : ", ") + info.name;
  }
  throw InputError("", 0, "--policy", "unknown policy '" + name + "' (known: " + known + ")");
}

}  // namespace tiersim::policies
