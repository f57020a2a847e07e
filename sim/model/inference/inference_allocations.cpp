#include "model/inference/inference_allocations.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/training/training_memory.hpp"

namespace tiersim::model {
namespace {

// Qwen3RMSNorm / LlamaRMSNorm over `rows` x `width` (modeling_qwen3.py Qwen3RMSNorm.forward):
// hidden_states.to(float32); variance = .pow(2).mean(-1) (the square freed); hidden_states * torch.rsqrt(variance +
// eps): the sum and its rsqrt are tensors of their own (rows fp32 values each), then the product (a new fp32 tensor;
// the rsqrt and the fp32 copy freed on rebinding); .to(input_dtype); weight * that; the cast, the product and the
// variance go when the function returns. The order of these calls is the allocator's own, logged for one decode token
// (results/validation/um-oversubscription/allocator_sizes.jsonl). Returns the output.
std::uint64_t rms_norm(AllocationSequence& s, double rows, double width, double a, const std::string& what) {
  const std::uint64_t f32 = s.alloc(rows * width * 4, what + " fp32 copy");
  const std::uint64_t sq = s.alloc(rows * width * 4, what + " square");
  const std::uint64_t var = s.alloc(rows * 4, what + " variance");
  s.free(sq);
  const std::uint64_t var_eps = s.alloc(rows * 4, what + " variance + eps");
  const std::uint64_t inv = s.alloc(rows * 4, what + " rsqrt");
  s.free(var_eps);
  const std::uint64_t scaled = s.alloc(rows * width * 4, what + " normalised");
  s.free(inv);
  s.free(f32);
  const std::uint64_t cast = s.alloc(rows * width * a, what + " cast");
  const std::uint64_t out = s.alloc(rows * width * a, what + " output");
  s.free(cast);
  s.free(scaled);
  s.free(var);
  return out;
}

// apply_rotary_pos_emb for one of q or k: (x * cos) + (rotate_half(x) * sin); rotate_half = cat(-x2, x1).
std::uint64_t rope(AllocationSequence& s, double elements, double a, const std::string& what) {
  const std::uint64_t xc = s.alloc(elements * a, what + " x cos");
  const std::uint64_t neg = s.alloc(elements / 2 * a, what + " -x2");
  const std::uint64_t rot = s.alloc(elements * a, what + " rotate_half");
  s.free(neg);
  const std::uint64_t rs = s.alloc(elements * a, what + " rotated x sin");
  s.free(rot);
  const std::uint64_t out = s.alloc(elements * a, what + " with rope");
  s.free(xc);
  s.free(rs);
  return out;
}

// Qwen3MoeSparseMoeBlock.forward (MixtralSparseMoeBlock's alike) over the post-attention norm's output x (T x h rows)
// with transformers 5's grouped_mm experts (integrations/moe.py grouped_mm_experts_forward and _grouped_linear,
// modeling_qwen3_moe.py Qwen3MoeTopKRouter, modeling_mixtral.py MixtralTopKRouter; read from the installed 5.17,
// results/validation/inference-memory/moe): the router's logits (kept by the block's `_` until it returns), its fp32
// softmax (freed when the router returns; Mixtral's takes an fp32 copy of the logits first), top-k's values and
// indices, the values normalised; Qwen3-MoE casts them back to the activations' dtype, Mixtral keeps them fp32, so its
// weighted rows are promoted to fp32 and its sum is cast back at the end. Then S = T x k token-expert rows: the sort (sorted ids and the permutation), the gathered hidden states (perm //
// top_k first), the gathered weights, histc's int input, its counts and their cumsum, the sentinel mask; gate_up over
// the rows and its masked copy (the first freed on rebinding), SiLU of the gate and its product with up (the [S, 2I]
// freed), down and its masked copy, the weighted rows, the inverse permutation (with arange's temporary) and the rows in
// token order (the weighted ones freed), and their sum over the k experts: the block's output. Every local of
// grouped_mm_experts_forward lives until it returns. hook_in: the hook's copy of the experts' two parameters
// when accelerate offloaded the layer (hook_in gives 0 when not), and the router's likewise.
std::uint64_t moe_block(AllocationSequence& s, const ModelConfig& m, double T, double a,
                        const std::function<std::uint64_t(double, const std::string&)>& hook_in,
                        const std::function<void(std::uint64_t)>& hook_out, const std::string& layer) {
  const double E = static_cast<double>(m.num_experts), k = static_cast<double>(m.num_experts_per_tok);
  const double h = static_cast<double>(m.hidden_size), I = static_cast<double>(m.moe_intermediate_size), S = T * k;
  const bool mixtral = m.model_type == "mixtral";
  const double w = mixtral ? 4 : a;  // the routing weights' element: fp32 (Mixtral) or the activations'
  const std::uint64_t wr = hook_in(static_cast<double>(m.router_params()), layer + "mlp.gate");
  const std::uint64_t logits = s.alloc(T * E * a, layer + "router logits");
  const std::uint64_t logits32 = mixtral ? s.alloc(T * E * 4, layer + "router logits .float()") : 0;
  const std::uint64_t probs = s.alloc(T * E * 4, layer + "router softmax, fp32");
  if (logits32) s.free(logits32);
  const std::uint64_t top_values = s.alloc(T * k * 4, layer + "top-k values");
  const std::uint64_t top_ids = s.alloc(T * k * 8, layer + "top-k indices");
  s.free(s.alloc(T * 4, layer + "top-k sum"));  // normalised (Qwen3-MoE: norm_topk_prob, true in its published configs)
  std::uint64_t weights = top_values;
  if (!mixtral) {
    weights = s.alloc(T * k * a, layer + "routing weights");
    s.free(top_values);
  }
  s.free(probs);
  hook_out(wr);
  const std::uint64_t we = hook_in(static_cast<double>(m.routed_expert_params()), layer + "mlp.experts");
  std::vector<std::uint64_t> locals{s.alloc(S * 8, layer + "sorted expert ids"), s.alloc(S * 8, layer + "permutation")};
  const std::uint64_t source_rows = s.alloc(S * 8, layer + "perm // top_k");
  locals.push_back(s.alloc(S * h * a, layer + "gathered hidden states"));
  s.free(source_rows);
  locals.push_back(s.alloc(S * w, layer + "gathered routing weights"));
  locals.push_back(s.alloc(S * 4, layer + "histc input"));
  locals.push_back(s.alloc(E * 4, layer + "tokens per expert"));
  locals.push_back(s.alloc(E * 4, layer + "offsets"));
  locals.push_back(s.alloc(S, layer + "sentinel mask"));
  std::uint64_t proj = s.alloc(S * 2 * I * a, layer + "grouped gate_up");
  std::uint64_t next = s.alloc(S * 2 * I * a, layer + "gate_up, masked");
  s.free(proj);
  const std::uint64_t act = s.alloc(S * I * a, layer + "silu(gate)");
  const std::uint64_t gated = s.alloc(S * I * a, layer + "silu(gate) x up");
  s.free(act);
  s.free(next);
  proj = s.alloc(S * h * a, layer + "grouped down");
  s.free(gated);
  next = s.alloc(S * h * a, layer + "down, masked");
  s.free(proj);
  locals.push_back(next);
  const std::uint64_t weighted = s.alloc(S * h * std::max(w, a), layer + "weighted rows");
  locals.push_back(s.alloc(S * 8, layer + "inverse permutation"));
  s.free(s.alloc(S * 8, layer + "arange"));
  locals.push_back(s.alloc(S * h * std::max(w, a), layer + "rows in token order"));
  s.free(weighted);
  if (w > a) locals.push_back(s.alloc(T * h * w, layer + "experts output, fp32"));
  const std::uint64_t out = s.alloc(T * h * a, layer + "experts output");
  s.free_all(locals);
  hook_out(we);
  s.free(logits);
  s.free(weights);
  s.free(top_ids);
  return out;
}

}  // namespace

bool inference_allocations_modelled(const ModelConfig& m) {
  return !m.is_moe() || m.model_type == "qwen3_moe" || m.model_type == "mixtral";
}

std::vector<AllocationEvent> inference_allocations(const ModelConfig& m, const InferenceShape& sh) {
  if (!inference_allocations_modelled(m))
    throw std::invalid_argument("inference allocations are modelled for dense decoders, qwen3_moe and mixtral");
  const double a = sh.activation_bytes, B = sh.batch;
  const double h = static_cast<double>(m.hidden_size), I = static_cast<double>(m.intermediate_size);
  const double hd = static_cast<double>(m.head_dim), V = static_cast<double>(m.vocab_size);
  const double qd = static_cast<double>(m.num_attention_heads) * hd, kvd = static_cast<double>(m.num_key_value_heads) * hd;
  const auto L = static_cast<std::int32_t>(m.num_hidden_layers);

  const auto& off = sh.offloaded;
  if (m.tie_word_embeddings && off.embedding != off.head)
    throw std::invalid_argument("a tied embedding offloaded on one side only is not modelled");
  AllocationSequence s;
  {
    const auto params = parameter_tensors(m);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto [layer, n] = params[i];
      // parameter_tensors: the embedding (-1), the layers, then the final norm and (untied) the head (L).
      const bool head = layer == L && i + 1 == params.size() && !m.tie_word_embeddings;
      const bool gone = layer < 0 ? off.embedding : layer < L ? off.layer(layer) : head ? off.head : off.norm;
      if (!gone) s.alloc(static_cast<double>(n) * sh.weight_bytes, "parameter");
    }
  }
  // A module's weights, copied to the GPU by its accelerate hook for its forward when it is offloaded (-> 0: none).
  auto hook_in = [&](bool offloaded, double params, const std::string& what) -> std::uint64_t {
    return offloaded ? s.alloc(params * sh.weight_bytes, what + " weight (accelerate hook)") : 0;
  };
  auto hook_out = [&](std::uint64_t w) {
    if (w) s.free(w);
  };
  std::vector<std::uint64_t> keys(L, 0), values(L, 0);
  double context = 0;
  const std::uint32_t steps = 1 + sh.decode;
  for (std::uint32_t step = 1; step <= steps; ++step) {
    s.step = step;
    s.phase = step == 1 ? "prefill" : "decode";
    const double new_tokens = step == 1 ? sh.prompt : 1;
    const double T = B * new_tokens;  // rows of this forward
    if (T <= 0) continue;
    std::vector<std::uint64_t> inputs{s.alloc(T * 8, "input ids"), s.alloc(new_tokens * 8, "cache position"),
                                      s.alloc(T * 8, "position ids")};
    const std::uint64_t we = hook_in(off.embedding, static_cast<double>(m.embedding_params()), "embed_tokens");
    const std::uint64_t embeds = s.alloc(T * h * a, "embedding output");
    hook_out(we);
    inputs.push_back(s.alloc(T * hd * a, "rope cos"));
    inputs.push_back(s.alloc(T * hd * a, "rope sin"));
    std::uint64_t hidden = embeds;
    for (std::int32_t l = 0; l < L; ++l) {
      const std::string layer = "layer " + std::to_string(l) + " ";
      const bool moved = off.layer(l);
      // A module's output with its weights around it when accelerate offloaded the layer.
      auto module = [&](double params, const std::string& name, auto&& forward) {
        const std::uint64_t w = hook_in(moved, params, layer + name);
        const std::uint64_t out = forward();
        hook_out(w);
        return out;
      };
      const std::uint64_t x =
          module(h, "input_layernorm", [&] { return rms_norm(s, T, h, a, layer + "input_layernorm"); });
      // q_norm(q_proj(x)), then k_norm(k_proj(x)): each projection freed once its norm is taken.
      std::uint64_t q = module(static_cast<double>(m.q_params()), "q_proj", [&] { return s.alloc(T * qd * a, layer + "q_proj"); });
      if (m.qk_norm) {
        const std::uint64_t qn =
            module(hd, "q_norm", [&] { return rms_norm(s, T * m.num_attention_heads, hd, a, layer + "q_norm"); });
        s.free(q);
        q = qn;
      }
      const double kvp = static_cast<double>(m.kv_params());
      std::uint64_t k = module(kvp, "k_proj", [&] { return s.alloc(T * kvd * a, layer + "k_proj"); });
      if (m.qk_norm) {
        const std::uint64_t kn =
            module(hd, "k_norm", [&] { return rms_norm(s, T * m.num_key_value_heads, hd, a, layer + "k_norm"); });
        s.free(k);
        k = kn;
      }
      const std::uint64_t v = module(kvp, "v_proj", [&] { return s.alloc(T * kvd * a, layer + "v_proj"); });
      const std::uint64_t qr = rope(s, T * qd, a, layer + "q");
      s.free(q);
      const std::uint64_t kr = rope(s, T * kvd, a, layer + "k");
      s.free(k);
      // DynamicLayer.update: self.keys = torch.cat([self.keys, key_states], dim=-2), then the old tensor goes.
      const double cached = B * (context + new_tokens);
      const std::uint64_t nk = s.alloc(cached * kvd * a, layer + "KV cache keys");
      if (keys[l]) s.free(keys[l]);
      keys[l] = nk;
      const std::uint64_t nv = s.alloc(cached * kvd * a, layer + "KV cache values");
      if (values[l]) s.free(values[l]);
      values[l] = nv;
      s.free(kr);
      s.free(v);
      // SDPA's cuDNN path (aten/src/ATen/native/transformers/cuda/attention.cu,
      // _scaled_dot_product_cudnn_attention_cuda): cudnn_seed and cudnn_offset, one int64 each on the GPU, then the
      // output; a one-byte tensor follows (the allocator's size log shows it, its source is not identified here).
      const std::uint64_t seed = s.alloc(8, layer + "sdpa cudnn_seed");
      const std::uint64_t offset = s.alloc(8, layer + "sdpa cudnn_offset");
      const std::uint64_t attn = s.alloc(T * qd * a, layer + "sdpa output");
      s.free(s.alloc(1, layer + "sdpa one-byte tensor"));
      s.free(seed);
      s.free(offset);
      s.free(qr);
      const std::uint64_t attn_c = s.alloc(T * qd * a, layer + "attention output, contiguous");
      s.free(attn);
      const std::uint64_t o =
          module(static_cast<double>(m.o_params()), "o_proj", [&] { return s.alloc(T * h * a, layer + "o_proj"); });
      s.free(attn_c);
      s.free(x);
      const std::uint64_t mid = s.alloc(T * h * a, layer + "attention residual");
      s.free(o);
      const std::uint64_t x2 = module(h, "post_attention_layernorm",
                                      [&] { return rms_norm(s, T, h, a, layer + "post_attention_layernorm"); });
      std::uint64_t down = 0;
      if (m.moe_layer(static_cast<std::uint64_t>(l))) {
        down = moe_block(s, m, T, a, [&](double params, const std::string& what) { return hook_in(moved, params, what); },
                         hook_out, layer);
      } else {
        const double mlp = static_cast<double>(m.mlp_matrix_params());
        const std::uint64_t gate = module(mlp, "gate_proj", [&] { return s.alloc(T * I * a, layer + "gate_proj"); });
        const std::uint64_t act = s.alloc(T * I * a, layer + "silu");
        s.free(gate);
        const std::uint64_t up = module(mlp, "up_proj", [&] { return s.alloc(T * I * a, layer + "up_proj"); });
        const std::uint64_t prod = s.alloc(T * I * a, layer + "silu x up");
        s.free(act);
        s.free(up);
        down = module(mlp, "down_proj", [&] { return s.alloc(T * h * a, layer + "down_proj"); });
        s.free(prod);
      }
      s.free(x2);
      const std::uint64_t out = s.alloc(T * h * a, layer + "output");
      s.free(down);
      s.free(mid);
      if (hidden != embeds) s.free(hidden);
      hidden = out;
    }
    const std::uint64_t wn = hook_in(off.norm, h, "final norm");
    const std::uint64_t normed = rms_norm(s, T, h, a, "final norm");
    hook_out(wn);
    if (hidden != embeds) s.free(hidden);
    const std::uint64_t wh = hook_in(off.head, static_cast<double>(m.embedding_params()), "lm_head");
    const std::uint64_t logits = s.alloc(B * V * a, "logits (last token)");
    hook_out(wh);
    s.free(normed);
    const std::uint64_t f32 = s.alloc(B * V * 4, "next-token logits, fp32");
    s.free(logits);
    const std::uint64_t next = s.alloc(B * 8, "next token");
    s.free(f32);
    s.free(embeds);
    s.free_all(inputs);
    s.free(next);
    context += new_tokens;
  }
  return s.events;
}

}  // namespace tiersim::model
