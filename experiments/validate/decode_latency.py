"""Measures real decode latency of a Hugging Face dense decoder (random weights, built from a tiersim
model description) under the strategies tiersim models, and writes one JSON line per configuration.

Runs on a GPU machine with torch and transformers (no network: weights are random, which does not
change speed). Batch 1, bf16, greedy decoding with the KV cache, logits for the last token only, and
a host sync per token (.item()), as `generate` does.

  python3 decode_latency.py --model traces/models/qwen3-8b.json --placements resident,offload:12:0:pinned \
      --out measured.jsonl
  python3 decode_latency.py --model ... --managed none|prefer-cpu|accessed-by|read-mostly --allocator-so X.so ...

Placements (one process can run several, the model is built once):
  resident                      everything on the GPU (PyTorch's caching allocator)
  offload:K:P:MEM               the last K decoder layers and the final norm + LM head kept in host
                                memory (MEM = pinned | pageable) or on another GPU (MEM = cuda:1) and
                                copied to cuda:0 when their layer runs, P = 0 (on demand, on the
                                compute stream) or 1 (one layer ahead, on a copy stream); the copies
                                are freed after the layer runs
Managed (one per process): every tensor from cudaMallocManaged through a CUDAPluggableAllocator; the
weights get the advice, at allocation or, with --advise-after-load, once built (ReadMostly at
allocation makes model construction crawl: results/validation/README.md); they start in host memory
(prefetched there after random init). Models: Qwen3, Llama or Qwen3-MoE descriptions (model_type qwen3,
llama, qwen3_moe).

Mixture of experts (qwen3_moe, e.g. experiments/llamacpp/models/qwen3-30b-a3b-L24.json):
  --experts-impl IMPL[,IMPL...]  how transformers runs a layer's experts (transformers 5: the
                                 @use_experts_implementation machinery of transformers/integrations/moe.py):
                                 eager (a Python loop over the experts hit, each a pair of small matmuls,
                                 with host syncs), grouped_mm (torch grouped GEMM over all experts,
                                 selected by offsets; transformers' default when unset), batched_mm (the
                                 selected experts' weights gathered then bmm); deepgemm, sonicmoe need the
                                 `kernels` hub package. Unset: transformers' default. Several: the model is
                                 built once and switched (model.set_experts_implementation), every placement
                                 run under each. Every row records the implementation read back from the
                                 model ("experts_implementation") and transformers' version.
  Routing of the random router (one extra, untimed prefill + decode at the first placement's already-run
  lengths, forward hooks on each layer's router): distinct experts per layer in one decode step
  ("experts_used_per_layer"; at batch 1 a step routes one token, so this is num_experts_per_tok unless the
  router output is degenerate), over all the decode steps ("experts_used_decode_union_per_layer"; the
  steps are fed the greedy next token, as the timed decode is, which a random model tends to repeat:
  "routing_decode_distinct_inputs" counts them; "experts_used_decode_union_random_inputs_per_layer" is
  the same decode fed a random token each step) and in the prefill ("experts_used_prefill_per_layer",
  with the most tokens any expert got), against what uniform routing predicts ("experts_uniform_expected").
  --routing-out FILE  the experts every timed decode really routed each token to (the prompt's tokens in the
                 prefill, then each decode step's token), appended to FILE as one JSON line per row and regime
                 (config, experts_implementation, prompt, regime fresh|warm) holding a tiersim routing file's
                 fields (sim/model/routing_file.hpp: tiersim_routing, num_experts, experts_per_token, layers,
                 sequences), for `sim run --routing replay:FILE`. A forward hook on each router copies its top-k
                 indices into a buffer allocated before the timed region (one small copy kernel per MoE layer
                 and forward, no allocation and no host sync in the timed steps), read back after the decode.

Two regimes per configuration. Eager SDPA pays a large host cost (~30 ms on the H200 machines) on the
first attention call at a sequence length the process has not run before (experiments/validate/
host_timeline.py shows it in layer 0's attention, once per step). A first `generate` in a process
meets a new length at every step ("fresh"); a process that has already decoded those lengths does
not ("warm"). Each configuration decodes from its own prompt length (so its lengths are new: fresh),
then repeats the same decode (warm); both are recorded.
"""
import argparse
import ctypes
import faulthandler
import json
import os
import statistics
import sys
import time

