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
(prefetched there after random init). Models: Qwen3 or Llama descriptions (model_type).

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


ARCHITECTURES = {"qwen3": ("Qwen3Config", "Qwen3ForCausalLM"), "llama": ("LlamaConfig", "LlamaForCausalLM")}


def load_config(path):
    """The Hugging Face config of a tiersim model description (model_type qwen3 or llama)."""
    import transformers
    with open(path) as f:
        d = json.load(f)
    kind = d.get("model_type", "qwen3")
    if kind not in ARCHITECTURES:
        sys.exit(f"{path}: model_type {kind!r}: the harness builds {sorted(ARCHITECTURES)}")
    keys = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "vocab_size", "tie_word_embeddings", "rms_norm_eps", "rope_theta", "max_position_embeddings",
            "attention_bias", "mlp_bias"]
    cfg = getattr(transformers, ARCHITECTURES[kind][0])(**{k: d[k] for k in keys if k in d})
    cfg.use_cache = True
    return d.get("name", os.path.basename(path)), cfg


def build(cfg, seed=0):
    import transformers
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = getattr(transformers, ARCHITECTURES[cfg.model_type][1])(cfg)
    model.eval()
    with torch.no_grad():
        for p in model.parameters():  # random, not zeros: zeros can run faster than real data
            p.normal_(0.0, 0.02)
    torch.cuda.synchronize()
    return model


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


def decode(model, vocab, prompt, tokens, warmup):
    from transformers import DynamicCache
    ids = torch.randint(0, vocab, (1, prompt), device="cuda")
    cache = DynamicCache()
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        nxt.item()
        prefill = time.perf_counter() - t0
        progress(f"prefill of {prompt} tokens: {prefill * 1e3:.1f} ms")
        times = []
        for _ in range(warmup + tokens):
            t = time.perf_counter()
            out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            nxt.item()
            times.append(time.perf_counter() - t)
            progress(f"decode step {len(times)}: {times[-1] * 1e3:.1f} ms")
    return prefill, times[:warmup], times[warmup:]


def count_kernels(model, vocab, prompt):
    """Kernels and GPU time of one decode step (profiled, so not timed)."""
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
    return len(kernels), busy


def measure(model, vocab, prompt, tokens, warmup):
    """The fresh decode (lengths new to the process, when prompt is), then the same decode again (warm)."""
    prefill, warm_up, times = decode(model, vocab, prompt, tokens, warmup)
    _, warm_warm_up, warm_times = decode(model, vocab, prompt, tokens, warmup)
    return dict(prompt=prompt, tokens=tokens, warmup=warmup, prefill_s=prefill, warmup_s=warm_up, decode_s=times,
                decode_median_s=statistics.median(times), warm_warmup_s=warm_warm_up, warm_decode_s=warm_times,
                warm_decode_median_s=statistics.median(warm_times))


def record(out, **row):
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")
    dec, warm = row["decode_median_s"], row["warm_decode_median_s"]
    print(f"{row['model']:>14} {row['config']:<28} prompt {row['prompt']:5d}  prefill {row['prefill_s'] * 1e3:8.1f} ms  "
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

    name, cfg = load_config(a.model)
    model = build(cfg)
    progress("model built")
    common = dict(model=name, gpu=torch.cuda.get_device_name(), torch=torch.__version__, layers=cfg.num_hidden_layers)
    assert a.context_stride >= a.warmup + a.tokens + 1, "--context-stride must exceed the decoded tokens"

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
            m = measure(model, cfg.vocab_size, a.prompt, a.tokens, a.warmup)
            if lib.tiersim_failed():
                sys.exit("a CUDA call in the managed allocator failed")
            record(a.out, config=config, **m, managed_bytes=int(lib.tiersim_in_use()), **common)
            return
        # Under a layer split: the last K layers + head streamed from host memory (LayerStreamer), their
        # per-forward copies allocated by the same managed allocator (with the advice then in force).
        units = execution_units(model)
        n_layers = len(units) - 1
        prompt = a.prompt
        for placement in a.placements.split(","):
            kind, k, pf, mem = placement.split(":", 3)
            assert kind == "offload" and mem in ("pinned", "pageable"), placement
            k, pf = int(k), int(pf)
            offloaded = list(range(n_layers - k, n_layers)) + [n_layers]
            streamer = LayerStreamer(units, offloaded, prefetch=pf == 1, storage=mem)
            m = measure(model, cfg.vocab_size, prompt, a.tokens, a.warmup)
            if lib.tiersim_failed():
                sys.exit("a CUDA call in the managed allocator failed")
            record(a.out, config=f"{config}+{placement}", offloaded_layers=k, prefetch=pf, host_memory=mem, **m,
                   managed_bytes=int(lib.tiersim_in_use()), **common)
            streamer.restore()
            prompt += a.context_stride
        return

    units = execution_units(model)
    n_layers = len(units) - 1
    prompt = a.prompt
    for placement in a.placements.split(","):
        tokens, warmup = a.tokens, a.warmup
        if placement.endswith(":pageable") and a.slow_tokens:
            tokens, warmup = a.slow_tokens, min(a.warmup, 2)
        torch.cuda.reset_peak_memory_stats()
        if placement == "resident":
            m = measure(model, cfg.vocab_size, prompt, tokens, warmup)
            extra = {}
            if a.count_kernels:
                k, busy = count_kernels(model, cfg.vocab_size, prompt)
                extra = dict(kernels_per_step=k, gpu_busy_s=busy)
            record(a.out, config="resident", **m, peak_bytes=torch.cuda.max_memory_allocated(), **extra, **common)
            prompt += a.context_stride
            continue
        kind, k, pf, mem = placement.split(":", 3)
        assert kind == "offload" and (mem in ("pinned", "pageable") or mem.startswith("cuda:")), placement
        k, pf = int(k), int(pf)
        offloaded = list(range(n_layers - k, n_layers)) + [n_layers]  # last K layers + the head
        streamer = LayerStreamer(units, offloaded, prefetch=pf == 1, storage=mem)
        torch.cuda.reset_peak_memory_stats()
        m = measure(model, cfg.vocab_size, prompt, tokens, warmup)
        record(a.out, config=placement, offloaded_layers=k, prefetch=pf, host_memory=mem, **m,
               peak_bytes=torch.cuda.max_memory_allocated(), **common)
        streamer.restore()
        prompt += a.context_stride


if __name__ == "__main__":
    main()
