// HF config.json reading: library exceptions become InputErrors naming file, line and key; every
// count is bounded with its range in the message; the parameter arithmetic is checked.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "support/run_sim.hpp"

namespace tiersim::model {
namespace {

// One field per line, so that each error's line is the field's.
std::string config(const std::string& extra_fields, const std::string& sizes = "") {
  std::string s = "{\n\"model_type\": \"llama\",\n";
  s += sizes.empty() ? "\"hidden_size\": 64,\n\"intermediate_size\": 128,\n\"num_hidden_layers\": 2,\n"
                       "\"num_attention_heads\": 4,\n\"vocab_size\": 100"
                     : sizes;
  if (!extra_fields.empty()) s += ",\n" + extra_fields;
  return s + "\n}\n";
}

void expect_error(const std::string& text, std::size_t line, const std::string& key, const std::string& says) {
  try {
    parse_model_config(text, "m.json");
    FAIL() << "accepted:\n" << text;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "m.json");
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(ModelConfigRobustness, TheBaseConfigParses) { EXPECT_EQ(parse_model_config(config(""), "m.json").num_hidden_layers, 2u); }

// nlohmann's out_of_range (a number beyond a double) escaped main: abort, exit 134.
TEST(ModelConfigRobustness, NumberOverflowingADoubleIsAnInputErrorEvenInAnIgnoredField) {
  expect_error(config("\"rope_theta\": 1e400"), 8, "rope_theta", "numbers must fit a double");
  expect_error(config("\"rope_scaling\": {\"factor\": -1e999}"), 8, "rope_scaling.factor", "numbers must fit a double");
}

// nlohmann's type_error escaped main: abort.
TEST(ModelConfigRobustness, WrongTypesAreInputErrors) {
  expect_error(config("\"name\": 5"), 8, "name", "must be a string, got 5");
  expect_error(config("\"_name_or_path\": [\"x\"]"), 8, "_name_or_path", "must be a string, got [\"x\"]");
  expect_error(config("\"tie_word_embeddings\": \"yes\""), 8, "tie_word_embeddings", "true or false");
  expect_error(config("\"head_dim\": 16.0"), 8, "head_dim", "must be an integer from 1 to 16,384");
  expect_error("[1, 2]", 1, "", "expected a JSON object");
}

TEST(ModelConfigRobustness, SyntaxErrorsCarryTheirLine) {
  expect_error("{\n\"model_type\": \"llama\",\n\"hidden_size\": 64,,\n}", 3, "hidden_size", "not valid JSON");
}

TEST(ModelConfigRobustness, DuplicateKeysAreRefused) {
  expect_error(config("\"hidden_size\": 128"), 8, "hidden_size", "appears twice");
}

// 2^32+1 layers was cast to int32 1 (a one-layer prediction); 2,000,000 layers took 5.4 GB and 34 s
// before failing.
TEST(ModelConfigRobustness, CountsAreBoundedWithTheRangeInTheMessage) {
  const std::string rest = "\"hidden_size\": 64,\n\"intermediate_size\": 128,\n\"num_attention_heads\": 4,\n\"vocab_size\": 100,\n";
  expect_error(config("", rest + "\"num_hidden_layers\": 4294967297"), 7, "num_hidden_layers",
               "must be an integer from 1 to 10,000, got 4294967297");
  expect_error(config("", rest + "\"num_hidden_layers\": 2000000"), 7, "num_hidden_layers", "1 to 10,000");
  expect_error(config("", rest + "\"num_hidden_layers\": -3"), 7, "num_hidden_layers", "1 to 10,000, got -3");
  expect_error(config("", rest + "\"num_hidden_layers\": 18446744073709551615"), 7, "num_hidden_layers", "1 to 10,000");
  expect_error(config("\"num_key_value_heads\": 100000"), 8, "num_key_value_heads", "1 to 4,096");
}

// hidden_size x vocab_size overflowed uint64 and gave a small model.
TEST(ModelConfigRobustness, ParameterArithmeticIsCheckedAndBounded) {
  const std::string huge =
      "\"hidden_size\": 1048576,\n\"intermediate_size\": 4194304,\n\"num_hidden_layers\": 10000,\n"
      "\"num_attention_heads\": 4096,\n\"vocab_size\": 16777216";
  expect_error(config("", huge), 3, "hidden_size", "at most 10^13 (ten trillion) are modelled");
  // Llama-3.1-405B's sizes are well inside.
  const std::string big =
      "\"hidden_size\": 16384,\n\"intermediate_size\": 53248,\n\"num_hidden_layers\": 126,\n"
      "\"num_attention_heads\": 128,\n\"num_key_value_heads\": 8,\n\"vocab_size\": 128256";
  EXPECT_EQ(parse_model_config(config("", big), "m.json").total_params(), 405853388800u);
}

TEST(ModelConfigRobustness, TheCommandReportsTheErrorInsteadOfAborting) {
  using testing::run_sim;
  const std::string path = testing::scratch_file("rope.json", config("\"rope_theta\": 1e400"));
  const auto r = run_sim("gen --model " + path + " -o " + path + ".trace");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("rope.json:8: 'rope_theta'"), std::string::npos) << r.out;
}

// --prompt 4294967295 --decode 1 wrapped to "both 0"; a batch x prompt past a step's token count was
// truncated.
TEST(ModelConfigRobustness, GenerationSizesAreBounded) {
  const ModelConfig m = parse_model_config(config(""), "m.json");
  GenerationOptions o;
  o.prompt_tokens = 4294967295u;
  o.decode_tokens = 1;
  EXPECT_THROW(LlmTraceGenerator(m, o), std::invalid_argument);
  o.prompt_tokens = 1'000'000;
  o.decode_tokens = 0;
  o.batch = 100'000;
  EXPECT_THROW(LlmTraceGenerator(m, o), std::invalid_argument);
  o.prompt_tokens = 512;
  o.decode_tokens = 128;
  o.batch = 1;
  EXPECT_NO_THROW(LlmTraceGenerator(m, o));
}

}  // namespace
}  // namespace tiersim::model
