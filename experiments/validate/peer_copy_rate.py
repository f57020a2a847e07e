"""GPU time of the peer copies the harness makes: one Qwen3-8B decoder layer's 11 weight tensors (and,
separately, single large tensors) copied cuda:1 -> cuda:0 with `.to("cuda:0", non_blocking=True)`,
timed with CUDA events on cuda:0's stream. Compared with calib's cudaMemcpyPeerAsync rate, it says
how much of the peer path's cost is PyTorch's cross-device copy rather than the link.

    python3 peer_copy_rate.py --out peer_copy_rate.json
"""
import argparse
import json
import statistics

import torch

# Qwen3-8B decoder layer: q, k, v, o projections, 3 MLP matrices, 4 norms (bf16 elements).
LAYER = [4096 * 4096, 1024 * 4096, 1024 * 4096, 4096 * 4096, 12288 * 4096, 12288 * 4096, 4096 * 12288,
         4096, 4096, 128, 128]


def time_copies(tensors, repeats=10):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(repeats):
        torch.cuda.synchronize("cuda:0")
        torch.cuda.synchronize("cuda:1")
        start.record()
        copies = [t.to("cuda:0", non_blocking=True) for t in tensors]
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e-3)
        del copies
    return out[2:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if torch.cuda.device_count() < 2:
        raise SystemExit("needs two GPUs")
    torch.cuda.set_device(0)
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, cases={})
    cases = {"qwen3-8b layer (11 tensors)": LAYER, "one 100 MiB tensor": [50 * 2 ** 20],
             "one 1 GiB tensor": [2 ** 29], "11 x 64 KiB tensors": [2 ** 15] * 11}
    for name, sizes in cases.items():
        tensors = [torch.randn(n, dtype=torch.bfloat16, device="cuda:1") for n in sizes]
        nbytes = sum(sizes) * 2
        t = time_copies(tensors)
        med = statistics.median(t)
        result["cases"][name] = dict(bytes=nbytes, tensors=len(sizes), seconds=t, median_s=med)
        print(f"{name:>28}: {med * 1e3:8.3f} ms GPU time, {nbytes / med / 1e9:7.1f} GB/s", flush=True)
    with open(a.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
