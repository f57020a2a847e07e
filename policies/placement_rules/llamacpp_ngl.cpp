// `llamacpp.ngl`: llama.cpp's layer assignment for `-ngl N` (ggml-org/llama.cpp, src/llama-model.cpp
// llama_model::load_tensors, the get_layer_buft_list lambda and the dev_input / dev_layer / dev_output
// assignments; read 2026-11 at 00342301). The output layer (final norm + output matrix) is one more
// slot, il = n_layer, after the repeating layers:
//   i_gpu_start    = max(n_layer + 1 - N, 0)       (before Dec 2025, PR #18148: max(n_layer - N, 0))
//   act_gpu_layers = min(N, n_layer + 1)
//   slot il is on a GPU iff il >= i_gpu_start and il - i_gpu_start < act_gpu_layers; which GPU:
//   upper_bound(splits, (il - i_gpu_start) / act_gpu_layers), splits the cumulative, normalised -ts
//   proportions (default: each GPU's free memory, here memory less the profile's reserve);
//   the input layer (token embedding) always stays on the CPU ("very little benefit to offloading").
// So `-ngl N` keeps the *last* layers on the GPU and, since PR #18148, offloads the output layer first;
// `output-first=off` is the older rule (the output layer only with N > n_layer). Layers on the CPU run
// there (the preset's offload path is `execute`); the KV cache follows each layer's device. Options:
// ngl=N (default: every layer, llama.cpp's -ngl 999), output-first=on|off (on), ts=P0,P1,... (-ts),
// kv-offload=on|off (on; off is --no-kv-offload: every layer's KV cache in host memory, its attention run
// by the CPU), ot="REGEX=BUFT,..." (-ot/--override-tensor: llama_model_loader::create_tensor searches each
// tensor's name with each std::regex in turn, the first match wins; tiersim matches them with RE2, tensor_pattern.hpp; BUFT is CPU or CUDA0, CUDA1, ...; a
// tensor overridden to CPU goes to the CPU's buffer list, whose first entry is the GPU's pinned host
// buffer). The KV cache stays on the layer's -ngl device whatever its tensors' overrides.
// --fit (fit=on, llama-cli's and llama-server's default; llama-bench never fits): before placing,
// llama.cpp's memory projection and common/fit.cpp's steps (llamacpp_fit.hpp) choose the context
// (ctx=N is -c, 0 = the training context) and, when ngl is not given, -ngl (and -ts on several GPUs),
// so that every GPU keeps fit-target MiB (1024) free; fit-ctx=N (4096) is the smallest context it sets.
// The projection, per GPU (checked against llama-fit-params --fit-print in tests/policies):
//   model   = the weights placed there (-ngl, -ts, -ot);
//   context = the KV cache of its layers for the context rounded up to 256 tokens (f16 K and V);
//   compute = on the GPU with the output layer, fp32 logits and hidden states for a micro-batch,
//             4 x ubatch x (vocab + hidden); with the output layer on the CPU, the first GPU holds
//             the same plus the output matrix that op offload copies in (llama.cpp's default);
//             a GPU with layers but not the output, 4 x ubatch x (2 x ffn + hidden) (assumed: no
//             several-GPU projection was measured).
// The fit reads the model's sizes from the trace's meta (vocab_size, hidden_size, intermediate_size,
// context_length, ubatch: written by the generator); a trace without them is placed without fitting,
// and the report says so. The KV cache a placement counts (memory per tier, capacity) is llama.cpp's
// allocation for the context (Placement::kv_allocation_scale); attention reads the run's own tokens. A
// tied output matrix: llama.cpp loads token_embd again for the output layer,
// and a GGUF trace has that copy as a tensor of its own (model/trace_generator.cpp); a trace that ties
// them (a bf16 one) is refused under this rule.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"
#include "policies/placement_rules/llamacpp_fit.hpp"
#include "policies/placement_rules/rules.hpp"
#include "policies/placement_rules/tensor_pattern.hpp"

