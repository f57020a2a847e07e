"""How many times PyTorch's Linear reads a weight that stays in host memory, by its rows: torch.nn.functional.linear
(bf16, no bias: transformers' projections) at M = 1..8192 rows with the weight in managed memory advised
PreferredLocation=CPU + AccessedBy=GPU and prefetched to the host (the validation harness's allocator,
experiments/validate/managed_allocator.cu), and with the weight GPU-resident, for Qwen3-8B's projections and
Qwen3-30B-A3B's. PyTorch's products go through cuBLASLt, whose tiles differ from tiersim_calib's cublasGemmEx
(results/calib/h100-remote-gemm): this is the framework's own curve, for the runtime profile.

  python3 experiments/calibrate/remote_linear_rate.py --allocator-so X.so --out remote_linear.jsonl   (GPU machine)
  python3 experiments/calibrate/remote_linear_rate.py --fit results/calib/h100-remote-linear/remote_linear.jsonl
      prints the runtime profile's remote_gemm_reads block (calib/runtimes/SCHEMA.md): per shape, the time at M rows
      over the median time at M <= 64 (one read), the median over shapes at each M above 64, at least 1.
Managed memory used: < 1 GB at a time (never near the GPU's free memory).
"""
import argparse
import json
import statistics
import sys

SHAPES = [(4096, 4096), (1024, 4096), (12288, 4096), (4096, 12288), (2048, 4096), (4096, 2048), (1536, 2048),
          (2048, 768)]  # {out, in}: Qwen3-8B's q/o, k/v, gate/up, down; Qwen3-30B-A3B's q, o, an expert's gate_up, down
ROWS = [1, 4, 16, 32, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096, 8192]


def measure(a):
    import ctypes
    import torch
    import torch.nn.functional as F
    from event_timing import median_seconds
    lib = ctypes.CDLL(a.allocator_so)
    torch.cuda.memory.change_current_allocator(
        torch.cuda.memory.CUDAPluggableAllocator(a.allocator_so, "tiersim_alloc", "tiersim_free"))
    lib.tiersim_prefetch_to_host.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    x = torch.randn(ROWS[-1], 12288, dtype=torch.bfloat16, device="cuda")
    out = open(a.out, "w")
    for n, k in SHAPES:
        xs = x[:, :k].contiguous()
        for where, advice in (("gpu", 0), ("host", 2)):
            lib.tiersim_set_advice(ctypes.c_int(advice))
            w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda")
            lib.tiersim_set_advice(ctypes.c_int(0))
            torch.cuda.synchronize()
            if where == "host" and lib.tiersim_prefetch_to_host(ctypes.c_void_p(w.data_ptr()), w.numel() * 2) != 0:
                sys.exit("prefetch to host failed")
            for m in ROWS:
                xm = xs[:m]
                seconds = median_seconds(lambda: F.linear(xm, w), warmup=3, reps=5 if m >= 1024 else 9)
                row = dict(out=n, inp=k, rows=m, weights=where, seconds=seconds,
                           weight_bytes=n * k * 2, gpu=torch.cuda.get_device_name(), torch=torch.__version__)
                print(json.dumps(row), flush=True)
                out.write(json.dumps(row) + "\n")
            del w
            if lib.tiersim_failed():
                sys.exit("a CUDA call in the managed allocator failed")


def fit(path):
    rows = [json.loads(line) for line in open(path)]
    by_shape = {}
    for r in rows:
        if r["weights"] == "host":
            by_shape.setdefault((r["out"], r["inp"]), {})[r["rows"]] = r["seconds"]
    reads = {}
    for times in by_shape.values():
        one = statistics.median_low([t for m, t in times.items() if m <= 64])
        for m, t in times.items():
            if m > 64:
                reads.setdefault(m, []).append(t / one)
    points = [[64, 1.0]] + [[m, max(1.0, statistics.median_low(v))] for m, v in sorted(reads.items())]
    r0 = rows[0]
    print("remote_gemm_reads:")
    print(f"  source: \"torch.nn.functional.linear (bf16, cuBLASLt) on weights in managed memory advised "
          f"PreferredLocation=CPU + AccessedBy, {r0['gpu']}, torch {r0['torch']}: per shape the time at M rows over "
          f"the median at M <= 64, the median over {len(by_shape)} shapes (experiments/calibrate/remote_linear_rate.py, "
          f"{path})\"")
    print("  points: [" + ", ".join(f"[{m}, {v:.2f}]" for m, v in points) + "]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--allocator-so")
    ap.add_argument("--out")
    ap.add_argument("--fit")
    a = ap.parse_args()
    if a.fit:
        fit(a.fit)
    elif a.allocator_so and a.out:
        measure(a)
    else:
        ap.error("--allocator-so and --out (on the GPU machine), or --fit FILE")


if __name__ == "__main__":
    main()