import torch

PROGRESS = False  # --progress: a timestamped line on stderr per phase and per decoded token
_T0 = time.perf_counter()


def progress(what):
    if PROGRESS:
        print(f"[{time.perf_counter() - _T0:9.3f} s] {what}", file=sys.stderr, flush=True)


ARCHITECTURES = {"qwen3": ("Qwen3Config", "Qwen3ForCausalLM"), "llama": ("LlamaConfig", "LlamaForCausalLM"),
                 "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}
# Mixture-of-experts fields passed through when the description has them (Qwen3MoeConfig's names).
MOE_KEYS = ["num_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step", "norm_topk_prob",
            "mlp_only_layers", "router_aux_loss_coef", "output_router_logits"]


def load_config(path):
    """The Hugging Face config of a tiersim model description (model_type qwen3, llama, qwen3_moe or qwen2)."""
    import transformers
    with open(path) as f:
        d = json.load(f)
    kind = d.get("model_type", "qwen3")
    if kind not in ARCHITECTURES:
        sys.exit(f"{path}: model_type {kind!r}: the harness builds {sorted(ARCHITECTURES)}")
    keys = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "vocab_size", "tie_word_embeddings", "rms_norm_eps", "rope_theta", "max_position_embeddings",
            "attention_bias", "mlp_bias"]
    if kind == "qwen3_moe":
        keys += MOE_KEYS
    cfg = getattr(transformers, ARCHITECTURES[kind][0])(**{k: d[k] for k in keys if k in d})
    cfg.use_cache = True
    return d.get("name", os.path.basename(path)), cfg


def build(cfg, seed=0, experts_impl=None):
    """Random weights on cuda:0. experts_impl: a transformers experts implementation (None: its default)."""
    import transformers
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = getattr(transformers, ARCHITECTURES[cfg.model_type][1])(cfg)
    model.eval()
    if experts_impl is not None:
        set_experts_impl(model, experts_impl)
    with torch.no_grad():
        for p in model.parameters():  # random, not zeros: zeros can run faster than real data
            p.normal_(0.0, 0.02)
    torch.cuda.synchronize()
    return model


def moe_layers(model):
    """(layer index, MoE block) of the decoder layers whose MLP is a routed mixture of experts."""
    return [(i, layer.mlp) for i, layer in enumerate(model.model.layers)
            if hasattr(layer.mlp, "experts") and hasattr(layer.mlp, "gate")]


def experts_impl(model):
    """The experts implementation the model's MoE layers dispatch on (read back from an experts module's
    config, what its forward reads), "eager loop" where transformers has no such machinery (before 5.x: the
    MoE block loops over the experts hit), None for a dense model."""
    layers = moe_layers(model)
    if not layers:
        return None
    experts = layers[0][1].experts
    cfg = getattr(experts, "config", None) or model.config
    impl = getattr(cfg, "_experts_implementation", None)
    return impl if impl is not None else "eager loop"


def set_experts_impl(model, impl):
    if not moe_layers(model):
        sys.exit(f"--experts-impl {impl}: the model has no mixture-of-experts layers")
    if not hasattr(model, "set_experts_implementation"):
        sys.exit(f"--experts-impl {impl}: this transformers has no experts implementations (set_experts_implementation)")
    model.set_experts_implementation(impl)  # raises ValueError, listing the valid names, on an unknown one
    if experts_impl(model) != impl:
        sys.exit(f"--experts-impl {impl}: the model reports {experts_impl(model)!r} after setting it")