namespace tiersim::strategy {
namespace {

class LlamaCppNgl final : public PlacementRule {
 public:
  explicit LlamaCppNgl(config::Section& o) {
    if (o.has("ngl")) ngl_ = static_cast<int>(o.integer("ngl", 0, 100000));
    if (o.has("output-first")) {
      const std::string v = o.text("output-first");
      if (v != "on" && v != "off") o.fail("output-first", "must be 'on' or 'off', not '" + v + "'");
      output_first_ = v == "on";
    }
    if (o.has("kv-offload")) {
      const std::string v = o.text("kv-offload");
      if (v != "on" && v != "off") o.fail("kv-offload", "must be 'on' or 'off' (--no-kv-offload), not '" + v + "'");
      kv_offload_ = v == "on";
    }
    if (o.has("ot")) {
      // As common/arg.cpp parse_tensor_buffer_overrides: split at ',', then at the first '='.
      const std::string text = o.text("ot");
      std::size_t start = 0;
      while (true) {
        const std::size_t sep = text.find(',', start);
        const std::string item = text.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
        const std::size_t eq = item.find('=');
        if (eq == std::string::npos) o.fail("ot", "each override is REGEX=BUFFER (blk\\.1[0-9]\\.ffn_.*=CPU), got '" + item + "'");
        const std::string buffer = item.substr(eq + 1);
        placement::DeviceId device = placement::kCpu;
        if (buffer != "CPU") {
          // Exactly CUDA followed by a device number, as ggml names its buffer types.
          const std::string digits = buffer.rfind("CUDA", 0) == 0 ? buffer.substr(4) : std::string();
          const bool number = !digits.empty() && digits.size() <= 2 &&
                              digits.find_first_not_of("0123456789") == std::string::npos &&
                              (digits.size() == 1 || digits[0] != '0');
          const int n = number ? std::stoi(digits) : -1;
          if (n < 0 || n > 63)
            o.fail("ot", "unknown buffer type '" + buffer + "' in '" + item + "': CPU, CUDA0, CUDA1, ...");
          device = n;
        }
        try {
          overrides_.push_back({TensorPattern(item.substr(0, eq)), device});
        } catch (const std::invalid_argument& e) {
          o.fail("ot", "the pattern '" + shown(item.substr(0, eq)) + "' " + e.what());
        }
        if (sep == std::string::npos) break;
        start = sep + 1;
      }
    }
    if (o.has("fit")) {
      const std::string v = o.text("fit");
      if (v != "on" && v != "off") o.fail("fit", "must be 'on' or 'off' (--fit), not '" + v + "'");
      fit_ = v == "on";
    }
    if (o.has("ctx")) ctx_ = static_cast<std::uint32_t>(o.integer("ctx", 0, 1 << 24));
    if (o.has("fit-ctx")) fit_ctx_ = static_cast<std::uint32_t>(o.integer("fit-ctx", 1, 1 << 24));
    if (o.has("fit-target")) {
      const std::string text = o.text("fit-target");
      std::size_t start = 0;
      if (text.find_first_not_of(",/") == std::string::npos) o.fail("fit-target", "no value in '" + text + "'");
      while (true) {
        const std::size_t sep = text.find_first_of(",/", start);
        const std::string item = text.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
        // As common/arg.cpp: split at runs of ',' and '/'.
        if (!item.empty()) {
          const bool digits = item.size() <= 9 && item.find_first_not_of("0123456789") == std::string::npos;
          if (!digits)
            o.fail("fit-target", "MiB to leave free per GPU, integers separated by ',' (1024 or 2048,1024), got '" + item + "'");
          fit_target_mib_.push_back(std::stoll(item));
        }
        if (sep == std::string::npos) break;
        start = sep + 1;
      }
    }
    if (o.has("ts")) {
      const std::string text = o.text("ts");
      std::size_t start = 0;
      while (start <= text.size()) {
        const std::size_t sep = text.find_first_of(",/", start);
        const std::string item = text.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
        try {
          std::size_t used = 0;
          const double v = std::stod(item, &used);
          if (used != item.size() || !(v >= 0) || !std::isfinite(v)) throw std::invalid_argument("");
          ts_.push_back(v);
        } catch (const std::exception&) {
          o.fail("ts", "proportions are numbers separated by ',' or '/' (-ts 3,1), got '" + item + "'");
        }
        if (sep == std::string::npos) break;
        start = sep + 1;
      }
      double sum = 0;
      for (double v : ts_) sum += v;
      if (!(sum > 0)) o.fail("ts", "the proportions must not all be 0");
    }
  }

