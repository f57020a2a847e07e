#include "model/training/training_trace.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace tiersim::model {
namespace {

using trace::Op;
using trace::OpKind;
using trace::TensorAccess;

Op make_op(OpKind kind, std::int32_t layer, std::uint64_t flops, std::uint32_t tensor, std::uint64_t read,
           std::uint64_t written, std::uint32_t launches) {
  Op op;
  op.kind = kind;
  op.layer = layer;
  op.flops = flops;
  op.reads = {TensorAccess{tensor, read}};
  op.writes = {TensorAccess{tensor, written}};
  op.launches = launches;
  return op;
}

std::uint64_t sum(const std::vector<TensorAccess>& v) {
  std::uint64_t s = 0;
  for (const auto& a : v) s += a.bytes;
  return s;
}

}  // namespace

TrainingTraceGenerator::TrainingTraceGenerator(const ModelConfig& model, const TrainingOptions& options,
                                               std::uint32_t steps, const runtime::TrainingHostCosts* host,
                                               const std::function<double(const trace::Op&)>& inference_host)
    : model_(model), options_(options), steps_(steps) {
  const bool fp32 = options.precision == TrainPrecision::Fp32, autocast = options.precision == TrainPrecision::Fp32AutocastBf16;
  GenerationOptions g;
  g.dtype = fp32 ? WeightDtype::Fp32 : options.precision == TrainPrecision::Fp16 ? WeightDtype::Fp16 : WeightDtype::Bf16;
  g.batch = options.batch;
  g.prompt_tokens = options.seq;
  g.decode_tokens = 0;
  inference_ = std::make_unique<LlmTraceGenerator>(model_, g);
  trace::Step forward;
  if (!inference_->next(forward)) throw std::logic_error("training: no forward step");

  header_ = inference_->header();
  // The loss's and backward's tensors (logits over every token, their gradients, the activations' gradients) in
  // a workspace of their own, sized below to the largest access.
  const std::uint32_t act = trace::append_tensor(header_, trace::TensorKind::Activation, 0, -1, "training workspace");
  const auto& tensors = header_.tensors;
  const auto L = static_cast<std::int32_t>(model_.num_hidden_layers);
  const std::uint64_t T = static_cast<std::uint64_t>(options.batch) * options.seq;
  const std::uint64_t h = model_.hidden_size, V = model_.vocab_size;
  const std::uint64_t a = fp32 ? 4 : 2;                    // activation bytes
  const std::uint64_t wb = fp32 || autocast ? 4 : 2;       // parameter, gradient and optimizer-state bytes
  const std::uint64_t stored = fp32 ? 4 : 2;               // bytes per parameter in the generator's tensors

  // Parameters by layer group (-1 embeddings .. L the head), from the weights' bytes.
  std::map<std::int32_t, std::uint64_t> params, parameter_tensors;
  for (const auto& t : tensors)
    if (t.kind == trace::TensorKind::Weight) {
      params[t.layer] += t.bytes / stored;
      ++parameter_tensors[t.layer];
    }

  // LoRA (peft): which projection a forward matmul is, from its weight's Hugging Face name, and its adapter's ops.
  const bool lora = options.lora_enabled();
  const std::uint64_t r = options.lora.rank;
  auto lora_module = [&](const Op& op, LoraModule& module) {
    if (!lora || op.layer < 0 || op.layer >= L || (op.kind != OpKind::Gemm && op.kind != OpKind::Gemv)) return false;
    const std::string& name = tensors[op.reads.front().tensor].name;
    static const std::pair<const char*, LoraModule> names[] = {
        {"q_proj", LoraModule::Q},       {"k_proj", LoraModule::K},  {"v_proj", LoraModule::V},
        {"o_proj", LoraModule::O},       {"gate_proj", LoraModule::Gate}, {"up_proj", LoraModule::Up},
        {"down_proj", LoraModule::Down}};
    for (const auto& [key, m] : names)
      if (name.find(key) != std::string::npos && options.lora.targets_module(m)) {
        module = m;
        return true;
      }
    return false;
  };
  auto fp32_gemm = [&](std::int32_t layer, std::uint64_t flops, std::uint64_t read, std::uint64_t written) {
    Op g = make_op(OpKind::Gemm, layer, flops, act, read, written, 1);
    g.dtype = "fp32";  // fp32 adapters (autocast_adapter_dtype), fp32 input: matmuls at the fp32 rate
    return g;
  };
  // Linear.forward's LoRA branch after the base matmul: x.to(fp32), A, B, * scaling, result + that, .to(dtype),
  // appended to the step; each branch's [first, end) op indices go to `lora_branches`.
  std::vector<Op>& ops = step_.ops;
  std::vector<std::pair<std::size_t, std::size_t>> lora_branches;
  auto lora_forward = [&](std::int32_t layer, LoraModule module) {
    const std::size_t before = ops.size();
    ++host_model_.lora_modules;
    const auto [in, o] = lora_module_shape(model_, module);
    ops.push_back(make_op(OpKind::Elementwise, layer, 0, act, T * in * a, T * in * 4, 1));
    ops.push_back(fp32_gemm(layer, 2 * T * in * r, T * in * 4 + r * in * 4, T * r * 4));
    ops.push_back(fp32_gemm(layer, 2 * T * r * o, T * r * 4 + o * r * 4, T * o * 4));
    ops.push_back(make_op(OpKind::Elementwise, layer, T * o, act, T * o * 4, T * o * 4, 1));
    ops.push_back(make_op(OpKind::Elementwise, layer, T * o, act, T * o * (a + 4), T * o * 4, 1));
    ops.push_back(make_op(OpKind::Elementwise, layer, 0, act, T * o * 4, T * o * a, 1));
    lora_branches.emplace_back(before, ops.size());
  };
  // Its backward: the cast back, B's weight and input gradients, A's, the cast of the input's gradient added in.
  auto lora_backward = [&](std::int32_t layer, LoraModule module) {
    const std::size_t before = ops.size();
    const auto [in, o] = lora_module_shape(model_, module);
    ops.push_back(make_op(OpKind::Elementwise, layer, 0, act, T * o * a, T * o * 4, 1));
    ops.push_back(fp32_gemm(layer, 2 * T * r * o, T * o * 4 + T * r * 4, o * r * 4));
    ops.push_back(fp32_gemm(layer, 2 * T * r * o, T * o * 4 + o * r * 4, T * r * 4));
    ops.push_back(fp32_gemm(layer, 2 * T * in * r, T * r * 4 + T * in * 4, r * in * 4));
    ops.push_back(fp32_gemm(layer, 2 * T * in * r, T * r * 4 + r * in * 4, T * in * 4));
    ops.push_back(make_op(OpKind::Elementwise, layer, T * in, act, T * in * (4 + a), T * in * a, 2));
    lora_branches.emplace_back(before, ops.size());
  };

  // Forward: the prompt step less its last-token head (norm kept), then the head over every token and the loss.
  std::vector<Op> fwd;
  std::uint32_t lm_head = 0;
  for (const Op& op : forward.ops) {
    if (op.layer == L && (op.kind == OpKind::Gemv || op.kind == OpKind::Gemm)) {
      lm_head = op.reads.front().tensor;
      continue;
    }
    if (op.kind == OpKind::Sample) continue;
    fwd.push_back(op);
  }
  // fp32 weights under autocast: each layer's matrices cast to bf16 once, at the layer's first op.
  std::int32_t cast_layer = INT32_MIN;
  for (const Op& op : fwd) {
    if (autocast && op.layer != cast_layer && op.layer >= 0 && op.layer < L) {
      cast_layer = op.layer;
      ops.push_back(make_op(OpKind::Elementwise, op.layer, 0, act, 4 * params[op.layer], 2 * params[op.layer], 1));
    }
    ops.push_back(op);
    LoraModule module;
    if (lora_module(op, module)) lora_forward(op.layer, module);
  }
  if (autocast) ops.push_back(make_op(OpKind::Elementwise, L, 0, act, 4 * V * h, 2 * V * h, 1));  // lm_head's cast
  Op head = make_op(OpKind::Gemm, L, 2 * T * h * V, act, 0, T * V * a, 1);
  head.reads = {TensorAccess{lm_head, tensors[lm_head].bytes}, TensorAccess{act, T * h * a}};
  ops.push_back(head);
  ops.push_back(make_op(OpKind::Elementwise, L, T * V, act, T * V * a, fp32 ? 0 : T * V * 4, fp32 ? 0 : 1));  // .float()
  ops.push_back(make_op(OpKind::Other, L, 5 * T * V, act, T * V * 4, T * V * 4, 1));                           // log_softmax
  ops.push_back(make_op(OpKind::Other, L, T, act, T * 8, 8, 2));                                               // nll, mean

  const std::size_t forward_end = ops.size();
  std::vector<std::size_t> recomputed_ops;  // indices of recomputed forward ops; a layer's first marked below
  std::vector<std::size_t> recompute_starts;
  // Backward: the loss's (nll's dense gradient, log_softmax's, the cast back), the head's two matmuls.
  ops.push_back(make_op(OpKind::Elementwise, L, T * V, act, 0, T * V * 4, 2));
  ops.push_back(make_op(OpKind::Other, L, 4 * T * V, act, T * V * 8, T * V * 4, 1));
  if (!fp32) ops.push_back(make_op(OpKind::Elementwise, L, T * V, act, T * V * 4, T * V * a, 1));
  Op dgrad = make_op(OpKind::Gemm, L, 2 * T * h * V, act, T * V * a, T * h * a, 1);
  dgrad.reads.push_back(TensorAccess{lm_head, tensors[lm_head].bytes});
  ops.push_back(dgrad);
  if (!lora) ops.push_back(make_op(OpKind::Gemm, L, 2 * T * h * V, act, T * V * a + T * h * a, tensors[lm_head].bytes / stored * wb, 1));
  // Every forward op in reverse; a checkpointed layer's forward ops again before its backward.
  std::int32_t recomputed = INT32_MIN;
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
    const Op& f = *it;
    if (options.checkpointing && f.layer >= 0 && f.layer < L && f.layer != recomputed) {
      recomputed = f.layer;
      recompute_starts.push_back(ops.size());
      for (const Op& again : fwd)
        if (again.layer == f.layer) {
          const std::size_t first = ops.size();
          ops.push_back(again);
          LoraModule module;
          if (lora_module(again, module)) lora_forward(again.layer, module);
          for (std::size_t k = first; k < ops.size(); ++k) recomputed_ops.push_back(k);
        }
    }
    const std::uint64_t in = sum(f.reads), out = sum(f.writes);
    switch (f.kind) {
      case OpKind::Gemm:
      case OpKind::Gemv: {
        const std::uint64_t weight = f.reads.front().bytes, x = in - weight;
        LoraModule module;
        if (lora_module(f, module)) lora_backward(f.layer, module);
        Op dx = make_op(OpKind::Gemm, f.layer, f.flops, act, out + 0, x, f.launches);
        dx.reads.push_back(TensorAccess{f.reads.front().tensor, weight});
        ops.push_back(dx);
        if (!lora)  // a frozen weight gets no gradient
          ops.push_back(make_op(OpKind::Gemm, f.layer, f.flops, act, out + x, weight / stored * wb, f.launches));
        break;
      }
      case OpKind::Attention:
        ops.push_back(make_op(OpKind::Attention, f.layer, f.flops * 5 / 2, act, in + out, in, f.launches));
        break;
      case OpKind::Embedding:
        // A dense gradient of the table, zeroed, then the rows scattered into it (none for a frozen table).
        if (!lora)
          ops.push_back(make_op(OpKind::Elementwise, f.layer, T * h, act, T * h * a, params[f.layer] * wb + T * h * wb, 2));
        break;
      default:
        ops.push_back(make_op(f.kind, f.layer, 2 * f.flops, act, in + out, in, f.launches));
        break;
    }
    // Under autocast each layer's bf16 weight gradients are added into the fp32 ones, after its first op's backward.
    if (autocast && f.layer >= 0 && (it + 1 == fwd.rend() || (it + 1)->layer != f.layer))
      ops.push_back(make_op(OpKind::Elementwise, f.layer, 0, act, 2 * params[f.layer] + 4 * params[f.layer],
                            4 * params[f.layer], 1));
  }
  // The optimizer: torch's foreach passes over every parameter, element bytes read and written per parameter
  // (adamw: lerp_ 3, mul_ 2, addcmul_ 3, sqrt 2, div_ 2, add_ 2, weight decay mul_ 2, addcdiv_ 4).
  // bitsandbytes' AdamW8bit: one fused kernel per parameter reading the parameter, its gradient and two one-byte
  // states (fp32 below 4096 elements, ignored here) and writing the parameter and the states.
  const bool eight_bit = options.optimizer == TrainOptimizer::AdamW8bit;
  const std::uint64_t passes = options.optimizer == TrainOptimizer::AdamW ? 20
                               : options.optimizer == TrainOptimizer::SgdMomentum ? 8 : 3;
  const std::uint32_t calls = options.optimizer == TrainOptimizer::AdamW ? 8 : options.optimizer == TrainOptimizer::SgdMomentum ? 3 : 1;
  const std::size_t optimizer_begin = ops.size();
  // What trains, by layer group: every parameter, or with LoRA the adapters (fp32).
  std::map<std::int32_t, std::uint64_t> trained = params, trained_tensors = parameter_tensors;
  std::uint64_t eb = wb;
  if (lora) {
    trained.clear();
    trained_tensors.clear();
    for (const TrainableTensor& t : trainable_tensors(model_, options)) {
      trained[t.layer] += t.n;
      ++trained_tensors[t.layer];
    }
    eb = 4;
  }
  if (options.offload != OptimizerOffload::None) {
    // Offloaded (optimizer_offload.hpp): the host runs the update; the GPU's fused step for the few small tensors
    // runs under it, its issue priced there.
    trained.clear();
    trained_tensors.clear();
  }
  for (const auto& [layer, n] : trained) {
    if (eight_bit) {
      const auto count = static_cast<std::uint32_t>(trained_tensors[layer]);
      ops.push_back(make_op(OpKind::Elementwise, layer, 20 * n, act, n * (2 * eb + 2), n * (eb + 2), count));
    } else {
      ops.push_back(make_op(OpKind::Elementwise, layer, passes * n / 2, act, passes * n * eb / 2, passes * n * eb / 2, calls));
    }
  }
  std::uint64_t workspace = 0;
  for (const Op& op : ops) {
    for (const auto& r : op.reads) if (r.tensor == act) workspace = std::max(workspace, r.bytes);
    for (const auto& w : op.writes) if (w.tensor == act) workspace = std::max(workspace, w.bytes);
  }
  header_.tensors[act].bytes = workspace;
  lora_op_.assign(ops.size(), 0);
  for (const auto& [first, end] : lora_branches) {
    lora_op_[first] = 1;
    std::fill(lora_op_.begin() + static_cast<std::ptrdiff_t>(first) + 1, lora_op_.begin() + static_cast<std::ptrdiff_t>(end), 2);
  }
  price_host(forward_end, recomputed_ops, recompute_starts, optimizer_begin, trained_tensors, calls, host, inference_host);
  backward_begin_ = forward_end;
  optimizer_begin_ = optimizer_begin;
  step_.kind = trace::StepKind::Iteration;
  step_.tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(T, UINT32_MAX));
}

