#pragma once
// Outputs that cannot be half-written or lost silently. A file is written to a temporary name in its
// own directory and renamed over the path only once every byte is written, flushed and closed; a
// failed or abandoned write removes the temporary file and leaves the path as it was. "-" is standard
// output. Every failure is an InputError naming the path and the option it came from (exit 2).
#include <fstream>
#include <memory>
#include <ostream>
#include <string>

namespace tiersim::report {

class OutputFile {
 public:
  // `option` names where the path came from in messages ("-o", "--timeline"). Opens at once, so that
  // a path that cannot be written (a directory, a missing directory, no permission) fails before any
  // work is done.
  OutputFile(std::string path, std::string option);
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
};

// Flushes standard output (C++ and C streams) and throws InputError when anything written to it was
// lost (closed, a full disk, a broken pipe ignored). `option` names the output in the message.
void check_stdout(const std::string& option);

}  // namespace tiersim::report
