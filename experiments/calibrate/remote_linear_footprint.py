"""Does a Linear reading a host-resident weight slow down with how much host-resident weight the GPU reads in all?
PyTorch's F.linear at batch 1 (bf16, 5120 x 5120: 50 MiB each) over L weights in turn, each its own cudaMallocManaged
advised PreferredLocation=CPU + AccessedBy=GPU (experiments/validate/managed_allocator.cu) and written before, the
input vector host-resident too (a fresh one per pass), for L weights totalling 0.05 to 8 GiB: seconds per Linear, the
median over 3 passes after one warm-up pass. A decode in seed 000's mode 2 reads its whole model so, where one such
Linear in isolation runs 10-100x faster per byte than the decode's (results/calib/h200-s32/README.md).

    python3 experiments/calibrate/remote_linear_footprint.py --allocator-so X.so --out footprint.csv
"""
import argparse
import ctypes
import statistics

import torch
import torch.nn.functional as F

N = 5120  # Qwen3-14B's and Qwen2.5-14B's hidden size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--allocator-so", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gib", default="0.05,0.5,2,8")
    a = ap.parse_args()
    lib = ctypes.CDLL(a.allocator_so)
    lib.tiersim_set_advice.argtypes = [ctypes.c_int]
    lib.tiersim_set_budget.argtypes = [ctypes.c_size_t]
    lib.tiersim_failed.restype = ctypes.c_int
    host = int(open("/proc/meminfo").read().split("MemTotal:")[1].split()[0]) * 1024
    lib.tiersim_set_budget(int(host * 0.6))
    alloc = torch.cuda.memory.CUDAPluggableAllocator(a.allocator_so, "tiersim_alloc", "tiersim_free")
    torch.cuda.memory.change_current_allocator(alloc)
    rows = ["# benchmark: F.linear 5120 x 5120 bf16 at batch 1 over L host-resident weights in turn "
            "(experiments/calibrate/remote_linear_footprint.py)", f"# gpu_name: {torch.cuda.get_device_name()}",
            "benchmark,variant,work,work_unit,repeats,median_s,min_s,max_s"]
    lib.tiersim_set_advice(2)  # PreferredLocation=CPU + AccessedBy=GPU
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.no_grad():
        for gib in [float(g) for g in a.gib.split(",")]:
            layers = max(1, round(gib * 2**30 / (2 * N * N)))
            if 2 * N * N * layers > host * 0.5:
                raise SystemExit(f"{gib} GiB would pass half of host memory")
            ws = [torch.empty(N, N, device="cuda", dtype=torch.bfloat16).normal_(0, 0.02) for _ in range(layers)]
            per = []
            for p in range(4):
                x = torch.randn(1, 1, N, device="cuda", dtype=torch.bfloat16)
                torch.cuda.synchronize()
                start.record()
                for w in ws:
                    x = F.linear(x, w)
                end.record()
                end.synchronize()
                if p > 0:
                    per.append(start.elapsed_time(end) * 1e-3 / layers)
            rows.append(f"remote_linear_footprint,linear_bf16_both_out{N}_in{N}_weights{layers},{2 * N * N * layers},bytes,3,"
                        f"{statistics.median(per):.9e},{min(per):.9e},{max(per):.9e}")
            print(f"{layers:4d} weights ({2 * N * N * layers / 2**30:.2f} GiB): {statistics.median(per) * 1e3:.3f} ms per Linear "
                  f"({2 * N * N / statistics.median(per) / 1e9:.1f} GB/s)", flush=True)
            del ws
            torch.cuda.synchronize()
    if lib.tiersim_failed():
        raise SystemExit("a CUDA call in the managed allocator failed")
    with open(a.out, "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
