#include "model/config_json.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/shipped_models.hpp"

namespace tiersim::model {
namespace {

// nlohmann reports byte offsets for syntax errors only, so the lines that errors name come from scanning the text
// (valid JSON only; a key written with escapes is not found and its errors carry line 0).
struct KeyPosition {
  std::size_t line = 0;
  std::size_t offset = 0;
};

std::size_t line_at(const std::string& text, std::size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

// The text's structure as it is read: `on` gets each { [ } ] (c, offset, line, "") and each object key (':' as c, the
// offset of its opening quote, its line, the key); strings are skipped whole. `on` returns false to stop.
template <class On>
void scan_json(const std::string& text, On on) {
  std::size_t line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (c == '{' || c == '[' || c == '}' || c == ']') {
      if (!on(c, i, line, std::string())) return;
    } else if (c == '"') {
      const std::size_t begin = i + 1;
      std::size_t j = begin;
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      if (j >= text.size()) return;
      std::size_t k = j + 1;
      while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
      if (k < text.size() && text[k] == ':' && !on(':', i, line, text.substr(begin, j - begin))) return;
      for (std::size_t m = begin; m < j; ++m) line += text[m] == '\n';
      i = j;
    }
  }
}

// Where each top-level key of the JSON text starts (its first occurrence).
std::map<std::string, KeyPosition> top_level_keys(const std::string& text) {
  std::map<std::string, KeyPosition> out;
  int depth = 0;
  scan_json(text, [&](char c, std::size_t offset, std::size_t line, const std::string& key) {
    if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') --depth;
    else if (depth == 1 && !out.count(key)) out[key] = {line, offset};
    return true;
  });
  return out;
}

// The line of the first key that repeats within its own object, as the parser reads them; 0 if the scan finds none.
std::size_t duplicate_key_line(const std::string& text) {
  std::vector<std::pair<bool, std::set<std::string>>> open;  // per open { or [: an object?, its keys so far
  std::size_t found = 0;
  scan_json(text, [&](char c, std::size_t, std::size_t line, const std::string& key) {
    if (c == '{' || c == '[') open.push_back({c == '{', {}});
    else if (c == '}' || c == ']') {
      if (!open.empty()) open.pop_back();
    } else if (!open.empty() && open.back().first && !open.back().second.insert(key).second) {
      found = line;
      return false;
    }
    return true;
  });
  return found;
}

// The text of the object that is the value of the top-level key at `key_offset` ({ to its }), and where it starts;
// npos where the value is no object.
std::pair<std::size_t, std::size_t> object_value(const std::string& text, std::size_t key_offset) {
  std::size_t begin = std::string::npos, end = std::string::npos;
  int depth = 0;
  scan_json(text, [&](char c, std::size_t offset, std::size_t, const std::string&) {
    if (offset <= key_offset) return true;
    if (begin == std::string::npos) {
      if (c != '{') return false;  // the key's value is not an object (or another key came first)
      begin = offset;
    }
    if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && --depth == 0) {
      end = offset;
      return false;
    }
    return true;
  });
  return {begin, end};
}

}  // namespace