def routing_stats(model, vocab, prompt, tokens):
    """Which experts the (random) routers choose: a prefill of `prompt` tokens, then `tokens` decode steps,
    with a forward hook on each MoE layer's router (untimed). None for a dense model."""
    from transformers import DynamicCache
    layers = moe_layers(model)
    if not layers:
        return None
    n_layers = len(model.model.layers)
    n_exp, k = model.config.num_experts, model.config.num_experts_per_tok
    picked = {}  # layer -> top-k expert indices (tokens, k) of the current forward

    def hook(layer):
        def fn(module, args, out):
            # transformers 5: the router returns (logits, top-k weights, top-k indices); before: an
            # nn.Linear returning the logits, the block taking softmax + top-k itself.
            if isinstance(out, tuple) and len(out) >= 3:
                idx = out[2]
            else:
                logits = out[0] if isinstance(out, tuple) else out
                idx = torch.topk(torch.softmax(logits.float(), dim=-1), k, dim=-1).indices
            picked[layer] = idx.detach().reshape(-1, idx.shape[-1]).clone()
        return fn

    handles = [mlp.gate.register_forward_hook(hook(i)) for i, mlp in layers]

    def distinct():
        return {i: torch.unique(picked[i]).numel() for i in picked}

    def one_pass(random_inputs):
        """A prefill of `prompt` random tokens, then `tokens` decode steps fed the greedy next token (as the
        timed decode is) or, random_inputs, a random token each step (the same lengths either way)."""
        ids = torch.randint(0, vocab, (1, prompt), device="cuda")
        cache = DynamicCache()
        picked.clear()
        out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        prefill = distinct()
        prefill_max = {i: int(torch.bincount(picked[i].reshape(-1), minlength=n_exp).max()) for i in picked}
        first, union, inputs = None, {i: set() for i, _ in layers}, set()
        for _ in range(tokens):
            if random_inputs:
                nxt = torch.randint(0, vocab, (1, 1), device="cuda")
            else:
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            inputs.add(int(nxt))
            picked.clear()
            out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            if first is None:
                first = distinct()
            for i in picked:
                union[i].update(picked[i].reshape(-1).tolist())
        return prefill, prefill_max, first or {}, {i: len(u) for i, u in union.items()}, len(inputs)

    try:
        with torch.no_grad():
            prefill, prefill_max, first, union, inputs = one_pass(False)
            _, _, _, union_random, _ = one_pass(True)
    finally:
        for h in handles:
            h.remove()

    def per_layer(d):
        return [d.get(i) for i in range(n_layers)]  # None for a layer with a dense MLP

    def uniform(t):  # expected distinct experts when t tokens each pick k of n_exp uniformly
        return n_exp * (1 - (1 - k / n_exp) ** t)

    return dict(experts_used_per_layer=per_layer(first),
                experts_used_decode_union_per_layer=per_layer(union),
                routing_decode_distinct_inputs=inputs,
                experts_used_decode_union_random_inputs_per_layer=per_layer(union_random),
                experts_used_prefill_per_layer=per_layer(prefill),
                experts_prefill_max_tokens_per_expert_per_layer=per_layer(prefill_max),
                experts_uniform_expected=dict(decode_step=k, decode_union=uniform(tokens), prefill=uniform(prompt),
                                              prefill_mean_tokens_per_expert=prompt * k / n_exp),
                routing_prompt=prompt, routing_decode_steps=tokens, num_experts=n_exp, experts_per_token=k)


