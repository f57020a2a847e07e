#include "model/hf_snapshot.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/config_json.hpp"
#include "model/safetensors_header.hpp"

namespace tiersim::model {
namespace fs = std::filesystem;

bool is_snapshot_dir(const std::string& spec) {
  std::error_code ec;
  return !spec.empty() && fs::is_directory(spec, ec);
}

std::string model_config_file(const std::string& spec) {
  if (!is_snapshot_dir(spec)) return spec;
  const std::string config = (fs::path(spec) / "config.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(config, ec))
    throw InputError(spec, 0, "--model", "is a folder without config.json (a Hugging Face snapshot holds one)");
  return config;
}

std::map<std::string, std::set<std::string>> parse_safetensors_index(const std::string& text, const std::string& file) {
  const ConfigJson doc = parse_config_json(text, file);
  const ConfigReader r(doc);
  if (!doc.json.is_object() || !doc.json.contains("weight_map") || !doc.json["weight_map"].is_object())
    r.fail("weight_map", "missing, or not an object of tensor name -> file");
  std::map<std::string, std::set<std::string>> indexed;
  for (const auto& [tensor, name] : doc.json["weight_map"].items()) {
    const std::string f = name.is_string() ? name.get<std::string>() : "";
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == ".." || fs::path(f).extension() != ".safetensors")
      r.fail("weight_map", "'" + tensor + "': " + name.dump() + " is no .safetensors file of this folder");
    indexed[f].insert(tensor);
  }
  return indexed;
}

SnapshotWeights read_snapshot_weights(const std::string& dir) {
  const fs::path root(dir);
  const std::string index_path = (root / "model.safetensors.index.json").string();
  std::set<std::string> files;
  std::map<std::string, std::set<std::string>> indexed;  // file -> the tensors the index puts in it
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    indexed = parse_safetensors_index(load_config_json(index_path, "safetensors index").text, index_path);
    for (const auto& [f, tensors] : indexed) files.insert(f);
  } else {
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.path().extension() == ".safetensors") files.insert(e.path().filename().string());
  }
  SnapshotWeights w;
  for (const std::string& f : files) {
    const std::string path = (root / f).string();
    const safetensors::Header h = safetensors::read_header_file(path);
    std::set<std::string> present;
    for (const auto& t : h.tensors) {
      present.insert(t.name);
      ++w.tensors;
      w.elements += t.elements;
      w.bytes += t.bytes;
      w.bytes_by_dtype[t.dtype] += t.bytes;
    }
    for (const std::string& t : indexed[f])
      if (!present.count(t))
        throw InputError(index_path, 0, "weight_map", "'" + t + "' is in " + f + " by the index, but not in its header");
    w.files.push_back(f);
  }
  return w;
}

}  // namespace tiersim::model