  std::vector<placement::DeviceId> place(const trace::Header& header, const hw::HardwareProfile& hw, const Completion&,
                                         Resolved& resolved) const override {
    const Effective e = effective(header, hw, &resolved);
    std::vector<placement::DeviceId> homes = layer_homes(header, hw, e, &resolved);
    // -ot: the first pattern that a weight's name matches decides its buffer.
    std::size_t moved = 0;
    double moved_bytes = 0;
    const std::vector<Override>& overrides = e.overrides.empty() ? overrides_ : e.overrides;
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      const auto to = override_of(llamacpp_name(t.name), overrides);
      if (!to || *to == homes[t.id]) continue;
      if (*to >= hw.gpu.count)
        throw InputError("", 0, "ot", "'" + placement::device_name(*to) + "' (CUDA" + std::to_string(*to) +
                                          ") for " + t.name + ", but '" + hw.name + "' has " +
                                          std::to_string(hw.gpu.count) + " GPU(s)");
      homes[t.id] = *to;
      ++moved;
      moved_bytes += static_cast<double>(t.bytes);
    }
    if (!overrides.empty())
      resolved.emplace_back("-ot", std::to_string(moved) + " tensors (" + units::format_bytes(moved_bytes) +
                                       ") placed by " + std::to_string(overrides.size()) + " pattern(s)" +
                                       (e.overrides.empty() ? "" : " that --fit chose"));
    return homes;
  }

  void annotate(const trace::Header& header, const hw::HardwareProfile& hw, const std::string&, placement::Placement& p,
                Resolved& resolved) const override {
    const Effective e = effective(header, hw, nullptr);
    const std::vector<placement::DeviceId> layers = layer_homes(header, hw, e, nullptr);
    // The KV cache llama.cpp allocates: the whole context (-c), not just the run's tokens.
    std::string missing;
    const std::optional<Sizes> z = sizes(header, missing);
    if (e.kv_tokens > 0 && z) {
      if (z->tokens > e.kv_tokens)
        throw InputError("", 0, "ctx",
                         "the run's " + std::to_string(static_cast<long long>(z->tokens)) +
                             " tokens (batch x (prompt + decode)) do not fit a context of " + std::to_string(e.kv_tokens) +
                             " (-c): llama.cpp would stop when its KV cache is full");
      p.kv_allocation_scale = e.kv_tokens / z->tokens;
      resolved.emplace_back("-c", std::to_string(e.kv_tokens) + " tokens of KV cache allocated (the run uses " +
                                      std::to_string(static_cast<long long>(z->tokens)) + ")");
    } else {
      resolved.emplace_back("-c", "unknown (the trace has no '" + (missing.empty() ? std::string("context_length") : missing) +
                                      "' meta" + (ctx_ > 0 ? "" : " and no ctx= was given") +
                                      "): the KV cache counted is the run's own tokens");
    }
    // --no-kv-offload: every KV cache in host memory; a GPU layer's attention still runs on the GPU, the cache
    // copied in (ExecuteOptions::kv_copied_in).
    if (!kv_offload_) {
      for (const auto& t : header.tensors)
        if (t.kind == trace::TensorKind::KvCache) p.kv_home[t.layer] = placement::kCpu;
      p.execute.kv_copied_in = true;
    }
    // Overrides that move a weight, under the execute path (layers run where their weights live): weights
    // stay where -ngl and the patterns put them (the execute path moved layers whole, to the device with
    // most of their bytes, which llama.cpp does not do), and the KV cache stays on the layer's -ngl device.
    const std::vector<Override>& overrides = e.overrides.empty() ? overrides_ : e.overrides;
    bool moved = false, executes = false;
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      const auto to = override_of(llamacpp_name(t.name), overrides);
      moved |= to && *to != layers[t.id];
      executes |= p.path[t.id] == placement::Path::Execute;
    }
    if (!moved || !executes) return;
    p.per_tensor = true;
    for (const auto& t : header.tensors) {
      if (t.kind == trace::TensorKind::KvCache && kv_offload_) p.kv_home[t.layer] = layers[t.id];
      if (t.kind != trace::TensorKind::Weight || p.path[t.id] == placement::Path::Managed) continue;
      const auto to = override_of(llamacpp_name(t.name), overrides);
      p.device[t.id] = to ? *to : layers[t.id];
      p.path[t.id] = p.device[t.id] == placement::kComputeGpu ? placement::Path::Local : placement::Path::Execute;
    }
  }

