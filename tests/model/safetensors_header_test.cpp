// The safetensors header reader (model/safetensors_header.hpp): the fuzzer's seeds read whole, and every malformed
// header is refused naming the file and the key, without reading tensor data.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "model/safetensors_header.hpp"
#include "model/hf_snapshot.hpp"

namespace {

namespace st = tiersim::model::safetensors;

// A file's bytes: the 8-byte little-endian length, the header, `data` zero bytes.
std::string file_of(const std::string& header, std::uint64_t data = 0, std::uint64_t length_field = UINT64_MAX) {
  std::uint64_t n = length_field == UINT64_MAX ? header.size() : length_field;
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data, '\0');
}

st::Header read(const std::string& bytes) {
  std::istringstream in(bytes);
  return st::read_header(in, bytes.size(), "t.safetensors");
}

// The error reading `bytes` ("" when it reads).
std::string error_of(const std::string& bytes) {
  try {
    read(bytes);
  } catch (const tiersim::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsHeader, TheFuzzerSeedsReadWhole) {
  const std::filesystem::path dir = std::filesystem::path(TIERSIM_SOURCE_DIR) / "tests/fuzz/corpus/safetensors_header";
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".json") {  // the fuzzer's other format: a snapshot's index
      std::ifstream in(e.path());
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_EQ(tiersim::model::parse_safetensors_index(text, e.path().string()).size(), 2u) << e.path();
      continue;
    }
    EXPECT_NO_THROW(st::read_header_file(e.path().string())) << e.path();
    ++n;
  }
  EXPECT_EQ(n, 4u);
  const st::Header h = st::read_header_file((dir / "tiny-bf16.safetensors").string());
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(h.tensors[0].shape, (std::vector<std::uint64_t>{4, 2}));
  EXPECT_EQ(h.tensors[0].bytes, 16u);
  EXPECT_EQ(h.data_bytes, 20u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  const st::Header o = st::read_header_file((dir / "out-of-order.safetensors").string());
  EXPECT_EQ(o.tensors[0].name, "z.weight");  // in data order, not the JSON's
}

TEST(SafetensorsHeader, MalformedHeadersAreRefusedNamingTheFileAndKey) {
  const std::string ok = R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}})";
  EXPECT_EQ(error_of(file_of(ok, 12)), "");
  auto refused = [&](const std::string& bytes, const std::string& part) {
    const std::string e = error_of(bytes);
    EXPECT_NE(e.find("t.safetensors"), std::string::npos) << e;
    EXPECT_NE(e.find(part), std::string::npos) << "want '" << part << "' in: " << e;
  };
  refused("short", "shorter than the 8-byte header length");
  refused(file_of(ok, 12, 100'000'001), "more than safetensors' 100,000,000 bytes");
  refused(file_of(ok, 12, 1000), "runs past the file's");
  refused(file_of(ok, 11), "the tensors end at byte 12");  // the data the header describes is not all there
  refused(file_of(R"({"w":{"dtype":"BF17","shape":[2,3],"data_offsets":[0,12]}})", 12), "'w': dtype: 'BF17'");
  refused(file_of(R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,10]}})", 12), "'w': data_offsets: 10 bytes");
  refused(file_of(R"({"w":{"dtype":"BF16","shape":[2,-3],"data_offsets":[0,12]}})", 12), "'w': shape");
  refused(file_of(R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[12,0]}})", 12), "end is before begin");
  refused(file_of(R"({"w":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]}})", 6), "begins at 4");
  refused(file_of(R"({"w":{"dtype":"BF16","shape":[1],"data_offsets":[0,2],"x":1}})", 2), "unknown field 'x'");
  refused(file_of(R"({"w":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},"w":{}})", 2), "appears twice");
  refused(file_of(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]}})", 1), "overflow");
  refused(file_of(R"({"__metadata__":{"format":1}})"), "'format' must be a string");
  refused(file_of("[1]"), "a JSON object of tensors");
  refused(file_of("{"), "not valid JSON");
}

}  // namespace

namespace tiersim::model {
namespace {

TEST(SafetensorsIndex, NamesEachFileOfTheFolderAndItsTensorsOrSaysWhichKey) {
  const auto idx = parse_safetensors_index(
      R"({"metadata": {}, "weight_map": {"a.weight": "m-1.safetensors", "b.weight": "m-2.safetensors", "c": "m-1.safetensors"}})",
      "index.json");
  ASSERT_EQ(idx.size(), 2u);
  EXPECT_EQ(idx.at("m-1.safetensors"), (std::set<std::string>{"a.weight", "c"}));
  for (const char* bad : {R"({"weight_map": {"a": "../x.safetensors"}})", R"({"weight_map": {"a": "x.bin"}})",
                          R"({"weight_map": {"a": 3}})", R"({"metadata": {}})", R"({"weight_map": [1]})"}) {
    try {
      parse_safetensors_index(bad, "index.json");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "weight_map") << bad << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("index.json"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_safetensors_index("{not json", "index.json"), InputError);
}

}  // namespace
}  // namespace tiersim::model
