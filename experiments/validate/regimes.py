"""The compute-bound and batched regimes of a resident model, measured: prefill at long prompts (batch 1)
and decode at batch 1..64 (short context), eager PyTorch + transformers, random bf16 weights built by
decode_latency.py from a tiersim model description. One JSON line per point.

    python3 regimes.py --model traces/models/qwen3-8b.json --prompts 512,1024,2048,4096,8192 \
        --batches 1,4,16,32,64 --out regimes.jsonl

Prefill (batch 1): what generate's first step does, as decode_latency.py times it: a forward over the
prompt with a fresh DynamicCache, logits of the last token only (logits_to_keep=1), argmax, and a host
sync (.item()); wall time from a synchronized start. The first forward at a length is "fresh" (eager
SDPA builds a cuDNN plan for a shape it has not run: decode_latency.py's docstring), then --prefill-warmup
untimed forwards, then --repeats timed ones ("warm": the regime `sim --lengths warm` predicts). The
prompt lengths are new to the process when first run (the decode part runs after, at other lengths).

Decode (batch B, prompt --decode-prompt, random token ids, no padding so no attention mask): prefill, then
--warmup + --tokens greedy steps with the KV cache, a host sync per step (.item() of the B next tokens);
then the same decode again. The first pass meets each (batch, length) shape for the first time (fresh:
at B > 1 the lengths were run at batch 1 before, but cuDNN plans per whole shape, batch included, and the
first pass paid it: results/validation/regimes/README.md); the second pass is warm.
Per step: wall seconds. tokens/s per sequence = 1 / step; aggregate = B / step. By default batch 1 is
measured again last (repeat=1: the host's drift over the run; its first pass is no longer fresh).

Then, per point, one extra forward under torch.profiler (CUDA activity, not timed): the kernels' summed
GPU time split into matmul, attention and other kernels by name, and the top kernels, so the GPU side
can be set beside tiersim's op costs.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_latency as dl  # noqa: E402


def prefill_once(model, ids):
    from transformers import DynamicCache
    cache = DynamicCache()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    nxt[0, 0].item()  # one sync for the B tokens
    return time.perf_counter() - t0, nxt, cache


def decode_pass(model, ids, steps):
    """Prefill of ids (B x P), then `steps` greedy decode steps; wall seconds of each step."""
    prefill, nxt, cache = prefill_once(model, ids)
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        nxt[0, 0].item()  # one sync for the B tokens (generate syncs once per step too)
        times.append(time.perf_counter() - t)
    return prefill, times, nxt, cache


def kernel_kind(name):
    n = name.lower()
    if any(s in n for s in ("flash", "fmha", "cudnn", "attention", "sdpa", "attn")):
        return "attention"
    if any(s in n for s in ("gemm", "gemv", "nvjet", "cutlass", "xmma", "cublas", "matmul", "splitk")):
        return "matmul"
    return "other"


def profiled(fn):
    """GPU kernel time of fn() by kind (seconds), kernel count, and the 8 largest kernels."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    by_kind, by_name, count = {"matmul": 0.0, "attention": 0.0, "other": 0.0}, {}, 0
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        t = e.device_time_total * 1e-6
        if t <= 0:
            continue
        count += 1
        by_kind[kernel_kind(e.name)] += t
        by_name[e.name] = by_name.get(e.name, 0.0) + t
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:8]
    return dict(kernel_s=by_kind, kernels=count, gpu_busy_s=sum(by_kind.values()),
                top_kernels=[[k[:120], v] for k, v in top])


def stats(xs):
    return dict(median_s=statistics.median(xs), min_s=min(xs), max_s=max(xs),
                spread=(max(xs) - min(xs)) / statistics.median(xs))


