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
// ngl=N (default: every layer, llama.cpp's -ngl 999), output-first=on|off (on), ts=P0,P1,... (-ts).
// Not modelled here: --no-kv-offload, -ot tensor overrides, --fit. A tied output matrix: llama.cpp loads
// token_embd again for the output layer, and a GGUF trace has that copy as a tensor of its own
// (model/trace_generator.cpp); a trace that ties them (a bf16 one) is refused under this rule.
#include <algorithm>
#include <cmath>
#include <optional>
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
      if (t.kind != trace::TensorKind::Weight) continue;
      homes[t.id] = t.layer < 0 ? placement::kCpu : slot_device(t.layer);
    }
    resolved.emplace_back("-ngl", std::to_string(ngl) + ": " + std::to_string(on_gpu) + " of " + std::to_string(n_layer) +
                                      " repeating layers on the GPU, the output layer on " +
                                      placement::device_name(slot_device(n_layer)) +
                                      ", the token embedding on the cpu" +
                                      (output_first_ ? "" : " (before PR #18148: the output layer last)"));
    return homes;
  }
  bool may_offload() const override { return true; }

 private:
  std::optional<int> ngl_;
  bool output_first_ = true;
  std::vector<double> ts_;
};

}  // namespace

std::unique_ptr<PlacementRule> make_llamacpp_ngl(config::Section& o) { return std::make_unique<LlamaCppNgl>(o); }

}  // namespace tiersim::strategy
