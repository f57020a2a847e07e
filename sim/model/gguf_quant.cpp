#include "model/gguf_quant.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>

namespace tiersim::model::gguf {
namespace {

// ggml type_traits: block size and bytes per block.
const QuantType kF32{"F32", 1, 4}, kF16{"F16", 1, 2}, kBF16{"BF16", 1, 2}, kQ8_0{"Q8_0", 32, 34},
    kQ4_0{"Q4_0", 32, 18}, kQ5_0{"Q5_0", 32, 22}, kQ2_K{"Q2_K", 256, 84}, kQ3_K{"Q3_K", 256, 110},
    kQ4_K{"Q4_K", 256, 144}, kQ5_K{"Q5_K", 256, 176}, kQ6_K{"Q6_K", 256, 210}, kIQ4_XS{"IQ4_XS", 256, 136};

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const std::map<std::string, const QuantType*>& bases() {
  // llama_model_quantize_impl: the default type of each file type.
  static const std::map<std::string, const QuantType*> m{
      {"F16", &kF16},     {"BF16", &kBF16},   {"Q8_0", &kQ8_0},   {"Q6_K", &kQ6_K},
      {"Q5_K_M", &kQ5_K}, {"Q5_K_S", &kQ5_K}, {"Q4_K_M", &kQ4_K}, {"Q4_K_S", &kQ4_K},
      {"Q4_0", &kQ4_0},   {"Q3_K_M", &kQ3_K}, {"Q2_K", &kQ2_K},   {"IQ4_XS", &kIQ4_XS}};
  return m;
}

bool quantized(const QuantType& t) { return t.block > 1; }

// use_more_bits in llama_tensor_get_type_impl.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

const QuantType& quant_type(const std::string& name) {
  const std::string u = upper(name);
  for (const QuantType* t : {&kF32, &kF16, &kBF16, &kQ8_0, &kQ4_0, &kQ5_0, &kQ2_K, &kQ3_K, &kQ4_K, &kQ5_K, &kQ6_K, &kIQ4_XS})
    if (u == t->name) return *t;
  throw std::invalid_argument("unknown ggml type '" + name + "'");
}

bool is_file_type(const std::string& name) { return bases().count(upper(name)) > 0; }

std::string file_type_name(const std::string& name) {
  const std::string u = upper(name);
  if (!bases().count(u)) throw std::invalid_argument("unknown GGUF file type '" + name + "'");
  return u;
}

const QuantType& base_type(const std::string& file_type) {
  const auto it = bases().find(upper(file_type));
  if (it == bases().end()) throw std::invalid_argument("unknown GGUF file type '" + file_type + "'");
  return *it->second;
}

const QuantType& tensor_type(const std::string& file_type, Role role, int layer, const FileTypeFacts& f) {
  const std::string ft = upper(file_type);
  const QuantType& base = base_type(ft);
  // Norms (1-D) are not quantised: convert_hf_to_gguf writes them in F32.
  if (role == Role::Norm) return kF32;
  if (!quantized(base)) return base;  // F16, BF16 files keep every matrix in that type
  const int n = f.n_layer;
  // The output matrix (and a tied token embedding): Q6_K unless the file is Q8_0.
  if (role == Role::Output || (f.tied_output && role == Role::TokenEmbd))
    return &base == &kQ8_0 ? kQ8_0 : kQ6_K;
  if (role == Role::TokenEmbd) return base;
  const QuantType* t = &base;
  if (role == Role::AttnV) {
    if (ft == "Q2_K") t = f.n_gqa >= 4 ? &kQ4_K : &kQ3_K;
    else if (ft == "Q3_K_M") t = layer < 2 ? &kQ5_K : &kQ4_K;
    else if (ft == "IQ4_XS" && f.n_gqa >= 4) t = &kQ5_K;
    else if ((ft == "Q4_K_M" || ft == "Q5_K_M") && use_more_bits(layer, n)) t = &kQ6_K;
    else if (ft == "Q4_K_S" && layer < 4) t = &kQ5_K;
    if (f.is_70b && (t == &kQ3_K || t == &kQ4_K)) t = &kQ5_K;
  } else if (role == Role::FfnDown) {
    if (ft == "Q2_K") t = &kQ3_K;
    else if (ft == "Q3_K_M") t = layer < n / 16 ? &kQ5_K : &kQ4_K;  // non-Falcon: Q4_K past the first 1/16
    else if (ft == "Q4_K_M") t = use_more_bits(layer, n) ? &kQ6_K : t;
    else if (ft == "IQ4_XS" && layer < n / 8) t = &kQ5_K;  // without an importance matrix
    else if (ft == "Q5_K_M" && use_more_bits(layer, n)) t = &kQ6_K;
    else if (ft == "Q4_K_S" && layer < n / 8) t = &kQ5_K;
  } else if (role == Role::AttnOutput) {
    if (ft == "Q2_K") t = &kQ3_K;
    else if (ft == "Q3_K_M") t = &kQ4_K;
  }
  return *t;
}

std::uint64_t tensor_bytes(const QuantType& type, std::uint64_t params) {
  const std::uint64_t blocks = (params + static_cast<std::uint64_t>(type.block) - 1) / static_cast<std::uint64_t>(type.block);
  return blocks * static_cast<std::uint64_t>(type.block_bytes);
}

}  // namespace tiersim::model::gguf
