#pragma once
// The entry points of the fuzzers, shared by the libFuzzer harnesses (tests/fuzz/fuzz_main.cpp, built
// with clang under TIERSIM_FUZZ) and the regression test that replays tests/fuzz/regressions/*/ in
// the normal suite. The contract they check is the command's: bad input ends in InputError,
// CapacityError or std::invalid_argument (exit 2 or 3). Any other exception, a crash, a sanitizer
// report or a broken invariant (__builtin_trap) is a finding.
#include <cmath>
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cli/run_inputs.hpp"
#include "cli/sweep_grid.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/units.hpp"
#include "report/grid_shard.hpp"
#include "cli/plan_shard.hpp"
#include "hardware/catalogue.hpp"
#include "policies/placement_rules/rules.hpp"
#include "policies/placement_rules/tensor_pattern.hpp"
#include "fit/oversubscribe_fit.hpp"
#include "fit/raw_csv.hpp"
#include "hardware/profile_loader.hpp"
#include "model/gguf_file.hpp"
#include "model/model_config.hpp"
#include "model/routing_file.hpp"
#include "model/hf_snapshot.hpp"
#include "model/safetensors_header.hpp"
#include "model/trace_generator.hpp"
// The split-string parser is moving under policies/placement_rules/ (the composition work).
#if __has_include("policies/placement_rules/split_string.hpp")
#include "policies/placement_rules/split_string.hpp"
#else
#include "policies/split_string.hpp"
#endif
#include "trace/trace_reader.hpp"
#include "trace/trace_writer.hpp"

