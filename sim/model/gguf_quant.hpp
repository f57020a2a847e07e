#pragma once
// GGUF quantisation as llama.cpp writes it (ggml-org/llama.cpp: ggml/src/ggml.c type_traits for the
// block layouts; src/llama-quant.cpp llama_tensor_get_type_impl for which type each tensor of a
// *_K_M / *_K_S / ... file gets; read 2026-11 at 007dbbf3). A file type ("Q4_K_M") names a base type
// and a mix: the output matrix in Q6_K, more bits for some layers' attn_v and ffn_down, norms in F32.
// Dense models only (MoE and the IQ1/IQ2/IQ3 mixes are not here).
#include <cstdint>
#include <string>

namespace tiersim::model::gguf {

struct QuantType {
  const char* name;
  int block;        // weights per block
  int block_bytes;  // bytes per block
  double bits() const { return 8.0 * block_bytes / block; }
};

// The role of a tensor in llama.cpp's quantisation rules (tensor_category).
enum class Role { TokenEmbd, AttnQ, AttnK, AttnV, AttnOutput, FfnGate, FfnUp, FfnDown, Output, Norm };

struct FileTypeFacts {
  int n_layer = 0;       // repeating layers
  int n_gqa = 1;         // attention heads per KV head
  bool is_70b = false;   // llama.cpp's LLM_TYPE_70B (80-layer Llama): attn_v gets Q5_K over Q3_K/Q4_K
  bool tied_output = false;
};

// True for the file-type names below (case-insensitive): F16, BF16, Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q4_K_M,
// Q4_K_S, Q4_0, Q3_K_M, Q2_K, IQ4_XS.
bool is_file_type(const std::string& name);
// The file type's name as llama.cpp writes it (upper case); throws std::invalid_argument if unknown.
std::string file_type_name(const std::string& name);
// The type a tensor of `role` in layer `layer` (0-based; -1 for none) gets in a file of `file_type`.
const QuantType& tensor_type(const std::string& file_type, Role role, int layer, const FileTypeFacts& facts);
// A ggml type by its name (F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS; any case);
// throws std::invalid_argument if unknown.
const QuantType& quant_type(const std::string& name);
// Bytes of `params` weights in `type` (whole blocks).
std::uint64_t tensor_bytes(const QuantType& type, std::uint64_t params);
// The base type of a file type (what most matrices get).
const QuantType& base_type(const std::string& file_type);

}  // namespace tiersim::model::gguf