 private:
  struct Override {
    TensorPattern pattern;
    placement::DeviceId device;
  };

  // The name llama.cpp matches overrides against: a tied model's output is token_embd loaded again, and
  // create_tensor matches it as "token_embd.weight".
  static std::string llamacpp_name(const std::string& trace_name) {
    return trace_name == "output.weight (token_embd duplicated)" ? "token_embd.weight" : trace_name;
  }

  // The device an -ot pattern gives this tensor name, if one matches (the first that does): the user's patterns, or
  // where --fit chose some (a mixture of experts; the fit writes them only where the user gave none), the fit's.
  std::optional<placement::DeviceId> override_of(const std::string& name, const std::vector<Override>& list) const {
    for (const auto& o : list)
      if (o.pattern.search(name)) return o.device;
    return std::nullopt;
  }

  // -ngl, -ts and -c as applied: the user's, or the fit's; the KV cache tokens llama.cpp allocates for
  // that context (rounded up to 256; 0: unknown, a trace without the training context and no -c).
  struct Effective {
    std::optional<int> ngl;
    std::vector<double> ts;
    std::uint32_t kv_tokens = 0;
    std::vector<Override> overrides;  // --fit's (a mixture of experts), else empty
  };

  static std::vector<Override> compiled(const std::vector<llamacpp::TensorOverride>& list) {
    std::vector<Override> out;
    for (const auto& o : list) out.push_back({TensorPattern(o.pattern), o.device < 0 ? placement::kCpu : o.device});
    return out;
  }

  // The model's sizes the projection needs, from the trace's meta; nullopt (with the reason) if absent.
  struct Sizes {
    std::int64_t vocab = 0, hidden = 0, ffn = 0, ubatch = 512;
    std::uint32_t n_ctx_train = 0;
    double tokens = 0;  // KV cache tokens of the trace (batch x (prompt + decode))
  };
  static std::optional<Sizes> sizes(const trace::Header& header, std::string& missing) {
    auto number = [&](const char* key, std::int64_t lo, std::int64_t hi, bool required) -> std::optional<std::int64_t> {
      const auto it = header.meta.find(key);
      if (it == header.meta.end()) {
        if (required && missing.empty()) missing = key;
        return std::nullopt;
      }
      std::size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(it->second, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != it->second.size() || v < lo || v > hi)
        throw InputError("", 0, key, "trace meta '" + it->second + "': an integer from " + std::to_string(lo) + " to " +
                                         std::to_string(hi) + " (llama.cpp's --fit reads it)");
      return v;
    };
    Sizes z;
    const auto vocab = number("vocab_size", 1, 1 << 24, true), hidden = number("hidden_size", 1, 1 << 20, true),
               ffn = number("intermediate_size", 1, 1 << 22, true), ctx = number("context_length", 1, 1 << 24, false),
               ub = number("ubatch", 1, 1 << 24, false), prompt = number("prompt_tokens", 0, 1 << 30, true),
               decode = number("decode_tokens", 0, 1 << 30, true);
    if (!missing.empty()) return std::nullopt;
    z.vocab = *vocab;
    z.hidden = *hidden;
    z.ffn = *ffn;
    z.n_ctx_train = ctx ? static_cast<std::uint32_t>(*ctx) : 0;
    if (ub) z.ubatch = *ub;
    z.tokens = static_cast<double>(header.batch()) * static_cast<double>(*prompt + *decode);
    if (z.tokens <= 0) {
      missing = "prompt_tokens";  // prompt + decode is 0: no tokens to size a KV cache by
      return std::nullopt;
    }
    return z;
  }