namespace tiersim::fuzz {

// Runs `body`, swallowing the errors the command reports to the user.
template <typename Body>
void expect_clean_failure(Body body) {
  try {
    body();
  } catch (const InputError&) {
  } catch (const CapacityError&) {
  } catch (const std::invalid_argument&) {
  }
}

inline void check(bool ok) {
  if (!ok) __builtin_trap();
}

inline std::string text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Reads every step; a trace that reads must write back into a trace that reads the same way.
inline int trace_reader(const std::uint8_t* data, std::size_t size) {
  expect_clean_failure([&] {
    trace::TraceReader r(std::make_unique<std::istringstream>(text(data, size)), "fuzz.trace");
    std::ostringstream out;
    trace::write_header(out, r.header());
    trace::Step step;
    std::size_t steps = 0;
    while (r.next(step)) {
      trace::write_step(out, r.header(), step);
      ++steps;
    }
    trace::write_end(out);
    trace::TraceReader again(std::make_unique<std::istringstream>(out.str()), "rewritten.trace");
    check(again.header().tensors.size() == r.header().tensors.size());
    std::size_t steps_again = 0;
    while (again.next(step)) ++steps_again;
    check(steps_again == steps);
  });
  return 0;
}

// The first steps of a model's trace can be generated (a short prompt and two tokens).
inline void generate_first_step(const model::ModelConfig& m, model::GenerationOptions o = {}) {
  o.prompt_tokens = 16;
  o.decode_tokens = 2;
  model::LlmTraceGenerator gen(m, o);
  trace::Step step;
  check(gen.next(step) && !step.ops.empty());
}

// A config that parses must give a model whose trace can be generated (first steps only).
inline int model_config(const std::uint8_t* data, std::size_t size) {
  expect_clean_failure([&] {
    const model::ModelConfig m = model::parse_model_config(text(data, size), "fuzz.json");
    check(m.total_params() > 0);
    generate_first_step(m);
  });
  return 0;
}

// The first byte picks the parser; a value that parses is finite and formats.
inline int units(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string s = text(data + 1, size - 1);
  expect_clean_failure([&] {
    double v = 0;
    switch (data[0] % 5) {
      case 0: v = units::parse_bytes(s); break;
      case 1: v = units::parse_bandwidth(s); break;
      case 2: v = units::parse_duration(s); break;
      case 3: v = units::parse_flop_rate(s); break;
      default: v = units::parse_distorch_bytes(s); break;
    }
    check(std::isfinite(v) && v >= 0);
    check(!units::format_bytes(v).empty() && !units::format_duration(v).empty());
  });
  return 0;
}

inline int raw_csv(const std::uint8_t* data, std::size_t size) {
  expect_clean_failure([&] {
    const calib::RawMeasurements m = calib::parse_raw_csv(text(data, size), "fuzz.csv");
    for (const auto& r : m.rows) check(std::isfinite(r.rate()) && r.repeats >= 0);
    // The past-VRAM fit of its rows, as 64 MiB passes and as decoder passes (tiersim_fit --decoder-passes).
    hw::ManagedMemorySpec um;
    um.fault_latency = 27e-6, um.fault_block_overhead = 8e-6, um.fault_migration_bandwidth = 12e9;
    calib::fit_oversubscription(m, um);
    calib::fit_oversubscription(m, um, {m});
  });
  return 0;
}

inline int profile(const std::uint8_t* data, std::size_t size) {
  expect_clean_failure([&] { hw::parse_profile(text(data, size), "fuzz.yaml"); });
  return 0;
}

// The first byte picks the mode and the model size; the quotas come from the default preset.
inline int split_string(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const hw::HardwareProfile hw = hw::resolve_profile(hw::kDefaultProfile);
  const auto mode = static_cast<policies::SplitMode>(data[0] % 3);
  const double model_bytes = static_cast<double>(data[0]) * 1e9 / 8;
  expect_clean_failure([&] {
    const auto entries = policies::parse_split(text(data + 1, size - 1), mode);
    for (const auto& [device, bytes] : policies::split_quotas(entries, mode, model_bytes, hw)) {
      (void)device;
      check(std::isfinite(bytes) && bytes >= 0);
    }
  });
  return 0;
}

// A GGUF header that reads has whole, named tensors; one that gives a model config gives a model
// whose trace can be generated (first steps only).
inline int gguf_header(const std::uint8_t* data, std::size_t size) {
  expect_clean_failure([&] {
    std::istringstream in(text(data, size));
    const model::gguf::FileHeader h = model::gguf::read_header(in, "fuzz.gguf");
    check(h.version == 2 || h.version == 3);
    check(h.data_offset % h.alignment == 0 && h.data_offset <= size + h.alignment);
    for (const auto& t : h.tensors) check(!t.name.empty() && !t.type.empty() && t.shape.size() <= 4 && t.bytes > 0);
    const model::ModelConfig m = model::gguf::model_config(h, "fuzz.gguf");
    check(m.total_params() > 0);
    // As sim --model FILE.gguf generates it: each weight the file's own tensor.
    model::GenerationOptions o;
    o.dtype = model::WeightDtype::Gguf;
    o.gguf = "GGUF";
    o.gguf_file = std::make_shared<model::gguf::FileHeader>(h);
    o.gguf_path = "fuzz.gguf";
    generate_first_step(m, o);
  });
  return 0;
}

// A device map that parses places modules on devices tiersim names (a GPU index, the CPU, the disk).
inline int device_map(const std::uint8_t* data, std::size_t size) {
  expect_clean_failure([&] {
    for (const auto& [module, device] : strategy::parse_device_map_json(text(data, size), "fuzz.json")) {
      (void)module;
      check(device >= placement::kDisk && device < 1024);
    }
  });
  return 0;
}

// A catalogue composition (--hw 2xrtx3090+nvlink+ram128) that composes gives a profile the strict loader reads, with
// a canonical spelling that composes to itself.
inline int composition(const std::uint8_t* data, std::size_t size) {
  expect_clean_failure([&] {
    const hw::Composed c = hw::compose(text(data, size));
    check(c.count >= 1 && !c.canonical.empty() && !c.gpu.empty());
    check(hw::compose(c.canonical).canonical == c.canonical);
  });
  return 0;
}

// A sweep's grid (--ngl 10,20,30, --offload-gb 0:8:0.5): the arguments are the input's lines; a grid that expands
// has points within its bound, each with one value per axis.
inline int grid_spec(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  const std::string s = text(data, size);
  for (std::size_t start = 0; start <= s.size();) {
    const std::size_t nl = s.find('\n', start);
    args.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    start = nl == std::string::npos ? s.size() + 1 : nl + 1;
  }
  expect_clean_failure([&] {
    const app::Grid g = app::expand_grid(args);
    check(!g.points.empty() && g.points.size() <= 100000);
    for (const auto& p : g.points) check(p.values.size() == g.axes.size() && p.args.size() == args.size());
  });
  return 0;
}

// An -ot pattern (the first line) against tensor names (the other lines): compiles or is refused with a reason, and
// matching ends; a match of the pattern's own literal text is found.
inline int ot_pattern(const std::uint8_t* data, std::size_t size) {
  const std::string s = text(data, size);
  const std::size_t nl = s.find('\n');
  const std::string pattern = s.substr(0, nl);
  expect_clean_failure([&] {
    const strategy::TensorPattern p(pattern);
    // A pattern without metacharacters is a literal: it matches itself.
    if (pattern.find_first_of("\\.*+?()[]{}|^$") == std::string::npos) check(p.search(pattern));
    for (std::size_t start = nl == std::string::npos ? s.size() : nl + 1; start < s.size();) {
      const std::size_t end = std::min(s.find('\n', start), s.size());
      (void)p.search(std::string_view(s).substr(start, end - start));
      start = end + 1;
    }
  });
  return 0;
}

// A result's "inputs" as sim run --config RESULT.json reads them: a config that reads writes back (inputs_to_json, as
// the re-run's own result holds it) into a config that reads to the same inputs. The files it names (a trace, a
// model, a routing file) are read as the command reads them: relative paths from the repository root, where
// run_fuzzers.sh and the corpus replay run.
inline int run_config(const std::uint8_t* data, std::size_t size) {
  expect_clean_failure([&] {
    const app::RunInputs r = app::inputs_from_config_text(text(data, size), "fuzz.json");
    check(r.trace.trace_path.empty() != r.trace.model_path.empty());
    const std::string once = dump_json(nlohmann::ordered_json{{"inputs", app::inputs_to_json(r)}});
    const app::RunInputs again = app::inputs_from_config_text(once, "rewritten.json");
    check(dump_json(nlohmann::ordered_json{{"inputs", app::inputs_to_json(again)}}) == once);
  });
  return 0;
}

// A routing replay file (--routing replay:FILE) that reads holds, for each sequence, tokens x layers x
// experts_per_token distinct experts below num_experts; a small one drives a mixture-of-experts model of its shape
// through its first steps (every token it routes) with no error at all: any exception there is a finding.
inline int routing_file(const std::uint8_t* data, std::size_t size) {
  std::shared_ptr<model::RoutingTable> t;
  expect_clean_failure(
      [&] { t = std::make_shared<model::RoutingTable>(model::parse_routing_file(text(data, size), "fuzz.json")); });
  if (!t) return 0;
  check(t->experts_per_token >= 1 && t->experts_per_token <= t->num_experts && t->layers >= 1);
  check(!t->tokens.empty() && t->tokens.size() == t->experts.size());
  for (std::size_t s = 0; s < t->tokens.size(); ++s) {
    check(t->tokens[s] >= 1);
    check(t->experts[s].size() == std::uint64_t{t->tokens[s]} * t->layers * t->experts_per_token);
    for (std::uint32_t tok = 0; tok < t->tokens[s]; ++tok)
      for (std::uint32_t l = 0; l < t->layers; ++l) {
        const std::uint16_t* e = t->at(s, tok, l);
        for (std::uint32_t j = 0; j < t->experts_per_token; ++j) {
          check(e[j] < t->num_experts);
          for (std::uint32_t i = 0; i < j; ++i) check(e[i] != e[j]);
        }
      }
  }
  if (t->layers > 4 || t->num_experts > 64 || t->tokens.front() < 2) return 0;
  const model::ModelConfig m = model::parse_model_config(
      R"({"model_type": "qwen3_moe", "name": "tiny-moe", "hidden_size": 64, "intermediate_size": 128,
          "moe_intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
          "vocab_size": 100, "num_hidden_layers": )" +
          std::to_string(t->layers) + R"(, "num_experts": )" + std::to_string(t->num_experts) +
          R"(, "num_experts_per_tok": )" + std::to_string(t->experts_per_token) + "}",
      "tiny-moe.json");
  model::GenerationOptions o;
  o.prompt_tokens = t->tokens.front() - 1;
  o.decode_tokens = 1;
  o.routing_replay = t;
  o.routing_path = "fuzz.json";
  model::LlmTraceGenerator gen(m, o);
  trace::Step step;
  std::size_t steps = 0;
  while (gen.next(step)) ++steps;
  check(steps == 2);  // the prompt, then the one decoded token
  return 0;
}

