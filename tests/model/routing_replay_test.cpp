// Mixture-of-experts routing replayed from a file (--routing replay:FILE): the trace reads exactly the experts
// the file names, and a file that does not fit the model or the run is refused naming the file.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "model/routing_file.hpp"
#include "model/trace_generator.hpp"
#include "support/expert_reads.hpp"
#include "support/run_sim.hpp"

namespace tiersim::model {
namespace {

ModelConfig qwen30() { return load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-30b-a3b.json"); }

// A routing of `tokens` tokens over 48 layers, 8 of 128 experts each: token t, layer l routes to experts
// (t + l + j * 16) % 128 for j = 0..7.
std::string routing_json(int tokens, int layers = 48, int sequences = 1) {
  std::ostringstream s;
  s << R"({"tiersim_routing": 1, "num_experts": 128, "experts_per_token": 8, "layers": )" << layers
    << R"(, "source": "test", "sequences": [)";
  for (int q = 0; q < sequences; ++q) {
    s << (q ? "," : "") << "[";
    for (int t = 0; t < tokens; ++t) {
      s << (t ? "," : "") << "[";
      for (int l = 0; l < layers; ++l) {
        s << (l ? "," : "") << "[";
        for (int j = 0; j < 8; ++j) s << (j ? "," : "") << (t + l + j * 16) % 128;
        s << "]";
      }
      s << "]";
    }
    s << "]";
  }
  s << "]}";
  return s.str();
}

GenerationOptions replay(const std::string& path, std::uint32_t prompt, std::uint32_t decode) {
  GenerationOptions g;
  g.prompt_tokens = prompt;
  g.decode_tokens = decode;
  g.routing_path = path;
  g.routing_replay = std::make_shared<RoutingTable>(load_routing_file(path));
  return g;
}

TEST(RoutingReplay, DecodeReadsExactlyTheExpertsTheFileNames) {
  const std::string path = testing::scratch_file("routing6.json", routing_json(6));
  LlmTraceGenerator gen(qwen30(), replay(path, 4, 2));
  EXPECT_NE(gen.header().meta.at("routing").find("replayed from"), std::string::npos);
  trace::Step step;
  ASSERT_TRUE(gen.next(step));  // the prompt: positions 0-3
  ASSERT_TRUE(gen.next(step));  // the first decoded token: position 4
  std::set<std::uint64_t> read;
  for (const auto& op : step.ops)
    for (const auto& r : op.reads)
      if (const auto e = testing::gate_read_expert(gen.header(), r, 3)) read.insert(*e);
  std::set<std::uint64_t> want;
  for (int j = 0; j < 8; ++j) want.insert(static_cast<std::uint64_t>((4 + 3 + j * 16) % 128));
  EXPECT_EQ(read, want);
}

TEST(RoutingReplay, AFileThatDoesNotFitTheModelOrTheRunIsRefused) {
  const std::string few = testing::scratch_file("routing3.json", routing_json(3));
  try {
    LlmTraceGenerator gen(qwen30(), replay(few, 4, 2));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "--routing");
    EXPECT_EQ(e.file(), few);
    EXPECT_NE(e.message().find("processes 6"), std::string::npos) << e.message();
  }
  const std::string layers = testing::scratch_file("routing_l2.json", routing_json(6, 2));
  EXPECT_THROW(LlmTraceGenerator(qwen30(), replay(layers, 4, 2)), InputError);
  GenerationOptions two = replay(testing::scratch_file("routing_b1.json", routing_json(6)), 4, 2);
  two.batch = 2;
  EXPECT_THROW(LlmTraceGenerator(qwen30(), two), InputError);
  // A small file that declares a huge routing is refused before anything is reserved for it.
  std::string huge = R"({"tiersim_routing":1,"num_experts":4096,"experts_per_token":4096,"layers":10000,"sequences":[[)";
  for (int i = 0; i < 20000; ++i) huge += i ? ",0" : "0";
  huge += "]]}";
  try {
    load_routing_file(testing::scratch_file("routing_huge.json", huge));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "sequences");
  }
  // A repeated expert, an expert out of range: errors naming the key.
  std::string bad = routing_json(1);
  bad.replace(bad.find("[[0,16,"), 7, "[[0,0,");
  try {
    load_routing_file(testing::scratch_file("routing_dup.json", bad));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "sequences");
    EXPECT_NE(e.message().find("distinct"), std::string::npos);
  }
}

TEST(RoutingReplay, ARunRecordsItsRoutingFileAndReRunsFromIt) {
  const std::string path = testing::scratch_file("routing_cli.json", routing_json(6));
  const std::string args = "--model traces/models/qwen3-30b-a3b.json --prompt 4 --decode 2 --routing replay:" + path +
                           " --hw rtx4090 --dtype q4 --policy resident --json";
  const auto first = testing::run_sim(args, false);
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_NE(first.out.find("\"routing_replay\""), std::string::npos);
  const std::string saved = testing::scratch_file("routing_result.json", first.out);
  const auto again = testing::run_sim("run --json --config " + saved, false);
  EXPECT_EQ(again.code, 0);
  EXPECT_EQ(again.out, first.out);
}

}  // namespace
}  // namespace tiersim::model

namespace tiersim::model {
namespace {

// A routing file llama.cpp itself made (experiments/llamacpp/capture_routing.cpp: its ffn_moe_topk node for a
// 512-token prompt of the 24-layer Qwen3-30B-A3B validation file): it reads, and the experts a prompt step of its
// 512 tokens reads per layer are the distinct experts the capture tool printed for its first 512 tokens
// (results/validation/llamacpp/raw/routing/moe-routing.log).
TEST(RoutingReplay, AFileCapturedFromLlamaCppDrivesThePromptsExpertReads) {
  const std::string path =
      std::string(TIERSIM_SOURCE_DIR) + "/results/validation/llamacpp/raw/routing/routing_pp512.json";
  const RoutingTable table = load_routing_file(path);
  EXPECT_EQ(table.layers, 24u);
  EXPECT_EQ(table.num_experts, 128u);
  ASSERT_EQ(table.tokens.size(), 2u);
  EXPECT_EQ(table.tokens[0], 512u);
  const std::vector<std::size_t> printed{126, 75, 48, 33, 34, 37, 31, 33, 26, 27, 26, 28,
                                         20, 27, 32, 25, 31, 23, 28, 22, 28, 21, 24, 21};
  const ModelConfig model =
      load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/experiments/llamacpp/models/qwen3-30b-a3b-L24.json");
  GenerationOptions g = replay(path, 512, 0);
  set_dtype(g, "Q4_K_M");
  LlmTraceGenerator gen(model, g);
  trace::Step step;
  ASSERT_TRUE(gen.next(step));
  for (std::uint32_t layer = 0; layer < 24; ++layer) {
    // llama.cpp's fused blk.L.ffn_gate_exps.weight: an expert's gate is the slice at offset expert x bytes.
    const std::string gate = "blk." + std::to_string(layer) + ".ffn_gate_exps.weight";
    std::set<std::uint64_t> read;
    for (const auto& op : step.ops)
      for (const auto& r : op.reads)
        if (gen.header().tensors[r.tensor].name == gate && r.bytes > 0) read.insert(r.offset / r.bytes);
    // The last layer runs its experts on the output row only (llama.cpp's inp_out_ids; the capture made every token
    // an output to record all of them): that token's 8.
    EXPECT_EQ(read.size(), layer + 1 < 24 ? printed[layer] : 8u) << "layer " << layer;
  }
}

}  // namespace
}  // namespace tiersim::model
