#include "model/gguf_file.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <system_error>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_text.hpp"

namespace tiersim::model::gguf {
namespace {

// ggml/include/ggml.h enum ggml_type and ggml/src/ggml.c type_traits (type_name lower-cased,
// blck_size, type_size = sizeof the block struct of ggml/src/ggml-common.h), at 34af94cd9. The ids
// whose support was removed (4, 5: Q4_2, Q4_3; 31-33: Q4_0_4_x; 36-38: IQ4_NL_4_x) have blck_size 0
// there and are refused by gguf_init_from_reader; here they have no name.
struct GgmlType {
  const char* name;
  std::uint32_t block;  // elements per block
  std::uint32_t bytes;  // bytes per block
};
constexpr GgmlType kGgmlTypes[] = {
    {"f32", 1, 4},          // 0
    {"f16", 1, 2},          // 1
    {"q4_0", 32, 18},       // 2
    {"q4_1", 32, 20},       // 3
    {nullptr, 0, 0},        // 4: Q4_2, removed
    {nullptr, 0, 0},        // 5: Q4_3, removed
    {"q5_0", 32, 22},       // 6
    {"q5_1", 32, 24},       // 7
    {"q8_0", 32, 34},       // 8
    {"q8_1", 32, 36},       // 9
    {"q2_k", 256, 84},      // 10
    {"q3_k", 256, 110},     // 11
    {"q4_k", 256, 144},     // 12
    {"q5_k", 256, 176},     // 13
    {"q6_k", 256, 210},     // 14
    {"q8_k", 256, 292},     // 15
    {"iq2_xxs", 256, 66},   // 16
    {"iq2_xs", 256, 74},    // 17
    {"iq3_xxs", 256, 98},   // 18
    {"iq1_s", 256, 50},     // 19
    {"iq4_nl", 32, 18},     // 20
    {"iq3_s", 256, 110},    // 21
    {"iq2_s", 256, 82},     // 22
    {"iq4_xs", 256, 136},   // 23
    {"i8", 1, 1},           // 24
    {"i16", 1, 2},          // 25
    {"i32", 1, 4},          // 26
    {"i64", 1, 8},          // 27
    {"f64", 1, 8},          // 28
    {"iq1_m", 256, 56},     // 29
    {"bf16", 1, 2},         // 30
    {nullptr, 0, 0},        // 31: Q4_0_4_4, removed from GGUF files
    {nullptr, 0, 0},        // 32: Q4_0_4_8
    {nullptr, 0, 0},        // 33: Q4_0_8_8
    {"tq1_0", 256, 54},     // 34
    {"tq2_0", 256, 66},     // 35
    {nullptr, 0, 0},        // 36: IQ4_NL_4_4, removed
    {nullptr, 0, 0},        // 37: IQ4_NL_4_8
    {nullptr, 0, 0},        // 38: IQ4_NL_8_8
    {"mxfp4", 32, 17},      // 39
    {"nvfp4", 64, 36},      // 40
    {"q1_0", 128, 18},      // 41
    {"q2_0", 64, 18},       // 42
};
constexpr std::uint32_t kGgmlTypeCount = sizeof(kGgmlTypes) / sizeof(kGgmlTypes[0]);  // GGML_TYPE_COUNT
static_assert(kGgmlTypeCount == 43);

// ggml/include/gguf.h enum gguf_type; the sizes are gguf.cpp GGUF_TYPE_SIZE, the names the GGUF
// specification's (docs/gguf.md gguf_metadata_value_type) in lower case.
enum ValueType : std::uint32_t {
  kUint8 = 0, kInt8, kUint16, kInt16, kUint32, kInt32, kFloat32, kBool, kString, kArray, kUint64, kInt64, kFloat64,
  kValueTypeCount
};
constexpr const char* kValueTypeNames[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32", "float32",
                                           "bool",  "string", "array",  "uint64", "int64",  "float64"};
constexpr std::uint64_t kValueTypeBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

// Limits. gguf.cpp: GGUF_MAX_STRING_LENGTH and GGUF_MAX_ARRAY_ELEMENTS (2^30 each), GGML_MAX_DIMS
// (4), GGML_MAX_NAME (64, with the terminating NUL). The counts are tiersim's: far above any model
// (a 405B Llama has ~1,100 tensors and ~40 keys) and low enough that what is kept stays small.
constexpr std::uint64_t kMaxStringBytes = 1ull << 30;
constexpr std::uint64_t kMaxArrayElements = 1ull << 30;
constexpr std::uint64_t kMaxKeptString = 1ull << 20;  // a longer value is skipped, not kept
constexpr std::uint64_t kMaxKeyBytes = 65535;         // the GGUF specification's bound on a key
constexpr std::uint64_t kMaxTensorName = 63;
constexpr std::uint32_t kMaxDims = 4;
constexpr std::uint64_t kMaxTensors = 1ull << 20;
constexpr std::uint64_t kMaxKv = 1ull << 20;
constexpr std::uint64_t kDefaultAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT
// The fewest bytes a key-value pair (a key of one byte, a type, a one-byte value) and a tensor info
// (an empty name's length, n_dims, the type, the offset) take: counts the file cannot hold are
// refused before the first is read.
constexpr std::uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

std::string num(std::uint64_t v) { return std::to_string(v); }

// Reads the stream little-endian, byte by byte (no reinterpretation of host memory), counting the
// bytes it consumed and, when the stream can seek, the bytes left: no length or count read from the
// file is used before it is checked against them.
class Reader {
 public:
  Reader(std::istream& in, const std::string& file) : in_(in), file_(file) {
    const std::streampos start = in.tellg();
    if (start == std::streampos(-1)) return;
    in.seekg(0, std::ios::end);
    const std::streampos end = in.tellg();
    in.clear();
    in.seekg(start);
    if (end != std::streampos(-1) && end >= start && in) {
      size_ = static_cast<std::uint64_t>(end - start);
      seekable_ = true;
    }
    in.clear();
  }

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw InputError(file_, 0, key, message);
  }
  std::uint64_t pos() const { return pos_; }
  std::uint64_t remaining() const { return seekable_ ? size_ - pos_ : std::numeric_limits<std::uint64_t>::max(); }

