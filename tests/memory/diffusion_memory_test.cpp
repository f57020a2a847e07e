// PyTorch's caching allocator over a diffusion model's iterations (sim/cli/diffusion_memory.hpp): the trace's own
// allocations replayed, the weights at load, then the copies of offloaded weights and the transient values op by op.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/run_sim.hpp"

namespace tiersim {
namespace {

TEST(DiffusionMemory, IterationsReplayTheTracesOwnAllocationsThroughTheCachingAllocator) {
  const std::string flux = "--model traces/models/flux.1-dev.json --steps 3 --hw h100-measured --runtime pytorch-hf-h100 ";
  const auto resident = testing::run_sim_json(flux + "--policy resident");
  const auto& m = resident["pytorch_memory"];
  ASSERT_TRUE(m.contains("iteration_peak_allocated_bytes")) << m.dump();
  const double allocated = m["iteration_peak_allocated_bytes"], reserved = m["iteration_peak_reserved_bytes"];
  // What the allocator holds at its peak is what the run's peak counts, less the driver's reserve (the replay rounds
  // each allocation to 512 bytes).
  const double reserve = std::stod(resident["inputs"]["hardware"]["gpu"]["reserved"].get<std::string>());
  EXPECT_NEAR(allocated, resident["memory_per_tier"]["cuda:0"]["peak_bytes"].get<double>() - reserve, 1e-3 * allocated);
  EXPECT_GT(reserved, allocated);
  // Offloaded weights copied in per op: less allocated than resident, by about what stays off the GPU.
  const auto offloaded = testing::run_sim_json(flux + "--policy bytes --offload-gb 8");
  EXPECT_LT(offloaded["pytorch_memory"]["iteration_peak_allocated_bytes"].get<double>(), allocated - 7e9);
  // Weights in managed memory: not modelled, and the JSON says why.
  const auto managed = testing::run_sim_json(flux + "--policy um");
  EXPECT_NE(managed["pytorch_memory"]["not_modelled"].get<std::string>().find("managed memory"), std::string::npos);
  // The activations stay device memory under managed memory (transient values, not managed ranges): on cuda:0.
  EXPECT_GT(managed["memory_per_tier"]["cuda:0"]["activation_bytes"].get<double>(), 100e6);
  // Out of memory is an outcome: a GPU too small for an iteration's values once the weights are in.
  const auto small = testing::run_sim(flux + "--policy resident --set 'gpu.memory=23.3 GiB'");
  EXPECT_EQ(small.code, 3) << small.out;
  EXPECT_NE(small.out.find("PyTorch allocator      OUT OF MEMORY in step 1 (iteration)"), std::string::npos) << small.out;
}

}  // namespace
}  // namespace tiersim
