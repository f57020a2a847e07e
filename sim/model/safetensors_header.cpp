#include "model/safetensors_header.hpp"

#include <algorithm>
#include <tuple>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/config_json.hpp"

namespace tiersim::model::safetensors {

unsigned dtype_bits(const std::string& d) {
  // safetensors' Dtype (safetensors/src/tensor.rs): bitsize of each.
  static const std::map<std::string, unsigned> bits{
      {"BOOL", 8},     {"U8", 8},       {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8},
      {"I16", 16},     {"U16", 16},     {"F16", 16}, {"BF16", 16},   {"I32", 32},    {"U32", 32},
      {"F32", 32},     {"F64", 64},     {"I64", 64}, {"U64", 64},    {"F4", 4},      {"F6_E2M3", 6},
      {"F6_E3M2", 6}};
  const auto it = bits.find(d);
  return it == bits.end() ? 0 : it->second;
}

Header parse_header_json(const std::string& json, const std::string& file, std::uint64_t header_bytes) {
  const ConfigJson doc = parse_config_json(json, file);
  if (!doc.json.is_object()) throw InputError(file, 1, "", "a safetensors header is a JSON object of tensors");
  const ConfigReader r(doc);
  Header h;
  h.header_bytes = header_bytes;
  struct Span {
    std::uint64_t begin, end;
    std::size_t tensor;
  };
  std::vector<Span> spans;
  for (const auto& [name, v] : doc.json.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) r.fail(name, "must be an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) r.fail(name, "'" + k + "' must be a string, got " + s.dump());
        h.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    if (!v.is_object()) r.fail(name, "a tensor must be an object with dtype, shape and data_offsets");
    for (const auto& [k, unused] : v.items()) {
      (void)unused;
      if (k != "dtype" && k != "shape" && k != "data_offsets") r.fail(name, "unknown field '" + k + "' of a tensor");
    }
    Tensor t;
    t.name = name;
    if (!v.contains("dtype") || !v["dtype"].is_string()) r.fail(name, "dtype: missing, or not a string");
    t.dtype = v["dtype"].get<std::string>();
    const unsigned bits = dtype_bits(t.dtype);
    if (bits == 0) r.fail(name, "dtype: '" + t.dtype + "' is no safetensors dtype");
    if (!v.contains("shape") || !v["shape"].is_array() || v["shape"].size() > 16)
      r.fail(name, "shape: missing, or not a list of at most 16 sizes");
    t.elements = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) r.fail(name, "shape: each size is an integer from 0, got " + d.dump());
      const auto n = d.get<std::uint64_t>();
      if (n > 0 && t.elements > UINT64_MAX / n) r.fail(name, "shape: its elements overflow 64 bits");
      t.elements *= n;
      t.shape.push_back(n);
    }
    const auto& off = v.contains("data_offsets") ? v["data_offsets"] : nlohmann::json();
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      r.fail(name, "data_offsets: must be [begin, end], two integers from 0");
    const auto begin = off[0].get<std::uint64_t>(), end = off[1].get<std::uint64_t>();
    if (end < begin) r.fail(name, "data_offsets: end is before begin");
    t.bytes = end - begin;
    if (t.elements > UINT64_MAX / bits) r.fail(name, "shape: its bits overflow 64 bits");
    const std::uint64_t want_bits = t.elements * bits;
    if (want_bits % 8 != 0 || t.bytes != want_bits / 8)
      r.fail(name, "data_offsets: " + std::to_string(t.bytes) + " bytes, but its shape holds " +
                       std::to_string(t.elements) + " " + t.dtype + " elements (" + std::to_string(want_bits) + " bits)");
    spans.push_back({begin, end, h.tensors.size()});
    h.tensors.push_back(std::move(t));
  }
  // As safetensors validates them: sorted by begin, each starts where the previous ends, from 0.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.begin, a.end, a.tensor) < std::tie(b.begin, b.end, b.tensor);
  });
  std::uint64_t at = 0;
  std::vector<Tensor> ordered;
  for (const Span& s : spans) {
    if (s.begin != at)
      r.fail(h.tensors[s.tensor].name, "data_offsets: begins at " + std::to_string(s.begin) + ", where " +
                                           std::to_string(at) + " was expected (tensors lie end to end from 0)");
    at = s.end;
    ordered.push_back(h.tensors[s.tensor]);
  }
  h.tensors = std::move(ordered);
  h.data_bytes = at;
  return h;
}

Header read_header(std::istream& in, std::uint64_t size, const std::string& file) {
  unsigned char len[8];
  if (size < 8 || !in.read(reinterpret_cast<char*>(len), 8))
    throw InputError(file, 0, "header", "shorter than the 8-byte header length of a safetensors file");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  if (n > kMaxHeaderBytes)
    throw InputError(file, 0, "header", "length " + std::to_string(n) + " is more than safetensors' 100,000,000 bytes");
  if (n > size - 8)
    throw InputError(file, 0, "header", "length " + std::to_string(n) + " runs past the file's " +
                                            std::to_string(size) + " bytes");
  std::string json(static_cast<std::size_t>(n), '\0');
  if (n > 0 && !in.read(json.data(), static_cast<std::streamsize>(n)))
    throw InputError(file, 0, "header", "could not read its " + std::to_string(n) + " bytes");
  Header h = read_config_with(ConfigJson{{}, json, file}, [&](const ConfigJson&) { return parse_header_json(json, file, n); });
  if (h.data_bytes > size - 8 - n)
    throw InputError(file, 0, "data_offsets", "the tensors end at byte " + std::to_string(h.data_bytes) +
                                                  " of the data, but the file holds " + std::to_string(size - 8 - n));
  return h;
}

Header read_header_file(const std::string& path) {
  const auto f = io::open_file(path, "", "safetensors file", true);
  f->seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(f->tellg());
  f->seekg(0);
  return read_header(*f, size, path);
}

}  // namespace tiersim::model::safetensors
