// The managed-memory driver model, mechanism by mechanism (sim/managed/managed_memory.hpp), on the toy
// machine (support/toy.hpp: 1 MiB blocks, faults at 100 MB/s, write-back at 50 MB/s).
#include <gtest/gtest.h>

#include <cmath>

#include "analytic/analytic_model.hpp"
#include "core/error.hpp"
#include "managed/managed_memory.hpp"
#include "policies/strategy/presets.hpp"
#include "replay/event_replay.hpp"
#include "replay/step_plan.hpp"
#include "support/toy.hpp"

namespace tiersim {
namespace {

constexpr double MiB = 1048576.0;

// A trace whose weights are whole 1 MiB blocks: `layers` ops each reading one 1 MiB weight.
std::unique_ptr<trace::TraceReader> block_trace(int layers, int steps) {
  std::ostringstream t;
  t << "tiersim-trace 1\nmeta model blocks\n";
  for (int l = 0; l < layers; ++l) t << "tensor " << l << " weight 1048576 " << l << " w" << l << "\n";
  for (int s = 0; s < steps; ++s) {
    t << "step decode tokens=1\n";
    for (int l = 0; l < layers; ++l) t << "op gemv layer=" << l << " read=" << l << "\n";
  }
  t << "end\n";
  return std::make_unique<trace::TraceReader>(std::make_unique<std::istringstream>(t.str()), "blocks.trace");
}

placement::Placement managed_weights(const trace::Header& h, std::uint8_t advice, bool caching = true) {
  placement::Placement p;
  p.device.assign(h.tensors.size(), placement::kCpu);
  p.path.assign(h.tensors.size(), placement::Path::Managed);
  p.managed.enabled = true;
  p.managed.managed.assign(h.tensors.size(), true);
  p.managed.advice.assign(h.tensors.size(), advice);
  p.managed.caching_allocator = caching;
  return p;
}

testing::ToyMachine toy_with_gpu(const std::string& memory) {
  return {hw::parse_profile(testing::toy_profile_yaml(memory, true), "toy.yaml"), testing::toy_runtime()};
}

TEST(ManagedMemory, AModelThatFitsPagesInOnceAndNeverFaultsAgain) {
  auto src = block_trace(8, 4);
  const auto hw = toy_with_gpu("16 MiB");
  const auto p = managed_weights(src->header(), placement::kAdviseNone);
  const auto r = replay::run_event_engine(hw, p, *src);
  EXPECT_EQ(r.steps[0].faulted_blocks, 8u);
  for (std::size_t i = 1; i < r.steps.size(); ++i) {
    EXPECT_EQ(r.steps[i].faulted_blocks, 0u) << "step " << i;
    EXPECT_EQ(r.steps[i].h2d_bytes, 0.0);
  }
  EXPECT_EQ(r.managed.evicted_blocks, 0u);
  EXPECT_DOUBLE_EQ(r.managed.peak_resident_bytes, 8 * MiB);
}

TEST(ManagedMemory, CyclicReadsJustOverCapacityMissEveryBlockEveryStep) {
  // 42 blocks of weights on a GPU that holds 40 (1.05x): FIFO eviction under a cyclic read order
  // evicts each block just before it is needed again.
  auto src = block_trace(42, 5);
  const auto hw = toy_with_gpu("40 MiB");
  const auto r = replay::run_event_engine(hw, managed_weights(src->header(), placement::kAdviseNone), *src);
  for (std::size_t i = 1; i < r.steps.size(); ++i) {
    EXPECT_EQ(r.steps[i].faulted_blocks, 42u) << "step " << i;
    EXPECT_EQ(r.steps[i].evicted_blocks, 42u) << "step " << i;
    EXPECT_DOUBLE_EQ(r.steps[i].d2h_bytes, 42 * MiB);  // every victim is the only copy: written back
  }
}

TEST(ManagedMemory, ReadMostlyDuplicatesAreDroppedWithoutWriteBack) {
  auto src = block_trace(42, 5);
  const auto hw = toy_with_gpu("40 MiB");
  const auto r = replay::run_event_engine(hw, managed_weights(src->header(), placement::kReadMostly), *src);
  EXPECT_GT(r.managed.evicted_blocks, 100u);
  EXPECT_EQ(r.managed.written_back_bytes, 0.0);
  for (const auto& s : r.steps) EXPECT_EQ(s.d2h_bytes, 0.0);
}

TEST(ManagedMemory, EvictionIsFifoByTimeOfBecomingResidentNotLru) {
  hw::ManagedMemorySpec spec = *toy_with_gpu("2 MiB").hw.managed_memory;
  auto src = block_trace(3, 1);
  const auto p = managed_weights(src->header(), placement::kAdviseNone);
  managed::ManagedMemory um(spec, src->header(), p, 2 * MiB);
  managed::AccessCost c;
  um.access(0, 1048576, false, c);  // A resident first
  um.access(1, 1048576, false, c);  // B
  um.access(0, 1048576, false, c);  // A again: a hit, and (FIFO) it does not move A to the back
  EXPECT_EQ(c.faulted_blocks, 2u);
  um.access(2, 1048576, false, c);  // C evicts A, the oldest resident, although A was used last
  EXPECT_EQ(c.evicted_blocks, 1u);
  managed::AccessCost again;
  um.access(1, 1048576, false, again);  // B is still there: LRU would have evicted it
  EXPECT_EQ(again.faulted_blocks, 0u);
  um.access(0, 1048576, false, again);  // A faults back in
  EXPECT_EQ(again.faulted_blocks, 1u);
}

TEST(ManagedMemory, AByteRangeTouchesTheBlocksItCoversNotTheTensorsStart) {
  // One expert's slice of a fused expert tensor: 8 blocks, per-tensor allocation (block-aligned).
  hw::ManagedMemorySpec spec = *toy_with_gpu("16 MiB").hw.managed_memory;
  auto src = std::make_unique<trace::TraceReader>(
      std::make_unique<std::istringstream>("tiersim-trace 2\ntensor 0 weight 8388608 0 experts\nend\n"), "fused.trace");
  managed::ManagedMemory um(spec, src->header(), managed_weights(src->header(), placement::kAdviseNone, false), 16 * MiB);
  managed::AccessCost c;
  um.access(0, static_cast<std::uint64_t>(1.5 * MiB), false, c, 0, static_cast<std::uint64_t>(5 * MiB));  // blocks 5, 6
  EXPECT_EQ(c.faulted_blocks, 2u);
  managed::AccessCost start;
  um.access(0, static_cast<std::uint64_t>(MiB), false, start);  // block 0: not brought in by the range
  EXPECT_EQ(start.faulted_blocks, 1u);
  managed::AccessCost again;
  um.access(0, static_cast<std::uint64_t>(MiB), false, again, 0, static_cast<std::uint64_t>(5 * MiB));
  um.access(0, static_cast<std::uint64_t>(MiB / 2), false, again, 0, static_cast<std::uint64_t>(6.5 * MiB));  // in block 6
  EXPECT_EQ(again.faulted_blocks, 0u);
  EXPECT_DOUBLE_EQ(um.resident_bytes(), 3 * MiB);
  // Under PreferredLocation=CPU the range is read over the link: its bytes, not the tensor's.
  managed::ManagedMemory remote(spec, src->header(), managed_weights(src->header(), placement::kPreferCpu, false), 16 * MiB);
  managed::AccessCost r;
  remote.access(0, static_cast<std::uint64_t>(1.5 * MiB), false, r, 0, static_cast<std::uint64_t>(5 * MiB));
  EXPECT_DOUBLE_EQ(r.remote_bytes, 1.5 * MiB);
  EXPECT_EQ(r.mapping_faults, 2u);
}

TEST(ManagedMemory, FaultCostIsLatencyPerBatchPlusPerBlockPlusBytes) {
  hw::ManagedMemorySpec spec = *toy_with_gpu("16 MiB").hw.managed_memory;
  auto src = block_trace(3, 1);
  managed::ManagedMemory um(spec, src->header(), managed_weights(src->header(), placement::kAdviseNone), 16 * MiB);
  managed::AccessCost c;
  for (std::uint32_t t = 0; t < 3; ++t) um.access(t, 1048576, false, c);
  // One batch (10 us) + 3 blocks x 5 us + 3 MiB at 100 MB/s.
  EXPECT_NEAR(um.stall_seconds(c), 10e-6 + 15e-6 + 3 * MiB / 100e6, 1e-12);
}

TEST(ManagedMemory, PreferredLocationCpuMapsOnceThenReadsRemotely) {
  auto src = block_trace(4, 3);
  const auto hw = toy_with_gpu("16 MiB");
  const auto r = replay::run_event_engine(hw, managed_weights(src->header(), placement::kPreferCpu), *src);
  EXPECT_EQ(r.managed.mapping_faults, 4u);    // first touch of each block, once
  EXPECT_EQ(r.managed.faulted_blocks, 0u);    // nothing migrates
  EXPECT_DOUBLE_EQ(r.managed.peak_resident_bytes, 0.0);
  // Each step reads 4 MiB over the link at 100 MB/s; after the first step no mapping cost.
  EXPECT_NEAR(r.steps[2].seconds, 4 * MiB / 100e6, 1e-9);
  EXPECT_NEAR(r.steps[0].seconds, 4 * MiB / 100e6 + 4 * 7e-6, 1e-9);
}

TEST(ManagedMemory, GpuFilledPreferredCpuWeightsAreMappedFromTheStart) {
  // Weights written by GPU kernels and then prefetched to host memory keep the GPU's mappings
  // (managed_first_read.cu): no mapping faults, the same remote reads.
  auto src = block_trace(4, 3);
  const auto hw = toy_with_gpu("16 MiB");
  placement::Placement p = managed_weights(src->header(), placement::kPreferCpu);
  p.managed.weights_mapped = true;
  const auto r = replay::run_event_engine(hw, p, *src);
  EXPECT_EQ(r.managed.mapping_faults, 0u);
  EXPECT_EQ(r.managed.faulted_blocks, 0u);
  EXPECT_NEAR(r.steps[0].seconds, 4 * MiB / 100e6, 1e-9);
  // Without PreferredLocation=CPU the flag changes nothing: the first touch migrates as before.
  auto again = block_trace(4, 1);
  placement::Placement none = managed_weights(again->header(), placement::kAdviseNone);
  none.managed.weights_mapped = true;
  const auto n = replay::run_event_engine(hw, none, *again);
  EXPECT_EQ(n.managed.faulted_blocks, 4u);
  EXPECT_DOUBLE_EQ(n.managed.remote_bytes, 0.0);
}

TEST(ManagedMemory, AccessedByNeedsNoMappingFaultAndMapsTheHostCopyAfterEviction) {
  hw::ManagedMemorySpec spec = *toy_with_gpu("1 MiB").hw.managed_memory;
  auto src = block_trace(2, 1);
  managed::ManagedMemory um(spec, src->header(), managed_weights(src->header(), placement::kAccessedByGpu), MiB);
  managed::AccessCost c;
  um.access(0, 1048576, false, c);
  EXPECT_EQ(c.mapping_faults, 0u);
  EXPECT_DOUBLE_EQ(c.remote_bytes, MiB);
  um.prefetch_to_gpu(0, c);   // an explicit prefetch still migrates it
  um.prefetch_to_gpu(1, c);   // ... and evicts it again
  managed::AccessCost after;
  um.access(0, 1048576, false, after);
  EXPECT_EQ(after.faulted_blocks, 0u);  // the GPU maps the host copy instead of faulting it back
  EXPECT_DOUBLE_EQ(after.remote_bytes, MiB);
}

TEST(ManagedMemory, APerTensorAllocatorSerialisesEveryOp) {
  auto a = block_trace(4, 3), b = block_trace(4, 3);
  const auto hw = toy_with_gpu("16 MiB");
  const auto caching = replay::run_event_engine(hw, managed_weights(a->header(), placement::kAdviseNone, true), *a);
  const auto per_tensor = replay::run_event_engine(hw, managed_weights(b->header(), placement::kAdviseNone, false), *b);
  // Warm steps: 4 kernels reading 1 MiB at 1 GB/s (1.048576 ms each). Per tensor, each op also pays a
  // 20 us cudaMallocManaged before its launch and a cudaFree that first waits for the kernel, then
  // takes 30 us: nothing overlaps.
  const double kernel = MiB / 1e9;
  EXPECT_NEAR(caching.steps[2].seconds, 4 * kernel, 1e-9);
  EXPECT_NEAR(per_tensor.steps[2].seconds, 4 * (20e-6 + kernel + 30e-6), 1e-9);
  auto c = block_trace(4, 3);
  const auto analytic = analytic::run_analytic(hw, managed_weights(c->header(), placement::kAdviseNone, false), *c);
  EXPECT_NEAR(analytic.steps[2].seconds, 4 * (20e-6 + kernel + 30e-6), 1e-9);
}

TEST(ManagedMemory, APerTensorAllocatorPaysTheFrameworksModelledCallsSpreadOverTheStepsOps) {
  // 10 allocations per decode step (say transformers generate's tensors) over the step's 4 ops: 2.5 calls per op, each
  // a 20 us cudaMallocManaged before the launch and a 30 us cudaFree after the kernel. The prefill count applies to
  // prefill steps only: this trace has none, so it changes nothing.
  const auto hw = toy_with_gpu("16 MiB");
  const double kernel = MiB / 1e9;
  for (const bool analytic_engine : {false, true}) {
    auto src = block_trace(4, 3);
    placement::Placement p = managed_weights(src->header(), placement::kAdviseNone, false);
    p.managed.allocations_per_decode = 10;
    p.managed.allocations_per_prefill = 1000;
    const auto r = analytic_engine ? analytic::run_analytic(hw, p, *src) : replay::run_event_engine(hw, p, *src);
    EXPECT_NEAR(r.steps[2].seconds, 4 * kernel + 10 * (20e-6 + 30e-6), 1e-9) << (analytic_engine ? "analytic" : "event");
  }
}

TEST(ManagedMemory, WithoutDemandPagingDataMovesWholeAtLaunchWithoutFaults) {
  // Windows/WSL2: no GPU faults; what a kernel uses is migrated whole at launch, at the bulk rate.
  hw::ManagedMemorySpec spec = *toy_with_gpu("16 MiB").hw.managed_memory;
  spec.prefetch_to_gpu = 200e6;  // apart from the fault-migration rate (100 MB/s), to tell them apart
  auto src = block_trace(3, 1);
  auto p = managed_weights(src->header(), placement::kAdviseNone);
  p.managed.demand_paging = false;
  managed::ManagedMemory um(spec, src->header(), p, 16 * MiB);
  managed::AccessCost c;
  for (std::uint32_t t = 0; t < 3; ++t) um.access(t, 1048576, false, c);
  EXPECT_EQ(c.faulted_blocks, 0u);
  EXPECT_DOUBLE_EQ(c.launch_migrated_bytes, 3 * MiB);
  EXPECT_NEAR(um.stall_seconds(c), 3 * MiB / 200e6, 1e-12);  // no batch latency, no per-block overhead
  managed::AccessCost again;
  um.access(0, 1048576, false, again);
  EXPECT_EQ(um.stall_seconds(again), 0.0);
  // Both engines: the first step pays the migration (toy: 100 MB/s), later steps only the kernels.
  const auto hw = toy_with_gpu("16 MiB");
  auto e = block_trace(4, 3), a = block_trace(4, 3);
  auto pe = managed_weights(e->header(), placement::kAdviseNone);
  pe.managed.demand_paging = false;
  const auto ev = replay::run_event_engine(hw, pe, *e);
  const auto an = analytic::run_analytic(hw, pe, *a);
  const double kernel = MiB / 1e9, move = MiB / 100e6;
  for (const auto* r : {&ev, &an}) {
    EXPECT_NEAR(r->steps[0].seconds, 4 * (move + kernel), 1e-9);
    EXPECT_NEAR(r->steps[2].seconds, 4 * kernel, 1e-9);
    EXPECT_EQ(r->steps[0].faulted_blocks, 0u);
  }
  EXPECT_DOUBLE_EQ(ev.steps[0].h2d_bytes, 4 * MiB);
}

// One GEMV over two steps: a 1e6-byte weight and an activation (its 1e3-byte input) in managed memory advised to the
// CPU (PreferredLocation=CPU + AccessedBy); the weight too when `weight_remote`, else in device memory.
result::RunResult run_gemv(const testing::ToyMachine& hw, bool weight_remote, bool analytic) {
  const std::string text =
      "tiersim-trace 1\nmeta model gemv\ntensor 0 weight 1000000 0 w\ntensor 1 act 1000 -1 x\n"
      "step decode tokens=1\nop gemv layer=0 read=0,1\nstep decode tokens=1\nop gemv layer=0 read=0,1\nend\n";
  trace::TraceReader src(std::make_unique<std::istringstream>(text), "gemv.trace");
  const std::uint8_t host = placement::kPreferCpu | placement::kAccessedByGpu;
  placement::Placement p;
  p.device = {weight_remote ? placement::kCpu : placement::kComputeGpu, placement::kCpu};
  p.path = {weight_remote ? placement::Path::Managed : placement::Path::Local, placement::Path::Managed};
  p.managed.enabled = true;
  p.managed.managed = {weight_remote, true};
  p.managed.advice = {static_cast<std::uint8_t>(weight_remote ? host : std::uint8_t{placement::kAdviseNone}), host};
  return analytic ? analytic::run_analytic(hw, p, src) : replay::run_event_engine(hw, p, src);
}

TEST(ManagedMemory, AGemvReadsAHostResidentInputOncePerOutputRow) {
  // The weight in device memory: the kernel reads it locally (1 ms at 1 GB/s) and the input's 1e3 bytes remotely
  // (10 us at 100 MB/s, overlapped); with gemv_remote_input_bandwidth (200 MB/s here) the input is read again per
  // output row, the weight's bytes at that rate: 5 ms more.
  auto run = [&](double input_rate, bool analytic) {
    auto hw = toy_with_gpu("16 MiB");
    hw.hw.managed_memory->gemv_remote_input_bandwidth = input_rate;
    return run_gemv(hw, false, analytic);
  };
  const double kernel = 1e6 / 1e9;
  for (bool analytic : {false, true}) {
    EXPECT_NEAR(run(200e6, analytic).steps[1].seconds, kernel + 1e6 / 200e6, 1e-9) << analytic;
    EXPECT_NEAR(run(0, analytic).steps[1].seconds, kernel, 1e-9) << analytic;
  }
}

TEST(ManagedMemory, AGemvOnAHostResidentInputTakesItsShapesMeasuredTime) {
  // The GEMV above with per-shape times (calib's remote_gemv): 3 ms with the weight on the GPU, 40 ms with the
  // weight host-resident too (more than its 10 ms of remote reads at the toy's 100 MB/s). The kernel takes the
  // measured time, not the re-reads at a rate (that rate is ignored), and never less than its other bounds.
  auto hw = toy_with_gpu("16 MiB");
  hw.hw.managed_memory->gemv_remote_input_bandwidth = 200e6;
  hw.hw.managed_memory->remote_gemv = {{1000, 1e6, 3e-3, 40e-3}};
  for (bool analytic : {false, true}) {
    EXPECT_NEAR(run_gemv(hw, false, analytic).steps[1].seconds, 3e-3, 1e-9) << analytic;
    EXPECT_NEAR(run_gemv(hw, true, analytic).steps[1].seconds, 40e-3, 1e-9) << analytic;
  }
}

TEST(ManagedMemory, AnAnswerCountsItsGemvShapesMeasuredAndTakenFromANeighbour) {
  // The GEMV above: its shape (1000 B of input, 1e6 B of weight) measured, then only a neighbour (2000 B of input).
  auto hw = toy_with_gpu("16 MiB");
  hw.hw.managed_memory->remote_gemv = {{1000, 1e6, 3e-3, 40e-3}};
  EXPECT_TRUE(hw.hw.managed_memory->remote_gemv_measured(1000, 1e6));
  EXPECT_FALSE(hw.hw.managed_memory->remote_gemv_measured(1000, 2e6));
  for (bool analytic : {false, true}) {
    const auto r = run_gemv(hw, false, analytic);
    EXPECT_EQ(r.managed.gemv_shapes_measured, 1u) << analytic;
    EXPECT_EQ(r.managed.gemv_shapes_from_nearest, 0u) << analytic;
  }
  hw.hw.managed_memory->remote_gemv = {{2000, 1e6, 3e-3, 40e-3}};
  for (bool analytic : {false, true}) {
    const auto r = run_gemv(hw, false, analytic);
    EXPECT_EQ(r.managed.gemv_shapes_measured, 0u) << analytic;
    EXPECT_EQ(r.managed.gemv_shapes_from_nearest, 1u) << analytic;
  }
  hw.hw.managed_memory->remote_gemv.clear();  // no per-shape times: nothing is priced per shape, nothing counted
  EXPECT_EQ(run_gemv(hw, false, false).managed.gemv_shapes_from_nearest, 0u);
}

TEST(ManagedMemory, TheWorkingSetIsWhatAStepTouchesOnTheGpuAndTheEdgeIsWithinOnePercent) {
  // 42 one-block weights read every step: the working set is 42 MiB whether the GPU holds them all or thrashes.
  for (const char* gpu : {"64 MiB", "40 MiB"}) {
    auto src = block_trace(42, 3);
    const auto r = replay::run_event_engine(toy_with_gpu(gpu), managed_weights(src->header(), placement::kAdviseNone), *src);
    EXPECT_DOUBLE_EQ(r.managed.working_set_bytes, 42 * MiB) << gpu;
    EXPECT_GT(r.managed.capacity_bytes, 0.0) << gpu;
  }
  result::ManagedTotals m;
  m.working_set_bytes = 100 * MiB;
  for (auto [capacity, edge] : {std::pair{100.5, true}, {99.2, true}, {101.5, false}, {98.0, false}}) {
    m.capacity_bytes = capacity * MiB;
    EXPECT_EQ(m.at_capacity_edge(), edge) << capacity;
  }
  m.working_set_bytes = 0;  // unknown (the analytic engine): never at the edge
  EXPECT_FALSE(m.at_capacity_edge());
}

TEST(ManagedMemory, ASmallTensorsBlockTakesItsPagesNotTheWholeBlock) {
  // Eight 10,000-byte weights, each in its own block under a per-tensor allocator: resident they take 12 KiB of
  // GPU pages each (nvidia-uvm block_gpu_chunk_size), so a GPU of 1 MiB holds all eight and nothing is evicted
  // (as whole 1 MiB blocks only one would fit).
  std::ostringstream t;
  t << "tiersim-trace 1\nmeta model small\n";
  for (int l = 0; l < 8; ++l) t << "tensor " << l << " weight 10000 " << l << " w" << l << "\n";
  for (int s = 0; s < 3; ++s) {
    t << "step decode tokens=1\n";
    for (int l = 0; l < 8; ++l) t << "op gemv layer=" << l << " read=" << l << "\n";
  }
  t << "end\n";
  trace::TraceReader src(std::make_unique<std::istringstream>(t.str()), "small.trace");
  const auto hw = toy_with_gpu("1 MiB");
  const auto r = replay::run_event_engine(hw, managed_weights(src.header(), placement::kAdviseNone, false), src);
  EXPECT_EQ(r.managed.evicted_blocks, 0u);
  EXPECT_DOUBLE_EQ(r.managed.peak_resident_bytes, 8 * 12288.0);
}

TEST(ManagedMemory, AMatrixProductReadsAHostResidentWeightOncePerTileOfItsRows) {
  // One product of 256 rows on a 1e6-byte bf16 weight (5e5 elements: 2.56e8 FLOPs) advised to the CPU: read over the
  // link at 100 MB/s (10 ms). With the profile's remote_gemm_reads at 2 for 256 rows the weight crosses twice (20
  // ms); a GEMV (M = 1) on the same weight still reads it once; without the curve, once.
  auto text = [](const char* kind, const char* flops) {
    return std::string("tiersim-trace 1\nmeta model gemm\nmeta dtype bf16\ntensor 0 weight 1000000 0 w\n") +
           "tensor 1 act 1000 -1 x\nstep prefill tokens=256\nop " + kind + " layer=0 read=0,1 flops=" + flops +
           "\nstep prefill tokens=256\nop " + kind + " layer=0 read=0,1 flops=" + flops + "\nend\n";
  };
  auto run = [&](const std::string& trace, bool curve, bool analytic) {
    trace::TraceReader src(std::make_unique<std::istringstream>(trace), "gemm.trace");
    auto hw = toy_with_gpu("16 MiB");
    if (curve) hw.hw.managed_memory->remote_gemm_reads = {{64, 1.0}, {256, 2.0}};
    placement::Placement p;
    p.device = {placement::kCpu, placement::kComputeGpu};
    p.path = {placement::Path::Managed, placement::Path::Local};
    p.managed.enabled = true;
    p.managed.managed = {true, false};
    p.managed.advice = {placement::kPreferCpu | placement::kAccessedByGpu, placement::kAdviseNone};
    return analytic ? analytic::run_analytic(hw, p, src) : replay::run_event_engine(hw, p, src);
  };
  const double once = 1e6 / 100e6;
  for (bool analytic : {false, true}) {
    const auto twice = run(text("gemm", "256000000"), true, analytic);
    EXPECT_NEAR(twice.steps[1].seconds, 2 * once, 1e-9) << analytic;
    EXPECT_DOUBLE_EQ(twice.steps[1].remote_read_bytes, 2e6) << analytic;
    EXPECT_NEAR(run(text("gemm", "256000000"), false, analytic).steps[1].seconds, once, 1e-9) << analytic;
    EXPECT_NEAR(run(text("gemv", "1000000"), true, analytic).steps[1].seconds, once, 1e-9) << analytic;
    EXPECT_NEAR(run(text("gemm", "32000000"), true, analytic).steps[1].seconds, once, 1e-9) << analytic;  // 32 rows
  }
}

TEST(ManagedMemory, APerTensorAllocatorPaysTheFirstTouchOfEveryOutputItWrites) {
  // One op a step reading a 1e6-byte weight (GPU-resident: managed, no advice, faulted in at step 0) and writing a
  // 2e6-byte activation. Under a per-tensor allocator the output is a fresh cudaMallocManaged range every step: its
  // first touch at the profile's fresh_touch rate (here 100 MB/s: 20 ms) stalls the kernel, in every step, in both
  // engines; under the caching allocator, or without the curve, nothing. An output smaller than a VA block (the toy's
  // 1 MiB) lands on pages live tensors keep populated: nothing either.
  auto text_writing = [](const char* bytes) {
    const std::string op = std::string("op gemv layer=0 read=0 write=1:") + bytes + "\n";
    return "tiersim-trace 1\nmeta model fresh\ntensor 0 weight 1000000 0 w\ntensor 1 act 2000000 -1 x\n"
           "step decode tokens=1\n" + op + "step decode tokens=1\n" + op + "step decode tokens=1\n" + op + "end\n";
  };
  std::string text = text_writing("2000000");
  auto run = [&](bool per_tensor, bool curve, bool analytic) {
    trace::TraceReader src(std::make_unique<std::istringstream>(text), "fresh.trace");
    auto hw = toy_with_gpu("16 MiB");
    if (curve) hw.hw.managed_memory->fresh_touch = {{4096, 100e6}, {1e9, 100e6}};
    auto p = managed_weights(src.header(), placement::kAdviseNone);
    p.managed.managed = {true, true};
    p.managed.advice = {placement::kAdviseNone, placement::kAdviseNone};
    p.managed.caching_allocator = !per_tensor;
    return analytic ? analytic::run_analytic(hw, p, src) : replay::run_event_engine(hw, p, src);
  };
  for (bool analytic : {false, true}) {
    const double without = run(true, false, analytic).steps[2].seconds;
    EXPECT_NEAR(run(true, true, analytic).steps[2].seconds - without, 2e6 / 100e6, 1e-9) << analytic;
    EXPECT_NEAR(run(false, true, analytic).steps[2].seconds, run(false, false, analytic).steps[2].seconds, 1e-12) << analytic;
  }
  text = text_writing("200000");
  for (bool analytic : {false, true})
    EXPECT_NEAR(run(true, true, analytic).steps[2].seconds, run(true, false, analytic).steps[2].seconds, 1e-12) << analytic;
}

TEST(ManagedMemory, APerTensorAllocatorPaysWhatTheAdviceAddsToEachActivationsCycle) {
  // One op a step writing a 4096-byte activation. Under a per-tensor allocator every output is a new range advised
  // at allocation: the profile's advised_cycle for its advice and size (here 30 us for PreferredLocation=CPU +
  // ReadMostly, 12 us for PreferredLocation=CPU, none for AccessedBy) is added to the op, every step, in both
  // engines, over the same run without the tables. Under the caching allocator, without the advice, or without
  // demand paging (Windows): nothing.
  const std::string op = "op gemv layer=0 read=0 write=1:4096\n";
  const std::string text = "tiersim-trace 1\nmeta model advised\ntensor 0 weight 1000000 0 w\ntensor 1 act 4096 -1 x\n"
                           "step decode tokens=1\n" + op + "step decode tokens=1\n" + op + "end\n";
  auto run = [&](std::uint8_t advice, bool tables, bool per_tensor, bool paging, bool analytic) {
    trace::TraceReader src(std::make_unique<std::istringstream>(text), "advised.trace");
    auto hw = toy_with_gpu("16 MiB");
    if (tables) {
      hw.hw.managed_memory->advised_cycle.prefer_cpu = {{4096, 12e-6}};
      hw.hw.managed_memory->advised_cycle.prefer_cpu_read_mostly = {{16, 10e-6}, {4096, 30e-6}};
    }
    auto p = managed_weights(src.header(), placement::kAdviseNone);
    p.managed.managed = {true, true};
    p.managed.advice = {placement::kAdviseNone, advice};
    p.managed.caching_allocator = !per_tensor;
    p.managed.demand_paging = paging;
    return (analytic ? analytic::run_analytic(hw, p, src) : replay::run_event_engine(hw, p, src)).steps[1].seconds;
  };
  auto added = [&](std::uint8_t advice, bool per_tensor, bool paging, bool analytic) {
    return run(advice, true, per_tensor, paging, analytic) - run(advice, false, per_tensor, paging, analytic);
  };
  const std::uint8_t mode3 = placement::kPreferCpu | placement::kReadMostly;
  for (bool analytic : {false, true}) {
    EXPECT_NEAR(added(mode3, true, true, analytic), 30e-6, 1e-12) << analytic;
    EXPECT_NEAR(added(placement::kPreferCpu, true, true, analytic), 12e-6, 1e-12) << analytic;
    EXPECT_NEAR(added(placement::kPreferCpu | placement::kAccessedByGpu, true, true, analytic), 0.0, 1e-12) << analytic;
    EXPECT_NEAR(added(placement::kAdviseNone, true, true, analytic), 0.0, 1e-12) << analytic;
    EXPECT_NEAR(added(mode3, false, true, analytic), 0.0, 1e-12) << analytic;
    EXPECT_NEAR(added(mode3, true, false, analytic), 0.0, 1e-12) << analytic;
  }
}

TEST(ManagedMemory, PastTheGpuAnEvictionPaysItsOverheadAndAPartlyOverlappedWriteBack) {
  // calib's oversubscribe rows (fit/oversubscribe_fit.hpp): an evicted block re-runs its fault's service, and its
  // write-back adds 1 / evict_writeback_bandwidth per byte; without the two keys write-back runs at evict_to_cpu.
  hw::ManagedMemorySpec spec = *toy_with_gpu("16 MiB").hw.managed_memory;
  managed::AccessCost c;
  c.evicted_blocks = 3;
  c.written_back_bytes = 3 * MiB;
  EXPECT_NEAR(managed::ManagedMemory::stall_seconds(spec, c), 3 * MiB / 50e6, 1e-12);  // the toy's evict_to_cpu
  spec.evict_block_overhead = 20e-6;
  spec.evict_writeback_bandwidth = 200e6;
  EXPECT_NEAR(managed::ManagedMemory::stall_seconds(spec, c), 3 * 20e-6 + 3 * MiB / 200e6, 1e-12);
}

TEST(ManagedMemory, AFaultThatEvictsMigratesAtTheEvictingRateWhereTheProfileMeasuredIt) {
  // calib's oversubscribe_decoder rows (evicting_fault_bandwidth): the evicting share of a kernel's faults (evicted
  // over faulted blocks) is priced at that rate in place of the per-block overhead and the migration rate; the
  // batches' latency and the write-back stay.
  hw::ManagedMemorySpec spec = *toy_with_gpu("16 MiB").hw.managed_memory;
  spec.evicting_fault_bandwidth = 300e6;
  spec.evict_writeback_bandwidth = 200e6;
  managed::AccessCost c;
  c.faulted_blocks = 4;
  c.migrated_bytes = 4 * MiB;
  c.evicted_blocks = 1;
  c.written_back_bytes = 1 * MiB;
  const double batches = std::ceil(4.0 / spec.fault_batch_count) * spec.fault_latency;
  const double path = 4 * spec.fault_block_overhead + 4 * MiB / spec.fault_migration_bandwidth;
  EXPECT_NEAR(managed::ManagedMemory::stall_seconds(spec, c), batches + 0.75 * path + 0.25 * 4 * MiB / 300e6 + MiB / 200e6,
              1e-12);
  c.evicted_blocks = 6;  // more evicted than faulted (a fresh range's first write evicting): every fault evicts
  EXPECT_NEAR(managed::ManagedMemory::stall_seconds(spec, c), batches + 4 * MiB / 300e6 + MiB / 200e6, 1e-12);
  // The profile gives one of the two ways of pricing a fault that evicts, never both.
  std::string yaml = testing::toy_profile_yaml("16 MiB", true);
  const auto at = yaml.find("  mapping_fault_cost:");
  ASSERT_NE(at, std::string::npos);
  yaml.insert(at, "  evicting_fault_bandwidth: \"14 GB/s\"\n");
  EXPECT_GT(hw::parse_profile(yaml, "t.yaml").managed_memory->evicting_fault_bandwidth, 13e9);
  yaml.insert(at, "  evict_block_overhead: \"30 us\"\n");
  EXPECT_THROW(hw::parse_profile(yaml, "t.yaml"), InputError);
}

TEST(ManagedMemory, ReadMostlyReadsDuplicateEvenUnderPreferredLocationCpu) {
  // CUDA's documented precedence: ReadMostly's policy overrides PreferredLocation's, so a read makes a GPU copy
  // (seed 000's mode 3), not a remote read; a write still goes where PreferredLocation says.
  auto src = block_trace(4, 3);
  const auto hw = toy_with_gpu("16 MiB");
  const auto p = managed_weights(src->header(), placement::kPreferCpu | placement::kReadMostly);
  const auto r = replay::run_event_engine(hw, p, *src);
  EXPECT_EQ(r.managed.faulted_blocks, 4u);  // read-duplicated once
  EXPECT_EQ(r.managed.mapping_faults, 0u);
  EXPECT_EQ(r.managed.remote_bytes, 0.0);
  EXPECT_DOUBLE_EQ(r.managed.peak_resident_bytes, 4 * MiB);
  managed::ManagedMemory um(*hw.hw.managed_memory, src->header(), p, 16 * MiB);
  managed::AccessCost w;
  um.access(0, 1048576, true, w);  // a write of a host-resident block: remote, as PreferredLocation=CPU
  EXPECT_EQ(w.faulted_blocks, 0u);
  EXPECT_DOUBLE_EQ(w.remote_bytes, 1048576.0);
}

TEST(ManagedMemory, AnalyticAgreesInSteadyState) {
  // Also with the oversubscription costs (an evicted block's overhead, overlapped write-back) and with
  // PreferredLocation=CPU + ReadMostly (read-duplicated, not remote): both engines price them alike.
  auto hw = toy_with_gpu("40 MiB");
  for (int evict_costs : {0, 1, 2}) {  // none; per evicted block; the evicting rate
    hw.hw.managed_memory->evict_block_overhead = evict_costs == 1 ? 20e-6 : 0.0;
    hw.hw.managed_memory->evicting_fault_bandwidth = evict_costs == 2 ? 150e6 : 0.0;
    hw.hw.managed_memory->evict_writeback_bandwidth = evict_costs ? 80e6 : 0.0;
    for (std::uint8_t advice : {std::uint8_t(placement::kAdviseNone), std::uint8_t(placement::kReadMostly),
                                std::uint8_t(placement::kPreferCpu),
                                std::uint8_t(placement::kPreferCpu | placement::kReadMostly)}) {
      auto e = block_trace(42, 4), a = block_trace(42, 4);
      const auto ev = replay::run_event_engine(hw, managed_weights(e->header(), advice), *e);
      const auto an = analytic::run_analytic(hw, managed_weights(a->header(), advice), *a);
      EXPECT_NEAR(an.steps[3].seconds, ev.steps[3].seconds, 0.02 * ev.steps[3].seconds)
          << int(advice) << " eviction costs " << evict_costs;
    }
  }
}

}  // namespace
}  // namespace tiersim

namespace tiersim {
namespace {

TEST(StepPlan, ManagedAccessesDoNotAccumulateAcrossSteps) {
  auto src = block_trace(4, 3);
  const auto hw = toy_with_gpu("16 MiB");
  const auto p = managed_weights(src->header(), placement::kAdviseNone);
  replay::StepPlanner planner(hw, src->header(), p);
  replay::StepPlan plan;
  trace::Step step;
  while (src->next(step)) {
    planner.plan(step, plan);
    EXPECT_EQ(plan.managed.size(), 4u);  // one read per op of this step, not of every step so far
  }
}

}  // namespace
}  // namespace tiersim
