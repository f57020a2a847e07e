#pragma once
// Completion tracking between pieces of work on different servers: a kernel that must wait for the
// copy of its weights, a host thread that must wait for a synchronous copy. A job becomes ready when
// all its prerequisites are done; its owner is told then, and its watchers when it completes.
#include <cstdint>
#include <vector>

#include "core/sim_time.hpp"

namespace tiersim::engine {

using JobId = std::uint32_t;

class JobListener {
 public:
  virtual ~JobListener() = default;
  virtual void job_ready(JobId) {}
  virtual void job_done(JobId) {}
};

class JobGraph {
 public:
  JobId create(JobListener* owner);
  // `job` cannot be ready before `prerequisite` is done. No effect if it is done already.
  void add_dependency(JobId job, JobId prerequisite);
  // Tells `listener->job_done(job)` when the job completes (immediately if it already has).
  void watch(JobId job, JobListener* listener);
  void complete(JobId job, SimTime at);
  bool ready(JobId job) const { return jobs_[job].pending == 0; }
  bool done(JobId job) const { return jobs_[job].done; }
  SimTime done_at(JobId job) const { return jobs_[job].done_at; }
  std::size_t size() const { return jobs_.size(); }
  // Forgets every job; only valid when no job is pending (between steps).
  void clear();

 private:
  struct Job {
    JobListener* owner = nullptr;
    std::uint32_t pending = 0;
    bool done = false;
    SimTime done_at = 0;
    std::vector<JobId> dependents;
    std::vector<JobListener*> watchers;
  };
  std::vector<Job> jobs_;
  std::size_t live_ = 0;  // jobs_[0, live_) are in use; the rest keep their capacity for reuse
};

}  // namespace tiersim::engine
