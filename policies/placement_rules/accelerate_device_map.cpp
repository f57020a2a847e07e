// `accelerate.auto`, `accelerate.balanced`, `accelerate.balanced_low_0`, `accelerate.sequential`: the
// device map Hugging Face transformers computes for from_pretrained(device_map=...), read from
// accelerate's source (src/accelerate/utils/modeling.py: get_max_memory, get_balanced_memory,
// infer_auto_device_map, get_max_layer_size; transformers' integrations/accelerate.py _get_device_map):
//  - budgets: each GPU's free memory (mem_get_info; here memory less the reserve) and 90% of the host's
//    RAM (transformers 5.17 integrations/accelerate.py get_max_memory: "cpu" x 0.90 when the user gave
//    no max_memory, "to offload to disk a bit more"), or `max_memory="0=20GiB,1=24GiB,cpu=64GiB"`;
//  - auto/balanced/balanced_low_0 pass them through get_balanced_memory: with one GPU and no user
//    max_memory its budget is x 0.9; with several, every GPU but the last is capped at
//    model/num_gpus + 1.25 x max(largest no-split block, mean leaf module) (balanced_low_0: GPU 0 gets
//    only what the others cannot hold); sequential uses the budgets as they are;
//  - infer_auto_device_map walks the modules in registration order; on the main devices (the first
//    GPU and the cpu) the size of the largest layer not yet placed is held back (room to bring an
//    offloaded layer in); a module that does not fit is split into its children unless it is a
//    decoder layer (no_split_module_classes), which moves to the next device instead.
// Modules are read from the tensor names (model.layers.12.mlp.down_proj): a path component that is a
// number is an entry of a ModuleList, i.e. a decoder layer, which is never split. Past every budget
// the rest goes to "disk", which has no limit (infer_auto_device_map appends it to the devices).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/error.hpp"
#include "core/units.hpp"
#include "policies/placement_rules/rules.hpp"

namespace tiersim::strategy {
namespace {

enum class Mode { Auto, Balanced, BalancedLow0, Sequential };

// The module tree implied by the weight names.
struct Module {
  std::string name;
  double bytes = 0;
  std::vector<std::size_t> children;  // in registration order
  std::vector<std::uint32_t> tensors; // every weight tensor under it
  bool no_split = false;              // a decoder layer (an entry of a ModuleList)
};

class ModuleTree {
 public:
  explicit ModuleTree(const trace::Header& header) {
    nodes_.push_back({});
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      std::size_t node = 0;
      std::size_t start = 0;
      nodes_[0].bytes += static_cast<double>(t.bytes);
      nodes_[0].tensors.push_back(t.id);
      while (start <= t.name.size()) {
        const std::size_t dot = t.name.find('.', start);
        const std::string path = t.name.substr(0, dot);
        const std::string part = t.name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        std::size_t child = find(node, path);
        if (child == 0) {
          child = nodes_.size();
          Module m;
          m.name = path;
          m.no_split = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
          nodes_.push_back(m);
          nodes_[node].children.push_back(child);
        }
        node = child;
        nodes_[node].bytes += static_cast<double>(t.bytes);
        nodes_[node].tensors.push_back(t.id);
        if (dot == std::string::npos) break;
        start = dot + 1;
      }
    }
  }
  const Module& operator[](std::size_t i) const { return nodes_[i]; }
  std::size_t size() const { return nodes_.size(); }

  // get_max_layer_size: the largest "layer" (a module without children, or a no-split one) under `roots`.
  double max_layer(const std::vector<std::size_t>& roots) const {
    double best = 0;
    std::vector<std::size_t> stack(roots.rbegin(), roots.rend());
    while (!stack.empty()) {
      const std::size_t i = stack.back();
      stack.pop_back();
      const Module& m = nodes_[i];
      if (m.children.empty() || m.no_split) best = std::max(best, m.bytes);
      else stack.insert(stack.end(), m.children.rbegin(), m.children.rend());
    }
    return best;
  }
  // The mean size of the final modules (modules whose children are all tensors, as accelerate counts
  // them once parameters are removed): the buffer get_balanced_memory adds.
  double mean_final_module() const {
    double sum = 0;
    std::size_t n = 0;
    for (std::size_t i = 1; i < nodes_.size(); ++i) {
      const Module& m = nodes_[i];
      if (m.children.empty()) continue;  // a tensor (a parameter in accelerate's sizes)
      const bool final = std::all_of(m.children.begin(), m.children.end(),
                                     [&](std::size_t c) { return nodes_[c].children.empty(); });
      if (final) sum += m.bytes, ++n;
    }
    return n ? std::floor(sum / static_cast<double>(n)) : 0;
  }