  // llama.cpp's memory projection of every GPU (llamacpp_fit.hpp), for -ngl/-ts and a padded context.
  std::vector<llamacpp::DeviceProjection> project(const trace::Header& header, const hw::HardwareProfile& hw,
                                                  const Sizes& z, const llamacpp::Assignment& a,
                                                  std::uint32_t n_ctx) const {
    const std::int32_t n_layer = layer_count(header);
    const std::vector<placement::DeviceId> slots = slot_devices(n_layer, hw, a.ngl, a.tensor_split);
    std::vector<llamacpp::DeviceProjection> out(static_cast<std::size_t>(hw.gpu.count));
    auto at = [&](placement::DeviceId d) -> llamacpp::DeviceProjection* {
      return d >= 0 && d < hw.gpu.count ? &out[static_cast<std::size_t>(d)] : nullptr;
    };
    // The fit's patterns (a trial of its MoE steps) are compiled once per projection, not per tensor.
    const std::vector<Override> fit_overrides = compiled(a.overrides);
    const std::vector<Override>& overrides = a.overrides.empty() ? overrides_ : fit_overrides;
    std::int64_t output_matrix = 0;
    for (const auto& t : header.tensors) {
      if (t.kind == trace::TensorKind::Weight) {
        const placement::DeviceId slot = t.layer < 0 ? placement::kCpu : slots[static_cast<std::size_t>(t.layer)];
        const auto to = override_of(llamacpp_name(t.name), overrides);
        if (auto* p = at(to ? *to : slot)) p->model += static_cast<std::int64_t>(t.bytes);
        if (t.layer == n_layer) output_matrix = std::max(output_matrix, static_cast<std::int64_t>(t.bytes));
      }
      if (t.kind == trace::TensorKind::KvCache && kv_offload_)
        if (auto* p = at(slots[static_cast<std::size_t>(t.layer)]))
          p->context += static_cast<std::int64_t>(std::llround(static_cast<double>(t.bytes) / z.tokens * n_ctx));
    }
    const std::int64_t logits = 4 * z.ubatch * (z.vocab + z.hidden);
    const placement::DeviceId output = slots[static_cast<std::size_t>(n_layer)];
    for (int d = 0; d < hw.gpu.count; ++d) {
      bool layers_here = false;
      for (std::int32_t il = 0; il < n_layer; ++il) layers_here |= slots[static_cast<std::size_t>(il)] == d;
      auto& p = out[static_cast<std::size_t>(d)];
      if (output == d) p.compute = logits;
      else if (output == placement::kCpu && d == placement::kComputeGpu) p.compute = logits + output_matrix;
      else if (layers_here) p.compute = 4 * z.ubatch * (2 * z.ffn + z.hidden);
    }
    return out;
  }