// A safetensors file's header (8-byte length, JSON), read as --model DIR reads each file: one that reads describes
// tensors lying end to end from 0, each its shape's elements x its dtype's bits, within the bytes given. An input that
// starts with '{' is a snapshot's model.safetensors.index.json instead (one fuzzer for the folder's two formats, so
// that CI's rounds stay seven): every file it names is a plain .safetensors name holding at least one tensor.
inline int safetensors_header(const std::uint8_t* data, std::size_t size) {
  if (size > 0 && data[0] == '{') {
    expect_clean_failure([&] {
      for (const auto& [file, tensors] : model::parse_safetensors_index(text(data, size), "fuzz.index.json"))
        check(file.size() > 12 && file.find('/') == std::string::npos && !tensors.empty());
    });
    return 0;
  }
  expect_clean_failure([&] {
    std::istringstream in(text(data, size));
    const model::safetensors::Header h = model::safetensors::read_header(in, size, "fuzz.safetensors");
    check(h.header_bytes <= size - 8 && h.data_bytes <= size - 8 - h.header_bytes);
    std::uint64_t at = 0;
    for (const auto& t : h.tensors) {
      check(!t.dtype.empty() && t.elements * model::safetensors::dtype_bits(t.dtype) == t.bytes * 8);
      at += t.bytes;
    }
    check(at == h.data_bytes);
  });
  return 0;
}

