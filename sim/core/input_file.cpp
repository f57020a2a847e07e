#include "core/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace tiersim::io {
namespace {

// What a file that is not a regular one is, for the message; nullptr for a regular file.
const char* not_regular(mode_t mode) {
  if (S_ISREG(mode)) return nullptr;
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO (a named pipe)";
  if (S_ISCHR(mode)) return "is a character device";
  if (S_ISBLK(mode)) return "is a block device";
  if (S_ISSOCK(mode)) return "is a socket";
  return "is not a regular file";
}

[[noreturn]] void refuse(const std::string& path, const std::string& key, const std::string& what, const char* kind) {
  throw InputError(path, 0, key, std::string(kind) + ", not a " + what + ": inputs are read only from regular files");
}

[[noreturn]] void cannot_open(const std::string& path, const std::string& key, const std::string& what, int err) {
  throw InputError(path, 0, key, "cannot open " + what + errno_text(err));
}

}  // namespace

std::string errno_text(int err) { return err ? std::string(": ") + std::strerror(err) : std::string(); }

void require_regular_file(const std::string& path, const std::string& key, const std::string& what) {
  if (path.empty()) throw InputError(path, 0, key, "no file name given");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) cannot_open(path, key, what, errno);
  if (const char* kind = not_regular(st.st_mode)) refuse(path, key, what, kind);
}

std::string read_file(const std::string& path, const std::string& key, const std::string& what, std::uint64_t limit,
                      const char* limit_text) {
  require_regular_file(path, key, what);
  // O_NONBLOCK: a path swapped for a FIFO after the stat does not block the open; fstat then refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) cannot_open(path, key, what, errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) cannot_open(path, key, what, errno);
  if (const char* kind = not_regular(st.st_mode)) refuse(path, key, what, kind);
  auto too_large = [&](std::uint64_t bytes, bool at_least) {
    throw InputError(path, 0, key,
                     "is " + std::string(at_least ? "more than " : "") + std::to_string(bytes) + " bytes, more than the " +
                         limit_text + " a " + what + " may be");
  };
  if (static_cast<std::uint64_t>(st.st_size) > limit) too_large(static_cast<std::uint64_t>(st.st_size), false);
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(path, 0, key, "cannot read the " + what + errno_text(errno));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > limit) too_large(limit, true);  // a file that grows while it is read
  }
  return text;
}

std::unique_ptr<std::ifstream> open_file(const std::string& path, const std::string& key, const std::string& what,
                                         bool binary) {
  require_regular_file(path, key, what);
  errno = 0;
  auto in = std::make_unique<std::ifstream>(path, binary ? std::ios::in | std::ios::binary : std::ios::in);
  if (!*in) cannot_open(path, key, what, errno);
  return in;
}

}  // namespace tiersim::io
