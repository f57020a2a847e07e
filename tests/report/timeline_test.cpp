// The timeline: a Chrome trace a viewer can read (steps, args, memory counters, copy-to-kernel arrows,
// managed-memory driver work), streamed without per-event state and byte-identical for identical inputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <streambuf>

#include "replay/event_replay.hpp"
#include "support/scratch_files.hpp"
#include "report/timeline.hpp"
#include "support/run_sim.hpp"
#include "support/toy.hpp"

namespace tiersim::report {
namespace {

using nlohmann::json;

// Discards what it is given and counts it: what a writer that keeps nothing needs underneath.
class CountingSink final : public std::streambuf {
 public:
  std::size_t bytes() const { return bytes_; }

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) ++bytes_;
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    bytes_ += static_cast<std::size_t>(n);
    return n;
  }

 private:
  std::size_t bytes_ = 0;
};

// A little of everything the writer writes.
void write_sample(Timeline& t) {
  t.process_name("toy run");
  t.track("steps");
  t.span("cuda:0 copy from host", "prefetch w1", 0, 10'000'000, {{"tensor", "w1"}, {"bytes", 1000000}, {"link", "pcie"}});
  t.span("cuda:0 compute", "gemv L1", 10'000'000, 11'100'000, {{"kind", "gemv"}, {"flops", 2000000}});
  t.flow("cuda:0 copy from host", 5'000'000, "cuda:0 compute", 10'550'000);
  t.counter("cuda:0 memory", 0, 1e6);
  t.counter("cuda:0 memory", 5'000'000, 1e6);  // unchanged: not written
  t.counter("cuda:0 memory", 10'000'000, 2e6 + 0.4);
  t.span("steps", "decode 0", 0, 11'100'000, {{"step", 0}, {"kind", "decode"}});
  t.finish();
}

std::vector<json> events_of(const std::string& text, const std::string& phase) {
  std::vector<json> out;
  const json doc = json::parse(text);
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == phase) out.push_back(e);
  return out;
}

TEST(Timeline, WritesSpansWithArgsCountersAndFlows) {
  std::ostringstream out;
  Timeline t(1, out);
  write_sample(t);
  const json j = json::parse(out.str());  // valid JSON
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.tracks(), 3u);
  EXPECT_EQ(t.flows(), 1u);

  const auto metadata = events_of(out.str(), "M");
  ASSERT_EQ(metadata.size(), 4u);  // the process and three tracks, "steps" first as declared
  EXPECT_EQ(metadata[0]["name"], "process_name");
  EXPECT_EQ(metadata[0]["args"]["name"], "toy run");
  EXPECT_EQ(metadata[1]["args"]["name"], "steps");
  EXPECT_EQ(metadata[1]["tid"], 0);

  const auto spans = events_of(out.str(), "X");
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0]["args"]["bytes"], 1000000);
  EXPECT_EQ(spans[0]["args"]["link"], "pcie");
  EXPECT_EQ(spans[1]["args"]["flops"], 2000000);
  EXPECT_EQ(spans[2]["name"], "decode 0");
  EXPECT_EQ(spans[2]["tid"], 0);

  const auto counters = events_of(out.str(), "C");
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0]["name"], "cuda:0 memory");
  EXPECT_EQ(counters[0]["args"]["bytes"], 1000000);
  EXPECT_EQ(counters[1]["args"]["bytes"], 2000000);  // whole bytes
  EXPECT_DOUBLE_EQ(counters[1]["ts"].get<double>(), 10.0);

  const auto starts = events_of(out.str(), "s");
  const auto ends = events_of(out.str(), "f");
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(starts[0]["id"], ends[0]["id"]);
  EXPECT_EQ(starts[0]["name"], ends[0]["name"]);
  EXPECT_EQ(starts[0]["cat"], ends[0]["cat"]);
  EXPECT_EQ(ends[0]["bp"], "e");
  EXPECT_EQ(starts[0]["tid"], spans[0]["tid"]);
  EXPECT_EQ(ends[0]["tid"], spans[1]["tid"]);
}