class RoutingRecorder:
    """--routing-out: every MoE layer's top-k expert indices of each token of the timed decodes (prefill, then
    the decode steps), copied by router forward hooks into a buffer allocated before timing starts."""

    def __init__(self, model):
        self.layers = moe_layers(model)
        self.n_layers = len(model.model.layers)
        self.n_exp, self.k = model.config.num_experts, model.config.num_experts_per_tok
        if len(self.layers) != self.n_layers:
            sys.exit("--routing-out: every decoder layer must be a mixture of experts (a tiersim routing file routes all)")
        self.buf, self.pos, self.sequences = None, 0, []
        self.handles = [mlp.gate.register_forward_hook(self.hook(i)) for i, mlp in self.layers]

    def hook(self, layer):
        def fn(module, args, out):
            if self.buf is None:  # not in a timed decode
                return
            if not (isinstance(out, tuple) and len(out) >= 3):
                sys.exit("--routing-out: the router returned no top-k indices (transformers 5's (logits, weights, "
                         "indices))")
            idx = out[2].reshape(-1, self.k)
            self.buf[self.pos:self.pos + idx.shape[0], layer].copy_(idx, non_blocking=True)
        return fn

    def start(self, tokens):  # before the timed region
        self.buf, self.pos = torch.full((tokens, self.n_layers, self.k), -1, dtype=torch.int64, device="cuda"), 0

    def advance(self, n):
        self.pos += n

    def stop(self):  # after the timed region
        seq = self.buf[:self.pos].tolist()
        self.buf = None
        if any(e < 0 or e >= self.n_exp for tok in seq for lay in tok for e in lay):
            sys.exit("--routing-out: a token of a layer was not routed (its router did not run)")
        self.sequences.append(seq)

    def write(self, path, config, experts_implementation, prompt):
        """The last measure()'s two decodes (fresh, then warm), one JSON line each."""
        fresh, warm = self.sequences[-2:]
        self.sequences.clear()
        with open(path, "a") as f:
            for regime, seq in (("fresh", fresh), ("warm", warm)):
                f.write(json.dumps(dict(config=config, experts_implementation=experts_implementation, prompt=prompt,
                                        regime=regime, tiersim_routing=1, num_experts=self.n_exp,
                                        experts_per_token=self.k, layers=self.n_layers,
                                        source=f"transformers router top-k of decode_latency.py's timed {regime} "
                                               f"decode ({config}, {experts_implementation})",
                                        sequences=[seq]), separators=(",", ":")) + "\n")


class LayerStreamer:
    """Keeps some execution units' weights off cuda:0 (pinned or pageable host memory, or another GPU)
    and copies them to cuda:0 when the unit runs. A unit is (its parameters, the module whose forward
    starts it, the module whose forward ends it)."""

    def __init__(self, units, offloaded, prefetch, storage):
        self.units, self.prefetch = units, prefetch
        self.non_blocking = storage != "pageable"
        self.offloaded = set(offloaded)
        self.host = {}
        self.pending = {}
        self.copy_stream = torch.cuda.Stream()
        self.handles = []
        for i in self.offloaded:
            params = units[i][0]
            hosted = []
            for p in params:
                if storage.startswith("cuda:"):
                    h = p.data.to(storage)
                else:
                    h = p.data.to("cpu")
                    if storage == "pinned":
                        h = h.pin_memory()
                hosted.append(h)
                p.data = torch.empty(0, device="cuda", dtype=p.dtype)
            self.host[i] = (params, hosted)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        for i, (_, first, last) in enumerate(units):
            self.handles.append(first.register_forward_pre_hook(lambda m, a, i=i: self.before(i)))
            self.handles.append(last.register_forward_hook(lambda m, a, o, i=i: self.after(i)))

    def load_now(self, i):
        params, hosted = self.host[i]
        for p, h in zip(params, hosted):
            p.data = h.to("cuda:0", non_blocking=self.non_blocking)

    def load_ahead(self, i):
        params, hosted = self.host[i]
        with torch.cuda.stream(self.copy_stream):
            tensors = [h.to("cuda:0", non_blocking=self.non_blocking) for h in hosted]
            ev = torch.cuda.Event()
            ev.record(self.copy_stream)
        self.pending[i] = (tensors, ev)

    def before(self, i):
        cur = torch.cuda.current_stream()
        if i in self.pending:
            tensors, ev = self.pending.pop(i)
            cur.wait_event(ev)
            for p, t in zip(self.host[i][0], tensors):
                t.record_stream(cur)
                p.data = t
        elif i in self.offloaded:
            self.load_now(i)
        if self.prefetch and (i + 1) in self.offloaded and (i + 1) not in self.pending:
            self.load_ahead(i + 1)

    def after(self, i):
        if i in self.offloaded:
            for p in self.host[i][0]:
                p.data = torch.empty(0, device="cuda", dtype=p.dtype)

    def restore(self):
        for h in self.handles:
            h.remove()
        for i, (params, hosted) in self.host.items():
            for p, h in zip(params, hosted):
                p.data = h.to("cuda:0")
        self.host.clear()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def execution_units(model):
    """Decoder layers, then the final norm + LM head as one unit (their weights move together)."""
    units = [(list(layer.parameters()), layer, layer) for layer in model.model.layers]
    units.append((list(model.model.norm.parameters()) + list(model.lm_head.parameters()), model.model.norm,
                  model.lm_head))
    return units


