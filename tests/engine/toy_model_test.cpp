// Hand-checked step times on the toy machine (support/toy.hpp): 1e6-byte weights, 1 ms per GPU
// kernel, 10 ms per weight copy, 1 ms per activation copy, 11 ms per CPU op.
#include <gtest/gtest.h>

#include "analytic/analytic_model.hpp"
#include "core/error.hpp"
#include "replay/event_replay.hpp"
#include "support/toy.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

namespace tiersim {
namespace {

using testing::ExecutionOptions;
using placement::kCpu;
constexpr double kTol = 1e-9;  // seconds; the engine keeps picoseconds

double decode_step(const result::RunResult& r) { return r.steps.back().seconds; }

result::RunResult run_event(int layers, std::initializer_list<int> offloaded, placement::DeviceId where,
                            ExecutionOptions exec, const testing::ToyMachine& hw = testing::toy_profile()) {
  auto src = testing::toy_trace(layers, 2);
  auto p = testing::toy_placement(src->header(), offloaded, where, exec);
  return replay::run_event_engine(hw, p, *src);
}

result::RunResult run_analytic(int layers, std::initializer_list<int> offloaded, placement::DeviceId where,
                               ExecutionOptions exec, const testing::ToyMachine& hw = testing::toy_profile()) {
  auto src = testing::toy_trace(layers, 2);
  auto p = testing::toy_placement(src->header(), offloaded, where, exec);
  return analytic::run_analytic(hw, p, *src);
}

TEST(ToyModel, ResidentIsTheSumOfKernels) {
  // 2 kernels of (1e6 + 1e5) bytes at 1 GB/s.
  EXPECT_NEAR(decode_step(run_event(2, {}, kCpu, {})), 2 * 1.1e-3, kTol);
  EXPECT_NEAR(decode_step(run_analytic(2, {}, kCpu, {})), 2 * 1.1e-3, kTol);
}

TEST(ToyModel, CopyOnDemandSerialisesCopyAndCompute) {
  // kernel L0 (1.1 ms), copy W1 on the compute stream (10 ms), kernel L1 (1.1 ms).
  const auto r = run_event(2, {1}, kCpu, {});
  EXPECT_NEAR(decode_step(r), 1.1e-3 + 10e-3 + 1.1e-3, kTol);
  EXPECT_DOUBLE_EQ(r.steps.back().h2d_bytes, 1e6);
  EXPECT_NEAR(decode_step(run_analytic(2, {1}, kCpu, {})), 12.2e-3, kTol);
}

TEST(ToyModel, PageableOnDemandCopyAlsoBlocksTheHost) {
  // Same device timeline; the host waits too, so with a 0.5 ms launch cost the second kernel is
  // issued only after the copy: 0.5 (issue L0) + 1.1 + 10 + 0.5 (issue L1) + 1.1.
  ExecutionOptions exec;
  exec.host_memory = placement::HostMemory::Pageable;
  const auto hw = testing::toy_profile("500 us");
  EXPECT_NEAR(decode_step(run_event(2, {1}, kCpu, exec, hw)), 0.5e-3 + 1.1e-3 + 10e-3 + 0.5e-3 + 1.1e-3, kTol);
  EXPECT_NEAR(decode_step(run_analytic(2, {1}, kCpu, exec, hw)), 13.2e-3, kTol);
}

TEST(ToyModel, PrefetchOverlapsCopiesWithCompute) {
  // Both layers offloaded, prefetch 1: copies W0 [0,10] and W1 [10,20] back to back on the copy
  // stream; kernel L0 [10,11.1], kernel L1 [20,21.1].
  ExecutionOptions exec;
  exec.prefetch = 1;
  EXPECT_NEAR(decode_step(run_event(2, {0, 1}, kCpu, exec)), 21.1e-3, kTol);
  EXPECT_NEAR(decode_step(run_analytic(2, {0, 1}, kCpu, exec)), 21.1e-3, kTol);
}

TEST(ToyModel, CopiesAheadAndOnDemandHaveTheirOwnHostCost) {
  // per_prefetch 4 ms: the host issues W0's copy [0,4] and W1's [4,8]; W0 [4,14], W1 [14,24] on the
  // copy stream; L0 [14,15.1], L1 [24,25.1]. per_copy does not apply to copies ahead of use.
  ExecutionOptions exec;
  exec.prefetch = 1;
  auto hw = testing::toy_profile();
  hw.runtime.per_prefetch = 4e-3;
  EXPECT_NEAR(decode_step(run_event(2, {0, 1}, kCpu, exec, hw)), 25.1e-3, kTol);
  // On demand (per_copy 0) the same profile gives the plain serial 12.2 ms.
  EXPECT_NEAR(decode_step(run_event(2, {1}, kCpu, {}, hw)), 12.2e-3, kTol);
  // With per_copy 4 ms the issue overlaps L0 on the GPU [0,1.1]: W1 [4,14], L1 [14,15.1].
  hw.runtime.per_copy = 4e-3;
  EXPECT_NEAR(decode_step(run_event(2, {1}, kCpu, {}, hw)), 15.1e-3, kTol);
}

TEST(ToyModel, PrefetchWaitsForAFreeStagingSlot) {
  // Three offloaded layers, prefetch 1 (two slots): W2 reuses W0's slot, so its copy is issued only
  // when kernel L0 ends (11.1 ms); the copy stream is busy until 20 anyway: W2 [20,30], L2 [30,31.1].
  ExecutionOptions exec;
  exec.prefetch = 1;
  EXPECT_NEAR(decode_step(run_event(3, {0, 1, 2}, kCpu, exec)), 31.1e-3, kTol);
}

TEST(ToyModel, PrefetchFromAPeerGpuUsesThePeerLink) {
  // 500 MB/s peer link: 2 ms per copy. W0 [0,2], W1 [2,4]; L0 [2,3.1], L1 [4,5.1].
  ExecutionOptions exec;
  exec.prefetch = 1;
  const auto r = run_event(2, {0, 1}, 1, exec);
  EXPECT_NEAR(decode_step(r), 5.1e-3, kTol);
  EXPECT_DOUBLE_EQ(r.steps.back().peer_bytes, 2e6);
  EXPECT_DOUBLE_EQ(r.steps.back().h2d_bytes, 0);
}

TEST(ToyModel, PeerCopySyncDelaysEachCopyFromAnotherGpuOnly) {
  // peer_copy_sync 0.5 ms: each peer copy takes 2.5 ms. On demand: L0 [0,1.1], W1 [1.1,3.6],
  // L1 [3.6,4.7]. Ahead: W0 [0,2.5], W1 [2.5,5]; L0 [2.5,3.6], L1 [5,6.1].
  auto hw = testing::toy_profile();
  hw.runtime.peer_copy_sync = 0.5e-3;
  EXPECT_NEAR(decode_step(run_event(2, {1}, 1, {}, hw)), 4.7e-3, kTol);
  EXPECT_NEAR(decode_step(run_analytic(2, {1}, 1, {}, hw)), 4.7e-3, kTol);
  ExecutionOptions exec;
  exec.prefetch = 1;
  EXPECT_NEAR(decode_step(run_event(2, {0, 1}, 1, exec, hw)), 6.1e-3, kTol);
  EXPECT_NEAR(decode_step(run_analytic(2, {0, 1}, 1, exec, hw)), 6.1e-3, kTol);
  // Copies from host memory are untouched: the plain 12.2 ms of CopyOnDemandSerialisesCopyAndCompute.
  EXPECT_NEAR(decode_step(run_event(2, {1}, kCpu, {}, hw)), 12.2e-3, kTol);
}

TEST(ToyModel, PeerCopiesThatDoNotOverlapComputeTakeTheirTurnOnTheComputeStream) {
  // PrefetchFromAPeerGpuUsesThePeerLink overlaps: 5.1 ms. Without overlap both copies, issued ahead of
  // L0, run before it on the compute stream: W0 [0,2], W1 [2,4], L0 [4,5.1], L1 [5.1,6.2], the same
  // 6.2 ms as on demand (W0, L0, W1, L1). Copies from host memory still overlap (21.1 ms as before).
  auto hw = testing::toy_profile();
  hw.runtime.peer_copy_overlaps_compute = false;
  ExecutionOptions exec;
  exec.prefetch = 1;
  EXPECT_NEAR(decode_step(run_event(2, {0, 1}, 1, exec, hw)), 6.2e-3, kTol);
  EXPECT_NEAR(decode_step(run_analytic(2, {0, 1}, 1, exec, hw)), 6.2e-3, kTol);
  EXPECT_NEAR(decode_step(run_event(2, {0, 1}, 1, {}, hw)), 6.2e-3, kTol);
  EXPECT_NEAR(decode_step(run_event(2, {0, 1}, kCpu, exec, hw)), 21.1e-3, kTol);
}

TEST(ToyModel, PerOpHostCostReplacesLaunchesTimesPerLaunchForItsKind) {
  // per_launch 5 ms would make it 2 x 5 + 1.1 (HostBoundStepIsIssueTimePlusLastKernel); per_op gemv
  // 2 ms: 2 x 2 + 1.1. A kind not in per_op keeps launches x per_launch.
  auto hw = testing::toy_profile("5 ms");
  hw.runtime.per_op[trace::OpKind::Gemv] = 2e-3;
  EXPECT_NEAR(decode_step(run_event(2, {}, kCpu, {}, hw)), 5.1e-3, kTol);
  EXPECT_NEAR(decode_step(run_analytic(2, {}, kCpu, {}, hw)), 5.1e-3, kTol);
  hw.runtime.per_op = {{trace::OpKind::Norm, 2e-3}};
  EXPECT_NEAR(decode_step(run_event(2, {}, kCpu, {}, hw)), 11.1e-3, kTol);
}

TEST(ToyModel, CpuExecutionMovesActivationsBothWays) {
  // L0 on the GPU (1.1 ms), activations to the host (1e5 B, 1 ms), L1 on the CPU (1.1e6 B at
  // 100 MB/s = 11 ms), activations back (1 ms), L2 on the GPU (1.1 ms).
  ExecutionOptions exec;
  exec.cpu = true;
  const auto r = run_event(3, {1}, kCpu, exec);
  EXPECT_NEAR(decode_step(r), 1.1e-3 + 1e-3 + 11e-3 + 1e-3 + 1.1e-3, kTol);
  EXPECT_DOUBLE_EQ(r.steps.back().d2h_bytes, 1e5);
  EXPECT_DOUBLE_EQ(r.steps.back().h2d_bytes, 1e5);
  EXPECT_NEAR(decode_step(run_analytic(3, {1}, kCpu, exec)), 15.2e-3, kTol);
}

TEST(ToyModel, HostBoundStepIsIssueTimePlusLastKernel) {
  // 5 ms per launch, kernels 1.1 ms: the GPU waits for the host. 2 x 5 ms + 1.1 ms.
  const auto hw = testing::toy_profile("5 ms");
  EXPECT_NEAR(decode_step(run_event(2, {}, kCpu, {}, hw)), 11.1e-3, kTol);
  EXPECT_NEAR(decode_step(run_analytic(2, {}, kCpu, {}, hw)), 11.1e-3, kTol);
}

TEST(ToyModel, PerStepHostCostIsAdded) {
  const auto hw = testing::toy_profile("0 us", "3 ms");
  EXPECT_NEAR(decode_step(run_event(2, {}, kCpu, {}, hw)), 2.2e-3 + 3e-3, kTol);
}

// Two layers, each a gemv (1.1 ms on the GPU) and an attention reading 1e5 bytes (0.1 ms), no launch
// cost; the framework's new-length attention cost is 5 ms. `attention_host` adds a measured host time.
double step_with_attention(bool fresh, const std::string& attention_host = "", bool analytic = false) {
  std::ostringstream t;
  t << "tiersim-trace 1\nmeta model toy\nmeta batch 1\n"
    << "tensor 0 weight 1000000 0 w0\ntensor 1 weight 1000000 1 w1\ntensor 2 kv 100000 -1 kv\n"
    << "tensor 3 act 100000 -1 activations\n";
  for (int s = 0; s < 2; ++s) {
    t << "step decode tokens=1\n";
    for (int l = 0; l < 2; ++l)
      t << "op gemv layer=" << l << " read=" << l << " write=3\nop attention layer=" << l << " read=2"
        << attention_host << "\n";
  }
  t << "end\n";
  auto hw = testing::toy_profile();
  hw.runtime.new_length_attention = 5e-3;
  hw.fresh_lengths = fresh;
  trace::TraceReader src(std::make_unique<std::istringstream>(t.str()), "toy.trace");
  const auto p = testing::toy_placement(src.header(), {}, kCpu);
  return decode_step(analytic ? analytic::run_analytic(hw, p, src) : replay::run_event_engine(hw, p, src));
}

TEST(ToyModel, FreshSequenceLengthsChargeOneAttentionPlanPerStep) {
  // Warm: the GPU's 2 x (1.1 + 0.1) ms.
  EXPECT_NEAR(step_with_attention(false), 2.4e-3, kTol);
  // Fresh: the first attention is issued after 5 ms of host time; the rest follows on the GPU:
  // 5.0 + 0.1 + 1.1 + 0.1 ms. Charged once: a second charge would put the last attention past 10 ms.
  EXPECT_NEAR(step_with_attention(true), 6.3e-3, kTol);
  // A captured trace's measured host time already contains it: not charged again.
  EXPECT_NEAR(step_with_attention(true, " host_us=2000"), step_with_attention(false, " host_us=2000"), kTol);
  // The analytic engine charges it once too; its closed form (host time + last kernel when host-bound)
  // does not see the GPU work queued behind the late attention.
  EXPECT_NEAR(step_with_attention(false, "", true), 2.4e-3, kTol);
  EXPECT_NEAR(step_with_attention(true, "", true), 5.1e-3, kTol);
}

TEST(ToyModel, TransientValuesCountWhileAliveBesideTheStagedCopies) {
  // Two resident layers, then layer 1 copied on demand: op 0 starts a (3e5), op 1 reads it and starts b (2e5), op 2
  // reads b. Alive at once: a and b before op 1, with layer 1's staged copy when it is offloaded.
  const std::string text =
      "tiersim-trace 1\nmeta model toy\ntensor 0 weight 1000000 0 w0\ntensor 1 weight 1000000 1 w1\n"
      "tensor 2 act 100000 -1 activations\ntensor 3 tmp 300000 0 a\ntensor 4 tmp 200000 1 b\n"
      "step decode tokens=1\nop gemv layer=0 read=0,2 write=3\nop gemv layer=1 read=1,3 write=4\n"
      "op elementwise layer=1 read=4 write=2\nend\n";
  for (const bool offload : {false, true}) {
    auto run = [&](bool analytic) {
      trace::TraceReader src(std::make_unique<std::istringstream>(text), "tmp.trace");
      auto p = testing::toy_placement(src.header(), {}, kCpu);
      if (offload) {
        p.device[1] = kCpu;
        p.path[1] = placement::Path::Copy;
      }
      return analytic ? analytic::run_analytic(testing::toy_profile(), p, src)
                      : replay::run_event_engine(testing::toy_profile(), p, src);
    };
    const double expected = 2e6 + 1e5 + 5e5;  // resident weights or one staged, the workspace, a and b
    EXPECT_DOUBLE_EQ(run(false).peak_bytes.at("cuda:0"), expected) << offload;
    EXPECT_DOUBLE_EQ(run(true).peak_bytes.at("cuda:0"), expected) << offload;
  }
}

TEST(ToyModel, ARunWhoseTransientValuesOverfillTheGpuNamesTheStepAndOpWhereItRunsOut) {
  // 1 GiB of GPU: 2e6 of weights, then op 1 of each step starts a value of 6e8 beside op 0's 5e8.
  const std::string text =
      "tiersim-trace 1\nmeta model toy\ntensor 0 weight 1000000 0 w0\ntensor 1 weight 1000000 1 w1\n"
      "tensor 2 tmp 500000000 0 a\ntensor 3 tmp 600000000 1 b\n"
      "step decode tokens=1\nop gemv layer=0 read=0 write=2\nop gemv layer=1 read=1,2 write=3\n"
      "op elementwise layer=1 read=3 write=3\nend\n";
  trace::TraceReader src(std::make_unique<std::istringstream>(text), "big.trace");
  const auto p = testing::toy_placement(src.header(), {}, kCpu);
  try {
    replay::run_event_engine(testing::toy_profile(), p, src);
    FAIL() << "no capacity error";
  } catch (const CapacityError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("it first runs out in step 1 at 'gemv L1', allocating 572.2 MiB with 478.7 MiB in use"),
              std::string::npos) << what;
  }
}

TEST(ToyModel, StagingPeakIsBoundedBySlots) {
  // Prefetch 1 keeps at most two 1e6-byte layers staged besides the resident activations.
  ExecutionOptions exec;
  exec.prefetch = 1;
  const auto r = run_event(3, {0, 1, 2}, kCpu, exec);
  EXPECT_DOUBLE_EQ(r.peak_bytes.at("cuda:0"), 1e5 + 2e6);
}

TEST(ToyModel, OffloadStreamsStageAtMostTwoCastsAndOverlapOneCopyWithCompute) {
  // Pinned casts on the offload streams do not hold the host, but the cast two back must be used
  // first: W0 [0,10], L0 [10,11.1]; W1 [10,20] (overlapping L0), L1 [20,21.1]; W2 waits for L0's
  // release (11.1) and the stream, [20,30], L2 [30,31.1]; W3 [30,40], L3 [40,41.1]. At most two 1e6-byte
  // casts staged besides the activations (without the bound the host staged all four at once).
  ExecutionOptions exec;
  exec.stream = true;
  const auto r = run_event(4, {0, 1, 2, 3}, kCpu, exec);
  EXPECT_NEAR(decode_step(r), 41.1e-3, kTol);
  EXPECT_DOUBLE_EQ(r.peak_bytes.at("cuda:0"), 1e5 + 2e6);
  EXPECT_NEAR(decode_step(run_analytic(4, {0, 1, 2, 3}, kCpu, exec)), 41.1e-3, kTol);
}

TEST(ToyModel, AWeightOnDiskIsReadByTheHostThenCopiedFromPageableMemory) {
  // Disk at 200 MB/s with 1 ms per read: L0 [0,1.1]; the host reads W1 for 1 + 5 ms, then copies it
  // from a pageable buffer [6,16] (the host waits); L1 [16,17.1]. Pinned would not matter: the buffer is
  // pageable.
  auto hw = testing::toy_profile();
  hw.hw.disk = hw::DiskSpec{200e6, 1e-3};
  EXPECT_NEAR(decode_step(run_event(2, {1}, placement::kDisk, {}, hw)), 17.1e-3, kTol);
  EXPECT_NEAR(decode_step(run_analytic(2, {1}, placement::kDisk, {}, hw)), 17.1e-3, kTol);
}

TEST(ToyModel, PipelineRunsEachLayerOnTheGpuThatHoldsIt) {
  // Layer 1 executes on cuda:1: kernel L0 on cuda:0 (1.1 ms), the 1e5 activation bytes to cuda:1 over
  // the 500 MB/s peer link (0.2 ms), kernel L1 on cuda:1 (1.1 ms); the step ends when cuda:1 is done.
  ExecutionOptions exec;
  exec.cpu = true;  // "execute where it lives": on cuda:1 here
  const auto r = run_event(2, {1}, 1, exec);
  EXPECT_NEAR(decode_step(r), 2.4e-3, kTol);
  EXPECT_DOUBLE_EQ(r.steps.back().peer_bytes, 1e5);
  EXPECT_DOUBLE_EQ(r.steps.back().h2d_bytes, 0);
  EXPECT_NEAR(decode_step(run_analytic(2, {1}, 1, exec)), 2.4e-3, kTol);
  // The same device map as a donor: the weight is copied to cuda:0 every step (2 ms at 500 MB/s).
  EXPECT_NEAR(decode_step(run_event(2, {1}, 1, {})), 1.1e-3 + 2e-3 + 1.1e-3, kTol);
}

TEST(ToyModel, TiedWeightIsCopiedAgainWhereItIsReadAgainAndStagingStaysBounded) {
  // embed (layer -1) is read by the first op and again by the head (layer 2), as a tied embedding and
  // LM head are; every weight is streamed from the host one layer ahead (two staging slots of 1e6 B).
  // Copies take 10 ms, kernels 1.1 ms: embed copy [0,10], kernel [10,11.1]; w0 copy [10,20], kernel
  // [20,21.1]; w1 copy waits for embed's slot (11.1), runs [20,30], kernel [30,31.1]; the head copies
  // embed again on demand [31.1,41.1] and runs [41.1,42.2]. Before, embed stayed staged all step (a
  // third buffer past the bound) and the slot wait named a job id left over from the previous step.
  std::ostringstream t;
  t << "tiersim-trace 1\nmeta model tied\nmeta batch 1\n"
    << "tensor 0 weight 1000000 -1 embed\ntensor 1 weight 1000000 0 w0\ntensor 2 weight 1000000 1 w1\n"
    << "tensor 3 act 100000 -1 activations\n";
  for (int s = 0; s < 3; ++s)
    t << "step decode tokens=1\nop embedding layer=-1 read=0 write=3\nop gemv layer=0 read=1 write=3\n"
      << "op gemv layer=1 read=2 write=3\nop gemv layer=2 read=0 write=3\n";
  t << "end\n";
  auto src = std::make_unique<trace::TraceReader>(std::make_unique<std::istringstream>(t.str()), "tied.trace");
  ExecutionOptions exec;
  exec.prefetch = 1;
  const auto p = testing::toy_placement(src->header(), {0, 1, 2}, kCpu, exec);
  const auto r = replay::run_event_engine(testing::toy_profile(), p, *src);
  for (const auto& step : r.steps) EXPECT_NEAR(step.seconds, 42.2e-3, kTol);
  EXPECT_LE(r.peak_bytes.at("cuda:0"), 1e5 + 2e6);
}

TEST(ToyModel, AWeightOnAnotherGpuIsReadOverThePeerLink) {
  // A pipeline whose second GPU runs a layer that also reads a weight kept on cuda:0 (a tied embedding
  // read again by the head): the embedding op and L0 on cuda:0 (1.1 ms each), the hidden states to
  // cuda:1 (1e5 B at 500 MB/s, 0.2 ms), the weight itself (1e6 B, 2 ms), then L1 reading 2e6 + writing
  // 1e5 bytes (2.1 ms). Found by review: the read of the cuda:0 weight used to cost nothing.
  std::ostringstream t;
  t << "tiersim-trace 1\nmeta model tied-pipeline\nmeta batch 1\n"
    << "tensor 0 weight 1000000 -1 embed\ntensor 1 weight 1000000 0 w0\ntensor 2 weight 1000000 1 w1\n"
    << "tensor 3 act 100000 -1 activations\n";
  for (int s = 0; s < 2; ++s)
    t << "step decode tokens=1\nop embedding layer=-1 read=0 write=3\nop gemv layer=0 read=1 write=3\n"
      << "op gemv layer=1 read=2,0 write=3\n";
  t << "end\n";
  auto src = std::make_unique<trace::TraceReader>(std::make_unique<std::istringstream>(t.str()), "tied.trace");
  ExecutionOptions exec;
  exec.cpu = true;  // execute where it lives: cuda:1
  const auto p = testing::toy_placement(src->header(), {2}, 1, exec);
  const auto r = replay::run_event_engine(testing::toy_profile(), p, *src);
  EXPECT_NEAR(decode_step(r), 6.5e-3, kTol);
  EXPECT_DOUBLE_EQ(r.steps.back().peer_bytes, 1.1e6);
}

TEST(ToyModel, EveryRunIsIdentical) {
  ExecutionOptions exec;
  exec.prefetch = 2;
  const auto a = run_event(3, {0, 2}, kCpu, exec);
  const auto b = run_event(3, {0, 2}, kCpu, exec);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t i = 0; i < a.steps.size(); ++i) EXPECT_EQ(a.steps[i].seconds, b.steps[i].seconds);
  EXPECT_EQ(a.events, b.events);
}

}  // namespace
}  // namespace tiersim