  void bytes(void* dst, std::uint64_t n, const std::string& key, const std::string& what) {
    if (n > remaining()) truncated(key, what, n, remaining());
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    const auto got = static_cast<std::uint64_t>(in_.gcount());
    if (got != n) truncated(key, what, n, got);
    pos_ += n;
  }
  // Skips n bytes: seeks over long runs, reads through short ones (a token list is 100,000+ short
  // strings; a seek per string would refill the stream's buffer each time).
  void skip(std::uint64_t n, const std::string& key, const std::string& what) {
    if (n > remaining()) truncated(key, what, n, remaining());
    if (seekable_ && n > (1u << 16)) {
      in_.seekg(static_cast<std::streamoff>(n), std::ios::cur);
      if (!in_) truncated(key, what, n, 0);
      pos_ += n;
      return;
    }
    while (n > 0) {
      const std::uint64_t chunk = std::min<std::uint64_t>(n, 1u << 20);
      in_.ignore(static_cast<std::streamsize>(chunk));
      const auto got = static_cast<std::uint64_t>(in_.gcount());
      pos_ += got;
      if (got != chunk) truncated(key, what, n, got);
      n -= chunk;
    }
  }
  template <int N>
  std::uint64_t le(const std::string& key, const std::string& what) {
    unsigned char b[N];
    bytes(b, N, key, what);
    std::uint64_t v = 0;
    for (int i = N - 1; i >= 0; --i) v = (v << 8) | b[i];
    return v;
  }
  std::uint64_t u64(const std::string& key, const std::string& what) { return le<8>(key, what); }
  std::uint32_t u32(const std::string& key, const std::string& what) {
    return static_cast<std::uint32_t>(le<4>(key, what));
  }

  // A string's length, checked against llama.cpp's bound and the bytes left.
  std::uint64_t string_length(const std::string& key, const std::string& what) {
    const std::uint64_t n = u64(key, what + "'s length");
    if (n > kMaxStringBytes)
      fail(key, what + " of " + num(n) + " bytes: llama.cpp reads at most 2^30 (GGUF_MAX_STRING_LENGTH)");
    if (n > remaining())
      fail(key, what + " of " + num(n) + " bytes runs past the end of the file (" + num(remaining()) + " bytes left)");
    return n;
  }
  // A name (a key, a tensor's name) of at most max bytes.
  std::string name(const std::string& key, const std::string& what, std::uint64_t max, const std::string& why) {
    const std::uint64_t n = string_length(key, what);
    if (n > max) fail(key, what + " of " + num(n) + " bytes: at most " + num(max) + " (" + why + ")");
    std::string s(static_cast<std::size_t>(n), '\0');
    if (n > 0) bytes(s.data(), n, key, what);
    return s;
  }
  // A string value: kept up to kMaxKeptString bytes, skipped past it (nullopt).
  std::optional<std::string> value_string(const std::string& key, std::uint64_t& length) {
    length = string_length(key, "the string");
    if (length > kMaxKeptString) {
      skip(length, key, "the string");
      return std::nullopt;
    }
    std::string s(static_cast<std::size_t>(length), '\0');
    if (length > 0) bytes(s.data(), length, key, "the string");
    return s;
  }

