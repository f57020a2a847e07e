// tiersim's accelerate placement rules against the device maps Hugging Face's own code computed
// (tests/fixtures/accelerate_device_maps.jsonl: transformers 5.17's _get_device_map on meta-device
// models, written by experiments/frameworks/accelerate_device_maps.py on a lent GPU machine; the command
// and versions are in results/frameworks/accelerate/README.md). Tensor for tensor, every case.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "hardware/profile_loader.hpp"
#include "policies/strategy/strategy.hpp"
#include "support/model_headers.hpp"

namespace tiersim::strategy {
namespace {

placement::DeviceId fixture_device(const std::string& d) {
  if (d == "cpu") return placement::kCpu;
  if (d == "disk") return placement::kDisk;
  return std::stoi(d);
}

// The device of a tensor in an hf_device_map: that of the longest module name that is its prefix.
placement::DeviceId lookup(const nlohmann::json& map, const std::string& tensor) {
  std::string best;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string& m = it.key();
    const bool prefix = m.empty() || tensor == m || tensor.rfind(m + ".", 0) == 0;
    if (prefix && m.size() >= best.size()) best = m;
  }
  return fixture_device(map.at(best).get<std::string>());
}

TEST(AccelerateFixtures, EveryDeviceMapEqualsTransformersOwnTensorForTensor) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/accelerate_device_maps.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  int cases = 0, mismatched_cases = 0, disk_cases = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    ASSERT_FALSE(row.contains("error")) << line.substr(0, 200);
    const std::string name = row["model"];
    const trace::Header& header = testing::model_header(name);
    // Budgets given: a machine large enough that only the budgets decide (the placement is compared,
    // not whether the rest of the run fits).
    hw::HardwareProfile hw = hw::resolve_profile("h200");
    std::string placement = "accelerate." + row["mode"].get<std::string>();
    if (row["max_memory"].is_null()) {
      // transformers read the free memory (faked to 23.4 GiB) and the host's available RAM (64 GiB).
      hw = hw::resolve_profile("rtx4090");
      hw.gpu.memory = row["fake_free_bytes"].get<double>() + hw.gpu.reserved;
      hw.host.memory = row["fake_host_bytes"].get<double>();
    } else {
      std::string mm;
      for (auto it = row["max_memory"].begin(); it != row["max_memory"].end(); ++it)
        mm += (mm.empty() ? "" : ";") + it.key() + "=" + std::to_string(it.value().get<long long>()) + " B";
      placement += ":max_memory=" + mm;
    }
    StrategySpec spec;
    spec.placement = PartSpec::parse(placement, "--placement");
    for (auto it = row["device_map"].begin(); it != row["device_map"].end(); ++it) disk_cases += it.value() == "disk";
    placement::Placement p;
    try {
      p = compose(header, hw, spec);
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << " " << row["case"] << ": " << e.what();
      continue;
    }
    ++cases;
    int wrong = 0;
    std::string first;
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      const placement::DeviceId want = lookup(row["device_map"], t.name);
      if (p.device[t.id] != want) {
        if (wrong++ == 0) first = t.name + ": tiersim " + placement::device_name(p.device[t.id]) + ", transformers " +
                                  placement::device_name(want);
      }
    }
    if (wrong) ++mismatched_cases;
    EXPECT_EQ(wrong, 0) << name << " " << row["case"] << ": " << wrong << " tensors differ, first " << first;
  }
  EXPECT_EQ(cases, 100);
  EXPECT_EQ(mismatched_cases, 0);
  EXPECT_GT(disk_cases, 0);  // past RAM too: weights on disk, compared like the others
}

}  // namespace
}  // namespace tiersim::strategy
