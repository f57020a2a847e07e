"""Calibration (not validation): how fast scaled-dot-product attention runs against a cuBLAS GEMM on this GPU.

tiersim costs an attention op's FLOPs at the GPU's matrix rate times an efficiency; this measures that
efficiency for SDPA as ComfyUI calls it (bf16, head_dim 128, no mask, ComfyUI's backend priority cuDNN >
flash > efficient > math where torch's sdpa_kernel takes set_priority: comfy/ops.py) at the shapes of
diffusion transformers (one image or video, 24-40 heads, 1,536-32,760 tokens; Wan's cross-attention to 512 text
tokens), and as transformers calls it
for a prefill (causal, 32 heads, 1,024-8,192 tokens, default backend priority). Each shape: the median of
20 timed calls after 5 warm-ups (CUDA events), TFLOP/s = 4 B H Sq Sk D / t (causal: half). The GEMM
reference: torch.matmul of bf16 [M, K] x [K, N] at the same shapes the calib GEMM uses (M = N = K = 8192 and
the LLM shapes M 4096, K 4096, N 14336), the best of them. Writes one JSON object with every shape.

  python3 experiments/calibrate/sdpa_rate.py --out OUT.json [--csv RAW.csv]

--csv also writes the rows as tiersim_calib's raw CSV (tiersim_fit --extra): benchmark `attention`, variants
sdpa_bf16_b{B}_h{H}_q{Q}_k{K}_d128 (no mask) and sdpa_causal_bf16_b{B}_h{H}_s{S}_d128, work = the FLOPs above, median /
min / max over the 20 timed calls; the machine facts tiersim_calib writes first (its GPU's name, count, driver).
tiersim_fit turns the unmasked rows into the profile's gpu.attention_efficiency (causal ones are kept, not fitted).
"""
import argparse
import inspect
import json
import statistics

import torch
import torch.nn.functional as F

from event_timing import all_seconds
from raw_csv import write_raw_csv

# (batch, heads, queries, keys): self-attention over a DiT's joint sequence (FLUX 512x512 / 1024x1024 / Kontext,
# Qwen-Image 1328x1328 with cfg, Wan 17 / 33 / 81 frames with cfg, Wan 2.2 5B 121 frames) and Wan's cross-attention
# to its 512 umT5 tokens.
DIT_SHAPES = [(1, 24, 1536, 1536), (1, 24, 4352, 4352), (1, 24, 4608, 4608), (2, 24, 4608, 4608), (1, 24, 8448, 8448),
              (2, 24, 7145, 7145), (2, 40, 7800, 7800), (2, 40, 14040, 14040), (2, 40, 32760, 32760),
              (2, 24, 27280, 27280), (2, 40, 7800, 512), (2, 40, 32760, 512), (2, 24, 27280, 512)]
CAUSAL_SHAPES = [(1, 32, 1024), (1, 32, 2048), (1, 32, 4096), (1, 32, 8192)]
GEMMS = [(8192, 8192, 8192), (4096, 4096, 14336), (4096, 14336, 4096)]


RAW = []  # (variant, flops, seconds of every timed call)


def timed(fn, variant=None, flops=0):
    times = all_seconds(fn)
    if variant:
        RAW.append((variant, flops, times))
    return statistics.median(times)


def write_csv(path):
    write_raw_csv(path, [("attention", variant, flops, "flop", times) for variant, flops, times in RAW])


def comfy_priority():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if "set_priority" not in inspect.signature(sdpa_kernel).parameters:
        return None
    order = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    return lambda: sdpa_kernel(order, set_priority=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--csv", default=None, help="also tiersim_calib's raw CSV rows (tiersim_fit --extra)")
    a = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "gemm": [], "dit": [], "causal": []}
    for m, k, n in GEMMS:
        x, w = torch.randn(m, k, device=dev, dtype=dt), torch.randn(k, n, device=dev, dtype=dt)
        t = timed(lambda: x @ w)
        out["gemm"].append({"m": m, "k": k, "n": n, "seconds": t, "tflops": 2 * m * k * n / t / 1e12})
        del x, w
    best_gemm = max(g["tflops"] for g in out["gemm"])
    prio = comfy_priority()
    for b, h, s, keys in DIT_SHAPES:
        q = torch.randn(b, h, s, 128, device=dev, dtype=dt)
        k, v = (torch.randn(b, h, keys, 128, device=dev, dtype=dt) for _ in range(2))
        flops = 4 * b * h * s * keys * 128
        variant = "sdpa_bf16_b%d_h%d_q%d_k%d_d128" % (b, h, s, keys)
        if prio:
            with prio():
                t = timed(lambda: F.scaled_dot_product_attention(q, k, v), variant, flops)
        else:
            t = timed(lambda: F.scaled_dot_product_attention(q, k, v), variant, flops)
        tf = flops / t / 1e12
        out["dit"].append({"batch": b, "heads": h, "tokens": s, "keys": keys, "seconds": t, "tflops": tf, "of_gemm": tf / best_gemm})
        del q, k, v
        torch.cuda.empty_cache()
    for b, h, s in CAUSAL_SHAPES:
        q, k, v = (torch.randn(b, h, s, 128, device=dev, dtype=dt) for _ in range(3))
        flops = 2 * b * h * s * s * 128
        t = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                  "sdpa_causal_bf16_b%d_h%d_s%d_d128" % (b, h, s), flops)
        tf = flops / t / 1e12
        out["causal"].append({"batch": b, "heads": h, "tokens": s, "seconds": t, "tflops": tf, "of_gemm": tf / best_gemm})
        del q, k, v
    out["best_gemm_tflops"] = best_gemm
    out["comfy_priority"] = prio is not None
    json.dump(out, open(a.out, "w"), indent=1)
    if a.csv:
        write_csv(a.csv)
    for key in ("gemm", "dit", "causal"):
        for r in out[key]:
            print(key, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})


if __name__ == "__main__":
    main()