 private:
  [[noreturn]] void truncated(const std::string& key, const std::string& what, std::uint64_t needed,
                              std::uint64_t left) const {
    fail(key, "the file ends inside " + what + " (at byte " + num(pos_) + ": " + num(needed) + " bytes needed, " +
                  num(left) + " left)");
  }

  std::istream& in_;
  const std::string& file_;
  std::uint64_t pos_ = 0;
  std::uint64_t size_ = 0;
  bool seekable_ = false;
};

std::string float_text(double v, bool single) {
  char buf[64];
  const auto r = single ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v)) : std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// A scalar value as read: its text, and for integers the value and its sign.
struct Scalar {
  std::string text;
  bool integer = false;
  bool negative = false;
  std::uint64_t magnitude = 0;
};

Scalar read_scalar(Reader& r, std::uint32_t type, const std::string& key) {
  const std::string what = std::string("the ") + kValueTypeNames[type] + " value";
  Scalar s;
  auto set_unsigned = [&](std::uint64_t v) {
    s.integer = true;
    s.magnitude = v;
    s.text = num(v);
  };
  auto set_signed = [&](std::uint64_t bits, int width) {
    // Two's complement of `width` bits, without a signed conversion of an out-of-range value.
    const std::uint64_t sign = 1ull << (width - 1);
    s.integer = true;
    if (bits & sign) {
      const std::uint64_t mask = width == 64 ? ~0ull : (1ull << width) - 1;
      s.negative = true;
      s.magnitude = ((~bits) & mask) + 1;  // 2^63 for the most negative int64: fits unsigned
      s.text = "-" + num(s.magnitude);
    } else {
      s.magnitude = bits;
      s.text = num(bits);
    }
  };
  switch (type) {
    case kUint8: set_unsigned(r.le<1>(key, what)); break;
    case kInt8: set_signed(r.le<1>(key, what), 8); break;
    case kUint16: set_unsigned(r.le<2>(key, what)); break;
    case kInt16: set_signed(r.le<2>(key, what), 16); break;
    case kUint32: set_unsigned(r.le<4>(key, what)); break;
    case kInt32: set_signed(r.le<4>(key, what), 32); break;
    case kUint64: set_unsigned(r.le<8>(key, what)); break;
    case kInt64: set_signed(r.le<8>(key, what), 64); break;
    case kBool: s.text = r.le<1>(key, what) != 0 ? "true" : "false"; break;  // gguf_reader::read(bool&): != 0
    case kFloat32: {
      const auto bits = static_cast<std::uint32_t>(r.le<4>(key, what));
      float f;
      std::memcpy(&f, &bits, sizeof f);
      s.text = float_text(f, true);
      break;
    }
    case kFloat64: {
      const std::uint64_t bits = r.le<8>(key, what);
      double d;
      std::memcpy(&d, &bits, sizeof d);
      s.text = float_text(d, false);
      break;
    }
    case kString: {
      std::uint64_t length = 0;
      const auto str = r.value_string(key, length);
      s.text = str ? *str : "[string of " + num(length) + " bytes]";
      break;
    }
    default: r.fail(key, "unknown value type " + num(type));
  }
  return s;
}

std::uint64_t pad(std::uint64_t x, std::uint64_t align) {  // GGML_PAD, align a power of two
  return (x + align - 1) & ~(align - 1);
}

}  // namespace

