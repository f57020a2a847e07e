#pragma once
// Progress of long work on standard error (issue 41): "sweep: 120/400 points, 35.2/s, 8 s left", rewritten in place
// at most five times a second, and a line end when done. Only when standard error is a terminal (a pipe, a file or
// CI gets nothing: outputs and logs stay byte for byte what they are) and the work has enough items to be worth it.
// Thread-safe: plan's worker threads tick it.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <ostream>
#include <string>

namespace tiersim::app {

class Progress {
 public:
  // On stderr when it is a terminal and `total` is at least `min_items`.
  Progress(std::string label, std::string unit, std::size_t total, std::size_t min_items = 20);
  // To `out` when `enabled` (tests).
  Progress(std::string label, std::string unit, std::size_t total, std::ostream* out);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void tick();    // one item done
  void finish();  // the last line, then a line end (also on destruction)

 private:
  void show(std::size_t done, bool last);
  std::string label_, unit_;
  std::size_t total_;
  std::ostream* out_;
  std::atomic<std::size_t> done_{0};
  std::mutex mutex_;
  std::chrono::steady_clock::time_point start_, shown_;
  bool finished_ = false;
};

}  // namespace tiersim::app
