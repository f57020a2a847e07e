// `--model NAME` for the configs that ship (traces/models/NAME.json, compiled in) and `sim models`, which lists them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/model_config.hpp"
#include "support/run_sim.hpp"
#include "support/scratch_files.hpp"

namespace {

using tiersim::testing::SimRun;

// The binary run from `dir` (a folder with no traces/ in it), stdout only when `with_stderr` is false.
SimRun sim_in(const std::string& dir, const std::string& args, bool with_stderr = true) {
  return tiersim::testing::run_sim(args, with_stderr, dir);
}

// A folder of the test's own: ctest runs the tests side by side, and a shared one was removed under a running test.
std::string elsewhere() {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  return tiersim::testing::scratch_dir(std::string("shipped-models-cwd-") + test->name()).string();
}

TEST(ShippedModels, ANameWorksFromAnyDirectoryAndPredictsWhatItsFileDoes) {
  const std::string run = " --decode 2 --policy resident --hw h200 --json";
  const SimRun by_name = sim_in(elsewhere(), "--model qwen3-8b" + run, false);
  ASSERT_EQ(by_name.code, 0) << by_name.out;
  const SimRun by_path = tiersim::testing::run_sim("--model traces/models/qwen3-8b.json" + run, false);
  ASSERT_EQ(by_path.code, 0) << by_path.out;
  auto a = nlohmann::json::parse(by_name.out), b = nlohmann::json::parse(by_path.out);
  EXPECT_EQ(a["inputs"]["trace"]["model"], "qwen3-8b");
  // The digest is of the same bytes: the shipped text is the file's.
  EXPECT_EQ(a["inputs"]["trace"]["fnv1a64"], b["inputs"]["trace"]["fnv1a64"]);
  for (const char* key : {"tps", "step_seconds", "vram_peak_bytes"}) EXPECT_EQ(a[key], b[key]) << key;
}

TEST(ShippedModels, AResultNamingAShippedModelReRunsToTheSameBytes) {
  const std::string dir = elsewhere();
  const SimRun first = sim_in(dir, "--model qwen3-0.6b --decode 2 --policy resident --json", false);
  ASSERT_EQ(first.code, 0) << first.out;
  std::ofstream(dir + "/result.json") << first.out;
  const SimRun again = sim_in(dir, "run --config result.json", false);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_TRUE(again.out == first.out);
}

TEST(ShippedModels, AFileOfThatNameStillWinsAndAPathStillWorks) {
  const std::string dir = elsewhere();
  std::ofstream(dir + "/qwen3-8b") << "{";  // a file at the path given is read, as for --hw
  const SimRun r = sim_in(dir, "--model qwen3-8b --decode 2 --policy resident");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not valid JSON"), std::string::npos) << r.out;
  EXPECT_EQ(tiersim::testing::run_sim("--model traces/models/qwen3-8b.json --decode 2 --policy resident").code, 0);
}

TEST(ShippedModels, AnUnknownNameIsRefusedNamingTheOptionAndTheNearestNames) {
  const SimRun r = sim_in(elsewhere(), "--model qwen3-9b --decode 2 --policy resident");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("'--model'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not a shipped model name"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("qwen3-8b"), std::string::npos) << r.out;
  // The hub's spelling finds the shipped name first.
  const SimRun hub = sim_in(elsewhere(), "--model Qwen3-8B --decode 2 --policy resident");
  EXPECT_EQ(hub.code, 2) << hub.out;
  EXPECT_NE(hub.out.find("(nearest: qwen3-8b,"), std::string::npos) << hub.out;
  // A path that is missing keeps the file's own error (no list of names for a typo'd path).
  const SimRun path = sim_in(elsewhere(), "--model missing/qwen3-8b.json --decode 2 --policy resident");
  EXPECT_EQ(path.code, 2) << path.out;
  EXPECT_EQ(path.out.find("shipped"), std::string::npos) << path.out;
}

TEST(ShippedModels, ARepositoryIdNamesTheShippedConfigCopiedFromItAndNothingIsDownloaded) {
  const std::string run = " --decode 2 --policy resident --hw h200 --json";
  const SimRun by_id = sim_in(elsewhere(), "--model Qwen/Qwen3-8B" + run, false);
  ASSERT_EQ(by_id.code, 0) << by_id.out;
  const SimRun by_name = sim_in(elsewhere(), "--model qwen3-8b" + run, false);
  ASSERT_EQ(by_name.code, 0) << by_name.out;
  auto a = nlohmann::json::parse(by_id.out), b = nlohmann::json::parse(by_name.out);
  EXPECT_EQ(a["inputs"]["trace"]["fnv1a64"], b["inputs"]["trace"]["fnv1a64"]);  // the same shipped bytes
  for (const char* key : {"tps", "step_seconds", "vram_peak_bytes"}) EXPECT_EQ(a[key], b[key]) << key;
  // A repository none of the shipped configs came from: refused, saying tiersim fetches nothing.
  const SimRun other = sim_in(elsewhere(), "--model Qwen/Qwen3-9B --decode 2 --policy resident");
  EXPECT_EQ(other.code, 2) << other.out;
  EXPECT_NE(other.out.find("'--model'"), std::string::npos) << other.out;
  EXPECT_NE(other.out.find("downloads nothing"), std::string::npos) << other.out;
}

TEST(ShippedModels, ADiffusionJobFindsItsShippedCompanions) {
  // --image-job reads FLUX's text encoders and VAE beside the model: for a shipped name, the shipped ones.
  const SimRun r = sim_in(elsewhere(), "--model flux.1-dev --policy resident --image-job --hw h200 --json", false);
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(ShippedModels, SimModelsListsEveryShippedConfigWithItsFamilyAndParameters) {
  const SimRun r = sim_in(elsewhere(), "models");
  ASSERT_EQ(r.code, 0) << r.out;
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TIERSIM_SOURCE_DIR) + "/traces/models")) {
    if (e.path().extension() != ".json") continue;
    ++files;
    EXPECT_NE(r.out.find("  " + e.path().stem().string() + " "), std::string::npos) << e.path();
  }
  EXPECT_EQ(files, 31u);
  const auto m = tiersim::model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-14b.json");
  const std::size_t row = r.out.find("  qwen3-14b ");
  ASSERT_NE(row, std::string::npos);
  const std::string line = r.out.substr(row, r.out.find('\n', row) - row);
  EXPECT_NE(line.find(" qwen3 "), std::string::npos) << line;
  EXPECT_NE(line.find(" " + std::to_string(m.total_params()) + " "), std::string::npos) << line;
  EXPECT_NE(r.out.find("FluxTransformer2DModel"), std::string::npos);
  EXPECT_EQ(sim_in(elsewhere(), "models").out, r.out);  // deterministic
}

}  // namespace