def write(out, row):
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", default="512,1024,2048,4096,8192")
    ap.add_argument("--batches", default="1,4,16,32,64,1", help="a size listed twice is measured again (repeat=1)")
    ap.add_argument("--prefill-warmup", type=int, default=1, help="untimed forwards after the fresh one")
    ap.add_argument("--repeats", type=int, default=5, help="timed warm prefills per length")
    ap.add_argument("--decode-prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    name, cfg = dl.load_config(a.model)
    t0 = time.perf_counter()
    model = dl.build(cfg)
    print(f"{name}: built in {time.perf_counter() - t0:.1f} s, {torch.cuda.memory_allocated() / 2**30:.2f} GiB", flush=True)
    common = dict(model=name, gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  transformers=__import__("transformers").__version__, layers=cfg.num_hidden_layers)
    torch.manual_seed(1)

    with torch.no_grad():
        for p in (int(x) for x in a.prompts.split(",") if x):
            ids = torch.randint(0, cfg.vocab_size, (1, p), device="cuda")
            fresh, _, _ = prefill_once(model, ids)
            for _ in range(a.prefill_warmup):
                prefill_once(model, ids)
            times = [prefill_once(model, ids)[0] for _ in range(a.repeats)]
            extra = {} if a.no_profile else dict(profile=profiled(lambda: prefill_once(model, ids)))
            torch.cuda.synchronize()
            row = dict(regime="prefill", batch=1, prompt=p, fresh_s=fresh, warm_s=times, **stats(times), **extra,
                       peak_bytes=torch.cuda.max_memory_allocated(), **common)
            write(a.out, row)
            print(f"{name:>14} prefill {p:5d} tokens: fresh {fresh * 1e3:8.1f} ms, warm median {row['median_s'] * 1e3:8.1f} ms "
                  f"(min {row['min_s'] * 1e3:.1f}, max {row['max_s'] * 1e3:.1f})"
                  + (f", kernels {row['profile']['gpu_busy_s'] * 1e3:.1f} ms "
                     f"(matmul {row['profile']['kernel_s']['matmul'] * 1e3:.1f}, attention "
                     f"{row['profile']['kernel_s']['attention'] * 1e3:.1f})" if extra else ""), flush=True)

        steps = a.warmup + a.tokens
        seen = []
        for b in (int(x) for x in a.batches.split(",")):
            repeat = seen.count(b)  # a batch size listed again: measured again (drift), not a new point
            seen.append(b)
            torch.cuda.reset_peak_memory_stats()
            ids = torch.randint(0, cfg.vocab_size, (b, a.decode_prompt), device="cuda")
            pre_f, fresh, _, _ = decode_pass(model, ids, steps)
            pre_w, warm, nxt, cache = decode_pass(model, ids, steps)
            extra = {}
            if not a.no_profile:
                def step():
                    model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1].argmax(-1)
                extra = dict(profile=profiled(step))
            fresh_t, warm_t = fresh[a.warmup:], warm[a.warmup:]
            row = dict(regime="decode", batch=b, repeat=repeat, prompt=a.decode_prompt, tokens=a.tokens, warmup=a.warmup,
                       prefill_fresh_s=pre_f, prefill_warm_s=pre_w, fresh_warmup_s=fresh[:a.warmup], fresh_s=fresh_t,
                       fresh_median_s=statistics.median(fresh_t), warm_warmup_s=warm[:a.warmup], warm_s=warm_t,
                       **stats(warm_t), **extra, peak_bytes=torch.cuda.max_memory_allocated(), **common)
            write(a.out, row)
            med = row["median_s"]
            print(f"{name:>14} decode batch {b:3d}: warm step median {med * 1e3:7.2f} ms (spread {100 * row['spread']:.0f}%) "
                  f"= {1 / med:6.2f} tok/s per sequence, {b / med:8.1f} aggregate; fresh {row['fresh_median_s'] * 1e3:7.2f} ms"
                  + (f"; kernels {row['profile']['gpu_busy_s'] * 1e3:.1f} ms/step" if extra else ""), flush=True)


if __name__ == "__main__":
    main()
