#include "cli/run_inputs.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/allocator_replay.hpp"
#include "hardware/profile_writer.hpp"
#include "config/strict_reader.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "hardware/profile_loader.hpp"
#include "model/model_family.hpp"
#include "model/hf_snapshot.hpp"
#include "model/shipped_models.hpp"
#include "policies/strategy/presets.hpp"
#include "runtime/runtime_loader.hpp"

namespace tiersim::app {
namespace {

using nlohmann::ordered_json;

ordered_json part_to_json(const strategy::PartSpec& p) {
  ordered_json j = {{"name", p.name}};
  for (const auto& [k, v] : p.options) j[k] = v;
  return j;
}

strategy::PartSpec part_from(config::Section& parent, const std::string& key) {
  config::Section s = parent.child(key);
  strategy::PartSpec p;
  p.name = s.text("name");
  p.origin = s.file();
  for (const std::string& k : s.keys())
    if (k != "name") p.options[k] = s.text(k);
  s.finish();
  return p;
}

// FNV-1a 64 of a file's bytes, in hex: a re-run checks that the trace or model it reads is the one the
// result was computed from (a path alone does not say so).
// FNV-1a of a file's first `limit` bytes (all of it by default): a .gguf model is named by its header,
// which holds every number tiersim reads from it, not by gigabytes of weights.
std::string file_digest(const std::string& path, std::uint64_t limit = UINT64_MAX) {
  // A regular file only: a result naming /dev/zero or a FIFO as its trace would never finish its digest.
  const auto file = io::open_file(path, "", "input file (to check its digest)", true);
  std::ifstream& f = *file;
  std::uint64_t h = 1469598103934665603ull;
  char buf[65536];
  std::uint64_t left = limit;
  while (left > 0 && (f.read(buf, static_cast<std::streamsize>(std::min<std::uint64_t>(sizeof buf, left))) || f.gcount() > 0)) {
    for (std::streamsize i = 0; i < f.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[i]);
      h *= 1099511628211ull;
    }
    left -= static_cast<std::uint64_t>(f.gcount());
    if (!f) break;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// FNV-1a 64 of a text in memory, in hex: a shipped model's config (model::shipped_model), as file_digest its file's.
std::string text_digest(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// The digest a generated trace's model is named by: the whole description (a shipped one's text), or a .gguf file's
// header.
std::string model_digest(const TraceSpec& spec) {
  if (const auto* shipped = model::shipped_model(spec.model_path)) return text_digest(shipped->text);
  const auto& gguf = spec.generation.gguf_file;
  return gguf ? file_digest(spec.model_path, gguf->data_offset) : file_digest(model::model_config_file(spec.model_path));
}

// Whether the generated trace is a diffusion transformer's (its options differ from a decoder's).
bool is_diffusion(const TraceSpec& spec) {
  return !spec.model_path.empty() && !is_gguf_path(spec.model_path) &&
         model::is_diffusion(model::model_family(spec.model_path));
}

}  // namespace

ordered_json inputs_to_json(const RunInputs& in) {
  ordered_json trace;
  if (!in.trace.trace_path.empty()) {
    trace["path"] = in.trace.trace_path;
    trace["fnv1a64"] = file_digest(in.trace.trace_path);
  } else {
    trace["model"] = in.trace.model_path;
    trace["fnv1a64"] = model_digest(in.trace);
    trace["dtype"] = model::dtype_name(in.trace.generation);
    trace["batch"] = in.trace.generation.batch;
    if (is_diffusion(in.trace)) {
      const auto& im = in.trace.generation.image;
      trace["resolution"] = std::to_string(im.width) + "x" + std::to_string(im.height);
      if (im.has_reference()) trace["reference"] = std::to_string(im.reference_width) + "x" + std::to_string(im.reference_height);
      trace["steps"] = im.steps;
      trace["text_tokens"] = im.text_tokens;
      if (im.negative_tokens != 0) trace["negative_tokens"] = im.negative_tokens;  // Qwen-Image's
      if (im.frames != 1) trace["frames"] = im.frames;
      if (im.start_image) trace["start_image"] = true;
      if (im.switch_step != 0) trace["switch_step"] = im.switch_step;
      trace["cfg"] = im.cfg;
    } else {
      trace["prompt"] = in.trace.generation.prompt_tokens;
      trace["decode"] = in.trace.generation.decode_tokens;
    }
    if (in.trace.generation.ubatch > 0) trace["ubatch"] = in.trace.generation.ubatch;
    if (in.trace.generation.routing_zipf > 0) trace["routing_zipf"] = in.trace.generation.routing_zipf;
    if (in.trace.generation.routing_seed != 0) trace["routing_seed"] = in.trace.generation.routing_seed;
    if (in.trace.generation.experts != model::GenerationOptions::Experts::GroupedMm)
      trace["experts_implementation"] = model::to_string(in.trace.generation.experts);
    if (in.trace.generation.routing_replay) {
      trace["routing_replay"] = in.trace.generation.routing_path;
      trace["routing_fnv1a64"] = file_digest(in.trace.generation.routing_path);
    }
  }
  ordered_json strategy = {{"preset", in.strategy.preset},
                           {"custom", in.strategy.custom},
                           {"placement", part_to_json(in.strategy.placement)},
                           {"memory", part_to_json(in.strategy.memory)},
                           {"offload", part_to_json(in.strategy.offload)},
                           {"platform", part_to_json(in.strategy.platform)}};
  ordered_json j = {{"trace", trace},
                    {"strategy", strategy},
                    {"engine", in.engine == EngineKind::Event ? "event" : "analytic"},
                    {"lengths", in.fresh_lengths ? "fresh" : "warm"},
                    {"hardware_origin", in.hw.origin},
                    {"hardware", config::profile_to_json(in.hw)},
                    {"runtime_origin", in.runtime.origin},
                    {"runtime", config::runtime_to_json(in.runtime)}};
  if (!in.alloc_conf.empty()) j["alloc_conf"] = in.alloc_conf;  // absent: unset (and results before it)
  if (in.image_job) j["image_job"] = {{"text_encoder_dtype", in.image_job->text_encoder_dtype}};
  if (in.sampler_job) j["sampler_job"] = true;
  if (in.video_job) j["video_job"] = {{"text_encoder_dtype", in.video_job->text_encoder_dtype}};
  return j;
}

std::vector<std::string> job_text_encoder_dtypes(const std::string& model_path) {
  if (!model_path.empty() && model::model_family(model_path) == model::ModelFamily::QwenImage) return {"fp8_scaled", "bf16"};
  return {"fp16", "fp8"};
}

RunInputs inputs_from_config(const std::string& path) {
  return inputs_from_config_text(io::read_file(path, "--config", "config (a result's JSON from sim run --json)"), path);
}

RunInputs inputs_from_config_text(const std::string& text, const std::string& path) {
  const YAML::Node root = config::parse_document(text, path);
  if (!root || !root.IsMap()) throw InputError(path, 0, "", "expected a JSON object (a result of sim run --json)");
  config::Section top(root, "", path);
  config::Section in = top.child("inputs");  // a result's other keys are outputs, not read
  // A file the result names must be a regular file (a FIFO or /dev/zero would block or never end the digest read
  // first); refused naming this config's key, the path and why.
  auto require_file = [&](config::Section& s, const std::string& key, const std::string& file, const std::string& what) {
    try {
      io::require_regular_file(file, "", what);
    } catch (const InputError& e) {
      s.fail(key, "'" + file + "' " + e.message());
    }
  };
  RunInputs r;
  {
    config::Section t = in.child("trace");
    if (t.has("path")) {
      r.trace.trace_path = t.text("path");
      require_file(t, "path", r.trace.trace_path, "trace file");
      if (file_digest(r.trace.trace_path) != t.text("fnv1a64"))
        t.fail("fnv1a64", "the trace '" + r.trace.trace_path + "' is not the file this result was computed from");
    } else {
      r.trace.model_path = t.text("model");
      if (!model::shipped_model(r.trace.model_path) && !model::is_snapshot_dir(r.trace.model_path))
        require_file(t, "model", r.trace.model_path, "model file");
      if (is_gguf_path(r.trace.model_path)) {
        use_gguf_file(r.trace);
        if (model::dtype_name(r.trace.generation) != t.text("dtype")) t.fail("dtype", "is not the .gguf file's type");
      } else {
        try {
          model::set_dtype(r.trace.generation, t.text("dtype"));
        } catch (const std::invalid_argument& e) {
          t.fail("dtype", e.what());
        }
      }
      if (model_digest(r.trace) != t.text("fnv1a64"))
        t.fail("fnv1a64", "the model '" + r.trace.model_path + "' is not the file this result was computed from");
      r.trace.generation.batch = static_cast<std::uint32_t>(t.integer("batch", 1, 1 << 20));
      if (is_diffusion(r.trace)) {
        auto& im = r.trace.generation.image;
        const std::string res = t.text("resolution");
        char extra = 0;
        if (std::sscanf(res.c_str(), "%ux%u%c", &im.width, &im.height, &extra) != 2)
          t.fail("resolution", "expected WIDTHxHEIGHT, got '" + res + "'");
        if (t.has("reference")) {
          const std::string ref = t.text("reference");
          if (std::sscanf(ref.c_str(), "%ux%u%c", &im.reference_width, &im.reference_height, &extra) != 2 ||
              im.reference_width == 0 || im.reference_height == 0)
            t.fail("reference", "expected WIDTHxHEIGHT, got '" + ref + "'");
        }
        im.steps = static_cast<std::uint32_t>(t.integer("steps", 1, 100000));
        im.text_tokens = static_cast<std::uint32_t>(t.integer("text_tokens", 1, 4096));
        // Absent for the families whose encoders pad (FLUX, Wan); Qwen-Image's results always write it.
        im.negative_tokens = t.has("negative_tokens") ? static_cast<std::uint32_t>(t.integer("negative_tokens", 1, 4096)) : 0;
        im.frames = t.has("frames") ? static_cast<std::uint32_t>(t.integer("frames", 1, 100001)) : 1;
        im.start_image = t.has("start_image") && t.flag("start_image");
        im.switch_step = t.has("switch_step") ? static_cast<std::uint32_t>(t.integer("switch_step", 1, 100000)) : 0;
        im.cfg = t.number("cfg", 0, 100);
        r.trace.generation.prompt_tokens = r.trace.generation.decode_tokens = 0;
      } else {
        r.trace.generation.prompt_tokens = static_cast<std::uint32_t>(t.integer("prompt", 0, 1 << 24));
        r.trace.generation.decode_tokens = static_cast<std::uint32_t>(t.integer("decode", 0, 1 << 24));
      }
      if (t.has("ubatch")) r.trace.generation.ubatch = static_cast<std::uint32_t>(t.integer("ubatch", 1, 1 << 24));
      if (t.has("routing_zipf")) r.trace.generation.routing_zipf = t.number("routing_zipf", 0.1, 4);
      if (t.has("routing_replay")) {
        r.trace.generation.routing_path = t.text("routing_replay");
        require_file(t, "routing_replay", r.trace.generation.routing_path, "routing file");
        if (file_digest(r.trace.generation.routing_path) != t.text("routing_fnv1a64"))
          t.fail("routing_fnv1a64", "the routing file '" + r.trace.generation.routing_path +
                                        "' is not the file this result was computed from");
        r.trace.generation.routing_replay =
            std::make_shared<model::RoutingTable>(model::load_routing_file(r.trace.generation.routing_path));
      }
      if (t.has("routing_seed"))
        r.trace.generation.routing_seed = static_cast<std::uint64_t>(t.integer("routing_seed", 0, 2147483647));
      if (t.has("experts_implementation") && !model::parse_experts(t.text("experts_implementation"), r.trace.generation.experts))
        t.fail("experts_implementation", "grouped_mm or eager, not '" + t.text("experts_implementation") + "'");
    }
    if (!r.trace.model_path.empty()) {
      // The generation settings get the generator's checks, named by this file's keys (not the flags').
      try {
        (void)open_trace(r.trace)->header();
      } catch (const InputError& e) {
        static const std::map<std::string, std::string> keys{
            {"--resolution", "resolution"}, {"--reference", "reference"}, {"--frames", "frames"}, {"--steps", "steps"}, {"--text-tokens", "text_tokens"},
            {"--negative-tokens", "negative_tokens"},
            {"--batch", "batch"},           {"--dtype", "dtype"},   {"--cfg", "cfg"},     {"--routing", "routing_replay"},
            {"--experts-impl", "experts_implementation"}, {"--start-image", "start_image"},
            {"--switch-step", "switch_step"}};
        const auto it = keys.find(e.key());
        if (it != keys.end() && t.has(it->second)) t.fail(it->second, e.message());
        throw;
      }
    }
    t.finish();
  }
  {
    config::Section s = in.child("strategy");
    r.strategy.preset = s.text("preset");
    if (!r.strategy.preset.empty()) {
      try {
        strategy::preset_spec(r.strategy.preset);
      } catch (const InputError& e) {
        s.fail("preset", e.message());
      }
    }
    r.strategy.custom = s.flag("custom");
    r.strategy.placement = part_from(s, "placement");
    r.strategy.memory = part_from(s, "memory");
    r.strategy.offload = part_from(s, "offload");
    if (s.has("platform")) r.strategy.platform = part_from(s, "platform");  // results before it: linux
    s.finish();
  }
  const std::string engine = in.text("engine");
  if (engine != "event" && engine != "analytic") in.fail("engine", "must be 'event' or 'analytic'");
  r.engine = engine == "event" ? EngineKind::Event : EngineKind::Analytic;
  const std::string lengths = in.text("lengths");
  if (lengths != "warm" && lengths != "fresh") in.fail("lengths", "must be 'warm' or 'fresh'");
  r.fresh_lengths = lengths == "fresh";
  const std::string hw_origin = in.text("hardware_origin");
  r.hw = hw::parse_profile_node(in.child("hardware").node(), path);
  r.hw.origin = hw_origin;
  const std::string rt_origin = in.text("runtime_origin");
  r.runtime = runtime::parse_runtime_node(in.child("runtime").node(), path);
  r.runtime.origin = rt_origin;
  if (in.has("alloc_conf")) {
    r.alloc_conf = in.text("alloc_conf");
    try {
      check_alloc_conf(r.alloc_conf, "alloc_conf");
    } catch (const InputError& e) {
      in.fail("alloc_conf", e.message());
    }
  }
  for (const char* key : {"image_job", "video_job"}) {
    if (!in.has(key)) continue;
    config::Section j = in.child(key);
    const std::string d = j.text("text_encoder_dtype");
    const std::vector<std::string> allowed = job_text_encoder_dtypes(r.trace.model_path);
    if (std::find(allowed.begin(), allowed.end(), d) == allowed.end())
      j.fail("text_encoder_dtype", "must be " + allowed[0] + " or " + allowed[1] + ", not '" + d + "'");
    (key[0] == 'i' ? r.image_job : r.video_job) = ImageJobOptions{d};
    j.finish();
  }
  if (const std::string why = gguf_runtime_refusal(r.trace, r.runtime); !why.empty()) {
    config::Section t = in.child("trace");  // named by this file's key, as the run would refuse it
    t.fail("model", "'" + r.trace.model_path + "' " + why);
  }
  r.sampler_job = in.has("sampler_job") && in.flag("sampler_job");
  // The command line's rule: one job at a time.
  if (r.video_job && r.sampler_job) in.fail("video_job", "includes the sampler nodes of sampler_job: give one of the two");
  if (r.video_job && r.image_job) in.fail("video_job", "is a Wan video's job, image_job a FLUX or Qwen-Image image's: give one of the two");
  in.finish();
  return r;
}

}  // namespace tiersim::app