 private:
  std::size_t find(std::size_t parent, const std::string& path) const {
    for (std::size_t c : nodes_[parent].children)
      if (nodes_[c].name == path) return c;
    return 0;
  }
  std::vector<Module> nodes_;
};

class AccelerateDeviceMap final : public PlacementRule {
 public:
  AccelerateDeviceMap(Mode mode, config::Section& o) : mode_(mode) {
    if (o.has("max_memory")) parse_max_memory(o);
  }

  std::vector<placement::DeviceId> place(const trace::Header& header, const hw::HardwareProfile& hw, const Completion&,
                                         Resolved& resolved) const override {
    const ModuleTree tree(header);
    // get_max_memory: free memory per GPU, available RAM for the cpu, unless the user gave them.
    std::vector<std::pair<placement::DeviceId, double>> budget;
    if (max_memory_.empty()) {
      for (int d = 0; d < hw.gpu.count; ++d) budget.emplace_back(d, hw.gpu.memory - hw.gpu.reserved);
      budget.emplace_back(placement::kCpu, 0.9 * hw.host.memory);
    } else {
      for (const auto& [d, bytes] : max_memory_) {
        check_on_machine(d, hw, "max_memory");
        if (d != placement::kCpu) budget.emplace_back(d, bytes);
      }
      budget.emplace_back(placement::kCpu, max_memory_.count(placement::kCpu) ? max_memory_.at(placement::kCpu) : 0.0);
    }
    if (mode_ != Mode::Sequential) balance(tree, budget);

    // infer_auto_device_map.
    std::vector<placement::DeviceId> homes(header.tensors.size(), placement::kComputeGpu);
    std::vector<std::size_t> to_treat = tree[0].children;
    std::size_t current = 0;
    double used = 0;
    double max_layer = 0;
    const placement::DeviceId main_gpu = budget.front().first;
    std::map<placement::DeviceId, double> placed;
    while (!to_treat.empty()) {
      const std::size_t node = to_treat.front();
      to_treat.erase(to_treat.begin());
      max_layer = tree.max_layer(to_treat);  // the largest layer not yet placed (this one excluded)
      if (current >= budget.size()) {  // disk: no limit, nothing held back
        for (std::uint32_t t : tree[node].tensors) homes[t] = placement::kDisk;
        placed[placement::kDisk] += tree[node].bytes;
        continue;
      }
      const auto [device, limit] = budget[current];
      double available = limit;
      if (device == main_gpu || device == placement::kCpu) available -= max_layer;
      const Module& m = tree[node];
      if (used + m.bytes > available) {
        if (m.children.empty() || m.no_split) {
          ++current;
          used = 0;
          to_treat.insert(to_treat.begin(), node);
        } else {
          to_treat.insert(to_treat.begin(), m.children.begin(), m.children.end());
        }
        continue;
      }
      for (std::uint32_t t : m.tensors) homes[t] = device;
      placed[device] += m.bytes;
      used += m.bytes;
    }
    std::string budgets, map;
    for (const auto& [d, b] : budget) budgets += (budgets.empty() ? "" : ", ") + placement::device_name(d) + " " + units::format_bytes(b);
    for (const auto& [d, b] : placed) map += (map.empty() ? "" : ", ") + placement::device_name(d) + " " + units::format_bytes(b);
    resolved.emplace_back("max_memory", budgets);
    resolved.emplace_back("device map", map);
    return homes;
  }
  bool may_offload() const override { return true; }

