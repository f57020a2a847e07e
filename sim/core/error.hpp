#pragma once
// Typed errors. Library code throws; only main() catches and turns them into an exit code.
#include <stdexcept>
#include <string>

namespace tiersim {

// Bad input from a user: a file, a line within it (0 when unknown) and the key at fault.
class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::size_t line, std::string key, const std::string& message)
      : std::runtime_error(format(file, line, key, message)),
        file_(std::move(file)), line_(line), key_(std::move(key)), message_(message) {}
  const std::string& file() const { return file_; }
  std::size_t line() const { return line_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }  // without the file, line and key

 private:
  static std::string format(const std::string& file, std::size_t line, const std::string& key,
                            const std::string& message) {
    // A command-line option is named by itself ("'--split': ..."); a file by its path, line and key.
    if (file.empty()) return (key.empty() ? std::string("input") : "'" + key + "'") + ": " + message;
    std::string out = file;
    if (line > 0) out += ":" + std::to_string(line);
    if (!key.empty()) out += ": '" + key + "'";
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
