#pragma once
// A safetensors file's header, read without its tensor data: 8 bytes (little-endian u64 N), then N bytes of JSON
// mapping each tensor's name to {"dtype", "shape", "data_offsets": [begin, end]} (and an optional "__metadata__" of
// strings), as huggingface/safetensors writes and checks it: N at most 100,000,000 (its MAX_HEADER_SIZE), the
// offsets contiguous from 0, each tensor's bytes its shape's elements x its dtype's size. Every error names the file,
// the line and the key (the tensor's name and field).
#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

namespace tiersim::model::safetensors {

inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

struct Tensor {
  std::string name;
  std::string dtype;                 // the file's spelling: BF16, F32, F8_E4M3, ...
  std::vector<std::uint64_t> shape;
  std::uint64_t elements = 0;        // the product of shape (1 for a scalar)
  std::uint64_t bytes = 0;           // data_offsets[1] - data_offsets[0]
};

struct Header {
  std::vector<Tensor> tensors;                  // in data order (by data_offsets[0])
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::uint64_t header_bytes = 0;               // N
  std::uint64_t data_bytes = 0;                 // the end of the last tensor's data
};

// The bits of one element of `dtype` (0 when the dtype is not one safetensors defines).
unsigned dtype_bits(const std::string& dtype);

// Parses the JSON header text alone (the N bytes).
Header parse_header_json(const std::string& json, const std::string& file, std::uint64_t header_bytes);
// Reads the 8-byte length and the header from `in` (`size`: the stream's length, to check that the data the header
// describes is there); never reads past the header.
Header read_header(std::istream& in, std::uint64_t size, const std::string& file);
Header read_header_file(const std::string& path);

}  // namespace tiersim::model::safetensors
