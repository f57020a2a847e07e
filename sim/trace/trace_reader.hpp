#pragma once
// Streaming reader of the text trace format (traces/FORMAT.md). The header is read on open; each
// call to next() parses exactly one step, so memory stays bounded by the largest step.
#include <fstream>
#include <istream>
#include <memory>
#include <string>

#include "trace/trace.hpp"

namespace tiersim::trace {

class TraceReader final : public StepSource {
 public:
  // Opens and reads the header; throws InputError naming the file and line on any malformed line.
  explicit TraceReader(const std::string& path);
  // Reads from a stream (tests); `name` is used in error messages.
  TraceReader(std::unique_ptr<std::istream> in, std::string name);

  const Header& header() const override { return header_; }
  bool next(Step& out) override;

 private:
  void read_header();
  bool read_line();  // next non-blank, non-comment line into line_; false at end of stream
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  void parse_op(std::string_view rest, Op& op) const;
  void parse_accesses(std::string_view key, std::string_view list, std::vector<TensorAccess>& out) const;
  void parse_keeps(std::string_view list, std::vector<std::uint32_t>& out) const;
  void parse_conv(std::string_view value, Op& op) const;

  std::unique_ptr<std::istream> in_;
  std::string name_;
  std::string line_;
  std::size_t line_no_ = 0;
  bool pending_step_ = false;  // line_ holds a "step" line not yet consumed
  bool ended_ = false;
  std::uint64_t total_bytes_ = 0;  // over the declared tensors, bounded
  bool has_transients_ = false;    // some tensor is `tmp`: each step's uses are checked against their values
  std::vector<std::size_t> op_lines_;  // the current step's op lines, for the transients' check
  Header header_;
};

}  // namespace tiersim::trace
