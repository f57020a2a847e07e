#include "model/training/training_allocations.hpp"

#include <map>
#include <stdexcept>

#include "model/training/optimizer_offload.hpp"

namespace tiersim::model {

namespace {

// offload_gradients: each offloaded gradient is freed while the side stream's copy to the host still reads it
// (torchao/optim/cpu_offload.py's post-accumulate-grad hook: the copy on self.stream, then
// p.grad.record_stream(self.stream) and p.grad = None), so the caching allocator holds its block until the event
// recorded at the free completes; the allocator looks (process_events) at each allocation. When a copy ends comes
// from optimizer_offload_time's pipeline (copy_ends: fractions of the backward pass): backward's allocations are
// placed on the same clock, each at the share of the spread parameters (the offloaded ones but the embedding, as
// optimizer_offload.cpp takes them) whose gradients were allocated before it, and a copy's end is marked before
// the first allocation at or after it. Copies that end after the pass are marked at its end: the CPU steps wait
// for them (optimizer_offload.hpp), and backward's last allocation has been made.
class GradientCopies {
 public:
  GradientCopies(const ModelConfig& m, const TrainingOptions& o, const std::vector<double>& copy_ends)
      : ends_(copy_ends) {
    if (o.offload != OptimizerOffload::CpuGradients) {
      if (!copy_ends.empty())
        throw std::invalid_argument("training_allocations: copy ends given for a set-up without offload_gradients");
      return;
    }
    queue_ = offload_queue(m, o);
    if (copy_ends.size() != queue_.size())
      throw std::invalid_argument("training_allocations: offload_gradients needs the end of each of the " +
                                  std::to_string(queue_.size()) + " offloaded gradients' copies, got " +
                                  std::to_string(copy_ends.size()));
    for (const TrainableTensor& t : queue_)
      if (t.layer >= 0) spread_ += static_cast<double>(t.n);
  }
  void begin_backward(const AllocationSequence& s) {
    begin_ = s.events.size();
    done_ = 0;
    progress_.clear();
    freed_.clear();
  }
  // The next offloaded gradient (`n` elements), just allocated: freed after its copy.
  void free_after_copy(AllocationSequence& s, std::uint64_t n, std::uint64_t id) {
    advance(s, n);
    freed_.push_back({id, s.events.size()});
    s.free_after_use(id);
  }
  // At backward's end: the copies' ends among its events.
  void end_backward(AllocationSequence& s) {
    if (freed_.size() != queue_.size())
      throw std::logic_error("training_allocations: " + std::to_string(freed_.size()) + " of the " +
                             std::to_string(queue_.size()) + " offloaded gradients were freed in backward");
    if (freed_.empty()) return;  // nothing held (no offload_gradients)
    std::vector<AllocationEvent> pass(s.events.begin() + static_cast<std::ptrdiff_t>(begin_), s.events.end());
    s.events.resize(begin_);
    std::size_t next = 0, at = 0;
    double now = 0;
    for (std::size_t i = 0; i < pass.size(); ++i) {
      const std::size_t index = begin_ + i;  // its place before the markers went in
      while (at < progress_.size() && progress_[at].first <= index) now = progress_[at++].second;
      if (pass[i].allocates())
        for (; next < freed_.size() && freed_[next].at < index && ends_[next] <= now; ++next)
          s.use_end(freed_[next].tensor);
      s.events.push_back(std::move(pass[i]));
    }
    for (; next < freed_.size(); ++next) s.use_end(freed_[next].tensor);
  }

 private:
  struct Freed {
    std::uint64_t tensor = 0;
    std::size_t at = 0;  // the index of its FreeAfterUse
  };
  void advance(const AllocationSequence& s, std::uint64_t n) {
    const std::size_t k = freed_.size();
    if (k >= queue_.size() || queue_[k].n != n)
      throw std::logic_error("training_allocations: the offloaded gradients come out of offload_queue's order");
    if (queue_[k].layer >= 0 && spread_ > 0) {
      done_ += static_cast<double>(n);
      progress_.push_back({s.events.size(), done_ / spread_});  // from here on, backward is this far
    }
  }

