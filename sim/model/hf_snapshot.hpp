#pragma once
// A Hugging Face snapshot folder given to --model (what `huggingface-cli download` leaves): config.json read as the
// model's description, and the safetensors files' headers (model.safetensors.index.json's weight_map, else every
// *.safetensors in the folder) for the tensors' dtypes and shapes, never their data.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tiersim::model {

// The file a --model argument's description is read from: DIR/config.json for a folder, else the argument itself.
std::string model_config_file(const std::string& spec);
bool is_snapshot_dir(const std::string& spec);

struct SnapshotWeights {
  std::vector<std::string> files;                 // the safetensors files read, sorted
  std::uint64_t tensors = 0, elements = 0, bytes = 0;
  std::map<std::string, std::uint64_t> bytes_by_dtype;
};

// A model.safetensors.index.json's text: each .safetensors file of the folder its weight_map names -> the tensors it
// puts there. InputError naming `file` and the key: not JSON, no weight_map object, a file that is not a plain
// .safetensors name of the folder (a path, "..", another extension).
std::map<std::string, std::set<std::string>> parse_safetensors_index(const std::string& text, const std::string& file);

// The weights the folder's safetensors headers describe (files empty when it has none). Errors name the file and key:
// an index whose weight_map names a file outside the folder or a tensor its file lacks, a malformed header.
SnapshotWeights read_snapshot_weights(const std::string& dir);

}  // namespace tiersim::model
