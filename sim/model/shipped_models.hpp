#pragma once
// The model configs that ship (traces/models/NAME.json, compiled in: config/embedded_models.hpp), named on the command
// line by NAME (`--model qwen3-8b`) from any directory. A file at the path given is read first, as for --hw presets.
#include <string>
#include <vector>

#include "config/embedded_files.hpp"

namespace tiersim::model {

// The shipped config `spec` names: nullptr when a file exists at that path or no shipped model has that name.
const config::EmbeddedFile* shipped_model(const std::string& spec);
std::vector<std::string> shipped_model_names();  // sorted

// A model description's text and the name its errors carry (the path, or "model:NAME" for a shipped one).
struct ModelText {
  std::string text;
  std::string origin;
};

// The file at `spec`, else the shipped config of that name. A word that is no path (no '/', no .json or .gguf ending)
// and no shipped name is refused naming --model and the nearest shipped names; a path keeps io::read_file's errors.
ModelText read_model_text(const std::string& spec, const std::string& what);

}  // namespace tiersim::model
