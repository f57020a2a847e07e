#pragma once
// The header of a llama.cpp GGUF file: its metadata (key-value pairs) and tensor infos, never the
// weights. The format is the one ggml-org/llama.cpp reads in ggml/src/gguf.cpp gguf_init_from_reader
// (called gguf_init_from_file_impl before) and documents in ggml/include/gguf.h; the tensor types
// are ggml/include/ggml.h enum ggml_type with ggml/src/ggml.c type_traits (read at 34af94cd9).
// Everything a file may say is checked before it is used: every failure is an InputError naming
// the file, the metadata key or tensor at fault (or "header", "tensor_count", "kv_count").
#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

#include "model/model_config.hpp"

namespace tiersim::model::gguf {

struct FileTensor {
  std::string name;
  std::string type;                  // ggml type name, lower case: f32, f16, bf16, q8_0, q4_k, q6_k, ...
  std::vector<std::uint64_t> shape;  // ggml order: shape[0] is the row (contiguous) dimension
  std::uint64_t bytes = 0;           // bytes of the tensor's data (whole blocks)
  std::uint64_t offset = 0;          // from the start of the data section
};

struct FileHeader {
  std::uint32_t version = 0;  // 2 or 3
  std::string architecture;   // general.architecture ("" when the file has none)
  // Scalar values as text: integers in decimal, floats in the shortest form that reads back, bools
  // true/false, strings as they are (a string over 1 MiB as "[string of N bytes]"). Arrays as
  // "[array of N TYPE]", TYPE a GGUF type name (uint8 ... float64, string).
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> metadata_type;  // the GGUF type of each key: uint32, string, array, ...
  std::uint64_t vocab_size = 0;  // tokenizer.ggml.tokens' length, else token_embd.weight's second dimension
  std::vector<FileTensor> tensors;  // in file order
  std::uint32_t file_type = 0;      // general.file_type (llama_ftype), when has_file_type
  bool has_file_type = false;
  std::uint64_t alignment = 32;    // general.alignment, else GGUF_DEFAULT_ALIGNMENT
  std::uint64_t data_offset = 0;   // where the tensor data starts (the header's end, aligned)
  std::uint64_t data_bytes = 0;    // the data section's size, each tensor padded to the alignment

  const FileTensor* find_tensor(const std::string& name) const;  // nullptr when absent
};

// Reads the header from the stream's current position; the tensor data is neither read nor
// required to be there (a file cut short after its header reads).
FileHeader read_header(std::istream& in, const std::string& file);
FileHeader read_header_file(const std::string& path);

// A ModelConfig for the dense decoders tiersim generates (architectures llama, mistral, qwen2,
// qwen3) from {arch}.block_count, .embedding_length, .feed_forward_length, .attention.head_count,
// .attention.head_count_kv (default head_count), .attention.key_length (default embedding_length /
// head_count) and the vocabulary; qwen3 has qk_norm; tied embeddings when there is no output.weight;
// attention_bias when blk.0.attn_q.bias is there; the name from general.name. The same bounds as a
// config.json (parse_model_config). Any other architecture: InputError naming it.
ModelConfig model_config(const FileHeader& h, const std::string& file);

// The llama-quantize name of a llama_ftype (include/llama.h enum llama_ftype): 15 -> "Q4_K_M",
// 0 -> "F32"; "" for an id llama.cpp does not define.
std::string ftype_name(std::uint32_t ftype);

}  // namespace tiersim::model::gguf