const FileTensor* FileHeader::find_tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// The layout and the checks follow gguf_init_from_reader (ggml/src/gguf.cpp): magic, version,
// tensor and key-value counts, the key-value pairs, then the tensor infos.
FileHeader read_header(std::istream& in, const std::string& file) {
  Reader r(in, file);
  FileHeader h;
  h.alignment = kDefaultAlignment;

  char magic[4];
  r.bytes(magic, 4, "header", "the magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) r.fail("header", "not a GGUF file (the first four bytes are not \"GGUF\")");

  h.version = r.u32("version", "the version");
  if (h.version != 2 && h.version != 3) {
    // A byte-swapped (big-endian) file reads as 0x02000000 or 0x03000000 (gguf_init_from_reader's check).
    const bool swapped = (h.version & 0xFFFF) == 0 && h.version != 0;
    r.fail("version", "GGUF version " + num(h.version) + " is not read (versions 2 and 3 are)" +
                          (swapped ? "; the file looks big-endian, which is not read" : ""));
  }

  const std::uint64_t n_tensors = r.u64("tensor_count", "the tensor count");
  if (n_tensors > kMaxTensors) r.fail("tensor_count", num(n_tensors) + " tensors: at most 2^20 are read");
  const std::uint64_t n_kv = r.u64("kv_count", "the key-value count");
  if (n_kv > kMaxKv) r.fail("kv_count", num(n_kv) + " key-value pairs: at most 2^20 are read");
  if (n_kv * kMinKvBytes + n_tensors * kMinTensorInfoBytes > r.remaining())  // no overflow: both < 2^25
    r.fail(n_kv * kMinKvBytes > r.remaining() ? "kv_count" : "tensor_count",
           num(n_kv) + " key-value pairs and " + num(n_tensors) + " tensors cannot fit in the " + num(r.remaining()) +
               " bytes left");

  std::uint64_t tokens = 0;
  bool has_tokens = false;
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::string where = "kv[" + num(i) + "]";
    const std::string key = r.name(where, "the key", kMaxKeyBytes, "the GGUF specification's bound");
    if (key.empty()) r.fail(where, "empty key");
    if (h.metadata.count(key)) r.fail(key, "appears twice");
    const std::uint32_t type = r.u32(key, "the value type");
    if (type >= kValueTypeCount) r.fail(key, "unknown value type " + num(type));
    if (type == kArray) {
      const std::uint32_t elem = r.u32(key, "the array's element type");
      if (elem == kArray)
        r.fail(key, "an array of arrays (llama.cpp's gguf_init_from_reader refuses them too)");
      if (elem >= kValueTypeCount) r.fail(key, "unknown array element type " + num(elem));
      const std::uint64_t n = r.u64(key, "the array's length");
      const std::string desc = "[array of " + num(n) + " " + kValueTypeNames[elem] + "]";
      if (n > kMaxArrayElements) r.fail(key, desc + ": llama.cpp reads at most 2^30 elements (GGUF_MAX_ARRAY_ELEMENTS)");
      const std::uint64_t min_bytes = elem == kString ? 8 : kValueTypeBytes[elem];
      if (n * min_bytes > r.remaining())  // n <= 2^30, min_bytes <= 8: no overflow
        r.fail(key, desc + " needs at least " + num(n * min_bytes) + " bytes, " + num(r.remaining()) + " left");
      if (elem == kString) {
        for (std::uint64_t j = 0; j < n; ++j) r.skip(r.string_length(key, "a string of the array"), key, "a string of the array");
      } else {
        r.skip(n * min_bytes, key, "the array");
      }
      if (key == "tokenizer.ggml.tokens") {
        if (elem != kString) r.fail(key, "must be an array of strings, got " + desc);
        tokens = n;
        has_tokens = true;
      }
      h.metadata[key] = desc;
      h.metadata_type[key] = "array";
      continue;
    }
    const Scalar v = read_scalar(r, type, key);
    if (key == "general.architecture") {
      if (type != kString) r.fail(key, std::string("must be a string, got ") + kValueTypeNames[type]);
      h.architecture = v.text;
    } else if (key == "general.alignment") {
      // gguf_init_from_reader: a uint32 power of two.
      if (type != kUint32) r.fail(key, std::string("must be a uint32, got ") + kValueTypeNames[type]);
      if (v.magnitude == 0 || (v.magnitude & (v.magnitude - 1)) != 0) r.fail(key, "must be a power of two, got " + v.text);
      h.alignment = v.magnitude;
    } else if (key == "general.file_type") {
      // llama_model_loader reads it as a uint32 llama_ftype; any integer type that holds one is taken.
      if (!v.integer || v.negative || v.magnitude > std::numeric_limits<std::uint32_t>::max())
        r.fail(key, "must be a llama_ftype (an unsigned 32-bit integer), got " + std::string(kValueTypeNames[type]) + " " + v.text);
      h.file_type = static_cast<std::uint32_t>(v.magnitude);
      h.has_file_type = true;
    } else if (key == "tokenizer.ggml.tokens") {
      r.fail(key, std::string("must be an array of strings, got ") + kValueTypeNames[type]);
    }
    h.metadata[key] = v.text;
    h.metadata_type[key] = kValueTypeNames[type];
  }

  // Tensor infos: name, n_dims, ne[n_dims] (int64), ggml type (int32), offset (uint64).
  std::set<std::string> names;
  std::uint64_t expected_offset = 0;
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    const std::string where = "tensor[" + num(i) + "]";
    FileTensor t;
    t.name = r.name(where, "the tensor name", kMaxTensorName, "ggml's GGML_MAX_NAME");
    if (t.name.empty()) r.fail(where, "empty tensor name");
    if (!names.insert(t.name).second) r.fail(t.name, "two tensors have this name");
    const std::uint32_t n_dims = r.u32(t.name, "the tensor's dimension count");
    if (n_dims > kMaxDims) r.fail(t.name, num(n_dims) + " dimensions: ggml tensors have at most 4 (GGML_MAX_DIMS)");
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t ne = r.u64(t.name, "the tensor's shape");
      if (ne > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        r.fail(t.name, "dimension " + num(d) + " is negative (an int64 of " + num(ne) + " read unsigned)");
      if (ne == 0) r.fail(t.name, "dimension " + num(d) + " is zero");
      // gguf_init_from_reader: the element count must be below INT64_MAX.
      if (__builtin_mul_overflow(elements, ne, &elements) ||
          elements >= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        r.fail(t.name, "the shape's element count overflows 63 bits");
      t.shape.push_back(ne);
    }
    const std::uint32_t type_id = r.u32(t.name, "the tensor's type");
    if (type_id >= kGgmlTypeCount || kGgmlTypes[type_id].name == nullptr)
      r.fail(t.name, "unknown ggml type id " + num(type_id) + " (removed from GGUF files or newer than this reader)");
    const GgmlType& type = kGgmlTypes[type_id];
    t.type = type.name;
    // gguf_init_from_reader: rows (ne[0]) are whole blocks.
    const std::uint64_t row = t.shape.empty() ? 1 : t.shape[0];
    if (row % type.block != 0)
      r.fail(t.name, "rows of " + num(row) + " elements are not whole " + t.type + " blocks of " + num(type.block));
    if (__builtin_mul_overflow(elements / type.block, std::uint64_t{type.bytes}, &t.bytes))
      r.fail(t.name, "the tensor's size in bytes overflows 64 bits");
    t.offset = r.u64(t.name, "the tensor's data offset");
    // gguf_init_from_reader: each tensor starts where the previous one ends, padded to the alignment.
    if (t.offset != expected_offset)
      r.fail(t.name, "data offset " + num(t.offset) + ", expected " + num(expected_offset) +
                         " (tensors follow one another, each padded to " + num(h.alignment) + " bytes)");
    if (t.bytes > std::numeric_limits<std::uint64_t>::max() - (h.alignment - 1) ||
        __builtin_add_overflow(expected_offset, pad(t.bytes, h.alignment), &expected_offset))
      r.fail(t.name, "the data section's size overflows 64 bits");
    h.tensors.push_back(std::move(t));
  }
  h.data_bytes = expected_offset;
  if (r.pos() > std::numeric_limits<std::uint64_t>::max() - (h.alignment - 1))
    r.fail("header", "the header's size overflows 64 bits");
  h.data_offset = pad(r.pos(), h.alignment);

  if (has_tokens) {
    h.vocab_size = tokens;
  } else if (const FileTensor* e = h.find_tensor("token_embd.weight"); e && e->shape.size() >= 2) {
    h.vocab_size = e->shape[1];
  }
  return h;
}

