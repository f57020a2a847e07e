// Published configs of families tiersim does not model (tests/fixtures/hf_configs/): the model_type is what is
// refused, first, and not a field of the family's own; fields a modelled family does not know are listed all at once.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "model/model_config.hpp"
#include "support/run_sim.hpp"

namespace {

std::string fixture(const std::string& name) { return std::string("tests/fixtures/hf_configs/") + name + ".json"; }

std::string text_of(const std::string& name) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/" + fixture(name));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The error reading `text` (the fixture, perhaps edited), or "" when it was accepted.
tiersim::InputError error_of(const std::string& text) {
  try {
    tiersim::model::parse_model_config(text, "config.json");
  } catch (const tiersim::InputError& e) {
    return e;
  }
  return tiersim::InputError("", 0, "", "accepted");
}

TEST(UnsupportedFamily, TheModelTypeIsRefusedBeforeAnyUnknownField) {
  for (const auto& [name, type] : {std::pair{"gemma-2-9b", "gemma2"}, std::pair{"phi-3-mini-4k-instruct", "phi3"}}) {
    const tiersim::InputError e = error_of(text_of(name));
    EXPECT_EQ(e.key(), "model_type") << name << ": " << e.what();
    EXPECT_EQ(e.message().rfind("unsupported model_type '" + std::string(type) + "'", 0), 0u) << e.what();
    EXPECT_EQ(std::string(e.what()).find("unknown field"), std::string::npos) << e.what();
    // As a user sees it: exit 2, the file, the line of model_type and the key.
    const tiersim::testing::SimRun r = tiersim::testing::run_sim("--model " + fixture(name) + " --decode 2 --policy resident");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(fixture(name) + ":"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("unsupported model_type '" + std::string(type) + "'"), std::string::npos) << r.out;
  }
}

std::string as_llama(std::string text, const std::string& type) {
  const std::string from = "\"model_type\": \"" + type + "\"";
  text.replace(text.find(from), from.size(), "\"model_type\": \"llama\"");
  return text;
}

TEST(UnsupportedFamily, EveryUnknownFieldIsListedAtOnce) {
  // Read as a family tiersim models, each config's own fields are all named in one error, the first one's line given.
  const tiersim::InputError gemma = error_of(as_llama(text_of("gemma-2-9b"), "gemma2"));
  EXPECT_EQ(gemma.key(), "attn_logit_softcapping") << gemma.what();
  EXPECT_EQ(gemma.line(), 7u) << gemma.what();
  for (const char* key : {"attn_logit_softcapping", "cache_implementation", "final_logit_softcapping", "hidden_activation",
                          "query_pre_attn_scalar", "sliding_window_size"})
    EXPECT_NE(gemma.message().find(key), std::string::npos) << key << ": " << gemma.what();
  const tiersim::InputError phi = error_of(as_llama(text_of("phi-3-mini-4k-instruct"), "phi3"));
  EXPECT_EQ(phi.key(), "embd_pdrop") << phi.what();
  for (const char* key : {"embd_pdrop", "original_max_position_embeddings", "resid_pdrop"})
    EXPECT_NE(phi.message().find(key), std::string::npos) << key << ": " << phi.what();
}

}  // namespace