// A grid shard file (sim merge's input): one that reads writes back to the same shard, and as the whole grid (it is
// shard 1/1 when it says so) into every format without an error.
inline int grid_shard(const std::uint8_t* data, std::size_t size) {
  expect_clean_failure([&] {
    const report::GridShard s = report::read_grid_shard(text(data, size), "fuzz.jsonl");
    check(s.k >= 1 && s.k <= s.n && s.rows.size() <= s.points);
    std::ostringstream again;
    report::write_grid_shard(again, s);
    const report::GridShard t = report::read_grid_shard(again.str(), "again.jsonl");
    check(t.rows.size() == s.rows.size() && t.axes == s.axes && t.first == s.first);
    std::vector<std::string> axes;
    const auto rows = report::merge_grid_shards({{"fuzz.jsonl", s}}, axes);  // refused unless it is shard 1/1
    for (auto format : {report::GridFormat::Csv, report::GridFormat::Jsonl, report::GridFormat::Markdown}) {
      std::ostringstream out;
      report::write_grid(out, format, axes, rows);
    }
  });
  return 0;
}

// A plan shard file (sim merge's input for sim plan --shard): one that reads writes back to the same rows, and, as the
// whole plan when it is shard 1/1, is ranked and written in every format without an error.
inline int plan_shard(const std::uint8_t* data, std::size_t size) {
  expect_clean_failure([&] {
    const app::PlanShard s = app::read_plan_shard(text(data, size), "fuzz.jsonl");
    check(s.k >= 1 && s.k <= s.n && s.rows.size() <= s.candidates);
    std::ostringstream again;
    app::write_plan_shard(again, s);
    const app::PlanShard t = app::read_plan_shard(again.str(), "again.jsonl");
    check(t.rows.size() == s.rows.size() && t.hardware == s.hardware && t.first == s.first);
    app::PlanShard whole;
    auto rows = app::merge_plan_shards({{"fuzz.jsonl", s}}, whole);  // refused unless it is shard 1/1
    const app::PlanPricer price = [&](const std::string& h) { return whole.prices.at(h); };
    rows = app::finish_plan(std::move(rows), whole.hardware, whole.goal, price);
    for (const char* format : {"md", "csv", "jsonl"}) {
      std::ostringstream out;
      app::write_plan(out, format, rows, whole.goal);
    }
  });
  return 0;
}

struct Target {
  const char* name;
  int (*run)(const std::uint8_t*, std::size_t);
};
inline constexpr Target kTargets[] = {{"trace_reader", trace_reader}, {"model_config", model_config},
                                      {"units", units},               {"raw_csv", raw_csv},
                                      {"profile", profile},           {"split_string", split_string},
                                      {"gguf_header", gguf_header},   {"device_map", device_map},
                                      {"composition", composition},   {"grid_spec", grid_spec},
                                      {"ot_pattern", ot_pattern},     {"run_config", run_config},
                                      {"routing_file", routing_file}, {"safetensors_header", safetensors_header},
                                      {"grid_shard", grid_shard},         {"plan_shard", plan_shard}};

}  // namespace tiersim::fuzz
