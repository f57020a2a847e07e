#pragma once
// A FLUX transformer from a GGUF file as ComfyUI-GGUF runs it (city96/ComfyUI-GGUF 795e451): the type each weight
// has in a file of a given type, and what dequantizing one costs at every forward.
// - Types (tools/convert.py handle_tensors, then llama-quantize with tools/lcpp.patch): 1-D tensors (biases, norm
//   scales) and tensors of at most 1,024 elements are F32; only 2-D tensors are quantized, and none under txt_in.,
//   img_in., time_in., vector_in., guidance_in. or final_layer. (llama_model_quantize_internal's FLUX rules): those
//   keep the bf16 checkpoint's BF16. The rest get the file type's base type, except a fused attn.qkv weight in a
//   Q4_K_M file (Q5_K) or a Q5_K_M one (Q6_K) (img_tensor_get_type; its to_v and ffn_down rules match no FLUX
//   name); a K-quant whose rows are not a multiple of 256 falls back to F16 (none in FLUX).
// - Runtime (ops.py GGMLLayer, dequant.py): every Linear's forward copies its weight to the GPU with a blocking
//   .to(device) (a no-op when it is there), dequantizes the blocks with torch ops into fp16 (or fp32 for BF16)
//   and casts that to the activations' bf16, and casts the F32 bias; the legacy and K-quant dequantizers also
//   build a shift table with torch.tensor([...], device=), a blocking host-to-device copy.
#include <cstdint>
#include <string>

#include "model/gguf_quant.hpp"

namespace tiersim::model {

// The GGUF file types modelled for a diffusion transformer: those ComfyUI-GGUF's dequantizers run on the GPU and
// tiersim's runtimes carry a measured rate for.
bool is_dit_gguf_file_type(const std::string& file_type);
extern const char* const kDitGgufFileTypes;  // "Q8_0, Q6_K, ...": for messages

// The type of a FLUX Linear's weight, given its ComfyUI module name ("double_blocks.0.img_attn.qkv") and
// in_features, in a file of `file_type`.
const gguf::QuantType& flux_weight_type(const std::string& module, std::uint64_t in_features, const std::string& file_type);

// What dequantize_tensor(weight, bf16) issues for a stored type, read from dequant.py (reshapes and splits of
// contiguous or stride-1 blocks are views, not kernels; a tensor's .to(None) is no kernel).
struct GgufDequant {
  const char* cast_tag;     // the cast op's dtype tag, priced by the runtime's gpu_cast share
  std::uint32_t launches;   // kernels, the final .to(bf16) included
  std::uint32_t syncs;      // blocking torch.tensor(..., device=) copies
  // Bytes per weight element of the dequantizer's intermediates at their most besides the bf16 copy it returns (the
  // uint8 nibbles, the fp16 products; dequant.py's locals live until dequantize_blocks returns): alive in the cast only.
  std::uint32_t scratch;
};
GgufDequant gguf_dequant(const gguf::QuantType& type);

}  // namespace tiersim::model