namespace tiersim {
namespace {

TEST(Timeline, ShowsTheHandWorkedPrefetchOverlap) {
  // As in ToyModel.PrefetchOverlapsCopiesWithCompute: copies [0,10] and [10,20] ms on the copy stream,
  // kernels [10,11.1] and [20,21.1] ms on the compute stream.
  testing::ExecutionOptions exec;
  exec.prefetch = 1;
  auto src = testing::toy_trace(2, 2);
  auto p = testing::toy_placement(src->header(), {0, 1}, placement::kCpu, exec);
  std::ostringstream out;
  report::Timeline timeline(1, out);
  replay::run_event_engine(testing::toy_profile(), p, *src, &timeline);
  timeline.finish();
  const auto j = nlohmann::json::parse(out.str());
  std::map<std::string, int> track_id;
  std::vector<std::tuple<std::string, std::string, double, double>> spans;  // track, name, start ms, end ms
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M") track_id[e["args"]["name"]] = e["tid"];
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    for (const auto& [name, id] : track_id)
      if (e["tid"] == id) spans.emplace_back(name, e["name"], e["ts"].get<double>() / 1e3, (e["ts"].get<double>() + e["dur"].get<double>()) / 1e3);
  }
  auto find = [&](const std::string& track, const std::string& name) {
    for (const auto& s : spans)
      if (std::get<0>(s) == track && std::get<1>(s) == name) return std::make_pair(std::get<2>(s), std::get<3>(s));
    ADD_FAILURE() << "no span " << name << " on " << track;
    return std::make_pair(-1.0, -1.0);
  };
  EXPECT_NEAR(find("cuda:0 copy from host", "prefetch w1").first, 10.0, 1e-6);
  EXPECT_NEAR(find("cuda:0 compute", "gemv L0").first, 10.0, 1e-6);
  EXPECT_NEAR(find("cuda:0 compute", "gemv L1").second, 21.1, 1e-6);
  std::ostringstream again;
  report::Timeline second(1, again);
  auto src2 = testing::toy_trace(2, 2);
  replay::run_event_engine(testing::toy_profile(), testing::toy_placement(src2->header(), {0, 1}, placement::kCpu, exec),
                           *src2, &second);
  second.finish();
  EXPECT_EQ(out.str(), again.str());
}

}  // namespace
}  // namespace tiersim
