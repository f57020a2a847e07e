#pragma once
// `sim models`: the model configs that ship (traces/models/NAME.json, compiled in), each with the key its family is
// read by (config.json's model_type or a diffusers config's _class_name) and its parameters as tiersim counts them.
#include <cstdint>
#include <string>
#include <vector>

namespace tiersim::app {

struct ShippedModel {
  std::string name;  // what --model takes
  std::string kind;  // model_type, or _class_name for a diffusers config
  std::uint64_t params = 0;
};

std::vector<ShippedModel> shipped_models();  // sorted by name
int list_models();                           // prints them; 0
// `sim models DIR`: a Hugging Face snapshot's config read as --model DIR reads it, and its safetensors headers'
// parameters and bytes against the config's (the config's count at its torch_dtype), saying by how much they differ.
int check_snapshot(const std::string& dir);

}  // namespace tiersim::app
