#pragma once
// The names nearest to a misspelt one (Levenshtein distance), for errors that list what was meant.
#include <cstddef>
#include <string>
#include <vector>

namespace tiersim::config {

std::size_t edit_distance(const std::string& a, const std::string& b);

// Up to `count` of `names`, nearest to `word` first, case aside (Qwen3-8B is qwen3-8b); ties by name, so the order
// does not depend on the input's.
std::vector<std::string> nearest_names(const std::string& word, std::vector<std::string> names, std::size_t count);

}  // namespace tiersim::config
