#!/usr/bin/env python3
"""Calibration of the CPU optimizer step of torchao's CPUOffloadOptimizer (issue 14's optimizer offload) on
synthetic parameters, never on the validation models: for each dtype (fp32, bf16) and tensor size, K CUDA
parameters of that size get a gradient through a backward pass (which fires the optimizer's post-accumulate-grad
hooks: the gradient's D2H copy on its side stream), then opt.step() is timed from a synchronized start to its
return (every parameter's fused CPU AdamW step, in turn, with its H2D copy back on the side stream, and the final
stream synchronize). Fitted by experiments/validate/cpu_offload_fit.py into the runtime profile's
training.cpu_optimizer_* costs.

Loads torchao's cpu_offload.py as experiments/validate/stage_torchao.sh staged it (carry .ext).
  python3 experiments/validate/cpu_offload_calib.py --out calib.jsonl
"""
import argparse
import json
import os
import sys
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", nargs="+", type=int, default=[4096, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--elements", type=int, default=128 << 20, help="elements per configuration (K = this / size)")
    ap.add_argument("--max-k", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_memory import load_cpu_offload
    CPUOffloadOptimizer = load_cpu_offload()

    base = {"torch": torch.__version__, "threads": torch.get_num_threads(), "gpu": torch.cuda.get_device_name(0),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    with open(args.out, "a") as out:
        for dt in args.dtypes:
            dtype = getattr(torch, dt)
            for size in args.sizes:
                k = max(2, min(args.max_k, args.elements // size))
                torch.manual_seed(0)
                params = [torch.nn.Parameter(torch.randn(size, device="cuda", dtype=dtype) * 0.02) for _ in range(k)]
                t0 = time.perf_counter()
                opt = CPUOffloadOptimizer(params, lr=1e-5)  # torch.optim.AdamW, fused on the CPU (its default)
                torch.cuda.synchronize()
                build_s = time.perf_counter() - t0
                times = []
                for i in range(args.warmup + args.steps):
                    loss = sum((p.float() * 1e-3).sum() for p in params)
                    loss.backward()
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    opt.step()
                    times.append((time.perf_counter() - t0) * 1e3)
                    opt.zero_grad()
                rec = dict(base, dtype=dt, size=size, k=k, build_s=round(build_s, 3),
                           step_ms=statistics.median(times[args.warmup:]), first_step_ms=times[0],
                           step_ms_all=[round(t, 3) for t in times])
                out.write(json.dumps(rec) + "\n")
                out.flush()
                print(f"{dt:9s} size {size:>9d} x {k:3d}: step {rec['step_ms']:8.2f} ms "
                      f"({rec['step_ms'] * 1e6 / (k * size):.3f} ns/element, first {times[0]:.1f} ms)", flush=True)
                del opt, params, loss
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
