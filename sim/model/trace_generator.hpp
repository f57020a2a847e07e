#pragma once
// Builds the trace of a decoder LLM's inference (dense, or with routed experts) (one prefill, then one decode step per new
// token) from its ModelConfig. Steps are generated on demand, so a 10,000-step trace costs no memory.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/gguf_file.hpp"
#include "model/model_config.hpp"
#include "model/routing_file.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

struct GenerationOptions {
  WeightDtype dtype = WeightDtype::Bf16;
  std::string gguf;  // with WeightDtype::Gguf: the llama.cpp file type (Q4_K_M, ...), upper case
  std::uint32_t batch = 1;
  std::uint32_t prompt_tokens = 512;   // 0: no prefill step
  std::uint32_t decode_tokens = 128;
  // The prompt in micro-batches of this many tokens of each sequence, one prefill step each (llama.cpp's
  // -ub, which counts all sequences' tokens: -ub / batch here; each micro-batch is its own graph, and
  // weights offloaded with it are copied again). 0: one step.
  std::uint32_t ubatch = 0;
  // A .gguf file's header (sim --model file.gguf): every weight's type and bytes come from the file's own
  // tensor of that llama.cpp name, not from the file type's mix (with dtype Gguf).
  std::shared_ptr<const gguf::FileHeader> gguf_file;
  std::string gguf_path;  // its path, for errors
  // Mixture of experts: the experts each token is routed to, drawn from a counter-based hash of (seed,
  // layer, sequence, token position), so every run is the same: uniform over the layer's experts, or, with
  // routing_zipf = s > 0, skewed: the layer's experts in a seeded order, the r-th chosen with weight
  // 1 / r^s (a few popular experts, as real routers have).
  std::uint64_t routing_seed = 0;
  double routing_zipf = 0;
  // Or replayed (--routing replay:FILE): every token's experts as a real run chose them (routing_file.hpp);
  // sequence b of the batch is the file's sequence b, token positions from 0 (the prompt, then decoded).
  std::shared_ptr<const RoutingTable> routing_replay;
  std::string routing_path;  // its path, for errors and the result's inputs
  std::uint32_t prefill_steps() const;
  // A diffusion transformer (a FLUX config): the image, its denoising iterations and the text encoder's
  // tokens; `batch` is images per iteration. Decoder models ignore these, diffusion models the LLM fields.
  // The defaults are FLUX.1-dev's; model_family.hpp's default_image gives each family's.
  struct Image {
    std::uint32_t width = 1024, height = 1024;  // pixels, multiples of 16 (VAE /8, then 2x2 patches)
    std::uint32_t steps = 28;                   // FLUX.1-dev's usual step count
    std::uint32_t text_tokens = 256;            // T5 tokens: ComfyUI pads FLUX's to at least 256 (text_encoders/flux.py)
    std::uint32_t frames = 1;                   // a video's frames (Wan: 4k + 1); 1 for an image
    // Wan 2.2 TI2V's image-to-video: the first latent frame is a start image's (comfy_extras/nodes_wan.py
    // Wan22ImageToVideoLatent's start_image and noise mask), so the model gets a timestep per latent frame
    // (comfy/model_base.py WAN22.process_timestep) and each block expands its modulations to every token.
    bool start_image = false;
    // A two-expert model (Wan 2.2 A14B): the step at which the low-noise expert takes over, as ComfyUI's two
    // KSamplerAdvanced nodes split the steps (the first's end_at_step, the second's start_at_step). 0: half the steps
    // (ComfyUI's Wan 2.2 14B template: 20 steps, 10 each).
    std::uint32_t switch_step = 0;
    // Classifier-free guidance scale: unless it is 1 ComfyUI runs the negative prompt too (comfy/samplers.py
    // sampling_function: math.isclose(cond_scale, 1.0) skips it), in the same batch as the positive one, doubling the
    // batch, or after it (cfg_separate, below).
    double cfg = 1.0;
    // The positive and negative prompt as two forwards of the batch each, not one of twice the batch: ComfyUI's
    // sampler batches them only when its memory estimate for the two, x 1.5, is below the GPU's free memory
    // (comfy/samplers.py _calc_cond_batch). app::simulate decides it from the run's placement; not an option of its own.
    bool cfg_separate = false;
    // The negative prompt's tokens as the transformer sees them, for an encoder that does not pad (Qwen-Image's
    // Qwen2.5-VL: its conds are ComfyUI CONDRegular, batched only when the two lengths are equal, else run as two
    // forwards); 0 for an encoder that pads both prompts to one length (FLUX's T5, Wan's umT5), whose two prompts
    // always share a batch.
    std::uint32_t negative_tokens = 0;
    // A reference image (FLUX.1 Kontext, Qwen-Image-Edit: ComfyUI's ReferenceLatent node), pixels; 0 x 0: none. Its
    // latent's tokens join the image's in every block and are cut off after the last (comfy/ldm/flux/model.py
    // Flux._forward, comfy/ldm/qwen_image/model.py: torch.cat of the ref_latents after the image, out[:, :img_tokens]).
    std::uint32_t reference_width = 0, reference_height = 0;
    bool has_reference() const { return reference_width != 0 || reference_height != 0; }
    // Its tokens: (height / 16) x (width / 16), as an image's (VAE /8, 2x2 patches).
    std::uint64_t reference_tokens() const {
      return static_cast<std::uint64_t>(reference_height / 16) * (reference_width / 16);
    }
    bool guided() const { return std::fabs(cfg - 1.0) > 1e-9 * std::max(1.0, std::fabs(cfg)); }
    // Images in one forward: the batch, doubled when the negative prompt shares it.
    std::uint32_t guided_batch(std::uint32_t batch) const { return guided() && !cfg_separate ? 2 * batch : batch; }
    // Forwards per iteration: two when the negative prompt runs on its own.
    std::uint32_t forwards() const { return guided() && cfg_separate ? 2 : 1; }
  } image;
  // With WeightDtype::Fp8: a scaled fp8 checkpoint (ComfyUI's *_fp8_scaled files, comfy/ops.py scaled_fp8_ops: each
  // Linear's weight times its scale_weight after the cast). Diffusion models only.
  bool fp8_scaled = false;
  // How transformers runs a mixture of experts' experts (not a GGUF file's: llama.cpp has its own): its
  // experts_implementation (transformers/integrations/moe.py, model.set_experts_implementation). GroupedMm,
  // transformers 5's default: torch._grouped_mm over the experts hit, no host sync. Eager: Qwen3MoeExperts.forward's
  // Python loop over the experts hit, which syncs the host with the GPU five times per expert (transformers 4's
  // only way).
  enum class Experts : std::uint8_t { GroupedMm, Eager };
  Experts experts = Experts::GroupedMm;
};

