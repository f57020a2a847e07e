#pragma once
// The one way tiersim turns JSON into text. nlohmann's dump() throws (type_error 316) on a string that
// is not valid UTF-8, and every JSON tiersim writes can hold bytes the user gave it: a path, an option,
// a dtype or name read from a file, an error message echoing any of these. Dumped here, such a byte
// becomes U+FFFD (the replacement character) and the rest of the text is written as before: valid
// UTF-8 gives the same bytes as a plain dump().
#include <nlohmann/json.hpp>
#include <string>

namespace tiersim {

template <class Json>
std::string dump_json(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace tiersim
