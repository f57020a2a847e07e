#pragma once
// A model description read as JSON (a Hugging Face config.json, a diffusers config): parsed with every
// error naming the file, the line and the key (duplicate keys in any object and numbers beyond a double refused), and a
// reader of its fields with range checks (the top level's, or a nested object's through child()). Shared by every model
// family's config reader.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

namespace tiersim::model {

// The parsed document with the text and file name its errors are reported against.
struct ConfigJson {
  nlohmann::json json;
  std::string text;
  std::string file;
};

// Parses `text` (errors: InputError naming `file`, the line and the key being read).
ConfigJson parse_config_json(const std::string& text, const std::string& file);
// Reads and parses the file at `path`, or the shipped config that `path` names (model/shipped_models.hpp: `qwen3-8b`);
// `what` names it in the error when it cannot be opened.
ConfigJson load_config_json(const std::string& path, const std::string& what = "model description");
[[noreturn]] void throw_unexpected_json(const std::string& file, const std::string& what);

// Runs a family's reader on the parsed document: a JSON value of an unexpected type that slipped past the
// reader's checks becomes an InputError naming the file, never an escaping library exception.
template <class Read>
auto read_config_with(const ConfigJson& doc, Read read) -> decltype(read(doc));

// An integer field's upper bound, with the bound as it is printed in errors.
struct Bound {
  const char* key;
  std::uint64_t max;
  const char* max_text;
};

// Reads top-level fields; every error names the file and the line where the key is.
class ConfigReader {
 public:
  explicit ConfigReader(const ConfigJson& doc);
  // The object under this reader's field `key` (a composite config's vision_config), read as a reader of its own:
  // its errors name "key.field" and the field's line in the file. Fails naming `key` when it is no object.
  ConfigReader child(const std::string& key) const;

  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  bool has(const std::string& key) const { return j_.contains(key); }
  // Every key that is neither read (`known`) nor ignored by name (`ignored`), reported at once: the error
  // names the first such key's line and lists them all.
  void refuse_unknown(const std::set<std::string>& known, const std::set<std::string>& ignored,
                      const std::string& what) const;

  std::uint64_t count(const Bound& b) const;  // required, 1..b.max
  bool optional_bool(const std::string& key, bool fallback) const;
  std::optional<std::string> optional_string(const std::string& key) const;

 private:
  ConfigReader(const nlohmann::json& j, std::string file, std::string text, std::size_t first_line, std::string prefix);

  const nlohmann::json& j_;
  std::string file_;
  std::string text_;                            // this object's text ({ to }), for a child's lines
  std::size_t first_line_ = 1;                  // the file's line where text_ starts
  std::string prefix_;                          // "key." for a child, named before its fields in errors
  std::map<std::string, std::size_t> lines_;    // this object's key -> the file's line
  std::map<std::string, std::size_t> offsets_;  // this object's key -> where it starts in text_
};

// A diffusion transformer's axes_dims_rope (FLUX, Qwen-Image: ComfyUI's EmbedND over 3 position axes), when given:
// even sizes adding up to the head width; else an error naming the key.
void check_axes_dims_rope(const ConfigReader& r, const nlohmann::json& j, std::uint64_t head_dim);

template <class Read>
auto read_config_with(const ConfigJson& doc, Read read) -> decltype(read(doc)) {
  try {
    return read(doc);
  } catch (const nlohmann::json::exception& e) {
    throw_unexpected_json(doc.file, e.what());
  }
}

}  // namespace tiersim::model
