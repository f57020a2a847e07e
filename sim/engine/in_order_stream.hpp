#pragma once
// A CUDA stream as a server: work runs one item at a time in the order it was enqueued, and an item
// starts only when it is at the head, the stream is free, and its prerequisite jobs are done. An
// item is either compute (a fixed duration on the device) or a transfer over a SharedLink.
#include <cstdint>
#include <deque>
#include <string>

#include "engine/job_graph.hpp"
#include "engine/shared_link.hpp"
#include "engine/simulator.hpp"

namespace tiersim::engine {

// Work whose duration is known only when it starts (a kernel that may fault on managed memory).
class DurationSource {
 public:
  virtual ~DurationSource() = default;
  virtual SimTime duration_at_start(std::uint64_t token) = 0;
};

// Told about every item a stream finishes (for timelines); not on the hot path unless attached.
class StreamObserver {
 public:
  virtual ~StreamObserver() = default;
  virtual void item_finished(const std::string& stream, SimTime start, SimTime end, JobId job) = 0;
};

class InOrderStream final : public EventHandler, public JobListener, public TransferClient {
 public:
  InOrderStream(Simulator& sim, JobGraph& jobs, std::string name) : sim_(sim), jobs_(jobs), name_(std::move(name)) {}

  // `job` must have been created with this stream as its owner.
  void enqueue_compute(JobId job, SimTime duration);
  void enqueue_transfer(JobId job, SharedLink& link, Direction dir, double bytes, double latency_seconds,
                        double solo_rate);
  // Compute whose duration `source` decides at the moment it starts.
  void enqueue_dynamic(JobId job, DurationSource& source, std::uint64_t token);

  bool idle() const { return queue_.empty(); }
  std::size_t queued() const { return queue_.size(); }
  SimTime busy_time() const { return busy_; }
  const std::string& name() const { return name_; }
  void observe(StreamObserver* observer) { observer_ = observer; }

  void on_event(std::uint64_t tag) override;   // compute finished
  void job_ready(JobId job) override;
  void transfer_done(std::uint64_t token) override;

 private:
  struct Item {
    JobId job;
    SimTime duration;        // compute
    SharedLink* link;        // transfer when non-null
    DurationSource* source;  // dynamic compute when non-null
    std::uint64_t token;
    Direction dir;
    double bytes;
    double latency;
    double rate;
  };
  void try_start();
  void finish_head();

  Simulator& sim_;
  JobGraph& jobs_;
  std::string name_;
  std::deque<Item> queue_;
  bool running_ = false;
  SimTime started_at_ = 0;
  SimTime busy_ = 0;
  StreamObserver* observer_ = nullptr;
};

}  // namespace tiersim::engine