  // -ngl/-ts as the user gave them, or as --fit sets them; `resolved` gets the fit's lines.
  Effective effective(const trace::Header& header, const hw::HardwareProfile& hw, Resolved* resolved) const {
    Effective e{ngl_, ts_, 0, {}};
    std::string missing;
    const std::optional<Sizes> z = sizes(header, missing);
    if (z && z->n_ctx_train == 0 && ctx_ == 0) missing = "context_length";
    if (ctx_ > 0 || (z && missing.empty())) e.kv_tokens = llamacpp::padded_context(ctx_, z ? z->n_ctx_train : 0);
    if (!fit_) return e;
    if (!z || !missing.empty()) {
      if (resolved)
        resolved->emplace_back("--fit", "not applied: the trace has no '" + missing +
                                            "' meta (generate it with --model), so llama.cpp's projection cannot be made");
      return e;
    }
    llamacpp::FitRequest rq;
    rq.n_layer = layer_count(header);
    rq.n_ctx_train = z->n_ctx_train;
    rq.n_ctx = ctx_;
    rq.n_ctx_min = fit_ctx_;
    rq.ngl = ngl_;
    rq.tensor_split_given = !ts_.empty();
    rq.overrides_given = !overrides_.empty();
    rq.moe = header.meta.count("num_experts") > 0;
    if (static_cast<int>(fit_target_mib_.size()) > std::max(hw.gpu.count, 1) && fit_target_mib_.size() > 1)
      throw InputError("", 0, "fit-target", std::to_string(fit_target_mib_.size()) + " margins for " +
                                                std::to_string(hw.gpu.count) + " GPU(s) on '" + hw.name + "'");
    std::string margins;
    for (int d = 0; d < hw.gpu.count; ++d) {
      rq.free.push_back(static_cast<std::int64_t>(hw.gpu.memory - hw.gpu.reserved));
      // As common/arg.cpp: one value is every GPU's; a list sets the GPUs it names, the rest keep 1024.
      const std::int64_t m = fit_target_mib_.size() == 1                          ? fit_target_mib_[0]
                             : d < static_cast<int>(fit_target_mib_.size()) ? fit_target_mib_[d]
                                                                             : 1024;
      rq.margin.push_back(m * 1024 * 1024);
      margins += (d ? "," : "") + std::to_string(m);
    }
    const llamacpp::FitResult r = llamacpp::fit(rq, [&](const llamacpp::Assignment& a, std::uint32_t n_ctx) {
      llamacpp::Assignment b = a;
      if (b.tensor_split.empty()) b.tensor_split = ts_;
      return project(header, hw, *z, b, n_ctx);
    });
    if (r.moe_steps_not_modelled) {
      if (resolved)
        resolved->emplace_back("--fit", "not applied: moving this mixture of experts' tensors came to a state llama.cpp "
                                        "reaches only through unsigned wrap-around, which is not modelled; give --ngl and "
                                        "--n-cpu-moe with --fit off");
      return e;
    }
    if (r.ngl) e.ngl = r.ngl;
    if (!r.tensor_split.empty()) e.ts = r.tensor_split;
    e.overrides = compiled(r.overrides);
    e.kv_tokens = llamacpp::padded_context(r.n_ctx, z->n_ctx_train);
    if (resolved) {
      // As llama-fit-params prints them: -c 0 and -ngl -1 are "not set" (the training context, every slot).
      const int ngl_printed = e.ngl ? *e.ngl : -1;
      std::string args = "-c " + std::to_string(r.n_ctx) + " -ngl " + std::to_string(ngl_printed);
      std::size_t shown = r.tensor_split.size();
      while (shown > 1 && r.tensor_split[shown - 1] == 0) --shown;  // as fit-params.cpp: trailing zeros dropped
      if (shown > 1) {
        args += " -ts ";
        for (std::size_t i = 0; i < shown; ++i)
          args += (i ? "," : "") + std::to_string(static_cast<long long>(r.tensor_split[i]));
      }
      if (!r.overrides.empty()) {  // as fit-params.cpp: the patterns raw, the buffer type's name
        args += " -ot \"";
        for (std::size_t i = 0; i < r.overrides.size(); ++i)
          args += (i ? "," : "") + r.overrides[i].pattern + "=" +
                  (r.overrides[i].device < 0 ? std::string("CPU") : "CUDA" + std::to_string(r.overrides[i].device));
        args += "\"";
      }
      const std::uint32_t ctx = llamacpp::padded_context(r.n_ctx, z->n_ctx_train);
      resolved->emplace_back("--fit", std::string(r.success ? "llama-fit-params would print: " : "failed; llama-cli loads with: ") +
                                          args + " (context " + std::to_string(ctx) + " tokens, margin " + margins +
                                          " MiB" + (hw.gpu.count > 1 ? " by GPU)" : ")"));
      for (std::size_t d = 0; d < r.projected.size(); ++d) {
        const auto& p = r.projected[d];
        constexpr double kMiB = 1048576.0;
        char line[200];
        std::snprintf(line, sizeof line, "%.0f MiB = model %.0f + context %.0f + compute %.0f, of %.0f MiB free",
                      std::floor(p.total() / kMiB), std::floor(p.model / kMiB), std::floor(p.context / kMiB),
                      std::floor(p.compute / kMiB), std::floor(rq.free[d] / kMiB));
        resolved->emplace_back("--fit projection CUDA" + std::to_string(d), line);
      }
    }
    return e;
  }

