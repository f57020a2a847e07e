#include "model/diffusion/gguf_dit.hpp"

#include <stdexcept>

namespace tiersim::model {
namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

const char* const kDitGgufFileTypes = "Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q4_K_M, Q4_K_S, Q4_0";

bool is_dit_gguf_file_type(const std::string& file_type) {
  if (!gguf::is_file_type(file_type)) return false;
  const std::string ft = gguf::file_type_name(file_type);
  for (const char* t : {"Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q4_K_M", "Q4_K_S", "Q4_0"})
    if (ft == t) return true;
  return false;
}

const gguf::QuantType& flux_weight_type(const std::string& module, std::uint64_t in_features, const std::string& file_type) {
  const std::string ft = gguf::file_type_name(file_type);
  const std::string name = module + ".weight";
  // llama_model_quantize_internal (lcpp.patch): FLUX's input and output layers are not quantized.
  for (const char* kept : {"txt_in.", "img_in.", "time_in.", "vector_in.", "guidance_in.", "final_layer."})
    if (contains(name, kept)) return gguf::quant_type("BF16");
  const gguf::QuantType* t = &gguf::base_type(ft);
  // img_tensor_get_type: the fused qkv rule.
  if (contains(name, "attn_qkv.weight") || contains(name, "attn.qkv.weight") || contains(name, "attention.qkv.weight")) {
    if (ft == "Q4_K_M") t = &gguf::quant_type("Q5_K");
    else if (ft == "Q5_K_M") t = &gguf::quant_type("Q6_K");
  }
  // K-quants need rows of whole 256-element super-blocks; otherwise F16.
  if (t->block == 256 && in_features % 256 != 0) return gguf::quant_type("F16");
  return *t;
}

GgufDequant gguf_dequant(const gguf::QuantType& type) {
  const std::string n = type.name;
  // F16 (the K-quant fallback) is torch-compatible: dequantize_tensor's .to(bf16) alone.
  if (n == "F16") return {"gguf_f16", 1, 0, 0};
  // dequantize_blocks_BF16: .to(int32), << 16 (viewed as fp32), then .to(bf16). At the shift: the int32 copy and
  // its shift, 8 bytes an element.
  if (n == "BF16") return {"gguf_bf16", 3, 0, 6};
  // Q8_0: d * x (fp16), .to(bf16): the fp16 product beside the copy.
  if (n == "Q8_0") return {"q8_0", 2, 0, 2};
  // Q4_0: >> table, & 0x0F, .to(int8), - 8, d * qs, .to(bf16); one table.
  // At the copy: the fp16 product beside it (before: the int8 nibbles and the product, 3 bytes).
  if (n == "Q4_0") return {"q4_0", 6, 1, 2};
  // Q4_K: get_scale_min (12: six bit ops and a cat for each of scales and mins), d * sc, dmin * m, >> table,
  // & 0x0F, d * qs, - dm, .to(bf16); one table.
  // At `d * qs - dm`: the nibbles (qs, a local), the product and the result, 5 bytes an element.
  if (n == "Q4_K") return {"q4_k", 19, 1, 3};
  // Q5_K: get_scale_min (12), d * sc, dmin * m, ql >> table, qh >> table, & 0x0F, & 0x01, qh << 4, |, d * q, - dm,
  // .to(bf16); two tables.
  // At `d * q - dm`: ql, qh and q (locals), the product and the result, 7 bytes an element.
  if (n == "Q5_K") return {"q5_k", 23, 2, 5};
  // Q6_K: d * scales, ql >> table, & 0x0F, qh >> table, & 0x03, qh << 4, |, .to(int8), - 32, d * q, .to(bf16); two.
  // At `d * q`: ql, qh and q (locals) and the product, 5 bytes an element.
  if (n == "Q6_K") return {"q6_k", 11, 2, 3};
  throw std::logic_error(std::string("no ComfyUI-GGUF dequantization modelled for ") + type.name);
}

}  // namespace tiersim::model
