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
// tensor's name with each std::regex in turn, the first match wins; BUFT is CPU or CUDA0, CUDA1, ...; a
// tensor overridden to CPU goes to the CPU's buffer list, whose first entry is the GPU's pinned host
// buffer). The KV cache stays on the layer's -ngl device whatever its tensors' overrides.
// Not modelled here: --fit. A tied output matrix: llama.cpp loads token_embd again for the output layer,
// and a GGUF trace has that copy as a tensor of its own (model/trace_generator.cpp); a trace that ties
// them (a bf16 one) is refused under this rule.
#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"
#include "policies/placement_rules/rules.hpp"

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
          overrides_.push_back({std::regex(item.substr(0, eq)), device});
        } catch (const std::regex_error& e) {
          o.fail("ot", "'" + item.substr(0, eq) + "' is not a regular expression: " + e.what());
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
    std::vector<placement::DeviceId> homes = layer_homes(header, hw, &resolved);
    // -ot: the first pattern that a weight's name matches decides its buffer.
    std::size_t moved = 0;
    double moved_bytes = 0;
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      const auto to = override_of(llamacpp_name(t.name));
      if (!to || *to == homes[t.id]) continue;
      if (*to >= hw.gpu.count)
        throw InputError("", 0, "ot", "'" + placement::device_name(*to) + "' (CUDA" + std::to_string(*to) +
                                          ") for " + t.name + ", but '" + hw.name + "' has " +
                                          std::to_string(hw.gpu.count) + " GPU(s)");
      homes[t.id] = *to;
      ++moved;
      moved_bytes += static_cast<double>(t.bytes);
    }
    if (!overrides_.empty())
      resolved.emplace_back("-ot", std::to_string(moved) + " tensors (" + units::format_bytes(moved_bytes) +
                                       ") placed by " + std::to_string(overrides_.size()) + " pattern(s)");
    return homes;
  }

  void annotate(const trace::Header& header, const hw::HardwareProfile& hw, const std::string&, placement::Placement& p,
                Resolved&) const override {
    const std::vector<placement::DeviceId> layers = layer_homes(header, hw, nullptr);
    // --no-kv-offload: every KV cache in host memory, attention on the CPU.
    if (!kv_offload_) {
      for (const auto& t : header.tensors)
        if (t.kind == trace::TensorKind::KvCache) p.kv_home[t.layer] = placement::kCpu;
      p.execute.attention_on_cpu = true;
    }
    // Overrides that move a weight, under the execute path (layers run where their weights live): weights
    // stay where -ngl and the patterns put them (the execute path moved layers whole, to the device with
    // most of their bytes, which llama.cpp does not do), and the KV cache stays on the layer's -ngl device.
    bool moved = false, executes = false;
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      const auto to = override_of(llamacpp_name(t.name));
      moved |= to && *to != layers[t.id];
      executes |= p.path[t.id] == placement::Path::Execute;
    }
    if (!moved || !executes) return;
    p.per_tensor = true;
    for (const auto& t : header.tensors) {
      if (t.kind == trace::TensorKind::KvCache && kv_offload_) p.kv_home[t.layer] = layers[t.id];
      if (t.kind != trace::TensorKind::Weight || p.path[t.id] == placement::Path::Managed) continue;
      const auto to = override_of(llamacpp_name(t.name));
      p.device[t.id] = to ? *to : layers[t.id];
      p.path[t.id] = p.device[t.id] == placement::kComputeGpu ? placement::Path::Local : placement::Path::Execute;
    }
  }

 private:
  // The name llama.cpp matches overrides against: a tied model's output is token_embd loaded again, and
  // create_tensor matches it as "token_embd.weight".
  static std::string llamacpp_name(const std::string& trace_name) {
    return trace_name == "output.weight (token_embd duplicated)" ? "token_embd.weight" : trace_name;
  }

  // The device an -ot pattern gives this tensor name, if one matches (the first that does).
  std::optional<placement::DeviceId> override_of(const std::string& name) const {
    for (const auto& o : overrides_)
      if (std::regex_search(name, o.pattern)) return o.device;
    return std::nullopt;
  }

  // Every tensor's home by -ngl alone (KV cache: its layer's device); `resolved` gets the summary line.
  std::vector<placement::DeviceId> layer_homes(const trace::Header& header, const hw::HardwareProfile& hw,
                                               Resolved* resolved) const {
    std::int32_t n_layer = 0;
    double embedding = 0;
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      n_layer = std::max(n_layer, t.layer);
      if (t.layer < 0) embedding = std::max(embedding, static_cast<double>(t.bytes));
    }
    // The output layer has its own matrix (vocabulary x hidden, as large as the embedding) unless tied.
    bool has_output_matrix = false;
    for (const auto& t : header.tensors)
      if (t.kind == trace::TensorKind::Weight && t.layer == n_layer && static_cast<double>(t.bytes) >= 0.5 * embedding)
        has_output_matrix = true;
    if (!has_output_matrix)
      throw InputError("", 0, "ngl",
                       "this model ties its output matrix to the token embedding; llama.cpp duplicates it onto the "
                       "output layer's device, which the llamacpp.ngl rule does not model");
    if (!ts_.empty() && static_cast<int>(ts_.size()) > hw.gpu.count)
      throw InputError("", 0, "ts", std::to_string(ts_.size()) + " proportions for " + std::to_string(hw.gpu.count) +
                                        " GPU(s) on '" + hw.name + "'");
    // The split points: cumulative, normalised proportions per GPU.
    std::vector<double> splits(static_cast<std::size_t>(hw.gpu.count), 0.0);
    for (int d = 0; d < hw.gpu.count; ++d)
      splits[d] = ts_.empty() ? hw.gpu.memory - hw.gpu.reserved : (d < static_cast<int>(ts_.size()) ? ts_[d] : 0.0);
    double sum = 0;
    for (double& s : splits) s = (sum += s);
    for (double& s : splits) s /= sum;

    const int slots = n_layer + 1;  // the repeating layers and the output layer
    const int ngl = std::min(ngl_.value_or(slots), 100000);
    const int gpu_start = std::max(output_first_ ? slots - ngl : n_layer - ngl, 0);
    const int active = std::min(ngl, slots);
    auto slot_device = [&](int il) -> placement::DeviceId {
      if (il < gpu_start || il - gpu_start >= active) return placement::kCpu;
      const float at = static_cast<float>(il - gpu_start) / static_cast<float>(active);  // as llama.cpp: float
      const auto gpu = std::upper_bound(splits.begin(), splits.end(), static_cast<double>(at)) - splits.begin();
      return static_cast<placement::DeviceId>(std::min<std::ptrdiff_t>(gpu, hw.gpu.count - 1));
    };
    std::vector<placement::DeviceId> homes(header.tensors.size(), placement::kComputeGpu);
    int on_gpu = 0;
    for (int il = 0; il < n_layer; ++il) on_gpu += slot_device(il) != placement::kCpu;
    for (const auto& t : header.tensors) {
      if (t.kind == trace::TensorKind::Weight) homes[t.id] = t.layer < 0 ? placement::kCpu : slot_device(t.layer);
      if (t.kind == trace::TensorKind::KvCache) homes[t.id] = slot_device(t.layer);
    }
    if (resolved)
      resolved->emplace_back("-ngl", std::to_string(ngl) + ": " + std::to_string(on_gpu) + " of " + std::to_string(n_layer) +
                                         " repeating layers on the GPU, the output layer on " +
                                         placement::device_name(slot_device(n_layer)) +
                                         ", the token embedding on the cpu" +
                                         (output_first_ ? "" : " (before PR #18148: the output layer last)") +
                                         (kv_offload_ ? "" : "; KV cache on the cpu (--no-kv-offload)"));
    return homes;
  }

 public:
  bool may_offload() const override { return true; }

 private:
  struct Override {
    std::regex pattern;
    placement::DeviceId device;
  };
  std::vector<Override> overrides_;
  bool kv_offload_ = true;
  std::optional<int> ngl_;
  bool output_first_ = true;
  std::vector<double> ts_;
};

}  // namespace

std::unique_ptr<PlacementRule> make_llamacpp_ngl(config::Section& o) { return std::make_unique<LlamaCppNgl>(o); }

}  // namespace tiersim::strategy
