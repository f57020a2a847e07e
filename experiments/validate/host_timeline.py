"""Where the host time of an eager decode step goes, measured without the profiler.

Every module's forward gets a pre- and a post-hook that append a perf_counter_ns timestamp (a few
microseconds each); the decode loop marks the step's start, the return of forward, the argmax issue
and the end of the host sync (.item()). Runs one placement of decode_latency.py (resident, or
offload:K:P:MEM with its LayerStreamer), so a resident step and an offloaded one can be laid side by
side. Optionally runs cProfile over a few resident steps (function-level host time).

  python3 host_timeline.py --model traces/models/qwen3-8b.json --placements resident,offload:4:0:pinned \
      --steps 5 --out timeline.json [--cprofile cprofile.txt]

Output JSON: per placement, per step, the events [microseconds since the step's start, module, "pre"|"post"]
plus the decode-loop marks, and the step time without hooks (same process, measured just before) so
the hooks' own cost is visible. A short summary (host arrival time at each decoder layer, the largest
gaps between consecutive events) is printed.
"""
import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_latency as dl  # noqa: E402


def timed_steps(model, nxt, cache, n, events=None):
    """n decode steps; returns per-step wall times and (with events) each step's marks."""
    times, steps = [], []
    for _ in range(n):
        if events is not None:
            events.clear()
        t0 = time.perf_counter_ns()
        out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
        t_fwd = time.perf_counter_ns()
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        t_arg = time.perf_counter_ns()
        nxt.item()
        t_end = time.perf_counter_ns()
        times.append((t_end - t0) * 1e-9)
        if events is not None:
            rel = [[(t - t0) / 1e3, name, kind] for t, name, kind in events]
            rel += [[(t_fwd - t0) / 1e3, "<forward returned>", "mark"], [(t_arg - t0) / 1e3, "<argmax issued>", "mark"],
                    [(t_end - t0) / 1e3, "<item returned>", "mark"]]
            steps.append(rel)
    return nxt, times, steps


def summarize(name, steps, n_layers):
    """Median arrival at each decoder layer and the largest gaps of the median step."""
    arrive = {}
    for st in steps:
        for t, mod, kind in st:
            if kind == "pre" and mod.startswith("model.layers.") and mod.count(".") == 2:
                arrive.setdefault(int(mod.split(".")[2]), []).append(t)
    marks = {m: statistics.median(t for st in steps for t, mm, k in st if mm == m)
             for m in ("<forward returned>", "<argmax issued>", "<item returned>")}
    first = [f"{i}:{statistics.median(arrive[i]) / 1e3:.1f}" for i in sorted(arrive) if i % 4 == 0 or i == n_layers - 1]
    print(f"[{name}] host arrival at layer (ms): " + " ".join(first), flush=True)
    print(f"[{name}] forward returned {marks['<forward returned>'] / 1e3:.2f} ms, argmax issued "
          f"{marks['<argmax issued>'] / 1e3:.2f} ms, item returned {marks['<item returned>'] / 1e3:.2f} ms", flush=True)
    mid = sorted(steps, key=lambda st: st[-1][0])[len(steps) // 2]
    gaps = sorted(((mid[i][0] - mid[i - 1][0], mid[i - 1], mid[i]) for i in range(1, len(mid))), key=lambda g: -g[0])
    for g, a, b in gaps[:8]:
        print(f"[{name}]   gap {g / 1e3:7.2f} ms between {a[1]} {a[2]} ({a[0] / 1e3:.2f}) and {b[1]} {b[2]}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--placements", default="resident")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cprofile", help="write cProfile statistics of a few resident steps here")
    a = ap.parse_args()

    name, cfg = dl.load_config(a.model)
    model = dl.build(cfg)
    units = dl.execution_units(model)
    n_layers = len(units) - 1
    from transformers import DynamicCache
    result = dict(model=name, gpu=torch.cuda.get_device_name(), torch=torch.__version__, prompt=a.prompt,
                  placements={})
    events = []
    hooks = []

    def add_hooks():
        for mname, module in model.named_modules():
            if not mname:
                continue
            hooks.append(module.register_forward_pre_hook(
                lambda m, args, mname=mname: events.append((time.perf_counter_ns(), mname, "pre"))))
            hooks.append(module.register_forward_hook(
                lambda m, args, out, mname=mname: events.append((time.perf_counter_ns(), mname, "post"))))

    for placement in a.placements.split(","):
        streamer = None
        if placement != "resident":
            kind, k, pf, mem = placement.split(":", 3)
            k, pf = int(k), int(pf)
            streamer = dl.LayerStreamer(units, list(range(n_layers - k, n_layers)) + [n_layers], prefetch=pf == 1,
                                        storage=mem)
        ids = torch.randint(0, cfg.vocab_size, (1, a.prompt), device="cuda")
        cache = DynamicCache()
        with torch.no_grad():
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            nxt.item()
            nxt, _, _ = timed_steps(model, nxt, cache, a.warmup)
            nxt, plain, _ = timed_steps(model, nxt, cache, a.steps)
            add_hooks()
            hooked, steps = [], []
            for _ in range(a.steps):
                nxt, t, st = timed_steps(model, nxt, cache, 1, events)
                hooked += t
                steps += st
            for h in hooks:
                h.remove()
            hooks.clear()
            if a.cprofile and placement == "resident":
                prof = cProfile.Profile()
                prof.enable()
                timed_steps(model, nxt, cache, 3)
                prof.disable()
                buf = io.StringIO()
                ps = pstats.Stats(prof, stream=buf)
                ps.sort_stats("tottime").print_stats(30)
                ps.sort_stats("cumulative").print_stats(40)
                with open(a.cprofile, "w") as f:
                    f.write(buf.getvalue())
        result["placements"][placement] = dict(step_s_without_hooks=plain, step_s_with_hooks=hooked, steps=steps)
        print(f"[{placement}] step without hooks median {statistics.median(plain) * 1e3:.1f} ms, with hooks "
              f"{statistics.median(hooked) * 1e3:.1f} ms", flush=True)
        summarize(placement, steps, n_layers)
        if streamer is not None:
            streamer.restore()
    with open(a.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
