#pragma once
// The model configs that ship (traces/models/NAME.json, compiled in: config/embedded_models.hpp), named on the command
// line by NAME (`--model qwen3-8b`) from any directory. A file at the path given is read first, as for --hw presets.
#include <string>
#include <vector>

#include "config/embedded_files.hpp"

namespace tiersim::model {

// The shipped config `spec` names, by its name (`qwen3-8b`) or by the Hugging Face repository it was copied from
// (`Qwen/Qwen3-8B`: the file whose source is that repository's config.json, or a pipeline's transformer/config.json):
// nullptr when a file exists at that path or no shipped model answers to it.
const config::EmbeddedFile* shipped_model(const std::string& spec);
std::vector<std::string> shipped_model_names();  // sorted

// A model description's text and the name its errors carry (the path, or "model:NAME" for a shipped one).
struct ModelText {
  std::string text;
  std::string origin;
};

// The file at `spec`, else the shipped config of that name or repository. A word that is no path (no '/', no .json or
// .gguf ending) and no shipped name is refused naming --model and the nearest shipped names; an ORG/NAME that is no file
// and no shipped repository is refused saying nothing is downloaded; a path keeps io::read_file's errors.
ModelText read_model_text(const std::string& spec, const std::string& what);

}  // namespace tiersim::model
