"""Calibration (not validation): how fast scaled-dot-product attention runs against a cuBLAS GEMM on this GPU.

tiersim costs an attention op's FLOPs at the GPU's matrix rate times an efficiency; this measures that
efficiency for SDPA as ComfyUI calls it (bf16, head_dim 128, no mask, ComfyUI's backend priority cuDNN >
flash > efficient > math where torch's sdpa_kernel takes set_priority: comfy/ops.py) at the shapes of
diffusion transformers (one image or video, 24-40 heads, 1,536-32,760 tokens), and as transformers calls it
for a prefill (causal, 32 heads, 1,024-8,192 tokens, default backend priority). Each shape: the median of
20 timed calls after 5 warm-ups (CUDA events), TFLOP/s = 4 B H Sq Sk D / t (causal: half). The GEMM
reference: torch.matmul of bf16 [M, K] x [K, N] at the same shapes the calib GEMM uses (M = N = K = 8192 and
the LLM shapes M 4096, K 4096, N 14336), the best of them. Writes one JSON object with every shape.

  python3 experiments/calibrate/sdpa_rate.py --out OUT.json
"""
import argparse
import inspect
import json

import torch
import torch.nn.functional as F

from event_timing import median_seconds

DIT_SHAPES = [(1, 24, 1536), (1, 24, 4608), (2, 24, 4608), (2, 40, 7800), (2, 40, 14040), (2, 40, 32760)]
CAUSAL_SHAPES = [(1, 32, 1024), (1, 32, 2048), (1, 32, 4096), (1, 32, 8192)]
GEMMS = [(8192, 8192, 8192), (4096, 4096, 14336), (4096, 14336, 4096)]


timed = median_seconds


def comfy_priority():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if "set_priority" not in inspect.signature(sdpa_kernel).parameters:
        return None
    order = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    return lambda: sdpa_kernel(order, set_priority=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
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
    for b, h, s in DIT_SHAPES:
        q, k, v = (torch.randn(b, h, s, 128, device=dev, dtype=dt) for _ in range(3))
        if prio:
            with prio():
                t = timed(lambda: F.scaled_dot_product_attention(q, k, v))
        else:
            t = timed(lambda: F.scaled_dot_product_attention(q, k, v))
        tf = 4 * b * h * s * s * 128 / t / 1e12
        out["dit"].append({"batch": b, "heads": h, "tokens": s, "seconds": t, "tflops": tf, "of_gemm": tf / best_gemm})
        del q, k, v
        torch.cuda.empty_cache()
    for b, h, s in CAUSAL_SHAPES:
        q, k, v = (torch.randn(b, h, s, 128, device=dev, dtype=dt) for _ in range(3))
        t = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        tf = 2 * b * h * s * s * 128 / t / 1e12
        out["causal"].append({"batch": b, "heads": h, "tokens": s, "seconds": t, "tflops": tf, "of_gemm": tf / best_gemm})
        del q, k, v
    out["best_gemm_tflops"] = best_gemm
    out["comfy_priority"] = prio is not None
    json.dump(out, open(a.out, "w"), indent=1)
    for key in ("gemm", "dit", "causal"):
        for r in out[key]:
            print(key, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})


if __name__ == "__main__":
    main()
