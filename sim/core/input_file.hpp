#pragma once
// Reading the files a user names. An input is read only from a regular file: a FIFO blocks until a
// writer comes, a character device (/dev/zero, /dev/urandom) never ends, a directory is no document.
// Each is refused before it is opened (stat, then open without blocking, then fstat of what was
// opened), with an InputError naming the path, the option or key it came from, and why. A file that
// is read whole has a size limit, named in the error; a file that cannot be opened says why
// (strerror: "No such file or directory", "Too many levels of symbolic links", "Permission denied").
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

namespace tiersim::io {

// Generous bounds for files read whole: a JSON or YAML config (a result's inputs, a hardware or
// runtime profile, a device map, a model's config.json, a routing file).
inline constexpr std::uint64_t kMaxConfigBytes = 64ull << 20;
inline constexpr const char* kMaxConfigText = "64 MiB";

// ": " + strerror(err), or "" when err is 0.
std::string errno_text(int err);

// Throws InputError(path, 0, key, ...) unless `path` names a regular file (through symbolic links).
// `what` names the input in messages ("trace file", "device map").
void require_regular_file(const std::string& path, const std::string& key, const std::string& what);

// The bytes of a regular file of at most `limit` bytes (`limit_text` says the limit in messages).
std::string read_file(const std::string& path, const std::string& key, const std::string& what,
                      std::uint64_t limit = kMaxConfigBytes, const char* limit_text = kMaxConfigText);

// A stream on a regular file (binary or text), for inputs read piece by piece (traces, GGUF headers).
std::unique_ptr<std::ifstream> open_file(const std::string& path, const std::string& key, const std::string& what,
                                         bool binary = false);

}  // namespace tiersim::io