ConfigJson parse_config_json(const std::string& text, const std::string& file) {
  nlohmann::json j;
  // Keys by depth as the parser meets them: a number that overflows a double is reported by nlohmann
  // without a position, so the key being read names it (and duplicate keys, which JSON leaves
  // undefined and nlohmann resolves silently, are refused in every object, nested ones too).
  std::vector<std::string> path;
  std::vector<std::set<std::string>> objects;  // the keys of each object being parsed, innermost last
  std::optional<std::string> duplicate;  // set, even to "" (a device map's whole-model key), when a key repeats
  auto dotted = [&] {
    std::string out;
    for (const auto& k : path) out += (out.empty() ? "" : ".") + k;
    return out;
  };
  auto track = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) objects.emplace_back();
    else if (event == E::object_end && !objects.empty()) objects.pop_back();
    if (event == E::key && depth >= 1) {
      path.resize(static_cast<std::size_t>(depth));
      path.back() = parsed.is_string() ? parsed.get<std::string>() : std::string();
      if (!objects.empty() && !objects.back().insert(path.back()).second && !duplicate) duplicate = dotted();
    }
    return true;
  };
  try {
    j = nlohmann::json::parse(text, track);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(file, line_at(text, e.byte == 0 ? 0 : e.byte - 1), dotted(), std::string("not valid JSON: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number beyond a double (1e400), even in a field tiersim ignores.
    const auto keys = top_level_keys(text);
    const auto it = path.empty() ? keys.end() : keys.find(path.front());
    throw InputError(file, it == keys.end() ? 0 : it->second.line, dotted(),
                     std::string("not a usable JSON value (numbers must fit a double): ") + e.what());
  }
  // The second occurrence is the one at fault.
  if (duplicate) throw InputError(file, duplicate_key_line(text), *duplicate, "appears twice");
  return {std::move(j), text, file};
}


ConfigJson load_config_json(const std::string& path, const std::string& what) {
  ModelText source = read_model_text(path, what);  // a file, or a shipped config by name
  return parse_config_json(source.text, source.origin);
}

void throw_unexpected_json(const std::string& file, const std::string& what) {
  throw InputError(file, 0, "", "unexpected JSON value: " + what);
}

ConfigReader::ConfigReader(const ConfigJson& doc) : ConfigReader(doc.json, doc.file, doc.text, 1, "") {}

ConfigReader::ConfigReader(const nlohmann::json& j, std::string file, std::string text, std::size_t first_line,
                           std::string prefix)
    : j_(j), file_(std::move(file)), text_(std::move(text)), first_line_(first_line), prefix_(std::move(prefix)) {
  for (const auto& [key, pos] : top_level_keys(text_)) {
    lines_[key] = pos.line + first_line_ - 1;
    offsets_[key] = pos.offset;
  }
}

ConfigReader ConfigReader::child(const std::string& key) const {
  if (!j_.contains(key) || !j_.at(key).is_object()) fail(key, "must be an object of fields");
  const auto at = offsets_.find(key);
  const auto [begin, end] = at == offsets_.end() ? std::pair{std::string::npos, std::string::npos}
                                                 : object_value(text_, at->second);
  // A key written with escapes is not found by the scan: its fields' errors then carry line 0.
  if (begin == std::string::npos || end == std::string::npos)
    return ConfigReader(j_.at(key), file_, "", 1, prefix_ + key + ".");
  return ConfigReader(j_.at(key), file_, text_.substr(begin, end - begin + 1), line_at(text_, begin) + first_line_ - 1,
                      prefix_ + key + ".");
}

void ConfigReader::fail(const std::string& key, const std::string& message) const {
  auto it = lines_.find(key);
  throw InputError(file_, it == lines_.end() ? 0 : it->second, prefix_ + key, message);
}

void ConfigReader::refuse_unknown(const std::set<std::string>& known, const std::set<std::string>& ignored,
                                  const std::string& what) const {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : j_.items()) {
    (void)value;
    if (!known.count(key) && !ignored.count(key)) unknown.push_back(key);
  }
  if (unknown.empty()) return;
  // The first in the file is the one the error points at.
  std::sort(unknown.begin(), unknown.end(), [&](const std::string& a, const std::string& b) {
    const auto la = lines_.count(a) ? lines_.at(a) : 0, lb = lines_.count(b) ? lines_.at(b) : 0;
    return std::make_pair(la, a) < std::make_pair(lb, b);
  });
  std::string all;
  for (const auto& k : unknown) all += (all.empty() ? "" : ", ") + prefix_ + k;
  fail(unknown.front(), "unknown field" + std::string(unknown.size() > 1 ? "s " : " ") + all + " (" + what +
                            " fields tiersim neither reads nor ignores)");
}

std::uint64_t ConfigReader::count(const Bound& b) const {
  if (!j_.contains(b.key)) fail(b.key, "missing required field");
  const auto& v = j_.at(b.key);
  const std::string range = std::string("must be an integer from 1 to ") + b.max_text;
  if (!v.is_number_integer()) fail(b.key, range + ", got " + v.dump());
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u >= 1 && u <= b.max) return u;
  }
  fail(b.key, range + ", got " + v.dump());
}

bool ConfigReader::optional_bool(const std::string& key, bool fallback) const {
  if (!j_.contains(key)) return fallback;
  if (!j_.at(key).is_boolean()) fail(key, "must be true or false, got " + j_.at(key).dump());
  return j_.at(key).get<bool>();
}

std::optional<std::string> ConfigReader::optional_string(const std::string& key) const {
  if (!j_.contains(key)) return std::nullopt;
  if (!j_.at(key).is_string()) fail(key, "must be a string, got " + j_.at(key).dump());
  return j_.at(key).get<std::string>();
}

void check_axes_dims_rope(const ConfigReader& r, const nlohmann::json& j, std::uint64_t head_dim) {
  if (!r.has("axes_dims_rope")) return;
  const auto& axes = j["axes_dims_rope"];
  std::uint64_t sum = 0;
  bool ok = axes.is_array() && !axes.empty();
  if (ok)
    for (const auto& a : axes) {
      ok = ok && a.is_number_unsigned() && a.get<std::uint64_t>() % 2 == 0 && a.get<std::uint64_t>() <= 1024;
      if (ok) sum += a.get<std::uint64_t>();
    }
  if (!ok || sum != head_dim)
    r.fail("axes_dims_rope", "must be a list of even sizes adding up to attention_head_dim (" + std::to_string(head_dim) +
                                 "), got " + axes.dump());
}

}  // namespace tiersim::model