// "grouped_mm" or "eager": the name of an experts implementation, and back (false for another name).
const char* to_string(GenerationOptions::Experts e);
bool parse_experts(const std::string& name, GenerationOptions::Experts& out);

// Sets the weight format from its name: fp32, bf16, fp16, fp8, fp8_scaled, int8, q4, or a GGUF file type (Q4_K_M,
// Q8_0, ...: gguf_quant.hpp). Throws std::invalid_argument naming the known ones.
void set_dtype(GenerationOptions& options, const std::string& name);
// The name set_dtype reads back.
std::string dtype_name(const GenerationOptions& options);

// Kernel launches eager PyTorch issues per logical op (HF modelling code): RMSNorm runs ~6 kernels
// (cast, pow, mean, add+rsqrt, mul, mul), rotary embedding ~8 for q and k, the gated MLP activation 2.
// These set the host-overhead side of the model; captured traces replace them with measured values.
struct LaunchCounts {
  std::uint32_t norm = 6;
  std::uint32_t rope = 8;
  std::uint32_t attention = 4;   // KV-cache update (2 cats) + SDPA + reshape
  std::uint32_t matmul = 1;
  std::uint32_t residual = 1;
  std::uint32_t mlp_activation = 2;
  std::uint32_t embedding = 1;
  std::uint32_t sample = 4;
};

// Kernels llama.cpp's CUDA backend runs per logical op of a decode graph (ggml-cuda.cu, ggml_cuda_graph_
// evaluate_and_capture and the fusions it tries): RMS norm fused with its weight multiply, q and k roped
// apart, the KV store (two set_rows) and flash attention, a quantised matrix-vector product quantises its
// input first (quantize_q8_1, mul_mat_vec_q), SwiGLU one kernel. Read from the source, not measured;
// a GGUF trace uses these unless counts are given.
LaunchCounts llamacpp_launch_counts();

class LlmTraceGenerator final : public trace::StepSource {
 public:
  // `launches`: the framework's kernels per op; without it, eager PyTorch's (LaunchCounts{}) or, for a
  // GGUF file type, llama.cpp's.
  LlmTraceGenerator(const ModelConfig& model, const GenerationOptions& options,
                    std::optional<LaunchCounts> launches = std::nullopt);
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;

 private:
  struct LayerTensors {
    std::uint32_t input_norm, q, k, v, q_norm, k_norm, o, post_norm, gate, up, down, kv;
    std::uint32_t router = 0;                           // MoE: the router (ffn_gate_inp)
    std::int64_t sinks = -1;                            // gpt_oss: the attention-sink logits (-1: none)
    // MoE, by expert: what its gate, up and down projections read, its slice of the fused tensor of that kind
    // (llama.cpp's ffn_{gate,up,down}_exps, transformers' gate_up_proj and down_proj).
    std::vector<trace::TensorAccess> expert_gate, expert_up, expert_down;
    // deepseek (MLA): q_a and its norm (q holds q_b, or the plain q), kv_a and its norm, and llama.cpp's attn_k_b
    // and attn_v_b (Hugging Face's one kv_b_proj: both hold it); the routed experts' selection bias (-1: none) and
    // the shared experts (one MLP, n_shared_experts x moe_intermediate_size wide).
    std::uint32_t q_a = 0, q_a_norm = 0, kv_a = 0, kv_a_norm = 0, k_b = 0, v_b = 0;
    std::int64_t score_bias = -1;
    std::uint32_t shexp_gate = 0, shexp_up = 0, shexp_down = 0;
  };
  // MoE: the token rows each expert of `layer` gets in a step (tokens position..position+new_tokens-1 of
  // every sequence), by expert.
  std::vector<std::uint32_t> route(std::int32_t layer, std::uint32_t new_tokens, std::uint64_t position) const;
  std::uint32_t add_tensor(trace::TensorKind kind, std::uint64_t bytes, std::int32_t layer, std::string name);
  void build_step(trace::Step& out, std::uint32_t new_tokens, std::uint64_t context_before, trace::StepKind kind,
                  bool logits);

  ModelConfig model_;
  GenerationOptions options_;
  LaunchCounts launches_;
  trace::Header header_;
  std::vector<LayerTensors> layers_;
  std::uint32_t embed_ = 0, final_norm_ = 0, lm_head_ = 0, act_ = 0;
  std::uint64_t steps_done_ = 0;
  std::vector<std::string> weight_type_;  // by tensor id: a GGUF matrix's type (q4_k), else empty
  std::string pending_type_;              // the type of the weight being added
};

}  // namespace tiersim::model
