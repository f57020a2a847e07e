#pragma once
// The order in which Hugging Face transformers' generate() allocates and frees GPU tensors for a dense decoder
// (Qwen3, Llama; eager PyTorch under torch.inference_mode, SDPA attention, a DynamicCache), for PyTorch's caching
// allocator model to turn into peak allocated and reserved memory, prefill and decode apart. Read from
// transformers 5's modeling_qwen3.py / modeling_llama.py (Qwen3Model.forward, Qwen3DecoderLayer, Qwen3Attention,
// Qwen3RMSNorm, Qwen3MLP, apply_rotary_pos_emb, rotate_half), integrations/sdpa_attention.py (GQA handed to SDPA:
// no repeated keys with torch >= 2.5 and no mask) and cache_utils.py (DynamicLayer.update: torch.cat of the cache
// and the new keys, every step):
// - load: every parameter, one tensor each (a tied embedding once);
// - prefill over batch x prompt tokens: the embedding output (held by Qwen3Model.forward's inputs_embeds to the
//   end), RoPE's cos and sin; per layer the norm's fp32 copy, its square, its variance, the variance plus eps and its
//   rsqrt, the scaled copy, then the bf16 cast and the weighted output (in the order the allocator's size log shows); q, k, v projections, the q/k norms (per head, the same pattern), RoPE's products and
//   rotate_half's negation and concatenation; the cache's concatenated keys and values (kept); SDPA's cuDNN seed and
//   offset (8 bytes each), its output, a one-byte tensor the size log shows beside it, and the output's contiguous
//   transposed copy; o_proj; the residual sum; the second norm; the MLP as Python evaluates
//   act_fn(gate_proj(x)) * up_proj(x) (gate freed once SiLU is taken, then up, then their product), down_proj; the
//   residual sum; the layer's input freed by the caller (not the embedding output). Then the final norm and the
//   head over the last token only (logits_to_keep=1), and the logits' fp32 copy generate takes;
// - decode: the same per token, each layer's keys and values concatenated into new tensors one token longer and the
//   old ones freed.
// - offloaded by accelerate (InferenceShape::offloaded): a module whose device_map entry is the CPU is not allocated at
//   load; accelerate's AlignDevicesHook on each of its submodules with weights of their own (hooks.py
//   attach_align_device_hook: every Linear and RMSNorm) copies that module's weights to the GPU in pre_forward
//   (set_module_tensor_to_device(value=weights_map[name]): one new tensor each) and drops them in post_forward, so
//   each weight is allocated just before its module's output and freed just after.
// Not modelled: CUDA/cuBLAS workspaces, the CUDA context, a materialised attention mask (none with SDPA, one
// sequence, no padding), sampling's own temporaries (a few vocabulary-sized vectors).
#include <cstdint>
#include <vector>

#include "model/allocation_event.hpp"
#include "model/model_config.hpp"

namespace tiersim::model {

struct InferenceShape {
  std::uint32_t batch = 1;
  std::uint32_t prompt = 0;        // tokens per sequence in the prefill
  std::uint32_t decode = 0;        // tokens generated after it
  std::uint32_t activation_bytes = 2;  // bf16 / fp16; 4 for fp32
  std::uint32_t weight_bytes = 2;      // per parameter
  // Parts accelerate keeps on the CPU: the embedding, each decoder layer, the final norm, the head.
  struct Offloaded {
    bool embedding = false, norm = false, head = false;
    std::vector<bool> layers;  // by decoder layer; empty: none
    bool layer(std::int32_t l) const { return l >= 0 && static_cast<std::size_t>(l) < layers.size() && layers[l]; }
  } offloaded;
};

// Whether the sequence is modelled for this model: a dense decoder, or a mixture of experts whose block is (qwen3_moe,
// mixtral under grouped_mm).
bool inference_allocations_modelled(const ModelConfig& m);

// Phases: "load" (step 0), "prefill" (step 1), "decode" (steps 2..decode+1, one per token).
std::vector<AllocationEvent> inference_allocations(const ModelConfig& m, const InferenceShape& s);

}  // namespace tiersim::model
