// comfy.lowvram against ComfyUI's own partial loading: tests/fixtures/comfyui_partial_loads.jsonl holds
// what ComfyUI's load_models_gpu / ModelPatcher.load / pin_memory decided for tiersim's models
// (experiments/frameworks/comfyui_partial_loads.py; results/frameworks/comfyui/README.md).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "hardware/profile_loader.hpp"
#include "policies/strategy/part_spec.hpp"
#include "policies/strategy/parts.hpp"
#include "support/model_headers.hpp"

namespace tiersim::strategy {
namespace {

class PlatformOnly final : public Completion {
 public:
  explicit PlatformOnly(std::string platform) : platform_(std::move(platform)) {}
  bool fits(const std::vector<placement::DeviceId>&) const override { return true; }
  bool fits_compute_gpu(const std::vector<placement::DeviceId>&) const override { return true; }
  int staged_layers(placement::DeviceId) const override { return 1; }
  const std::string& platform() const override { return platform_; }

 private:
  std::string platform_;
};

std::string bytes(double b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g B", b);
  return buf;
}

// The rule's options for a case: ComfyUI's inputs and command-line flags.
PartSpec spec_for(const nlohmann::json& row) {
  PartSpec p("comfy.lowvram");
  const auto& in = row["inputs"];
  if (row["comfyui"].get<std::string>().rfind("2025-07", 0) == 0) p.options["version"] = "2025-07";
  p.options["free"] = bytes(in["vram_free"].get<double>());
  p.options["memory-required"] = bytes(in["memory_required"].get<double>());
  if (!in["minimum_memory_required"].is_null())
    p.options["minimum-memory-required"] = bytes(in["minimum_memory_required"].get<double>());
  const auto& args = in["args"];
  if (args.contains("reserve_vram")) p.options["reserve-vram"] = std::to_string(args["reserve_vram"].get<double>()) + " GiB";
  if (args.contains("disable_async_offload")) p.options["async-offload"] = "0";
  if (args.contains("disable_pinned_memory")) p.options["pin"] = "off";
  if (args.contains("novram")) p.options["novram"] = "true";
  return p;
}

TEST(ComfyUiFixtures, EveryPartialLoadEqualsComfyUisOwnModuleForModuleAndPinForPin) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/comfyui_partial_loads.jsonl");
  ASSERT_TRUE(in);
  const PartInfo<PlacementRule>* info = nullptr;
  for (const auto& i : placement_rules())
    if (i.name == "comfy.lowvram") info = &i;
  ASSERT_NE(info, nullptr);
  std::string line;
  int cases = 0, skipped = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    const auto& inputs = row["inputs"];
    if (inputs["vendor"] != "nvidia") {  // tiersim models NVIDIA GPUs (other vendors: ratio 0.4)
      ++skipped;
      continue;
    }
    const std::string label = row["model"].get<std::string>() + " " + row["case"].get<std::string>() + " " +
                              row["comfyui"].get<std::string>().substr(0, 8);
    const trace::Header& header = testing::model_header(row["model"]);
    auto hw = hw::resolve_profile("rtx4090");
    hw.gpu.memory = inputs["vram_total"].get<double>();
    hw.host.memory = inputs["ram_total"].get<double>();
    const PartSpec spec = spec_for(row);
    config::Section options(spec.node(), "", "fixture");
    const auto rule = info->make(options);
    options.finish();
    Resolved resolved;
    const std::string platform = inputs["platform"];
    const auto homes = rule->place(header, hw, PlatformOnly(platform), resolved);

    // What the copy path would make of it, then ComfyUI's pinning.
    placement::Placement p;
    p.device = homes;
    p.path.assign(homes.size(), placement::Path::Local);
    for (const auto& t : header.tensors)
      if (homes[t.id] == placement::kCpu) p.path[t.id] = placement::Path::Copy;
    p.copy.host_memory = placement::HostMemory::Pinned;
    rule->annotate(header, hw, platform, p, resolved);

    std::map<std::string, const trace::Tensor*> by_module;
    for (const auto& t : header.tensors)
      if (t.kind == trace::TensorKind::Weight) by_module[t.name.substr(0, t.name.rfind(".weight"))] = &t;
    int wrong_home = 0, wrong_pin = 0;
    std::string first;
    double offloaded = 0;
    ASSERT_EQ(row["modules"].size(), by_module.size()) << label;
    for (const auto& m : row["modules"]) {
      const std::string name = m[0];
      ASSERT_TRUE(by_module.count(name)) << label << ": " << name;
      const trace::Tensor& t = *by_module[name];
      ASSERT_EQ(static_cast<double>(t.bytes), m[2].get<double>()) << name;
      const bool on_gpu = m[3].get<int>() == 1;
      if ((homes[t.id] == placement::kComputeGpu) != on_gpu && wrong_home++ == 0)
        first = name + (on_gpu ? " loaded by ComfyUI" : " offloaded by ComfyUI");
      if (!on_gpu) offloaded += static_cast<double>(t.bytes);
      if (!on_gpu && !row["pinned_bytes"].is_null()) {
        const bool pinned = m[5].get<int>() == 1;
        if ((placement::host_memory_of(p, t.id) == placement::HostMemory::Pinned) != pinned) ++wrong_pin;
      }
    }
    EXPECT_EQ(wrong_home, 0) << label << ": " << wrong_home << " modules differ, first " << first;
    EXPECT_EQ(wrong_pin, 0) << label << ": pinning differs for " << wrong_pin << " modules";
    EXPECT_EQ(offloaded, row["offloaded_bytes"].get<double>()) << label;
    ++cases;
  }
  EXPECT_EQ(cases, 54);
  EXPECT_EQ(skipped, 3);
}

}  // namespace
}  // namespace tiersim::strategy

namespace tiersim::strategy {
namespace {

TEST(ComfyUi, DynamicVramIsRefusedWithTheFlagThatTurnsItOff) {
  for (const std::string rule : {"comfy.lowvram", "distorch.ratio"}) {
    const PartInfo<PlacementRule>* info = nullptr;
    for (const auto& i : placement_rules())
      if (i.name == rule) info = &i;
    ASSERT_NE(info, nullptr);
    PartSpec on(rule);
    on.options["dynamic-vram"] = "on";
    config::Section options(on.node(), "", "test");
    try {
      info->make(options);
      ADD_FAILURE() << rule;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "dynamic-vram");
      EXPECT_NE(std::string(e.what()).find("--disable-dynamic-vram"), std::string::npos) << e.what();
    }
    PartSpec off(rule);
    off.options["dynamic-vram"] = "off";
    config::Section ok(off.node(), "", "test");
    EXPECT_NO_THROW(info->make(ok));
  }
}

}  // namespace
}  // namespace tiersim::strategy
