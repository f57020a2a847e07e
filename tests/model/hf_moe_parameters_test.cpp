// tiersim's Hugging Face MoE traces against transformers' own models: tests/fixtures/hf_moe_parameters.jsonl holds
// the named parameters transformers 5.17 builds from each published config (experiments/frameworks/
// hf_moe_parameters.py, on the meta device, quantization_config dropped). The trace's weights, bf16 and with the same
// config, must be the same modules with the same element counts: that is what accelerate's hooks and device maps
// move, so a copier moves what transformers holds (the experts' two fused parameters per layer, not one per expert).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model_config.hpp"
#include "model/trace_generator.hpp"

namespace tiersim::model {
namespace {

// A parameter's module as tiersim names tensors: the module path without .weight / .bias, and an expert bias
// parameter (gpt-oss's mlp.experts.gate_up_proj_bias) with the matrix it belongs to.
std::string module_of(std::string name) {
  for (const std::string suffix : {".weight", ".bias", "_bias"})
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return name.substr(0, name.size() - suffix.size());
  return name;
}

TEST(HfMoeParameters, TracesHoldTransformersOwnParametersModuleForModule) {
  std::ifstream fixture(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/hf_moe_parameters.jsonl");
  ASSERT_TRUE(fixture) << "fixture missing";
  std::string line;
  int models = 0;
  while (std::getline(fixture, line)) {
    const nlohmann::json row = nlohmann::json::parse(line);
    ASSERT_FALSE(row.contains("error")) << row.dump();
    SCOPED_TRACE(row.at("model").get<std::string>());
    EXPECT_EQ(row.at("transformers").get<std::string>(), "5.17.0");
    const std::string path = std::string(TIERSIM_SOURCE_DIR) + "/" + row.at("config").get<std::string>();
    std::ifstream in(path);
    nlohmann::json config = nlohmann::json::parse(in);
    config.erase("quantization_config");  // as the fixture's models were built: every weight bf16
    const ModelConfig m = parse_model_config(config.dump(), path);
    GenerationOptions o;
    set_dtype(o, "bf16");
    o.prompt_tokens = 1;
    o.decode_tokens = 1;
    const LlmTraceGenerator gen(m, o);

    std::map<std::string, std::uint64_t> want;  // module -> elements
    for (const auto& p : row.at("parameters")) {
      std::uint64_t n = 1;
      for (const auto& d : p.at(1)) n *= d.get<std::uint64_t>();
      want[module_of(p.at(0).get<std::string>())] += n;
    }
    std::map<std::string, std::uint64_t> got;
    for (const auto& t : gen.header().tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      // DeepSeek-V3's selection bias is a buffer in transformers 5.17 (not among its parameters): 1 KiB a layer.
      if (t.name.find("e_score_correction_bias") != std::string::npos) continue;
      got[t.name] += t.bytes / 2;
    }
    EXPECT_EQ(got.size(), want.size());
    for (const auto& [name, n] : want) {
      const auto it = got.find(name);
      if (it == got.end()) {
        ADD_FAILURE() << "transformers has " << name << ", the trace does not";
        continue;
      }
      EXPECT_EQ(it->second, n) << name;
    }
    for (const auto& [name, n] : got)
      if (!want.count(name)) ADD_FAILURE() << "the trace has " << name << ", transformers does not";
    ++models;
  }
  EXPECT_EQ(models, 5);  // Qwen3-30B-A3B, Mixtral-8x7B, gpt-oss-20b and -120b, DeepSeek-V3
}

}  // namespace
}  // namespace tiersim::model
