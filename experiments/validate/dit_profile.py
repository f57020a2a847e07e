"""Diagnosis (not calibration): where one diffusion-transformer iteration's GPU time goes, by kernel kind.

Runs dit_iteration.py's model (ComfyUI's Flux or WanModel rebuilt, random bf16 weights, resident) for one
shape under torch.profiler and sums CUDA kernel time by kind: matrix products (cuBLAS/CUTLASS gemm kernels),
attention (flash / cuDNN / fmha kernels), and the rest (elementwise, norms, copies). Compared with tiersim's
op-kind split of the same iteration it says which part of the model a gap comes from; nothing is fitted to it.

  python3 experiments/validate/dit_profile.py --model traces/models/wan2.1-t2v-14b.json --resolution 832x480 \
      --frames 17 --cfg 6 --out OUT.json
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dit_iteration  # noqa: E402


def kind(name):
    n = name.lower()
    if any(s in n for s in ("flash", "fmha", "cudnn", "attention", "sdpa")):
        return "attention"
    if any(s in n for s in ("gemm", "cutlass", "xmma", "sm90", "gemv", "matmul")):
        return "matmul"
    return "other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--resolution", required=True)
    ap.add_argument("--frames", type=int, default=None)
    ap.add_argument("--cfg", type=float, default=1.0)
    ap.add_argument("--text-tokens", type=int, default=512)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    fam = dit_iteration.Family(a.model, False)
    model = fam.module.build(fam.params)
    w, h = dit_iteration.parse_resolution(a.resolution)
    batch = 1 if abs(a.cfg - 1.0) < 1e-9 else 2
    inputs = fam.make_inputs(w, h, a.frames, batch, a.text_tokens)
    with torch.no_grad():
        dit_iteration.forwards(model, [inputs], 2)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            dit_iteration.forwards(model, [inputs], 1)
    totals, kernels = {"matmul": 0.0, "attention": 0.0, "other": 0.0}, {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = e.cuda_time_total
        if t <= 0:
            continue
        totals[kind(e.key)] += t / 1e6
        kernels[e.key] = t / 1e6
    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:25]
    out = {"model": a.model, "resolution": a.resolution, "frames": a.frames, "cfg": a.cfg, "batch": batch,
           "seconds_by_kind": totals, "top_kernels": top, "torch": torch.__version__}
    json.dump(out, open(a.out, "w"), indent=1)
    print(json.dumps(totals))


if __name__ == "__main__":
    main()
