"""Calibration (not validation): how fast PyTorch casts float8_e4m3fn weights to bf16 on this GPU, against a plain
bf16 copy.

ComfyUI runs fp8 weights (UNETLoader's fp8_e4m3fn, fp8 checkpoints) by casting each Linear's weight to the
activations' dtype when its forward runs (comfy/ops.py manual_cast, cast_bias_weight -> weight.to(bf16)). tiersim
prices that cast as an elementwise pass over the weight (1 byte read, 2 written per element) at the GPU's memory
rate; this measures the cast kernel's rate against a bf16 clone (2 bytes read, 2 written) at the weight shapes of
FLUX.1, Qwen-Image and Wan 14B, so the runtime can carry their ratio. ComfyUI's text encoders compute in fp32 and cast
to it: the same shapes' fp8 -> fp32, bf16 -> fp32 and fp16 -> fp32 casts are timed too (their own fields). Each shape: the median of 20 timed calls after
5 warm-ups (CUDA events); GB/s = bytes read + written over the time. Writes one JSON object with every shape.

  python3 experiments/calibrate/cast_rate.py --out OUT.json
"""
import argparse
import json

import torch

from sdpa_rate import timed  # the median of 20 CUDA-event-timed calls after 5 warm-ups

SHAPES = [(3072, 3072), (9216, 3072), (12288, 3072), (3072, 12288), (18432, 3072), (21504, 3072), (5120, 5120),
          (13824, 5120), (5120, 13824)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows = []
    for out_f, in_f in SHAPES:
        w16 = torch.randn((out_f, in_f), device="cuda", dtype=torch.bfloat16) * 0.02
        w8 = w16.to(torch.float8_e4m3fn)
        n = w16.numel()
        cast = timed(lambda: w8.to(torch.bfloat16))
        copy = timed(lambda: w16.clone())
        w16h = w16.to(torch.float16)
        to32 = {"fp8_to_fp32": (timed(lambda: w8.to(torch.float32)), 5),
                "bf16_to_fp32": (timed(lambda: w16.to(torch.float32)), 6),
                "fp16_to_fp32": (timed(lambda: w16h.to(torch.float32)), 6)}
        rows.append(dict(shape=[out_f, in_f], elements=n, fp8_to_bf16_s=cast, fp8_to_bf16_GBps=3 * n / cast / 1e9,
                         bf16_clone_s=copy, bf16_clone_GBps=4 * n / copy / 1e9,
                         **{f"{k}_s": t for k, (t, b) in to32.items()},
                         **{f"{k}_GBps": b * n / t / 1e9 for k, (t, b) in to32.items()}))
        print(f"{out_f}x{in_f}: fp8->bf16 {rows[-1]['fp8_to_bf16_GBps']:.0f} GB/s ({cast * 1e6:.1f} us), "
              f"bf16 clone {rows[-1]['bf16_clone_GBps']:.0f} GB/s ({copy * 1e6:.1f} us)", flush=True)
    cast_total = sum(r["fp8_to_bf16_s"] for r in rows)
    copy_total = sum(r["bf16_clone_s"] for r in rows)
    bytes8 = sum(3 * r["elements"] for r in rows)
    bytes16 = sum(4 * r["elements"] for r in rows)
    summary = dict(fp8_to_bf16_GBps=bytes8 / cast_total / 1e9, bf16_clone_GBps=bytes16 / copy_total / 1e9)
    summary["ratio"] = summary["fp8_to_bf16_GBps"] / summary["bf16_clone_GBps"]
    for k, b in (("fp8_to_fp32", 5), ("bf16_to_fp32", 6), ("fp16_to_fp32", 6)):
        summary[f"{k}_GBps"] = sum(b * r["elements"] for r in rows) / sum(r[f"{k}_s"] for r in rows) / 1e9
        summary[f"{k}_ratio"] = summary[f"{k}_GBps"] / summary["bf16_clone_GBps"]
        print(f"over all shapes: {k} {summary[f'{k}_GBps']:.0f} GB/s, ratio to the clone {summary[f'{k}_ratio']:.3f}")
    print(f"over all shapes: fp8->bf16 {summary['fp8_to_bf16_GBps']:.0f} GB/s, bf16 clone "
          f"{summary['bf16_clone_GBps']:.0f} GB/s, ratio {summary['ratio']:.3f}")
    json.dump(dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, shapes=rows, summary=summary),
              open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