TEST(Timeline, TimesAreExactMicroseconds) {
  std::ostringstream out;
  Timeline t(1, out);
  t.span("host", "a", 1, 12'500'000);
  t.span("host", "b", 3'000'000'000'000, 3'000'000'000'001);
  t.finish();
  EXPECT_NE(out.str().find(R"("ts":0.000001,"dur":12.499999)"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(R"("ts":3000000,"dur":0.000001)"), std::string::npos) << out.str();
}

TEST(Timeline, TheSameEventsGiveTheSameBytes) {
  std::ostringstream a, b;
  Timeline first(1, a), second(1, b);
  write_sample(first);
  write_sample(second);
  EXPECT_EQ(a.str(), b.str());
}

TEST(Timeline, KeepsNoStatePerEvent) {
  // A thousand steps of a hand-fed run: what the writer keeps stays its tracks and its counters, however
  // many events went through it.
  CountingSink sink;
  std::ostream out(&sink);
  Timeline t(1000, out);
  SimTime now = 0;
  for (std::size_t step = 0; step < 1000; ++step) {
    const SimTime start = now;
    for (int layer = 0; layer < 50; ++layer) {
      t.span("cuda:0 copy from host", "prefetch w", now, now + 10);
      t.span("cuda:0 compute", "gemv", now + 10, now + 20, {{"layer", layer}});
      t.flow("cuda:0 copy from host", now + 5, "cuda:0 compute", now + 15);
      t.counter("cuda:0 memory", now + 20, static_cast<double>(layer % 3));
      now += 20;
    }
    t.span("steps", "decode " + std::to_string(step), start, now);
  }
  t.finish();
  EXPECT_EQ(t.size(), 1000u * 101u);
  EXPECT_EQ(t.flows(), 1000u * 50u);
  EXPECT_EQ(t.tracks(), 3u);
  EXPECT_EQ(t.counters(), 1u);
  EXPECT_GT(sink.bytes(), 1000u * 50u * 300u);  // it all went to the stream
}

TEST(Timeline, AnEngineRunShowsStepsArgsAndArrows) {
  // The toy's hand-worked prefetch overlap (tests/engine/toy_model_test.cpp): copies on the copy stream,
  // each kernel waiting for its copy.
  testing::ExecutionOptions exec;
  exec.prefetch = 1;
  auto src = testing::toy_trace(2, 3);
  auto p = testing::toy_placement(src->header(), {0, 1}, placement::kCpu, exec);
  std::ostringstream out;
  Timeline timeline(2, out);
  replay::run_event_engine(testing::toy_profile(), p, *src, &timeline);
  timeline.finish();
  const std::string text = out.str();

  std::vector<std::string> steps;
  for (const auto& e : events_of(text, "X"))
    if (e["tid"] == 0) steps.push_back(e["name"]);
  EXPECT_EQ(steps, (std::vector<std::string>{"decode 0", "decode 1"}));  // two recorded of three
  bool copy_args = false, kernel_args = false;
  for (const auto& e : events_of(text, "X")) {
    if (e["name"] == "prefetch w1")
      copy_args = e["args"]["bytes"] == 1000000 && e["args"]["from"] == "cpu" && e["args"]["link"] == "pcie";
    if (e["name"] == "gemv L1") kernel_args = e["args"]["kind"] == "gemv" && e["args"].contains("flops") && e["args"]["weights"][0] == "w1";
  }
  EXPECT_TRUE(copy_args) << text;
  EXPECT_TRUE(kernel_args) << text;
  EXPECT_EQ(events_of(text, "s").size(), 4u);  // two kernels waiting for their copy, in each of two steps
  EXPECT_EQ(events_of(text, "f").size(), 4u);
  // Staging grows with each prefetch and shrinks when its kernel is done.
  std::set<long long> memory;
  for (const auto& e : events_of(text, "C")) memory.insert(e["args"]["bytes"].get<long long>());
  EXPECT_GE(memory.size(), 2u);
}

// --- Through the command --------------------------------------------------------------------------

namespace fs = std::filesystem;

using testing::slurp;

// Runs `sim run ARGS --timeline FILE` and returns the timeline's text.
std::string timeline_of(const std::string& args, const std::string& name) {
  const fs::path file = fs::path(TIERSIM_BINARY_DIR) / ("timeline_" + name + ".json");
  fs::remove(file);
  const auto r = testing::run_sim("run " + args + " --timeline " + file.string());
  EXPECT_EQ(r.code, 0) << r.out;
  return slurp(file);
}

// Track names by id.
std::map<int, std::string> tracks_of(const std::string& text) {
  std::map<int, std::string> out;
  for (const auto& e : events_of(text, "M"))
    if (e["name"] == "thread_name") out[e["tid"].get<int>()] = e["args"]["name"];
  return out;
}

TEST(Timeline, ARunWithCopiesShowsEveryKindOfEvent) {
  const std::string args = R"(--trace traces/qwen.trace --policy ratio --split "cuda:0,75%;cpu,25%" --timeline-steps 2)";
  const std::string text = timeline_of(args, "copies");
  const json j = json::parse(text);
  const auto tracks = tracks_of(text);
  EXPECT_EQ(tracks.at(0), "steps");
  EXPECT_EQ(tracks.at(1), "host");
  ASSERT_FALSE(events_of(text, "M").empty());
  EXPECT_EQ(events_of(text, "M").front()["name"], "process_name");

  std::vector<std::string> steps;
  std::size_t copies_with_args = 0, kernels_with_args = 0;
  for (const auto& e : events_of(text, "X")) {
    const std::string& track = tracks.at(e["tid"].get<int>());
    if (track == "steps") {
      steps.push_back(e["name"]);
      EXPECT_TRUE(e["args"].contains("tokens"));
    }
    if (track.find("copy") != std::string::npos && e["args"].contains("bytes") && e["args"].contains("link")) ++copies_with_args;
    if (track == "cuda:0 compute" && e.contains("args") && e["args"].contains("flops") && e["args"].contains("kind")) ++kernels_with_args;
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"prefill 0", "decode 1"}));
  EXPECT_GT(copies_with_args, 0u);
  EXPECT_GT(kernels_with_args, 0u);

  // Memory counters: the compute GPU's changes as copies are staged and released; the host's is there.
  std::map<std::string, std::set<long long>> counters;
  for (const auto& e : events_of(text, "C")) counters[e["name"]].insert(e["args"]["bytes"].get<long long>());
  ASSERT_TRUE(counters.count("cuda:0 memory"));
  EXPECT_GT(counters["cuda:0 memory"].size(), 2u);
  EXPECT_TRUE(counters.count("cpu memory"));

  // Every arrow has both ends, from a copy track to a compute track.
  std::map<long long, std::pair<int, int>> ends;  // by id: starts and finishes
  for (const auto& e : events_of(text, "s")) {
    ++ends[e["id"].get<long long>()].first;
    EXPECT_NE(tracks.at(e["tid"].get<int>()).find("copy"), std::string::npos);
  }
  for (const auto& e : events_of(text, "f")) {
    ++ends[e["id"].get<long long>()].second;
    EXPECT_EQ(e["bp"], "e");
  }
  EXPECT_FALSE(ends.empty());
  for (const auto& [id, n] : ends) EXPECT_EQ(n, std::make_pair(1, 1)) << "flow " << id;

  // Identical inputs, identical bytes.
  EXPECT_EQ(timeline_of(args, "copies_again"), text);
}

