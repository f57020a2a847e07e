"""Calibration (not validation): a device-to-host copy into freshly allocated pageable memory, as PyTorch makes one.

`tensor.to("cpu")` allocates its host tensor anew (c10's CPU allocator: posix_memalign, which glibc serves from fresh
mmap'd pages above its mmap threshold), so the copy also pays the kernel's first touch of every page; tiersim_calib's
d2h pageable rows copy into a buffer already touched. ComfyUI's unloads are such copies (comfy/model_patcher.py
a125cd84: unpatch_model's `self.model.to(offload_device)`, partially_unload's `m.to(device_to)`). Each size: a CUDA
uint8 tensor, then `reps` timed `.to("cpu")` (wall clock to a synchronize; the result freed before the next), after one
untimed warm-up. Sizes from 1 MiB to 1 GiB. Writes tiersim_calib's raw CSV rows (tiersim_fit --extra): benchmark d2h,
variant fresh_pageable_<bytes>, work = bytes; tiersim_fit makes them host_link.d2h_fresh_pageable.

  python3 experiments/calibrate/fresh_d2h.py --csv RAW.csv
"""
import argparse
import statistics
import time

import torch

from raw_csv import write_raw_csv

SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    rows = []
    for size in SIZES:
        x = torch.empty(size, dtype=torch.uint8, device="cuda").fill_(1)
        y = x.to("cpu")  # warm-up: the CUDA side's staging, not timed
        del y
        times = []
        for _ in range(a.reps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            y = x.to("cpu")
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
            del y
        del x
        torch.cuda.empty_cache()
        rows.append((size, times))
        print(f"{size / 2**20:7.0f} MiB  median {statistics.median(times) * 1e3:9.3f} ms  "
              f"{size / statistics.median(times) / 1e9:6.2f} GB/s", flush=True)
    write_raw_csv(a.csv, [("d2h", "fresh_pageable_%d" % size, size, "bytes", times) for size, times in rows])

if __name__ == "__main__":
    main()
