// --model DIR (a Hugging Face snapshot folder) and `sim models DIR`, which checks its safetensors headers against its
// config.json. The folders are made here: a small published-style config and synthetic headers over sparse data.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "model/model_config.hpp"
#include "support/run_sim.hpp"
#include "support/scratch_files.hpp"

namespace {

namespace fs = std::filesystem;
using tiersim::testing::run_sim;
using tiersim::testing::SimRun;

const char* kConfig = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
  "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
  "vocab_size": 100, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "max_position_embeddings": 4096})";

std::uint64_t config_params() { return tiersim::model::parse_model_config(kConfig, "config.json").total_params(); }

// A safetensors file of one BF16 tensor per (name, elements), its data a sparse hole of the right length.
void write_safetensors(const fs::path& path, const std::vector<std::pair<std::string, std::uint64_t>>& tensors) {
  nlohmann::ordered_json h;
  std::uint64_t at = 0;
  for (const auto& [name, n] : tensors) {
    h[name] = {{"dtype", "BF16"}, {"shape", {n}}, {"data_offsets", {at, at + 2 * n}}};
    at += 2 * n;
  }
  const std::string text = h.dump();
  std::string len;
  for (int i = 0; i < 8; ++i) len += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << len << text;
  fs::resize_file(path, 8 + text.size() + at);
}

fs::path snapshot(const std::string& name) {
  const fs::path dir = tiersim::testing::scratch_dir(name);
  std::ofstream(dir / "config.json") << kConfig;
  return dir;
}

TEST(HfSnapshot, AFolderRunsFromItsConfigJson) {
  const fs::path dir = snapshot("snapshot-run");
  std::ofstream(dir.parent_path() / "snapshot-run-config.json") << kConfig;
  const std::string run = " --decode 2 --policy resident --json";
  const auto a = tiersim::testing::run_sim_json("--model " + dir.string() + run);
  const auto b = tiersim::testing::run_sim_json("--model " + (dir.parent_path() / "snapshot-run-config.json").string() + run);
  EXPECT_EQ(a["tps"], b["tps"]);
  EXPECT_EQ(a["inputs"]["trace"]["fnv1a64"], b["inputs"]["trace"]["fnv1a64"]);
  fs::remove(dir / "config.json");
  const SimRun none = run_sim("--model " + dir.string() + run);
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("is a folder without config.json"), std::string::npos) << none.out;
}

TEST(HfSnapshot, TheHeadersAgreeWithTheConfigOrSayByHowMuchTheyDiffer) {
  const std::uint64_t p = config_params();
  const fs::path dir = snapshot("snapshot-check");
  write_safetensors(dir / "model.safetensors", {{"model.embed_tokens.weight", 6400}, {"rest", p - 6400}});
  SimRun r = run_sim("models " + dir.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("qwen3, " + std::to_string(p) + " parameters"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 file(s), 2 tensors, " + std::to_string(p) + " parameters, " + std::to_string(2 * p) + " bytes (BF16"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("parameters: the headers and the config agree"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bytes: the headers and the config at bfloat16 agree"), std::string::npos) << r.out;
  // Sharded by an index, one tensor 10 elements short: both counts differ, by how much said.
  fs::remove(dir / "model.safetensors");
  write_safetensors(dir / "model-00001-of-00002.safetensors", {{"model.embed_tokens.weight", 6400}});
  write_safetensors(dir / "model-00002-of-00002.safetensors", {{"rest", p - 6410}});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {"total_size": 1}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
           "rest": "model-00002-of-00002.safetensors"}})";
  r = run_sim("models " + dir.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 file(s), 2 tensors"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("parameters: differ: the headers hold -10 against the config's count"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bytes: differ: the headers hold -20"), std::string::npos) << r.out;
}

TEST(HfSnapshot, AnIndexOutsideTheFolderOrAMissingTensorIsRefused) {
  const fs::path dir = snapshot("snapshot-bad-index");
  write_safetensors(dir / "model.safetensors", {{"a", 4}});
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map": {"a": "../model.safetensors"}})";
  SimRun r = run_sim("models " + dir.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("model.safetensors.index.json:1: 'weight_map'"), std::string::npos) << r.out;
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map": {"a": "model.safetensors", "b": "model.safetensors"}})";
  r = run_sim("models " + dir.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("'b' is in model.safetensors by the index, but not in its header"), std::string::npos) << r.out;
  // A header whose length field is past the 100 MB bound: the file and the key named.
  std::ofstream(dir / "model.safetensors", std::ios::binary) << std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) << "{}";
  fs::remove(dir / "model.safetensors.index.json");
  r = run_sim("models " + dir.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("model.safetensors: 'header': length 4294967295 is more than"), std::string::npos) << r.out;
}

}  // namespace