FileHeader read_header_file(const std::string& path) {
  // A regular file only: /dev/zero would read gigabytes of "metadata" before a bound stops it.
  const auto in = io::open_file(path, "", "GGUF file", true);
  return read_header(*in, path);
}

namespace {

bool is_integer_type(const std::string& type) {
  return type == "uint8" || type == "int8" || type == "uint16" || type == "int16" || type == "uint32" ||
         type == "int32" || type == "uint64" || type == "int64";
}

// A hyperparameter: one non-negative integer of any integer type (llama_model_loader::get_key; a
// per-layer array, which get_key_or_arr also takes, is refused: one value for every layer is modelled).
std::optional<std::uint64_t> hparam(const FileHeader& h, const std::string& key, const std::string& file) {
  const auto it = h.metadata.find(key);
  if (it == h.metadata.end()) return std::nullopt;
  const auto type = h.metadata_type.find(key);
  const std::string t = type == h.metadata_type.end() ? "" : type->second;
  if (t == "array") throw InputError(file, 0, key, "a per-layer array " + it->second + ": one value for every layer is modelled");
  if (!is_integer_type(t)) throw InputError(file, 0, key, "must be an integer, got " + t + " " + it->second);
  const std::string& text = it->second;
  std::uint64_t v = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size())
    throw InputError(file, 0, key, "must be a non-negative integer, got " + text);
  return v;
}

}  // namespace