  const std::vector<double>& ends_;
  std::vector<TrainableTensor> queue_;
  double spread_ = 0, done_ = 0;
  std::size_t begin_ = 0;
  std::vector<std::pair<std::size_t, double>> progress_;       // (event index, share of backward done from there)
  std::vector<Freed> freed_;  // in the queue's order
};

}  // namespace

std::vector<AllocationEvent> training_allocations(const ModelConfig& m, const TrainingOptions& o, std::uint32_t steps,
                                                  const std::vector<double>& copy_ends) {
  const bool fp32 = o.precision == TrainPrecision::Fp32, autocast = o.precision == TrainPrecision::Fp32AutocastBf16;
  const double wb = parameter_bytes(o), act = fp32 ? 4 : 2, f = 4;
  const double res = fp32 || autocast ? f : act;  // the residual stream's bytes per element
  const double T = static_cast<double>(o.batch) * o.seq;
  const double h = static_cast<double>(m.hidden_size), V = static_cast<double>(m.vocab_size);
  const double inter = static_cast<double>(m.intermediate_size);
  const auto L = static_cast<std::int32_t>(m.num_hidden_layers);
  const auto params = parameter_tensors(m);
  const auto layer_saved = saved_per_layer(m, o);
  const auto final_saved = saved_final_norm(m, o);
  // Matrices autocast casts (more than a norm's width of parameters) by layer group; lm_head reads the embedding
  // table when tied.
  auto is_matrix = [&](std::uint64_t n) { return n > m.hidden_size && n > m.head_dim; };

  const bool lora = o.lora_enabled();
  const auto trainable = trainable_tensors(m, o);
  GradientCopies copies(m, o, copy_ends);
  AllocationSequence s;
  std::vector<std::uint64_t> weights;
  for (const auto& [layer, n] : params) weights.push_back(s.alloc(static_cast<double>(n) * wb, "parameter"));
  if (lora)  // get_peft_model: each targeted Linear's A and B, after the model is built
    for (const TrainableTensor& t : trainable)
      weights.push_back(s.alloc(static_cast<double>(t.n) * t.element_bytes, "LoRA adapter"));
  std::vector<std::uint64_t> state;
  for (std::uint32_t step = 1; step <= steps; ++step) {
    s.step = step;
    s.phase = "forward";
    std::map<std::int32_t, std::vector<std::uint64_t>> saved, casts;
    std::uint64_t residual = s.alloc(T * h * res, "embedding output");
    for (std::int32_t l = 0; l < L; ++l) {
      const std::string layer = "layer " + std::to_string(l) + " ";
      if (autocast)
        for (const auto& [g, n] : params)
          if (g == l && is_matrix(n)) casts[l].push_back(s.alloc(2.0 * static_cast<double>(n), layer + "bf16 weight copy"));
      std::vector<std::uint64_t> made;
      for (const auto& t : layer_saved) made.push_back(s.alloc(T * t.bytes_per_token, layer + t.what));
      const std::uint64_t mid = s.alloc(T * h * res, layer + "attention residual");
      const std::uint64_t out = s.alloc(T * h * res, layer + "output");
      s.free(mid);
      if (o.checkpointing) {  // only the layer's input is kept; its activations go with the layer
        for (std::uint64_t id : made) s.free(id);
        saved[l].push_back(residual);
      } else {
        saved[l] = made;
        s.free(residual);
      }
      residual = out;
    }
    std::vector<std::uint64_t> head;
    for (const auto& t : final_saved) head.push_back(s.alloc(T * t.bytes_per_token, "final norm " + std::string(t.what)));
    s.free(residual);
    std::vector<std::uint64_t> head_cast;
    if (autocast) head_cast.push_back(s.alloc(2.0 * V * h, "lm_head bf16 weight copy"));
    s.phase = "loss";
    const std::uint64_t logits = s.alloc(T * V * (fp32 ? f : 2), "logits");
    const std::uint64_t copy = fp32 ? 0 : s.alloc(T * V * f, "logits.float()");
    const std::uint64_t lsm = s.alloc(T * V * f, "log_softmax output");
    if (copy) s.free(copy);
    s.free(logits);  // the model's output is dropped once the loss is taken from it

    s.phase = "backward";
    copies.begin_backward(s);
    std::map<std::int32_t, std::vector<std::uint64_t>> grads;
    const std::uint64_t nll = s.alloc(T * V * f, "nll_loss gradient");
    const std::uint64_t lsm_grad = s.alloc(T * V * f, "log_softmax gradient");
    s.free(nll);
    s.free(lsm);
    const std::uint64_t cast_grad = fp32 ? 0 : s.alloc(T * V * act, "logits gradient");
    s.free(lsm_grad);
    std::uint64_t grad = s.alloc(T * h * act, "lm_head input gradient");
    // With offload_gradients a gradient is freed once its copy to the host is queued (the tied matrix's only after
    // the embedding's share is added, at the end of backward), its block held until the copy ends (GradientCopies).
    auto keep_grad = [&](std::int32_t group, std::uint64_t n, std::uint64_t id) {
      if (o.gradient_offloaded(n)) copies.free_after_copy(s, n, id);
      else grads[group].push_back(id);
    };
    if (!lora) {
      const std::uint64_t out = s.alloc(V * h * wb, "gradient of the output matrix");
      if (m.tie_word_embeddings) grads[-1].push_back(out);
      else keep_grad(L, m.embedding_params(), out);
    }
    // The final norm's weight gradient (hidden_size elements), from the norm's backward after lm_head's.
    if (!lora) keep_grad(L, m.hidden_size, s.alloc(h * wb, "final norm gradient"));
    if (cast_grad) s.free(cast_grad);
    s.free_all(head_cast);
    s.free_all(head);
    for (std::int32_t l = L - 1; l >= 0; --l) {
      const std::string layer = "layer " + std::to_string(l) + " ";
      std::vector<std::uint64_t> recomputed;
      if (o.checkpointing)
        for (const auto& t : layer_saved) recomputed.push_back(s.alloc(T * t.bytes_per_token, layer + t.what + " (recomputed)"));
      if (lora)  // only the adapters get gradients, in fp32, the last module's first
        for (auto it = trainable.rbegin(); it != trainable.rend(); ++it) {
          if (it->layer == l)
            keep_grad(l, it->n, s.alloc(static_cast<double>(it->n) * it->element_bytes, layer + "LoRA adapter gradient"));
        }
      for (auto it = params.rbegin(); !lora && it != params.rend(); ++it)
        if (it->first == l) {
          const double n = static_cast<double>(it->second);
          if (autocast && is_matrix(it->second)) {  // the bf16 gradient, added into the fp32 one
            const std::uint64_t half = s.alloc(2 * n, layer + "bf16 weight gradient");
            const std::uint64_t full = s.alloc(n * wb, layer + "parameter gradient");
            s.free(half);
            keep_grad(l, it->second, full);
          } else {
            keep_grad(l, it->second, s.alloc(n * wb, layer + "parameter gradient"));
          }
        }
      const std::uint64_t mlp = s.alloc(T * inter * act, layer + "MLP gradient");
      const std::uint64_t next = s.alloc(T * h * (fp32 || autocast ? f : act), layer + "input gradient");
      s.free(mlp);
      s.free_all(recomputed);
      s.free_all(saved[l]);
      s.free_all(casts[l]);
      s.free(grad);
      grad = next;
    }
    // The embedding's dense gradient: a new tensor, added into the tied output matrix's when they share one.
    if (!lora) {  // a frozen embedding gets none
      const std::uint64_t embedding = s.alloc(V * h * wb, "embedding gradient");
      if (m.tie_word_embeddings) s.free(embedding);
      else keep_grad(-1, m.embedding_params(), embedding);
      if (m.tie_word_embeddings && o.gradient_offloaded(m.embedding_params())) {
        const std::vector<std::uint64_t> tied = grads[-1];
        grads[-1].clear();
        for (std::uint64_t id : tied) keep_grad(-1, m.embedding_params(), id);
      }
    }
    s.free(grad);
    copies.end_backward(s);

    s.phase = "optimizer step";
    if (state.empty())  // lazily, at the first step: each parameter's state as the optimizer's init_state makes it
      for (const TrainableTensor& t : trainable)
        if (!o.offloaded(t.n))  // an offloaded one's is on the host
          for (double bytes : optimizer_state_tensors(t.n, o, t.element_bytes)) state.push_back(s.alloc(bytes, "optimizer state"));
    if (o.optimizer == TrainOptimizer::AdamW && o.offload == OptimizerOffload::None) {  // torch._foreach_sqrt(exp_avg_sqs): one tensor per parameter
      std::vector<std::uint64_t> sqrt;
      for (const TrainableTensor& t : trainable)
        sqrt.push_back(s.alloc(static_cast<double>(t.n) * t.element_bytes, "AdamW sqrt temporary"));
      s.free_all(sqrt);
    }
    s.phase = "zero_grad";
    for (auto& [layer, ids] : grads) s.free_all(ids);
  }
  return s.events;
}

}  // namespace tiersim::model