void TrainingTraceGenerator::price_host(std::size_t forward_end, const std::vector<std::size_t>& recomputed_ops,
                                        const std::vector<std::size_t>& recompute_starts, std::size_t optimizer_begin,
                                        const std::map<std::int32_t, std::uint64_t>& parameter_tensors,
                                        std::uint32_t calls, const runtime::TrainingHostCosts* host,
                                        const std::function<double(const trace::Op&)>& inference_host) {
  std::vector<Op>& ops = step_.ops;
  const auto L = static_cast<std::int32_t>(model_.num_hidden_layers);
  TrainingHostModel& m = host_model_;
  std::vector<char> recompute(ops.size(), 0), recompute_start(ops.size(), 0);
  for (std::size_t i : recomputed_ops) recompute[i] = 1;
  for (std::size_t i : recompute_starts) recompute_start[i] = 1;
  m.optimizer_calls = options_.optimizer == TrainOptimizer::AdamW8bit ? 0 : calls;  // 8-bit: one call per tensor
  for (const auto& [layer, n] : parameter_tensors) m.parameter_tensors += n;
  m.checkpointed_layers = recompute_starts.size();
  const double scale = !host ? 1.0
                       : options_.precision == TrainPrecision::Fp32AutocastBf16 ? host->autocast_forward_scale
                                                                               : host->forward_scale;
  std::int32_t forward_layer = INT32_MIN;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    Op& op = ops[i];
    const double inference = inference_host ? inference_host(op) : 0.0;
    double seconds = 0;
    if (lora_op_[i] != 0) {
      // An adapter branch's op: with the runtime's LoRA costs the branch's host time sits on its first op (the
      // forward cost for a forward or recomputed branch, its own in backward); without them each op is priced
      // like any other. Counted apart from the ops the other costs multiply.
      ++m.lora_ops;
      const bool backward = i >= forward_end && i < optimizer_begin && !recompute[i];
      if (host && host->lora_forward_per_module >= 0)
        seconds = lora_op_[i] == 1 ? (backward ? host->lora_backward_per_module : host->lora_forward_per_module) : 0.0;
      else if (host)
        seconds = backward ? host->backward_per_op : scale * inference;
      if (host) {
        op.host_seconds = seconds;
        (i < forward_end ? m.forward_seconds : m.backward_seconds) += seconds;
      }
      continue;
    }
    if (i < forward_end) {
      ++m.forward_ops;
      m.forward_inference_seconds += inference;
      seconds = scale * inference + (host && i == 0 ? host->forward_per_step : 0.0);
      if (host && options_.checkpointing && op.layer >= 0 && op.layer < L && op.layer != forward_layer)
        seconds += host->checkpoint_forward_per_layer;
      forward_layer = op.layer;
      m.forward_seconds += host ? seconds : 0.0;
    } else if (i < optimizer_begin && recompute[i]) {
      ++m.recompute_ops;
      m.recompute_inference_seconds += inference;
      seconds = scale * inference + (host && recompute_start[i] ? host->checkpoint_backward_per_layer : 0.0);
      m.backward_seconds += host ? seconds : 0.0;
    } else if (i < optimizer_begin) {
      ++m.backward_ops;
      seconds = host ? host->backward_per_op + (i == forward_end ? host->backward_per_step : 0.0) : 0.0;
      m.backward_seconds += seconds;
    } else if (host) {
      const auto it = parameter_tensors.find(op.layer);
      const double tensors = it == parameter_tensors.end() ? 0.0 : static_cast<double>(it->second);
      if (options_.optimizer == TrainOptimizer::AdamW8bit) {
        // bitsandbytes updates parameter by parameter from Python: each one a call of its own (assumed priced as
        // one of torch's foreach calls over one tensor; not calibrated).
        seconds = tensors * (host->optimizer_per_call + host->optimizer_per_tensor + host->optimizer_per_tensor_call);
        if (i == optimizer_begin) seconds += host->optimizer_per_step;
      } else {
        seconds = tensors * (host->optimizer_per_tensor + calls * host->optimizer_per_tensor_call);
        if (i == optimizer_begin) seconds += host->optimizer_per_step + calls * host->optimizer_per_call;
      }
      m.optimizer_seconds += seconds;
    }
    if (host) op.host_seconds = seconds;
  }
}

bool TrainingTraceGenerator::next(trace::Step& out) {
  if (done_ >= steps_) return false;
  ++done_;
  out = step_;
  return true;
}

}  // namespace tiersim::model
