"""Calibration (not validation): how fast PyTorch's GroupNorm runs on this GPU, kernel by kernel.

torch.nn.functional.group_norm on a CUDA tensor (aten/src/ATen/native/cuda/group_norm_kernel.cu,
GroupNormKernelImplInternal) launches three kernels: RowwiseMomentsCUDAKernel<<<N * G, 512>>> (each thread block
reduces the D * HxW elements of one (sample, group) pair with Welford's update: the statistics), then
ComputeFusedParamsCUDAKernel (N x C scale and bias, tiny) and an elementwise TensorIterator kernel that applies them
(reads x, writes y). With N = 1 and G = 32, as in a VAE decode of one image, the statistics run on 32 blocks, a
quarter of an H100's SMs, each streaming its group serially: the kernel is bound by one block's rate, not by HBM.

This times those kernels (torch.profiler, CUDA activity; each call synchronized, kernels summed per call, median
over 10 calls after 3 warm-ups) for bf16 inputs (N, C, H, W) at shapes that are NOT those of the validation rows
(FLUX's VAE decoder: C 128/256/512 at 128..1328 px): C in {64, 192, 320, 640}, H = W in {96, 192, 384, 768},
N in {1, 2, 4, 8} (G = 32, so 32..256 blocks). Per row:
  moments_s, params_s, apply_s   kernel seconds per call of each of the three kernels
  block_bytes                    bytes one statistics block reads: D * HxW * 2
  block_GBps                     block_bytes / moments_s (one block's streaming rate; meaningful while N*G <= SMs)
  apply_GBps                     (x read + y written) / apply_s
Summary: block_rate_GBps = median block_GBps over the rows with N*G <= the SM count and at least 4 MiB per block
(below that the kernel's fixed cost shows), and the multi-wave rows' rate against min(N*G*block_rate, HBM) as a
check of the model tiersim uses (bytes / min(blocks x block rate, the memory rate)).

  python3 experiments/calibrate/group_norm_rate.py --out OUT.json
  ... --device cpu --out /tmp/g.json     (smoke test on the CPU: wall-clock times of the whole call, no profiler)
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "validate"))
from profiler_events import chrome_events  # noqa: E402

GROUPS = 32
CHANNELS = [64, 192, 320, 640]
SIDES = [96, 192, 384, 768]
BATCHES = [1, 2, 4, 8]


def kernel_class(name):
    if "RowwiseMoments" in name:
        return "moments"
    if "ComputeFusedParams" in name:
        return "params"
    return "apply"


def profile_kernels(fn, warmup=3, reps=10):
    """Kernel seconds per call by class (moments, params, apply): totals over reps synchronized calls / reps."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
            torch.cuda.synchronize()
    events = chrome_events(prof)
    per = {"moments": [], "params": [], "apply": []}
    counts = {"moments": 0, "params": 0, "apply": 0}
    for e in events:
        if str(e.get("cat", "")).lower() != "kernel" or e.get("ph", "X") != "X":
            continue
        k = kernel_class(str(e.get("name", "")))
        per[k].append(float(e.get("dur", 0)) * 1e-6)
        counts[k] += 1
    out = {f"{k}_s": (sum(v) / reps) for k, v in per.items()}
    out.update({f"{k}_kernels_per_call": counts[k] / reps for k in counts})
    # the median single kernel time of the statistics, a check of the per-call mean
    out["moments_median_kernel_s"] = statistics.median(per["moments"]) if per["moments"] else None
    return out


def wall(fn, warmup=1, reps=3):
    for _ in range(warmup):
        fn()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    cuda = torch.device(a.device).type == "cuda"
    dt = torch.bfloat16
    sms = torch.cuda.get_device_properties(0).multi_processor_count if cuda else 0
    rows = []
    print(f"{'N':>2s} {'C':>4s} {'side':>5s} {'blocks':>6s} {'MiB/blk':>8s} {'moments us':>11s} {'blk GB/s':>9s} "
          f"{'apply GB/s':>10s}", flush=True)
    channels, sides, batches = (CHANNELS, SIDES, BATCHES) if cuda else ([64], [16], [1, 2])
    for n in batches:
        for c in channels:
            for side in sides:
                elems = n * c * side * side
                if elems * 2 > (1 << 30):  # at most 1 GiB per tensor
                    continue
                x = torch.randn((n, c, side, side), device=a.device, dtype=dt)
                w = torch.randn((c,), device=a.device, dtype=dt)
                b = torch.randn((c,), device=a.device, dtype=dt)
                fn = (lambda x=x, w=w, b=b: F.group_norm(x, GROUPS, w, b, 1e-6))
                r = dict(N=n, C=c, H=side, W=side, groups=GROUPS, blocks=n * GROUPS, elements=elems,
                         block_bytes=c // GROUPS * side * side * 2)
                if cuda:
                    r.update(profile_kernels(fn))
                    r["block_GBps"] = r["block_bytes"] / r["moments_s"] / 1e9
                    r["apply_GBps"] = 2 * elems * 2 / r["apply_s"] / 1e9
                    print(f"{n:2d} {c:4d} {side:5d} {n * GROUPS:6d} {r['block_bytes'] / 2**20:8.2f} "
                          f"{r['moments_s'] * 1e6:11.1f} {r['block_GBps']:9.2f} {r['apply_GBps']:10.0f}", flush=True)
                else:
                    r["wall_s"] = wall(fn)
                rows.append(r)
                del x
                if cuda:
                    torch.cuda.empty_cache()
    out = dict(gpu=torch.cuda.get_device_name(0) if cuda else "cpu", sms=sms, torch=torch.__version__,
               dtype="bfloat16", rows=rows, summary={})
    if cuda:
        one_wave = [r for r in rows if r["blocks"] <= sms and r["block_bytes"] >= (4 << 20)]
        rate = statistics.median(r["block_GBps"] for r in one_wave)
        big = [r for r in rows if r["elements"] * 2 >= (64 << 20)]
        apply_rate = statistics.median(r["apply_GBps"] for r in big)
        out["summary"] = dict(block_rate_GBps=rate, one_wave_rows=len(one_wave),
                              block_rate_min_GBps=min(r["block_GBps"] for r in one_wave),
                              block_rate_max_GBps=max(r["block_GBps"] for r in one_wave),
                              apply_GBps_median=apply_rate)
        print(f"one block: {rate:.3f} GB/s (median of {len(one_wave)} one-wave rows, "
              f"{out['summary']['block_rate_min_GBps']:.3f}..{out['summary']['block_rate_max_GBps']:.3f}); "
              f"apply {apply_rate:.0f} GB/s", flush=True)
        # the model's check on every row: bytes / min(blocks x rate, apply's rate as the memory's)
        for r in rows:
            predicted = r["elements"] * 2 / (min(r["blocks"] * rate, apply_rate) * 1e9)
            r["moments_model_error"] = predicted / r["moments_s"] - 1
        worst = max(rows, key=lambda r: abs(r["moments_model_error"]))
        out["summary"]["model_mean_abs_error"] = statistics.mean(abs(r["moments_model_error"]) for r in rows)
        out["summary"]["model_worst"] = dict(N=worst["N"], C=worst["C"], side=worst["H"],
                                             error=worst["moments_model_error"])
        print(f"model bytes / min(blocks x rate, {apply_rate:.0f} GB/s): mean |error| "
              f"{out['summary']['model_mean_abs_error'] * 100:.1f}%, worst {worst['moments_model_error'] * 100:+.1f}% "
              f"(N={worst['N']} C={worst['C']} {worst['H']}px)", flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    sys.exit(main())