namespace {
// Whether a name from a file can be printed and written to JSON as it is: well-formed UTF-8 (no overlong
// forms, surrogates or code points past U+10FFFF) without control characters, at most 256 bytes.
bool printable_utf8(const std::string& s) {
  if (s.size() > 256) return false;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    const int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 ? 1 : -1;
    if (extra < 0 || c > 0xf4 || i + static_cast<std::size_t>(extra) >= s.size()) return false;
    std::uint32_t cp = c & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += static_cast<std::size_t>(extra) + 1;
  }
  return true;
}
}  // namespace

ModelConfig model_config(const FileHeader& h, const std::string& file) {
  const std::string& arch = h.architecture;
  if (arch.empty()) throw InputError(file, 0, "general.architecture", "missing: the file does not name its architecture");
  // llama.cpp writes Mistral's dense models as "llama"; "mistral" is taken for files that name it. qwen3moe
  // (LLM_ARCH_QWEN3MOE, src/llama-arch.cpp) is Qwen3-MoE: config.json's qwen3_moe.
  if (arch != "llama" && arch != "mistral" && arch != "qwen2" && arch != "qwen3" && arch != "qwen3moe")
    throw InputError(file, 0, "general.architecture",
                     "unsupported architecture '" + arch +
                         "': the dense decoders llama, mistral, qwen2, qwen3 and the mixture of experts qwen3moe are modelled");
  const std::string layers_key = arch + ".block_count", hidden_key = arch + ".embedding_length",
                    ffn_key = arch + ".feed_forward_length", heads_key = arch + ".attention.head_count",
                    kv_key = arch + ".attention.head_count_kv", head_dim_key = arch + ".attention.key_length",
                    value_dim_key = arch + ".attention.value_length", vocab_key = arch + ".vocab_size";
  auto required = [&](const std::string& key) {
    const auto v = hparam(h, key, file);
    if (!v) throw InputError(file, 0, key, "missing");
    return *v;
  };
  nlohmann::json j;
  j["name"] = "gguf";  // general.name is set after validation (it may be any bytes, not JSON text)
  const bool moe = arch == "qwen3moe";
  j["model_type"] = moe ? "qwen3_moe" : arch;
  const std::uint64_t hidden = required(hidden_key), heads = required(heads_key);
  j["num_hidden_layers"] = required(layers_key);
  j["hidden_size"] = hidden;
  j["intermediate_size"] = required(ffn_key);
  j["num_attention_heads"] = heads;
  if (const auto kv = hparam(h, kv_key, file)) j["num_key_value_heads"] = *kv;
  if (const auto head_dim = hparam(h, head_dim_key, file)) j["head_dim"] = *head_dim;
  if (const auto context = hparam(h, arch + ".context_length", file)) j["max_position_embeddings"] = *context;
  // A mixture of experts (src/llama-arch.cpp LLM_KV_EXPERT_COUNT, _USED_COUNT, _FEED_FORWARD_LENGTH): the experts
  // and their width; feed_forward_length is then the dense-equivalent width, which no tensor has.
  if (moe) {
    j["num_experts"] = required(arch + ".expert_count");
    j["num_experts_per_tok"] = required(arch + ".expert_used_count");
    j["moe_intermediate_size"] = required(arch + ".expert_feed_forward_length");
  }
  const auto value_dim = hparam(h, value_dim_key, file);

  // The vocabulary: the token list, else token_embd.weight (read_header), else {arch}.vocab_size.
  std::uint64_t vocab = h.vocab_size;
  std::string vocab_source = h.metadata.count("tokenizer.ggml.tokens") ? "tokenizer.ggml.tokens" : "token_embd.weight";
  if (vocab == 0) {
    if (const auto v = hparam(h, vocab_key, file)) {
      vocab = *v;
      vocab_source = vocab_key;
    }
  }
  if (vocab == 0)
    throw InputError(file, 0, "tokenizer.ggml.tokens",
                     "missing: the vocabulary size comes from the token list, token_embd.weight or " + vocab_key);
  j["vocab_size"] = vocab;
  // llama.cpp loads token_embd and output as {n_embd, n_vocab} (create_tensor checks the shape).
  for (const char* name : {"token_embd.weight", "output.weight"}) {
    const FileTensor* t = h.find_tensor(name);
    if (t && (t->shape.size() != 2 || t->shape[0] != hidden || t->shape[1] != vocab)) {
      std::string shape;
      for (const auto d : t->shape) shape += (shape.empty() ? "" : ", ") + num(d);
      throw InputError(file, 0, name,
                       "shape [" + shape + "], expected [" + num(hidden) + ", " + num(vocab) + "] (" + hidden_key +
                           ", the vocabulary of " + vocab_source + ")");
    }
  }
  j["tie_word_embeddings"] = h.find_tensor("output.weight") == nullptr;
  j["attention_bias"] = h.find_tensor("blk.0.attn_q.bias") != nullptr;

  // parse_model_config holds the bounds a model must keep; its errors name config.json's fields,
  // renamed here to the file's keys.
  ModelConfig m;
  try {
    m = parse_model_config(dump_json(j), file);
  } catch (const InputError& e) {
    static const std::map<std::string, std::string> json_to_gguf{
        {"num_hidden_layers", ".block_count"},        {"hidden_size", ".embedding_length"},
        {"intermediate_size", ".feed_forward_length"}, {"num_attention_heads", ".attention.head_count"},
        {"num_key_value_heads", ".attention.head_count_kv"}, {"head_dim", ".attention.key_length"},
        {"max_position_embeddings", ".context_length"},  {"num_experts", ".expert_count"},
        {"num_experts_per_tok", ".expert_used_count"},   {"moe_intermediate_size", ".expert_feed_forward_length"}};
    const auto it = json_to_gguf.find(e.key());
    const std::string key = it != json_to_gguf.end() ? arch + it->second : e.key() == "vocab_size" ? vocab_source : e.key();
    throw InputError(file, 0, key, e.message() + " (as config.json's " + e.key() + ")");
  }
  if (value_dim && *value_dim != m.head_dim)
    throw InputError(file, 0, value_dim_key,
                     num(*value_dim) + " differs from the key length " + num(m.head_dim) + ": equal head sizes are modelled");
  const auto name = h.metadata.find("general.name");
  const auto name_type = h.metadata_type.find("general.name");
  m.name = name != h.metadata.end() && name_type != h.metadata_type.end() && name_type->second == "string" &&
                   !name->second.empty() && printable_utf8(name->second)
               ? name->second
               : arch;
  return m;
}

std::string ftype_name(std::uint32_t ftype) {
  // include/llama.h enum llama_ftype; the names llama-quantize takes (tools/quantize).
  static const std::map<std::uint32_t, const char*> names{
      {0, "F32"},      {1, "F16"},      {2, "Q4_0"},     {3, "Q4_1"},     {7, "Q8_0"},    {8, "Q5_0"},
      {9, "Q5_1"},     {10, "Q2_K"},    {11, "Q3_K_S"},  {12, "Q3_K_M"},  {13, "Q3_K_L"}, {14, "Q4_K_S"},
      {15, "Q4_K_M"},  {16, "Q5_K_S"},  {17, "Q5_K_M"},  {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},
      {21, "Q2_K_S"},  {22, "IQ3_XS"},  {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"}, {26, "IQ3_S"},
      {27, "IQ3_M"},   {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},  {31, "IQ1_M"},  {32, "BF16"},
      {36, "TQ1_0"},   {37, "TQ2_0"},   {38, "MXFP4_MOE"}, {39, "NVFP4"}, {40, "Q1_0"},   {41, "Q2_0"}};
  const auto it = names.find(ftype);
  return it == names.end() ? "" : it->second;
}

}  // namespace tiersim::model::gguf