def decode(model, vocab, prompt, tokens, warmup, recorder=None):
    from transformers import DynamicCache
    ids = torch.randint(0, vocab, (1, prompt), device="cuda")
    cache = DynamicCache()
    if recorder:
        recorder.start(prompt + warmup + tokens)
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        nxt.item()
        prefill = time.perf_counter() - t0
        if recorder:
            recorder.advance(prompt)
        progress(f"prefill of {prompt} tokens: {prefill * 1e3:.1f} ms")
        times = []
        for _ in range(warmup + tokens):
            t = time.perf_counter()
            out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            nxt.item()
            times.append(time.perf_counter() - t)
            if recorder:
                recorder.advance(1)
            progress(f"decode step {len(times)}: {times[-1] * 1e3:.1f} ms")
    if recorder:
        recorder.stop()
    return prefill, times[:warmup], times[warmup:]


def count_kernels(model, vocab, prompt, names=False):
    """Kernels and GPU time of one decode step (profiled, so not timed); names: also the 12 most launched
    kernel names with their counts."""
    from torch.profiler import ProfilerActivity, profile
    from transformers import DynamicCache
    ids = torch.randint(0, vocab, (1, prompt), device="cuda")
    cache = DynamicCache()
    with torch.no_grad():
        out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)  # warm
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            out.logits[:, -1].argmax(-1, keepdim=True).item()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.device_time_total for e in kernels) * 1e-6
    if names:
        counts = {}
        for e in kernels:
            counts[e.name[:120]] = counts.get(e.name[:120], 0) + 1
        return len(kernels), busy, sorted(counts.items(), key=lambda kv: -kv[1])[:12]
    return len(kernels), busy


def measure(model, vocab, prompt, tokens, warmup, recorder=None):
    """The fresh decode (lengths new to the process, when prompt is), then the same decode again (warm)."""
    prefill, warm_up, times = decode(model, vocab, prompt, tokens, warmup, recorder)
    warm_prefill, warm_warm_up, warm_times = decode(model, vocab, prompt, tokens, warmup, recorder)
    return dict(prompt=prompt, tokens=tokens, warmup=warmup, prefill_s=prefill, warm_prefill_s=warm_prefill,
                warmup_s=warm_up, decode_s=times,
                decode_median_s=statistics.median(times), warm_warmup_s=warm_warm_up, warm_decode_s=warm_times,
                warm_decode_median_s=statistics.median(warm_times))


