"""What the GPU does during a decode step of an offloaded model: every copy (kind, bytes, duration,
stream) and the kernels' busy time, from torch.profiler with CUDA activity only, warm lengths.

host_timeline.py says when the host issues work; this says how long the copies take on the GPU, so a
copy's duration in the real run can be set beside calib's curve for the same size (and a framework's
cost per copy told apart from the link's).

    python3 gpu_timeline.py --model traces/models/qwen3-8b.json \
        --placements offload:24:0:cuda:1,offload:24:0:pinned --steps 3 --out gpu_timeline.json

Per placement: the model decodes warmup + steps tokens from --prompt (so the lengths are known to the
process), then decodes the same lengths again, profiling each of the last `steps` tokens on its own.
Output JSON: per placement, per profiled step: wall time, GPU span (first start to last end), kernel
count and summed duration, the union of busy time, every memcpy [name, bytes, microseconds, stream], and
every GPU event in order [k|c|m, start us, duration us, device, stream, bytes].
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
from profiler_events import chrome_events  # noqa: E402


def union_us(intervals):
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def profiled_step(model, nxt, cache):
    """One decode step under the profiler; its GPU events from the exported Chrome trace."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        nxt.item()
        wall = time.perf_counter() - t0
    events = chrome_events(prof)
    kernels, copies, busy, timeline = [], [], [], []
    gpu = [e for e in events if e.get("cat", "") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    t0 = min((e["ts"] for e in gpu), default=0.0)
    for e in sorted(gpu, key=lambda e: e["ts"]):
        cat = e["cat"]
        busy.append((e["ts"], e["ts"] + e["dur"]))
        nbytes = int(e.get("args", {}).get("bytes", 0))
        if cat == "kernel":
            kernels.append(e["dur"])
        elif cat == "gpu_memcpy":
            copies.append([e["name"], nbytes, e["dur"], e.get("tid")])
        # every GPU event: kernel/copy/memset, start (us from the step's first), duration, device, stream, bytes
        timeline.append([{"kernel": "k", "gpu_memcpy": "c", "gpu_memset": "m"}[cat], round(e["ts"] - t0, 3),
                         e["dur"], e.get("pid"), e.get("tid"), nbytes])
    span = (max(b for _, b in busy) - min(a for a, _ in busy)) if busy else 0.0
    return nxt, dict(wall_s=wall, gpu_span_us=span, busy_us=union_us(busy), kernels=len(kernels),
                     kernel_us=sum(kernels), copies=copies, timeline=timeline)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--placements", required=True)
    ap.add_argument("--prompt", type=int, default=160)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from transformers import DynamicCache
    name, cfg = dl.load_config(a.model)
    model = dl.build(cfg)
    units = dl.execution_units(model)
    n_layers = len(units) - 1
    result = dict(model=name, gpu=torch.cuda.get_device_name(), torch=torch.__version__, placements={})
    prompt = a.prompt
    for placement in a.placements.split(","):
        streamer = None
        if placement != "resident":
            _, k, pf, mem = placement.split(":", 3)
            streamer = dl.LayerStreamer(units, list(range(n_layers - int(k), n_layers)) + [n_layers],
                                        prefetch=pf == "1", storage=mem)
        dl.decode(model, cfg.vocab_size, prompt, a.steps, a.warmup)  # the lengths become known (warm)
        ids = torch.randint(0, cfg.vocab_size, (1, prompt), device="cuda")
        cache = DynamicCache()
        steps = []
        with torch.no_grad():
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            for _ in range(a.warmup):
                out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            nxt.item()
            for _ in range(a.steps):
                nxt, st = profiled_step(model, nxt, cache)
                steps.append(st)
        result["placements"][placement] = dict(steps=steps)
        med = lambda key: statistics.median(s[key] for s in steps)  # noqa: E731
        ncopy = statistics.median(len(s["copies"]) for s in steps)
        copy_us = statistics.median(sum(c[2] for c in s["copies"]) for s in steps)
        copy_bytes = statistics.median(sum(c[1] for c in s["copies"]) for s in steps)
        print(f"[{placement}] wall {med('wall_s') * 1e3:.1f} ms, GPU span {med('gpu_span_us') / 1e3:.1f} ms, busy "
              f"{med('busy_us') / 1e3:.1f} ms, {med('kernels'):.0f} kernels {med('kernel_us') / 1e3:.1f} ms, "
              f"{ncopy:.0f} copies {copy_us / 1e3:.1f} ms ({copy_bytes / max(copy_us, 1e-9) / 1e3:.1f} GB/s)",
              flush=True)
        if streamer is not None:
            streamer.restore()
        prompt += 2 * (a.warmup + a.steps + 1)
    with open(a.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
