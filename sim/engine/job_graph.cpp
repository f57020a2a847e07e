#include "engine/job_graph.hpp"

namespace tiersim::engine {

JobId JobGraph::create(JobListener* owner) {
  if (live_ == jobs_.size()) jobs_.emplace_back();
  Job& j = jobs_[live_];
  j.owner = owner;
  j.pending = 0;
  j.done = false;
  j.done_at = 0;
  j.dependents.clear();
  j.watchers.clear();
  return static_cast<JobId>(live_++);
}

void JobGraph::add_dependency(JobId job, JobId prerequisite) {
  if (jobs_[prerequisite].done) return;
  ++jobs_[job].pending;
  jobs_[prerequisite].dependents.push_back(job);
}

void JobGraph::watch(JobId job, JobListener* listener) {
  if (jobs_[job].done) {
    listener->job_done(job);
    return;
  }
  jobs_[job].watchers.push_back(listener);
}

void JobGraph::complete(JobId job, SimTime at) {
  jobs_[job].done = true;
  jobs_[job].done_at = at;
  // Index-based loops: listeners may create jobs, which can grow jobs_ and move its elements.
  for (std::size_t i = 0; i < jobs_[job].dependents.size(); ++i) {
    const JobId d = jobs_[job].dependents[i];
    if (--jobs_[d].pending == 0 && jobs_[d].owner) jobs_[d].owner->job_ready(d);
  }
  for (std::size_t i = 0; i < jobs_[job].watchers.size(); ++i) jobs_[job].watchers[i]->job_done(job);
}

void JobGraph::clear() { live_ = 0; }

}  // namespace tiersim::engine
