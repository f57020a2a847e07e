#pragma once
// Outputs that cannot be half-written or lost silently. A file is written to a temporary name in its
// own directory and renamed over the path only once every byte is written, flushed and closed; a
// failed or abandoned write removes the temporary file and leaves the path as it was. "-" is standard
// output. Every failure is an InputError naming the path and the option it came from (exit 2).
// A run stopped by SIGINT, SIGTERM or SIGHUP removes its temporary files too: each is registered while it
// exists, and a handler (installed with the first one, only where the signal's action is the default)
// unlinks them with async-signal-safe calls only, then re-raises the signal with its default action.
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace tiersim::report {

class OutputFile {
 public:
  // `option` names where the path came from in messages ("-o", "--timeline"). Opens at once, so that
  // a path that cannot be written (a directory, a missing directory, no permission) fails before any
  // work is done. A path that is the same file as one of `inputs` (by device and inode: through links,
  // "./", other spellings) is refused, as is a symbolic link that names no file (a link is written
  // through to its file, and a dangling one has none; it is never replaced).
  OutputFile(std::string path, std::string option, const std::vector<std::string>& inputs = {});
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // without commit(): removes the temporary file, the path is untouched

  std::ostream& stream();
  // Flushes and checks every write, closes, and renames the temporary file over the path.
  void commit();

  const std::string& path() const { return path_; }
  bool is_stdout() const { return path_ == "-"; }

 private:
  [[noreturn]] void fail(const std::string& message) const;

  std::string path_;
  std::string option_;
  std::string temp_;       // empty when writing in place (stdout, a device or a pipe)
  std::string rename_to_;  // the file the temporary one replaces (the path, through any symlink)
  std::ofstream file_;
  bool committed_ = false;
  int slot_ = -1;  // the temporary's place in the signal handler's registry (-1: not registered)
};

// The registry of temporary files that a signal removes (exposed for the tests). register_temporary keeps the
// pointer (the caller keeps the string alive until unregister_temporary) and returns its slot, or -1 when all
// slots are taken (the file is then removed only by the destructor). remove_registered_temporaries is what the
// handler does: unlink() each registered path; async-signal-safe.
namespace temporaries {
int register_temporary(const char* path);
void unregister_temporary(int slot);
void remove_registered_temporaries();
}  // namespace temporaries

// Flushes standard output (C++ and C streams) and throws InputError when anything written to it was
// lost (closed, a full disk, a broken pipe ignored). `option` names the output in the message.
void check_stdout(const std::string& option);

}  // namespace tiersim::report
