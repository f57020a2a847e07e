#pragma once
// Typed errors. Library code throws; only main() catches and turns them into an exit code.
#include <stdexcept>
#include <string>
#include <string_view>

namespace tiersim {

// A value echoed in a message: the value itself up to `max` bytes, else its first bytes (not cutting a UTF-8
// character) and "… (N bytes)", so that a 32 MiB token or a 98 KB spec is not printed whole.
inline constexpr std::size_t kShownBytes = 200;
inline std::string shown(std::string_view v, std::size_t max = kShownBytes) {
  if (v.size() <= max) return std::string(v);
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xC0) == 0x80) --cut;
  return std::string(v.substr(0, cut)) + "\u2026 (" + std::to_string(v.size()) + " bytes)";
}

// A message as it is printed: every word (a run without spaces) of more than kShownBytes shortened by shown(), and
// the whole kept to kMessageBytes, whatever a message echoes (a token, a spec, a list of values).
inline constexpr std::size_t kMessageBytes = 4096;
inline std::string bounded(std::string_view text) {
  if (text.size() <= kShownBytes) return std::string(text);
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\n') ++j;
    out += shown(text.substr(i, j - i));
    if (j < text.size()) out += text[j++];
    i = j;
  }
  return out.size() > kMessageBytes ? shown(out, kMessageBytes) : out;
}

// Bad input from a user: a file, a line within it (0 when unknown) and the key at fault.
class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::size_t line, std::string key, const std::string& message)
      : std::runtime_error(format(file, line, key, bounded(message))),
        file_(std::move(file)), line_(line), key_(shown(key)), message_(bounded(message)) {}
  const std::string& file() const { return file_; }
  std::size_t line() const { return line_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }  // without the file, line and key

 private:
  static std::string format(const std::string& file, std::size_t line, const std::string& key,
                            const std::string& message) {
    // A command-line option is named by itself ("'--split': ..."); a file by its path, line and key.
    if (file.empty()) return (key.empty() ? std::string("input") : "'" + shown(key) + "'") + ": " + message;
    std::string out = shown(file, 4096);
    if (line > 0) out += ":" + std::to_string(line);
    if (!key.empty()) out += ": '" + shown(key) + "'";
    return out + ": " + message;
  }
  std::string file_;
  std::size_t line_;
  std::string key_;
  std::string message_;
};

// A valid input that cannot run: a model that does not fit, a donor GPU the profile lacks. Where it
// is a device that is too small, which one, how many bytes were needed and how many it has.
class CapacityError : public std::runtime_error {
 public:
  explicit CapacityError(const std::string& message, std::string device = "", double needed = 0, double available = 0)
      : std::runtime_error(message), device_(std::move(device)), needed_(needed), available_(available) {}
  const std::string& device() const { return device_; }  // "cuda:0", "cuda:1", "cpu", or "" when not one device
  double needed() const { return needed_; }
  double available() const { return available_; }

 private:
  std::string device_;
  double needed_;
  double available_;
};

}  // namespace tiersim
