#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/error.hpp"
#include "hardware/catalogue.hpp"
#include "hardware/profile_loader.hpp"

namespace tiersim::hw {
namespace {

HardwareProfile composed(const std::string& spec) {
  const Composed c = compose(spec);
  return parse_profile_node(c.tree, "catalogue:" + c.canonical);
}

TEST(Catalogue, EveryGpuComposesIntoAProfileTheLoaderAccepts) {
  ASSERT_GE(catalogue_gpus().size(), 28u);
  for (const auto& g : catalogue_gpus()) {
    for (const std::string count : {"", "2x"}) {
      SCOPED_TRACE(count + g.id);
      const HardwareProfile p = composed(count + g.id);
      EXPECT_EQ(p.gpu.name, g.name);
      EXPECT_EQ(p.gpu.count, count.empty() ? 1 : 2);
      EXPECT_DOUBLE_EQ(p.gpu.memory, g.memory);
      EXPECT_DOUBLE_EQ(p.gpu.memory_bandwidth, g.memory_bandwidth);
      EXPECT_GT(p.gpu_rate("bf16"), 0);
      ASSERT_TRUE(p.managed_memory.has_value());
      EXPECT_EQ(p.peer_link.has_value(), !count.empty());
      for (const char* section : {"gpu", "host", "host_link", "managed_memory"})
        EXPECT_FALSE(p.sources.at(section).empty()) << section;
    }
  }
}

// Every number of a preset against its composition (presets.yaml), to the rounding the preset files were written
// with: the managed-memory costs there are the same ratios of the pinned rate, rounded by hand.
TEST(Catalogue, PresetsAreTheirCompositions) {
  std::set<std::string> mapped;
  for (const auto& [preset, composition] : catalogue_presets()) {
    SCOPED_TRACE(preset + " = " + composition);
    mapped.insert(preset);
    const HardwareProfile a = resolve_profile(preset);
    const HardwareProfile b = composed(composition);
    auto near = [](double x, double y, const char* what) {
      EXPECT_NEAR(x, y, 0.015 * std::max(std::abs(x), std::abs(y))) << what;
    };
    EXPECT_EQ(a.gpu.name, b.gpu.name);
    EXPECT_EQ(a.gpu.count, b.gpu.count);
    near(a.gpu.memory, b.gpu.memory, "gpu.memory");
    near(a.gpu.reserved, b.gpu.reserved, "gpu.reserved");
    near(a.gpu.memory_bandwidth, b.gpu.memory_bandwidth, "gpu.memory_bandwidth");
    near(a.gpu.memory_efficiency, b.gpu.memory_efficiency, "gpu.memory_efficiency");
    near(a.gpu.compute_efficiency, b.gpu.compute_efficiency, "gpu.compute_efficiency");
    near(a.gpu.kernel_min_time, b.gpu.kernel_min_time, "gpu.kernel_min_time");
    EXPECT_EQ(a.gpu.compute, b.gpu.compute);
    EXPECT_EQ(a.host.name, b.host.name);
    near(a.host.memory, b.host.memory, "host.memory");
    near(a.host.memory_bandwidth, b.host.memory_bandwidth, "host.memory_bandwidth");
    EXPECT_EQ(a.host.compute, b.host.compute);
    near(a.host.op_overhead, b.host.op_overhead, "host.op_overhead");
    EXPECT_EQ(a.host_link.generation, b.host_link.generation);
    EXPECT_EQ(a.host_link.width, b.host_link.width);
    for (auto [x, y, what] : {std::tuple{&a.host_link.h2d_pinned, &b.host_link.h2d_pinned, "h2d_pinned"},
                              {&a.host_link.d2h_pinned, &b.host_link.d2h_pinned, "d2h_pinned"},
                              {&a.host_link.h2d_pageable, &b.host_link.h2d_pageable, "h2d_pageable"},
                              {&a.host_link.d2h_pageable, &b.host_link.d2h_pageable, "d2h_pageable"}}) {
      near(x->bandwidth, y->bandwidth, what);
      near(x->latency, y->latency, what);
    }
    near(a.host_link.bidirectional, b.host_link.bidirectional, "host_link.bidirectional");
    ASSERT_EQ(a.peer_link.has_value(), b.peer_link.has_value());
    if (a.peer_link) {
      EXPECT_EQ(a.peer_link->type, b.peer_link->type);
      near(a.peer_link->transfer.bandwidth, b.peer_link->transfer.bandwidth, "peer_link.transfer");
      near(a.peer_link->transfer.latency, b.peer_link->transfer.latency, "peer_link.latency");
      near(a.peer_link->bidirectional, b.peer_link->bidirectional, "peer_link.bidirectional");
    }
    ASSERT_TRUE(a.managed_memory && b.managed_memory);
    const ManagedMemorySpec &m = *a.managed_memory, &n = *b.managed_memory;
    near(m.fault_migration_bandwidth, n.fault_migration_bandwidth, "fault_migration_bandwidth");
    near(m.prefetch_to_gpu, n.prefetch_to_gpu, "prefetch_to_gpu");
    near(m.evict_to_cpu, n.evict_to_cpu, "evict_to_cpu");
    near(m.remote_read_bandwidth, n.remote_read_bandwidth, "remote_read_bandwidth");
    near(m.gemv_remote_input_bandwidth, n.gemv_remote_input_bandwidth, "gemv_remote_input_bandwidth");
    EXPECT_EQ(m.remote_gemm_reads, n.remote_gemm_reads) << "remote_gemm_reads";
    ASSERT_EQ(m.remote_gemv.size(), n.remote_gemv.size()) << "remote_gemv";
    for (std::size_t i = 0; i < m.remote_gemv.size(); ++i) {
      near(m.remote_gemv[i].weight_bytes, n.remote_gemv[i].weight_bytes, "remote_gemv weight bytes");
      near(m.remote_gemv[i].both_seconds, n.remote_gemv[i].both_seconds, "remote_gemv both seconds");
    }
    EXPECT_EQ(m.fresh_touch, n.fresh_touch) << "fresh_touch";
    near(m.fault_latency, n.fault_latency, "fault_latency");
    near(m.fault_block_overhead, n.fault_block_overhead, "fault_block_overhead");
    near(m.mapping_fault_cost, n.mapping_fault_cost, "mapping_fault_cost");
    EXPECT_EQ(m.fault_batch_count, n.fault_batch_count);
    ASSERT_EQ(a.disk.has_value(), b.disk.has_value());
    if (a.disk) near(a.disk->read_bandwidth, b.disk->read_bandwidth, "disk.read_bandwidth");
  }
  // Every datasheet preset is mapped; the measured ones are not compositions.
  for (const auto& p : list_presets())
    if (p.name.find("measured") == std::string::npos) {
      EXPECT_TRUE(mapped.count(p.name)) << p.name;
    }
}

TEST(Catalogue, TheLinkIsTheNarrowestOfCardCpuAndSlot) {
  auto link = [](const std::string& spec) {
    const HardwareProfile p = composed(spec);
    return std::to_string(p.host_link.generation) + "x" + std::to_string(p.host_link.width);
  };
  EXPECT_EQ(link("rtx4090"), "4x16");                            // card 4.0, CPU 4.0
  EXPECT_EQ(link("rtx5090"), "5x16");                            // card 5.0 on a DDR5 desktop's 5.0
  EXPECT_EQ(link("rtx5090+desktop-ddr4-3200"), "4x16");          // an older CPU
  EXPECT_EQ(link("rtx4060ti-16gb"), "4x8");                      // an x8 card
  EXPECT_EQ(link("rtx4090+pcie3-x8"), "3x8");                    // the slot
  EXPECT_EQ(link("rtx4060ti-16gb+pcie4-x16"), "4x8");            // a wide slot does not widen the card
  EXPECT_EQ(link("2xrtx3090"), "4x8");                           // a desktop's 16 lanes shared: x8/x8
  EXPECT_EQ(link("2xrtx3090+pcie4-x16"), "4x16");                // a board that gives both x16
  EXPECT_EQ(link("8xh100-sxm"), "5x16");                         // a server's lanes
}

TEST(Catalogue, PeersAreNvlinkWhereFittedOrBuiltInElsePcie) {
  EXPECT_EQ(composed("2xrtx3090").peer_link->type, "pcie");      // no bridge named: staged through the host
  EXPECT_EQ(composed("2xrtx3090+nvlink").peer_link->type, "nvlink");
  EXPECT_NEAR(composed("2xrtx3090+nvlink").peer_link->transfer.bandwidth, 56.25e9, 1);
  EXPECT_EQ(composed("8xh100-sxm").peer_link->type, "nvlink");   // SXM: built in
  const HardwareProfile staged = composed("2xrtx4090"), p2p = composed("2xrtx6000-ada");
  EXPECT_LT(staged.peer_link->transfer.bandwidth, staged.host_link.h2d_pinned.bandwidth);
  EXPECT_DOUBLE_EQ(p2p.peer_link->transfer.bandwidth, p2p.host_link.h2d_pinned.bandwidth);
  EXPECT_FALSE(composed("rtx4090").peer_link.has_value());
}

TEST(Catalogue, RamResizesTheHostAndTheCanonicalNameSaysEverything) {
  const Composed c = compose("rtx5090+ram128");
  EXPECT_EQ(c.canonical, "rtx5090+desktop-ddr5-5600+pcie5-x16+ram128");
  EXPECT_DOUBLE_EQ(parse_profile_node(c.tree, "t").host.memory, 128.0 * 1073741824.0);
  EXPECT_EQ(compose("2xrtx3090+nvlink").canonical, "2xrtx3090+desktop-ddr4-3200+pcie4-x8+nvlink-3090-bridge");
  // The canonical name composes to itself.
  EXPECT_EQ(compose(c.canonical).canonical, c.canonical);
  EXPECT_EQ(YAML::Dump(compose(c.canonical).tree), YAML::Dump(c.tree));
}

TEST(Catalogue, PricesAreTheGpusLaunchPricesTimesTheirCount) {
  ASSERT_TRUE(compose("rtx4090").price.has_value());
  EXPECT_DOUBLE_EQ(compose("rtx4090").price->usd, 1599);
  EXPECT_DOUBLE_EQ(compose("2xrtx3090+nvlink").price->usd, 2 * 1499.0);
  EXPECT_NE(compose("2xrtx3090").price->source.find("2 x"), std::string::npos);
  EXPECT_FALSE(compose("8xh100-sxm").price.has_value());         // no public list price
  ASSERT_TRUE(price_of("rtx3090x2-nvlink").has_value());          // a preset, by its composition
  EXPECT_DOUBLE_EQ(price_of("rtx3090x2-nvlink")->usd, 2 * 1499.0);
  EXPECT_FALSE(price_of("h100-measured").has_value());
  EXPECT_DOUBLE_EQ(price_of("rtx5070ti")->usd, 749);
}

TEST(Catalogue, AMissingFileIsAMissingFileEvenWithAPlus) {
  try {
    resolve_profile("./my+h100.yaml");
    ADD_FAILURE() << "resolved";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no such file"), std::string::npos) << e.what();
  }
}

TEST(Catalogue, ResolveProfileComposesWhatIsNotAFileOrPreset) {
  const HardwareProfile p = resolve_profile("2xrtx3090+nvlink");
  EXPECT_EQ(p.origin, "catalogue:2xrtx3090+desktop-ddr4-3200+pcie4-x8+nvlink-3090-bridge");
  EXPECT_EQ(resolve_profile("rtx4090").origin, "preset:rtx4090");  // a preset's name stays the preset
  EXPECT_EQ(resolve_profile("1xrtx4090").origin, "catalogue:rtx4090+desktop-ddr4-3200+pcie4-x16");
}

TEST(Catalogue, BadCompositionsNameTheTerm) {
  auto message = [](const std::string& spec) -> std::string {
    try {
      compose(spec);
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "--hw");
      return e.message();
    }
    ADD_FAILURE() << spec << " composed";
    return "";
  };
  EXPECT_NE(message("rtx9999").find("not a catalogue GPU"), std::string::npos);
  EXPECT_NE(message("rtx4090+ddr9").find("'ddr9' is not a catalogue part"), std::string::npos);
  EXPECT_NE(message("rtx4090+desktop-ddr4-3200+server-ddr5-4800").find("two hosts"), std::string::npos);
  EXPECT_NE(message("rtx4090+pcie3-x8+pcie4-x8").find("two host links"), std::string::npos);
  EXPECT_NE(message("2xrtx4090+nvlink").find("has no NVLink"), std::string::npos);
  EXPECT_NE(message("rtx3090+nvlink").find("needs two or more GPUs"), std::string::npos);
  EXPECT_NE(message("2xrtx3090+pcie-p2p").find("no peer-to-peer"), std::string::npos);
  EXPECT_NE(message("2xrtx3090+nvlink-h100-sxm").find("not the"), std::string::npos);
  EXPECT_NE(message("8xh100-sxm+pcie-p2p").find("built-in NVLink"), std::string::npos);
  EXPECT_NE(message("0xrtx4090").find("1 to 64"), std::string::npos);
  EXPECT_NE(message("65xrtx4090").find("1 to 64"), std::string::npos);
  EXPECT_NE(message("99999999xrtx4090").find("1 to 64"), std::string::npos);
  EXPECT_NE(message("rtx4090++ram64").find("empty part"), std::string::npos);
  EXPECT_NE(message("rtx4090+").find("empty part"), std::string::npos);
  EXPECT_NE(message("rtx4090+ram0").find("1 to 65536"), std::string::npos);
  EXPECT_NE(message("rtx4090+ram99999999999").find("1 to 65536"), std::string::npos);
  EXPECT_NE(message("rtx4090+ram64+ram128").find("two host memory sizes"), std::string::npos);
  EXPECT_NE(message("4xrtx3090+nvlink").find("bridge between two cards"), std::string::npos);
  EXPECT_NE(message("8xrtx4090").find("CPU lanes"), std::string::npos);  // a desktop's 16 lanes: four cards at x4
  EXPECT_NO_THROW(compose("4xrtx4090"));
  EXPECT_NO_THROW(compose("8xrtx4090+server-ddr5-4800"));
}

}  // namespace
}  // namespace tiersim::hw
