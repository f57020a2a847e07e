"""Host time to issue one weight copy to cuda:0 from eager PyTorch (the framework's per_copy), from
pinned host memory and, with two GPUs, from cuda:1: `h.to("cuda:0", non_blocking=True)` on a 64 KiB
tensor (its transfer is a few microseconds), timed on the host, 50 calls between syncs.

    python3 copy_issue.py --out copy_issue.json
"""
import argparse
import json
import statistics
import time

import torch


def issue_times(h, n=400, batch=50):
    times, keep = [], []
    for i in range(n):
        t = time.perf_counter()
        keep.append(h.to("cuda:0", non_blocking=True))
        times.append(time.perf_counter() - t)
        if (i + 1) % batch == 0:
            torch.cuda.synchronize()
            keep.clear()
    return times[batch:]  # the first batch warms the caching allocator


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    n = 64 * 1024 // 2
    sources = {"pinned": torch.randn(n, dtype=torch.bfloat16).pin_memory()}
    if torch.cuda.device_count() > 1:
        sources["cuda:1"] = torch.randn(n, dtype=torch.bfloat16, device="cuda:1")
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, bytes=n * 2, sources={})
    for name, h in sources.items():
        t = issue_times(h)
        result["sources"][name] = dict(median_s=statistics.median(t), times_s=t)
        print(f"copy issue from {name:>7}: median {statistics.median(t) * 1e6:7.1f} us per .to(non_blocking=True)",
              flush=True)
    with open(a.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