  // The repeating layers (the output layer is the last weight layer); every tensor's layer must be one
  // of llama.cpp's slots: weights -1 (the embedding) to n_layer, KV caches 0 to n_layer - 1.
  static std::int32_t layer_count(const trace::Header& header) {
    std::int32_t n_layer = 0;
    for (const auto& t : header.tensors)
      if (t.kind == trace::TensorKind::Weight) n_layer = std::max(n_layer, t.layer);
    if (n_layer > 100000)
      throw InputError("", 0, "tensor", "a weight at layer " + std::to_string(n_layer) + ": llamacpp.ngl models at most 100,000 layers");
    for (const auto& t : header.tensors) {
      const bool weight_ok = t.kind != trace::TensorKind::Weight || t.layer >= -1;
      const bool kv_ok = t.kind != trace::TensorKind::KvCache || (t.layer >= 0 && t.layer < n_layer);
      if (!weight_ok || !kv_ok)
        throw InputError("", 0, "tensor", "'" + t.name + "' is at layer " + std::to_string(t.layer) + ", outside the model's " +
                                              std::to_string(n_layer) + " layers and its output layer");
    }
    return n_layer;
  }

  // The device of every slot 0..n_layer (the output layer last) for -ngl and -ts (empty: free memory).
  std::vector<placement::DeviceId> slot_devices(std::int32_t n_layer, const hw::HardwareProfile& hw,
                                                std::optional<int> ngl_given, const std::vector<double>& ts) const {
    if (!ts.empty() && static_cast<int>(ts.size()) > hw.gpu.count)
      throw InputError("", 0, "ts", std::to_string(ts.size()) + " proportions for " + std::to_string(hw.gpu.count) +
                                        " GPU(s) on '" + hw.name + "'");
    // The split points: cumulative, normalised proportions per GPU.
    // As llama_model::load_tensors: float split points (the fit's -ts counts then give each GPU exactly its count).
    std::vector<float> splits(static_cast<std::size_t>(hw.gpu.count), 0.0f);
    bool all_zero = true;
    for (const double v : ts) all_zero &= v == 0.0;
    for (int d = 0; d < hw.gpu.count; ++d)
      splits[d] = all_zero ? static_cast<float>(hw.gpu.memory - hw.gpu.reserved)
                           : static_cast<float>(d < static_cast<int>(ts.size()) ? ts[d] : 0.0);
    float sum = 0.0f;
    for (float& s : splits) s = (sum += s);
    for (float& s : splits) s /= sum;

    const int slots = n_layer + 1;  // the repeating layers and the output layer
    const int ngl = std::min(ngl_given.value_or(slots), 100000);
    const int gpu_start = std::max(output_first_ ? slots - ngl : n_layer - ngl, 0);
    const int active = std::min(ngl, slots);
    std::vector<placement::DeviceId> out(static_cast<std::size_t>(slots), placement::kCpu);
    for (int il = 0; il < slots; ++il) {
      if (il < gpu_start || il - gpu_start >= active) continue;
      const float at = static_cast<float>(il - gpu_start) / static_cast<float>(active);  // as llama.cpp: float
      const auto gpu = std::upper_bound(splits.begin(), splits.end(), at) - splits.begin();
      out[static_cast<std::size_t>(il)] = static_cast<placement::DeviceId>(std::min<std::ptrdiff_t>(gpu, hw.gpu.count - 1));
    }
    return out;
  }

