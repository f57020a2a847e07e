#include "report/output_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
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

// Lock-free slots, so that the handler reads them without a lock it could find held.
constexpr std::size_t kSlots = 256;
std::array<std::atomic<const char*>, kSlots> g_temporaries{};
std::atomic<bool> g_handlers_installed{false};
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_temporaries_and_reraise(int sig) {
  temporaries::remove_registered_temporaries();
  // SA_RESETHAND has restored the default action; raised again, it takes effect when the handler returns (the
  // exit status says the signal, as without the handler).
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void install_handlers() {
  if (g_handlers_installed.exchange(true)) return;
  for (const int sig : kSignals) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    // A signal ignored (nohup) or handled by someone else is left as it is.
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = remove_temporaries_and_reraise;
    sigemptyset(&sa.sa_mask);
    for (const int other : kSignals) sigaddset(&sa.sa_mask, other);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace

namespace temporaries {

int register_temporary(const char* path) {
  install_handlers();
  for (std::size_t i = 0; i < kSlots; ++i) {
    const char* expected = nullptr;
    if (g_temporaries[i].compare_exchange_strong(expected, path)) return static_cast<int>(i);
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot >= 0 && static_cast<std::size_t>(slot) < kSlots) g_temporaries[static_cast<std::size_t>(slot)].store(nullptr);
}

void remove_registered_temporaries() {
  for (auto& slot : g_temporaries)
    if (const char* path = slot.load()) ::unlink(path);
}

}  // namespace temporaries

OutputFile::OutputFile(std::string path, std::string option, const std::vector<std::string>& inputs)
    : path_(std::move(path)), option_(std::move(option)) {
  if (path_.empty()) fail("no file name given");
  if (is_stdout()) return;
  std::error_code ec;
  fs::path target(path_);
  // Write through a symbolic link to the file it names, rather than replacing the link.
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    if (!fs::exists(fs::status(target, ec))) {
      std::error_code link_ec;
      const fs::path to = fs::read_symlink(target, link_ec);
      fail("is a symbolic link to '" + (link_ec ? std::string("?") : to.string()) +
           "', which does not exist: an output is written through a link to its file, and this link names none "
           "(give the file's path, or remove the link)");
    }
    const fs::path resolved = fs::weakly_canonical(target, ec);
    if (!ec) target = resolved;
  }
  // Never over an input of the same run (--timeline naming the trace it reads): the same device and inode.
  struct stat out_st {};
  if (::stat(target.c_str(), &out_st) == 0 && S_ISREG(out_st.st_mode))
    for (const std::string& input : inputs) {
      struct stat in_st {};
      if (!input.empty() && ::stat(input.c_str(), &in_st) == 0 && in_st.st_dev == out_st.st_dev &&
          in_st.st_ino == out_st.st_ino)
        fail("is the same file as the input '" + input + "', which writing it would destroy: give another path");
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
  slot_ = temporaries::register_temporary(temp_.c_str());
  rename_to_ = target.string();
  file_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!file_) {
    const int err = errno;
    std::remove(temp_.c_str());
    temporaries::unregister_temporary(slot_);
    slot_ = -1;
    fail("cannot open '" + temp_ + "' for writing" + errno_text(err));
  }
}

OutputFile::~OutputFile() {
  if (committed_ || temp_.empty()) return;
  file_.close();
  std::remove(temp_.c_str());
  temporaries::unregister_temporary(slot_);
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
    temporaries::unregister_temporary(slot_);
    slot_ = -1;
    fail("cannot rename the finished output into place" + errno_text(err));
  }
  temporaries::unregister_temporary(slot_);  // renamed: nothing of it left to remove
  slot_ = -1;
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
