#include "policies/strategy/part_spec.hpp"

#include "core/error.hpp"

namespace tiersim::strategy {

PartSpec PartSpec::parse(const std::string& text, const std::string& flag) {
  PartSpec spec;
  spec.origin = flag;
  spec.given = true;
  const std::size_t colon = text.find(':');
  spec.name = text.substr(0, colon);
  if (spec.name.empty()) throw InputError("", 0, flag, "expected NAME or NAME:OPTION,... (sim parts lists them), got '" + text + "'");
  if (colon == std::string::npos) return spec;
  std::string rest = text.substr(colon + 1);
  std::size_t start = 0;
  while (start <= rest.size()) {
    const std::size_t comma = rest.find(',', start);
    const std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw InputError("", 0, flag, "empty option in '" + text + "'");
    const std::size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "true" : item.substr(eq + 1);
    if (key.empty() || value.empty()) throw InputError("", 0, flag, "option '" + item + "' needs the form key=value");
    if (!spec.options.emplace(key, value).second) throw InputError("", 0, flag, "option '" + key + "' given twice");
    spec.given_by[key] = flag;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return spec;
}

std::string PartSpec::text() const {
  std::string out = name;
  char sep = ':';
  for (const auto& [k, v] : options) {
    out += sep + k + "=" + v;
    sep = ',';
  }
  return out;
}

YAML::Node PartSpec::node() const {
  YAML::Node n(YAML::NodeType::Map);
  for (const auto& [k, v] : options) n[k] = v;
  return n;
}

void PartSpec::set(const std::string& key, const std::string& value, const std::string& flag) {
  const auto it = options.find(key);
  if (it != options.end() && given_by.count(key) && given_by.at(key) != flag)
    throw InputError("", 0, flag, "sets '" + key + "', which " + given_by.at(key) + " sets too; give it once");
  options[key] = value;
  given_by[key] = flag;
  given = true;
}

}  // namespace tiersim::strategy