 private:
  // get_balanced_memory.
  void balance(const ModuleTree& tree, std::vector<std::pair<placement::DeviceId, double>>& budget) const {
    std::vector<std::size_t> gpus;
    for (std::size_t i = 0; i < budget.size(); ++i)
      if (budget[i].first != placement::kCpu && budget[i].second > 0) gpus.push_back(i);
    if (gpus.empty()) return;
    if (gpus.size() == 1) {
      // One GPU: no low_zero; 90% of it when the user left the budgets to accelerate.
      if (max_memory_.empty()) budget[gpus.front()].second *= 0.9;
      return;
    }
    const bool low_zero = mode_ == Mode::BalancedLow0;
    const double model = tree[0].bytes;
    double per_gpu = std::floor(model / static_cast<double>(low_zero ? gpus.size() - 1 : gpus.size()));
    double no_split = 0;
    for (std::size_t i = 1; i < tree.size() && no_split == 0; ++i)
      if (tree[i].no_split) no_split = tree[i].bytes;  // the first decoder layer's size
    per_gpu += std::floor(1.25 * std::max(no_split, tree.mean_final_module()));
    for (std::size_t k = 0; k + 1 < gpus.size(); ++k) {
      auto& b = budget[gpus[k]].second;
      b = std::min(low_zero && k == 0 ? budget[gpus[0]].second : per_gpu, b);
    }
    if (low_zero) {
      double others = 0;
      for (std::size_t k = 1; k < gpus.size(); ++k) others += budget[gpus[k]].second;
      budget[gpus[0]].second = std::min(std::max(0.0, model - others), budget[gpus[0]].second);
    }
  }

  void parse_max_memory(config::Section& o) {
    const std::string text = o.text("max_memory");
    std::size_t start = 0;
    while (start < text.size()) {
      const std::size_t semi = text.find(';', start);
      const std::string entry = text.substr(start, semi == std::string::npos ? std::string::npos : semi - start);
      start = semi == std::string::npos ? text.size() : semi + 1;
      const std::size_t eq = entry.find('=');
      if (eq == std::string::npos) o.fail("max_memory", "entries are DEVICE=SIZE separated by ';' (0=20GiB;cpu=64GiB), got '" + entry + "'");
      const std::string dev = entry.substr(0, eq);
      if (dev == "disk")
        o.fail("max_memory", "'disk' has no budget in accelerate's walk (whatever no device holds goes there); leave it out");
      placement::DeviceId d = placement::kCpu;
      try {
        d = dev == "cpu" ? placement::kCpu : placement::parse_device(dev.rfind("cuda:", 0) == 0 ? dev : "cuda:" + dev);
        const double bytes = units::parse_bytes(entry.substr(eq + 1));
        if (!(bytes >= 0) || !std::isfinite(bytes)) throw std::invalid_argument("a size must be finite and not negative");
        if (!max_memory_.emplace(d, bytes).second) throw std::invalid_argument(dev + " given twice");
      } catch (const std::invalid_argument& e) {
        o.fail("max_memory", std::string(e.what()));
      }
    }
  }

  Mode mode_;
  std::map<placement::DeviceId, double> max_memory_;  // empty: accelerate's get_max_memory
};

}  // namespace

std::unique_ptr<PlacementRule> make_accelerate_auto(config::Section& o) {
  return std::make_unique<AccelerateDeviceMap>(Mode::Auto, o);
}
std::unique_ptr<PlacementRule> make_accelerate_balanced(config::Section& o) {
  return std::make_unique<AccelerateDeviceMap>(Mode::Balanced, o);
}
std::unique_ptr<PlacementRule> make_accelerate_balanced_low_0(config::Section& o) {
  return std::make_unique<AccelerateDeviceMap>(Mode::BalancedLow0, o);
}
std::unique_ptr<PlacementRule> make_accelerate_sequential(config::Section& o) {
  return std::make_unique<AccelerateDeviceMap>(Mode::Sequential, o);
}

}  // namespace tiersim::strategy
