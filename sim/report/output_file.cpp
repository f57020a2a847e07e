#include "report/output_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "core/error.hpp"

namespace tiersim::report {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) { return err ? std::string(": ") + std::strerror(err) : std::string(); }

}  // namespace

OutputFile::OutputFile(std::string path, std::string option) : path_(std::move(path)), option_(std::move(option)) {
  if (path_.empty()) fail("no file name given");
  if (is_stdout()) return;
  std::error_code ec;
  fs::path target(path_);
  // Write through a symbolic link to the file it names, rather than replacing the link.
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    const fs::path resolved = fs::weakly_canonical(target, ec);
    if (!ec) target = resolved;
  }
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) fail("is a directory; give a file name");
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    // A device, a pipe or a terminal (/dev/stdout, /dev/null): written in place, never renamed over.
    file_.open(target, std::ios::binary | std::ios::trunc);
    if (!file_) fail("cannot open for writing" + errno_text(errno));
    return;
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) fail("cannot write: directory '" + dir.string() + "' does not exist");
  std::string templ = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  std::vector<char> name(templ.begin(), templ.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) fail("cannot create a file in '" + dir.string() + "'" + errno_text(errno));
  // mkstemp creates the file 0600; give it the mode a plain open would (0666 less the umask).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  ::close(fd);
  temp_.assign(name.data());
  rename_to_ = target.string();
  file_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!file_) {
    std::remove(temp_.c_str());
    fail("cannot open '" + temp_ + "' for writing" + errno_text(errno));
  }
}

OutputFile::~OutputFile() {
  if (committed_ || temp_.empty()) return;
  file_.close();
  std::remove(temp_.c_str());
}

std::ostream& OutputFile::stream() {
  if (is_stdout()) return std::cout;
  return file_;
}

void OutputFile::commit() {
  if (committed_) return;
  if (is_stdout()) {
    check_stdout(option_);
    committed_ = true;
    return;
  }
  errno = 0;
  file_.flush();
  if (!file_) fail("write failed (disk full?)" + errno_text(errno));
  file_.close();
  if (file_.fail()) fail("write failed on close" + errno_text(errno));
  if (!temp_.empty() && std::rename(temp_.c_str(), rename_to_.c_str()) != 0) {
    const int err = errno;
    std::remove(temp_.c_str());
    fail("cannot rename the finished output into place" + errno_text(err));
  }
  committed_ = true;
}

void OutputFile::fail(const std::string& message) const { throw InputError(path_, 0, option_, message); }

void check_stdout(const std::string& option) {
  errno = 0;
  std::cout.flush();
  const bool c_ok = std::fflush(stdout) == 0 && !std::ferror(stdout);
  if (!std::cout || !c_ok)
    throw InputError("standard output", 0, option, "writing to standard output failed (closed, or the disk is full)" +
                                                errno_text(errno));
}

}  // namespace tiersim::report