def record(out, **row):
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")
    dec, warm = row["decode_median_s"], row["warm_decode_median_s"]
    label = row["config"] + (f" [{row['experts_implementation']}]" if row.get("experts_implementation") else "")
    print(f"{row['model']:>14} {label:<28} prompt {row['prompt']:5d}  prefill {row['prefill_s'] * 1e3:8.1f} ms  "
          f"decode median fresh {dec * 1e3:8.2f} ms ({1 / dec:6.2f} tok/s)  warm {warm * 1e3:8.2f} ms", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--placements", default="resident")
    ap.add_argument("--managed", choices=["none", "prefer-cpu", "accessed-by", "read-mostly"])
    ap.add_argument("--allocator-so")
    ap.add_argument("--advise-everything", action="store_true",
                    help="managed: keep the advice for every later allocation too (activations, KV cache), as the "
                         "seeds' allocator applies its mode to every allocation")
    ap.add_argument("--advise-after-load", action="store_true",
                    help="managed: build with no advice, then advise each weight's range (not at allocation)")
    ap.add_argument("--progress", action="store_true", help="timestamped phases and tokens on stderr")
    ap.add_argument("--stack-every", type=float, help="dump every thread's Python stack to stderr every S seconds")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--slow-tokens", type=int, help="tokens (and at most 2 warm-up steps) for pageable placements")
    ap.add_argument("--context-stride", type=int, default=64,
                    help="each placement starts this many tokens after the previous one's prompt (fresh lengths)")
    ap.add_argument("--count-kernels", action="store_true")
    ap.add_argument("--experts-impl",
                    help="mixture of experts: transformers' experts implementation(s), comma-separated (eager, "
                         "grouped_mm, batched_mm, ...: the names transformers accepts); unset: its default")
    ap.add_argument("--no-routing-stats", action="store_true",
                    help="mixture of experts: skip the untimed pass that records which experts the routers use")
    ap.add_argument("--routing-out",
                    help="mixture of experts: append the timed decodes' real routing (tiersim routing files' fields, "
                         "one JSON line per row and regime) to this file")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    global PROGRESS
    PROGRESS = a.progress
    if a.stack_every:
        faulthandler.dump_traceback_later(a.stack_every, repeat=True, file=sys.stderr)

    lib = None
    if a.managed:
        lib = ctypes.CDLL(a.allocator_so)
        alloc = torch.cuda.memory.CUDAPluggableAllocator(a.allocator_so, "tiersim_alloc", "tiersim_free")
        torch.cuda.memory.change_current_allocator(alloc)
        advice = {"none": 0, "prefer-cpu": 1, "accessed-by": 2, "read-mostly": 3}[a.managed]
        lib.tiersim_set_advice(ctypes.c_int(0 if a.advise_after_load else advice))
        lib.tiersim_prefetch_to_host.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.tiersim_advise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
        lib.tiersim_in_use.restype = ctypes.c_size_t

    import transformers
    name, cfg = load_config(a.model)
    impls = a.experts_impl.split(",") if a.experts_impl else [None]
    model = build(cfg, experts_impl=impls[0])
    progress(f"model built (experts implementation: {experts_impl(model)})")
    common = dict(model=name, gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  transformers=transformers.__version__, layers=cfg.num_hidden_layers)
    assert a.context_stride >= a.warmup + a.tokens + 1, "--context-stride must exceed the decoded tokens"
    routing = {}  # the routers' expert use, measured once (after the first configuration), in every row
    recorder = RoutingRecorder(model) if a.routing_out else None

    def dump_routing(config, prompt):
        if recorder:
            recorder.write(a.routing_out, config, experts_impl(model), prompt)

    def moe_fields(prompt):
        if not routing and moe_layers(model) and not a.no_routing_stats:
            routing.update(routing_stats(model, cfg.vocab_size, prompt, a.tokens))
            progress("routing recorded")
        return dict(experts_implementation=experts_impl(model), **routing) if moe_layers(model) else {}

    def switch(impl):
        if impl is not None and impl != experts_impl(model):
            set_experts_impl(model, impl)
            progress(f"experts implementation: {experts_impl(model)}")

    if a.managed:
        if not a.advise_everything:
            lib.tiersim_set_advice(ctypes.c_int(0))  # activations and KV cache: managed, no advice
        if a.advise_after_load:
            for p in model.parameters():
                if lib.tiersim_advise(ctypes.c_void_p(p.data_ptr()), p.numel() * p.element_size(), advice, 0) != 0:
                    sys.exit("cudaMemAdvise on a weight failed")
            progress("weights advised")
        for p in model.parameters():  # start where a freshly loaded checkpoint would be: host memory
            if lib.tiersim_prefetch_to_host(ctypes.c_void_p(p.data_ptr()), p.numel() * p.element_size()) != 0:
                sys.exit("prefetch to host failed")
        progress("weights prefetched to host")
        config = (f"managed:{a.managed}" + (":after-load" if a.advise_after_load else "")
                  + (":everything" if a.advise_everything else ""))
        if a.placements == "resident":
            prompt = a.prompt
            for impl in impls:
                switch(impl)
                m = measure(model, cfg.vocab_size, prompt, a.tokens, a.warmup, recorder)
                if lib.tiersim_failed():
                    sys.exit("a CUDA call in the managed allocator failed")
                record(a.out, config=config, **m, managed_bytes=int(lib.tiersim_in_use()), **moe_fields(prompt),
                       **common)
                dump_routing(config, prompt)
                prompt += a.context_stride
            return
        # Under a layer split: the last K layers + head streamed from host memory (LayerStreamer), their
        # per-forward copies allocated by the same managed allocator (with the advice then in force).
        units = execution_units(model)
        n_layers = len(units) - 1
        prompt = a.prompt
        for impl, placement in [(i, p) for i in impls for p in a.placements.split(",")]:
            switch(impl)
            kind, k, pf, mem = placement.split(":", 3)
            assert kind == "offload" and mem in ("pinned", "pageable"), placement
            k, pf = int(k), int(pf)
            offloaded = list(range(n_layers - k, n_layers)) + [n_layers]
            streamer = LayerStreamer(units, offloaded, prefetch=pf == 1, storage=mem)
            m = measure(model, cfg.vocab_size, prompt, a.tokens, a.warmup, recorder)
            if lib.tiersim_failed():
                sys.exit("a CUDA call in the managed allocator failed")
            moe = moe_fields(prompt)
            record(a.out, config=f"{config}+{placement}", offloaded_layers=k, prefetch=pf, host_memory=mem, **m,
                   managed_bytes=int(lib.tiersim_in_use()), **moe, **common)
            dump_routing(f"{config}+{placement}", prompt)
            streamer.restore()
            prompt += a.context_stride
        return

    units = execution_units(model)
    n_layers = len(units) - 1
    prompt = a.prompt
    for impl, placement in [(i, p) for i in impls for p in a.placements.split(",")]:
        switch(impl)
        tokens, warmup = a.tokens, a.warmup
        if placement.endswith(":pageable") and a.slow_tokens:
            tokens, warmup = a.slow_tokens, min(a.warmup, 2)
        torch.cuda.reset_peak_memory_stats()
        if placement == "resident":
            m = measure(model, cfg.vocab_size, prompt, tokens, warmup, recorder)
            extra = {}
            if a.count_kernels:
                moe = bool(moe_layers(model))
                k, busy, *top = count_kernels(model, cfg.vocab_size, prompt, names=moe)
                extra = dict(kernels_per_step=k, gpu_busy_s=busy)
                if moe:
                    extra["top_kernels"] = top[0]
            peak = torch.cuda.max_memory_allocated()
            record(a.out, config="resident", **m, peak_bytes=peak, **extra, **moe_fields(prompt), **common)
            dump_routing("resident", prompt)
            prompt += a.context_stride
            continue
        kind, k, pf, mem = placement.split(":", 3)
        assert kind == "offload" and (mem in ("pinned", "pageable") or mem.startswith("cuda:")), placement
        k, pf = int(k), int(pf)
        offloaded = list(range(n_layers - k, n_layers)) + [n_layers]  # last K layers + the head
        streamer = LayerStreamer(units, offloaded, prefetch=pf == 1, storage=mem)
        torch.cuda.reset_peak_memory_stats()
        m = measure(model, cfg.vocab_size, prompt, tokens, warmup, recorder)
        peak = torch.cuda.max_memory_allocated()
        record(a.out, config=placement, offloaded_layers=k, prefetch=pf, host_memory=mem, **m,
               peak_bytes=peak, **moe_fields(prompt), **common)
        dump_routing(placement, prompt)
        streamer.restore()
        prompt += a.context_stride


if __name__ == "__main__":
    main()
