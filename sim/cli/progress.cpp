#include "cli/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace tiersim::app {

Progress::Progress(std::string label, std::string unit, std::size_t total, std::size_t min_items)
    : Progress(std::move(label), std::move(unit), total, isatty(2) && total >= min_items ? &std::cerr : nullptr) {}

Progress::Progress(std::string label, std::string unit, std::size_t total, std::ostream* out)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), out_(out),
      start_(std::chrono::steady_clock::now()), shown_(start_) {}

Progress::~Progress() { finish(); }

void Progress::tick() {
  const std::size_t done = ++done_;
  if (!out_) return;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_ || done >= total_ || now - shown_ < std::chrono::milliseconds(200)) return;  // the last: finish()
  shown_ = now;
  show(done, false);
}

void Progress::finish() {
  if (!out_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  show(done_.load(), true);
  *out_ << "\n" << std::flush;
}

void Progress::show(std::size_t done, bool last) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char buf[160];
  int n = std::snprintf(buf, sizeof buf, "\r%s: %zu/%zu %s", label_.c_str(), done, total_, unit_.c_str());
  if (seconds > 0 && done > 0 && n > 0 && n < int(sizeof buf)) {
    const double rate = double(done) / seconds;
    if (last || done >= total_)
      std::snprintf(buf + n, sizeof buf - n, ", %.1f/s, %.1f s   ", rate, seconds);
    else
      std::snprintf(buf + n, sizeof buf - n, ", %.1f/s, %.0f s left   ", rate, double(total_ - done) / rate);
  }
  *out_ << buf << std::flush;
}

}  // namespace tiersim::app