  // Every tensor's home by -ngl alone (KV cache: its layer's device); `resolved` gets the summary line.
  std::vector<placement::DeviceId> layer_homes(const trace::Header& header, const hw::HardwareProfile& hw,
                                               const Effective& e, Resolved* resolved) const {
    const std::int32_t n_layer = layer_count(header);
    double embedding = 0;
    for (const auto& t : header.tensors)
      if (t.kind == trace::TensorKind::Weight && t.layer < 0) embedding = std::max(embedding, static_cast<double>(t.bytes));
    // The output layer has its own matrix (vocabulary x hidden, as large as the embedding) unless tied.
    bool has_output_matrix = false;
    for (const auto& t : header.tensors)
      if (t.kind == trace::TensorKind::Weight && t.layer == n_layer && static_cast<double>(t.bytes) >= 0.5 * embedding)
        has_output_matrix = true;
    if (!has_output_matrix)
      throw InputError("", 0, "ngl",
                       "this model ties its output matrix to the token embedding; llama.cpp duplicates it onto the "
                       "output layer's device, which the llamacpp.ngl rule does not model");
    const std::vector<placement::DeviceId> slots = slot_devices(n_layer, hw, e.ngl, e.ts);
    std::vector<placement::DeviceId> homes(header.tensors.size(), placement::kComputeGpu);
    int on_gpu = 0;
    for (int il = 0; il < n_layer; ++il) on_gpu += slots[static_cast<std::size_t>(il)] != placement::kCpu;
    for (const auto& t : header.tensors) {
      if (t.kind == trace::TensorKind::Weight) homes[t.id] = t.layer < 0 ? placement::kCpu : slots[static_cast<std::size_t>(t.layer)];
      if (t.kind == trace::TensorKind::KvCache) homes[t.id] = slots[static_cast<std::size_t>(t.layer)];
    }
    if (resolved) {
      const int slots_n = n_layer + 1;
      const int ngl = std::min(e.ngl.value_or(slots_n), 100000);
      resolved->emplace_back("-ngl", std::to_string(ngl) + ": " + std::to_string(on_gpu) + " of " + std::to_string(n_layer) +
                                         " repeating layers on the GPU, the output layer on " +
                                         placement::device_name(slots[static_cast<std::size_t>(n_layer)]) +
                                         ", the token embedding on the cpu" +
                                         (output_first_ ? "" : " (before PR #18148: the output layer last)") +
                                         (kv_offload_ ? "" : "; KV cache on the cpu (--no-kv-offload)"));
    }
    return homes;
  }

 public:
  bool may_offload() const override { return true; }

 private:
  std::vector<Override> overrides_;
  bool kv_offload_ = true;
  std::optional<int> ngl_;
  bool output_first_ = true;
  std::vector<double> ts_;
  bool fit_ = true;
  std::uint32_t ctx_ = 0;
  std::uint32_t fit_ctx_ = 4096;
  std::vector<long long> fit_target_mib_;
};

}  // namespace

std::unique_ptr<PlacementRule> make_llamacpp_ngl(config::Section& o) { return std::make_unique<LlamaCppNgl>(o); }

}  // namespace tiersim::strategy
