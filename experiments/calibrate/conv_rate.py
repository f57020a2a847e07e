"""Calibration (not validation): how fast cuDNN runs a bf16 convolution, as PyTorch calls it for a VAE's layers, against
the best cuBLAS GEMM on this GPU.

A convolution's FLOPs are 2 x kernel volume x in x out per output element. This times torch.nn.functional.conv3d and
conv2d alone (the convolution kernels cuDNN picks with torch.backends.cudnn.benchmark off, ComfyUI's setting, and the
layout transposes it runs around them; no bias: PyTorch adds a Conv's bias in a separate kernel, priced apart) on NCDHW /
NCHW bf16 tensors, at shapes chosen apart from the ones tiersim's VAE validation runs (channels 64, 128, 256, 512;
the Wan and FLUX decoders use 96, 192, 384 and 128-512 at other sizes): 3x3x3 over 3-6 frames (the causal decoder's
cache of two frames plus the new ones), 3x1x1 temporal, 3x3 and 1x1 2D; then the Wan 2.1 VAE decoder's own
(kernel, in, out) kinds at latent sizes no validation row decodes (WAN_LEVELS). Each shape: the median of 10 timed calls after
3 warm-ups (CUDA events). GEMM reference as sdpa_rate.py. Writes one JSON object with every shape.

  python3 experiments/calibrate/conv_rate.py --out OUT.json [--csv RAW.csv]

--csv writes tiersim_calib's raw CSV rows: benchmark `convolution`, variants conv{3d,2d}_bf16_c{IN}x{OUT}_k{K}_t{T}_{H}x{W},
work = the FLOPs, median / min / max seconds.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

from event_timing import all_seconds
from raw_csv import write_raw_csv

GEMMS = [(8192, 8192, 8192), (4096, 4096, 14336), (4096, 14336, 4096)]
# (dims, in, out, kernel (t, h, w), input frames, height, width): the input is already padded in time as
# CausalConv3d leaves it (cat with the cache, F.pad); space padded by 1 for a 3-wide kernel.
SHAPES = [(3, c, c, (3, 3, 3), t, h, w) for c in (64, 128, 256, 512) for (t, h, w) in
          ((3, 64, 64), (3, 128, 128), (6, 64, 64), (6, 128, 128), (6, 256, 256)) if c * t * h * w <= 512 * 6 * 128 * 128]
SHAPES += [(3, 128, 128, (3, 3, 3), 6, 512, 512), (3, 64, 64, (3, 3, 3), 6, 512, 512)]
SHAPES += [(3, c, 2 * c, (3, 1, 1), 3, h, w) for c in (256, 512) for (h, w) in ((64, 64), (128, 128))]
SHAPES += [(3, c, 2 * c, (1, 1, 1), 4, 128, 128) for c in (128, 256)]
SHAPES += [(2, c, c // 2, (3, 3), 4, h, w) for c in (256, 512) for (h, w) in ((128, 128), (256, 256))]
SHAPES += [(2, c, c, (3, 3), 1, h, w) for c in (128, 256) for (h, w) in ((256, 256), (512, 512))]
# The Wan 2.1 VAE decoder's convolutions (comfy/ldm/wan/vae.py Decoder3d at dim 96: channels 16, 96, 192, 384, 768),
# at latent sizes no validation row decodes (48x64 and 72x72; the rows use 60x104, 90x160, 128x128, 166x166), each
# level at its own scale (x1, x2, x4, x8) and frames: 3x3x3 over the cache's two frames plus 1, 2 or 4 new ones,
# the temporal 3x1x1 upsample, the 2D 3x3 after each spatial upsample, the 1x1 shortcut and the attention's 1x1s.
WAN_LEVELS = [  # (kernel, in, out, scale, new frames)
    ((3, 3, 3), 16, 384, 1, 1), ((3, 3, 3), 384, 384, 1, 1), ((3, 1, 1), 384, 768, 1, 1), ((2, 3, 3), 384, 192, 2, 2),
    ((3, 3, 3), 192, 384, 2, 2), ((1, 1, 1), 192, 384, 2, 2), ((3, 3, 3), 384, 384, 2, 2), ((3, 1, 1), 384, 768, 2, 2),
    ((2, 3, 3), 384, 192, 4, 4), ((3, 3, 3), 192, 192, 4, 4), ((2, 3, 3), 192, 96, 8, 4), ((3, 3, 3), 96, 96, 8, 4),
    ((3, 3, 3), 96, 3, 8, 4), ((2, 1, 1), 384, 1152, 1, 1), ((2, 1, 1), 384, 384, 1, 1)]
for (k, cin, cout, scale, new) in WAN_LEVELS:
    for (lh, lw) in ((48, 64), (72, 72)):
        for frames in sorted({1, new}):
            h, w = lh * scale, lw * scale
            if k[0] == 2:  # a 2D convolution over the chunk's frames as a batch
                SHAPES.append((2, cin, cout, k[1:], frames, h, w))
            else:
                SHAPES.append((3, cin, cout, k, frames + k[0] - 1, h, w))

RAW = []


def variant(dims, cin, cout, k, t, h, w):
    return "conv%dd_bf16_c%dx%d_k%s_t%d_%dx%d" % (dims, cin, cout, "x".join(map(str, k)), t, h, w)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--csv", default=None)
    a = ap.parse_args()
    dev, dt = "cuda", torch.bfloat16
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "cudnn_benchmark": torch.backends.cudnn.benchmark, "gemm": [], "conv": []}
    for m, k, n in GEMMS:
        x, w = torch.randn(m, k, device=dev, dtype=dt), torch.randn(k, n, device=dev, dtype=dt)
        t = statistics.median(all_seconds(lambda: x @ w, 3, 10))
        out["gemm"].append({"m": m, "k": k, "n": n, "seconds": t, "tflops": 2 * m * k * n / t / 1e12})
        del x, w
    best = max(g["tflops"] for g in out["gemm"])
    with torch.no_grad():
        for dims, cin, cout, k, t, h, w in SHAPES:
            if dims == 3:
                kt, kh, kw = k
                x = torch.randn(1, cin, t, h, w, device=dev, dtype=dt)
                wt = torch.randn(cout, cin, kt, kh, kw, device=dev, dtype=dt) / (cin * kt * kh * kw) ** 0.5
                pad = (0, kh // 2, kw // 2)
                fn = lambda: F.conv3d(x, wt, None, 1, pad)  # noqa: E731
                outs = (t - kt + 1) * h * w
                vol = kt * kh * kw
            else:
                kh, kw = k
                x = torch.randn(t, cin, h, w, device=dev, dtype=dt)  # t images (a chunk's frames as a batch)
                wt = torch.randn(cout, cin, kh, kw, device=dev, dtype=dt) / (cin * kh * kw) ** 0.5
                fn = lambda: F.conv2d(x, wt, None, 1, (kh // 2, kw // 2))  # noqa: E731
                outs = t * h * w
                vol = kh * kw
            flops = 2 * vol * cin * cout * outs
            v = variant(dims, cin, cout, k, t, h, w)
            times = all_seconds(fn, 3, 10)
            RAW.append((v, flops, times))
            s = statistics.median(times)
            out["conv"].append({"variant": v, "flops": flops, "seconds": s, "tflops": flops / s / 1e12,
                                "of_gemm": flops / s / 1e12 / best})
            print(v, "%.3f ms" % (s * 1e3), "%.1f TFLOP/s" % (flops / s / 1e12), "%.3f of GEMM" % (flops / s / 1e12 / best),
                  flush=True)
            del x, wt
            torch.cuda.empty_cache()
    out["best_gemm_tflops"] = best
    json.dump(out, open(a.out, "w"), indent=1)
    if a.csv:
        write_raw_csv(a.csv, [("convolution", v, flops, "flop", times) for v, flops, times in RAW])

if __name__ == "__main__":
    main()
