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
  };
  return list;
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
