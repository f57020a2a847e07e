// `device_map`: an explicit device map, as Hugging Face writes model.hf_device_map: a JSON object of
// module names to devices ({"model.embed_tokens": 0, "model.layers.30": "cpu", "lm_head": "cpu"}), read
// from `file=PATH`. Each weight goes where the longest module name that prefixes it says ("" names the
// whole model); a weight no entry covers is an error. Devices: an integer or "cuda:N" for a GPU, "cpu",
// "disk" (read from its file on each use: the profile's disk section).
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/config_json.hpp"
#include "policies/placement_rules/rules.hpp"

namespace tiersim::strategy {
namespace {

class ExplicitDeviceMap final : public PlacementRule {
 public:
  explicit ExplicitDeviceMap(config::Section& o) : file_(o.text("file")) {
    std::string text;
    try {
      text = io::read_file(file_, "", "JSON device map");  // a regular file of at most 64 MiB
    } catch (const InputError& e) {
      o.fail("file", "'" + file_ + "' " + e.message());
    }
    map_ = parse_device_map_json(text, file_);
  }

  std::vector<placement::DeviceId> place(const trace::Header& header, const hw::HardwareProfile& hw, const Completion&,
                                         Resolved& resolved) const override {
    std::vector<placement::DeviceId> homes(header.tensors.size(), placement::kComputeGpu);
    std::map<placement::DeviceId, double> bytes;
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      const std::string* best = nullptr;
      for (const auto& [module, d] : map_)
        if ((module.empty() || t.name == module || t.name.rfind(module + ".", 0) == 0) && (!best || module.size() > best->size()))
          best = &module;
      if (!best) throw InputError(file_, 0, t.name, "the device map places no module holding this weight");
      homes[t.id] = map_.at(*best);
      check_on_machine(homes[t.id], hw, *best, file_);
      bytes[homes[t.id]] += static_cast<double>(t.bytes);
    }
    std::string text;
    for (const auto& [d, b] : bytes) text += (text.empty() ? "" : ", ") + placement::device_name(d) + " " + std::to_string(static_cast<long long>(b)) + " B";
    resolved.emplace_back("device map", file_ + ": " + text);
    return homes;
  }
  bool may_offload() const override { return true; }

 private:
  std::string file_;
  std::map<std::string, placement::DeviceId> map_;
};

}  // namespace

std::map<std::string, placement::DeviceId> parse_device_map_json(const std::string& text, const std::string& file) {
  // model::parse_config_json: syntax errors with their line, duplicate keys refused (nlohmann keeps the last silently,
  // so a map that names a module twice would place it by whichever came last), the key at fault named with its line.
  const model::ConfigJson doc = model::parse_config_json(text, file);
  if (!doc.json.is_object()) throw InputError(file, 0, "", "expected a JSON object of module names to devices");
  const model::ConfigReader entries(doc);
  std::map<std::string, placement::DeviceId> map;
  for (auto it = doc.json.begin(); it != doc.json.end(); ++it) {
    placement::DeviceId d = placement::kCpu;
    const auto& v = it.value();
    if (v.is_number_integer() && v.get<long long>() >= 0 && v.get<long long>() < 1024) {
      d = static_cast<placement::DeviceId>(v.get<long long>());
    } else if (v.is_string()) {
      try {
        d = placement::parse_device(v.get<std::string>(), true);
      } catch (const std::invalid_argument& e) {
        entries.fail(it.key(), e.what());
      }
    } else {
      entries.fail(it.key(), "expected a GPU index, \"cuda:N\", \"cpu\" or \"disk\"");
    }
    map[it.key()] = d;
  }
  return map;
}

std::unique_ptr<PlacementRule> make_explicit_device_map(config::Section& o) {
  return std::make_unique<ExplicitDeviceMap>(o);
}

}  // namespace tiersim::strategy
