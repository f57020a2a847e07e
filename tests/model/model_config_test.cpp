#include <gtest/gtest.h>

#include "core/error.hpp"
#include "model/model_config.hpp"

namespace tiersim::model {
namespace {

ModelConfig shipped(const std::string& name) {
  return load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + name + ".json");
}

// Published totals (Hugging Face model cards / safetensors metadata).
TEST(ModelConfig, ParameterCountsMatchThePublishedModels) {
  EXPECT_EQ(shipped("qwen3-14b").total_params(), 14768307200u);  // "14.8B"
  EXPECT_EQ(shipped("qwen3-8b").total_params(), 8190735360u);    // "8.2B"
  EXPECT_EQ(shipped("qwen3-32b").total_params(), 32762123264u);  // "32.8B"
  EXPECT_EQ(shipped("llama-3.1-8b").total_params(), 8030261248u);    // 8.03B
  EXPECT_EQ(shipped("llama-3.1-70b").total_params(), 70553706496u);  // 70.6B
}

TEST(ModelConfig, WeightBytesFollowTheDtype) {
  const ModelConfig m = shipped("qwen3-14b");
  EXPECT_EQ(matrix_bytes(m.q_params(), WeightDtype::Bf16), 2 * m.q_params());
  EXPECT_EQ(matrix_bytes(m.q_params(), WeightDtype::Fp8), m.q_params());
  EXPECT_EQ(matrix_bytes(64, WeightDtype::Q4), 36u);  // 4.5 bits each
}

TEST(ModelConfig, RejectsUnknownAndMissingFields) {
  const std::string base = R"("model_type":"llama","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100)";
  EXPECT_NO_THROW(parse_model_config("{" + base + "}", "m.json"));
  try {
    parse_model_config("{" + base + R"(,"hiden_size":64})", "m.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "hiden_size");
    EXPECT_EQ(e.file(), "m.json");
  }
  EXPECT_THROW(parse_model_config(R"({"model_type":"llama"})", "m.json"), InputError);
  EXPECT_THROW(parse_model_config("{" + base + R"(,"hidden_act":"gelu"})", "m.json"), InputError);
  EXPECT_THROW(parse_model_config(R"({"model_type":"mamba"})", "m.json"), InputError);
  EXPECT_THROW(parse_model_config("{not json", "m.json"), InputError);
  EXPECT_THROW(parse_model_config("{" + base + R"(,"num_key_value_heads":3})", "m.json"), InputError);
}

}  // namespace
}  // namespace tiersim::model
