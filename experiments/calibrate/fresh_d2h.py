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
import datetime
import statistics
import subprocess
import time

import torch

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
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                            text=True).stdout.strip().splitlines()
    with open(a.csv, "w") as f:
        f.write("# measured_at: %s\n" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        f.write("# gpu_name: %s\n# gpu_count: %d\n" % (torch.cuda.get_device_name(0), torch.cuda.device_count()))
        f.write("# nvidia_driver: %s\n# torch: %s\n" % (driver[0] if driver else "unknown", torch.__version__))
        f.write("benchmark,variant,work,work_unit,repeats,median_s,min_s,max_s\n")
        for size, times in rows:
            f.write("d2h,fresh_pageable_%d,%d,bytes,%d,%.9e,%.9e,%.9e\n" % (size, size, len(times), statistics.median(times),
                                                                         min(times), max(times)))


if __name__ == "__main__":
    main()