TEST(Timeline, AManagedRunShowsTheDriversFaultsAndEvictions) {
  const std::string text = timeline_of("--trace traces/qwen.trace --policy um --hw rtx4070 --timeline-steps 1", "managed");
  const auto tracks = tracks_of(text);
  std::size_t faults = 0, evictions = 0;
  for (const auto& e : events_of(text, "X")) {
    if (tracks.at(e["tid"].get<int>()) != "cuda:0 managed memory") continue;
    if (e["name"] == "fault batches") {
      ++faults;
      EXPECT_GT(e["args"]["batches"].get<long long>(), 0);
      EXPECT_GT(e["args"]["blocks"].get<long long>(), 0);
      EXPECT_GT(e["args"]["migrated_bytes"].get<long long>(), 0);
    }
    if (e["name"] == "evict") {
      ++evictions;
      EXPECT_GT(e["args"]["blocks"].get<long long>(), 0);
      EXPECT_TRUE(e["args"].contains("written_back_bytes"));
    }
  }
  EXPECT_GT(faults, 0u);
  EXPECT_GT(evictions, 0u);
  // Resident managed blocks count towards the compute GPU's memory.
  std::set<long long> memory;
  for (const auto& e : events_of(text, "C"))
    if (e["name"] == "cuda:0 memory") memory.insert(e["args"]["bytes"].get<long long>());
  EXPECT_GT(memory.size(), 2u);
}

}  // namespace
}  // namespace tiersim::report
