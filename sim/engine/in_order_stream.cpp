#include "engine/in_order_stream.hpp"

namespace tiersim::engine {

void InOrderStream::enqueue_compute(JobId job, SimTime duration) {
  queue_.push_back(Item{job, duration, nullptr, nullptr, 0, Direction::ToDevice, 0.0, 0.0, 0.0});
  try_start();
}

void InOrderStream::enqueue_transfer(JobId job, SharedLink& link, Direction dir, double bytes, double latency_seconds,
                                     double solo_rate) {
  queue_.push_back(Item{job, 0, &link, nullptr, 0, dir, bytes, latency_seconds, solo_rate});
  try_start();
}

void InOrderStream::enqueue_dynamic(JobId job, DurationSource& source, std::uint64_t token) {
  queue_.push_back(Item{job, 0, nullptr, &source, token, Direction::ToDevice, 0.0, 0.0, 0.0});
  try_start();
}

void InOrderStream::try_start() {
  if (running_ || queue_.empty()) return;
  const Item& head = queue_.front();
  if (!jobs_.ready(head.job)) return;  // job_ready() will call back
  running_ = true;
  started_at_ = sim_.now();
  if (head.link) {
    head.link->start(head.dir, head.bytes, head.latency, head.rate, this, head.job);
  } else if (head.source) {
    sim_.schedule_in(head.source->duration_at_start(head.token), kPriorityComplete, this, head.job);
  } else {
    sim_.schedule_in(head.duration, kPriorityComplete, this, head.job);
  }
}

void InOrderStream::job_ready(JobId job) {
  if (!queue_.empty() && queue_.front().job == job) try_start();
}

void InOrderStream::finish_head() {
  const JobId job = queue_.front().job;
  queue_.pop_front();
  running_ = false;
  busy_ += sim_.now() - started_at_;
  if (observer_) observer_->item_finished(name_, started_at_, sim_.now(), job);
  jobs_.complete(job, sim_.now());
  try_start();
}

void InOrderStream::on_event(std::uint64_t) { finish_head(); }
void InOrderStream::transfer_done(std::uint64_t) { finish_head(); }

}  // namespace tiersim::engine
