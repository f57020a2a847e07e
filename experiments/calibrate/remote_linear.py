"""PyTorch's Linear at batch 1 (F.linear, as transformers' q/k/v projections call it) with its input vector in host
memory, with and without a bias: a microbenchmark of the kernels modes 2 and 4 of seed 000's experiment run, for
the shapes of Qwen2.5's biased q, k and v projections (and their unbiased twins: the o projection's kernel).

Every tensor comes from experiments/validate/managed_allocator.cu through a CUDAPluggableAllocator (one
cudaMallocManaged each). `input`: the weight (and bias) written on the GPU with no advice (GPU-resident), the input
vector advised PreferredLocation=CPU + AccessedBy=GPU and written (host-resident, mapped); `both`: the weight and bias
so advised too. The GPU has room (no balloon): nothing is evicted; PreferredLocation=CPU pages do not migrate on an
x86 host (results/validation/um-oversubscription/driver_reading_s31.md). Times: CUDA events around each call
(experiments/calibrate/event_timing.py), 3 warm-up calls, the median of 15; the same input every call. Rows in
tiersim_calib's CSV format:

  remote_linear,linear_bf16_<input|both>_<bias|nobias>_out<N>_in<K>,<weight bytes>,bytes,15,median,min,max

`--footprint-gib LIST`: instead, does such a Linear slow down with how much host-resident weight the GPU reads in
all? F.linear 5120 x 5120 (50 MiB each) over L weights in turn, each advised PreferredLocation=CPU + AccessedBy=GPU
and written before, the input host-resident too (a fresh one per pass), for L weights totalling each GiB of the
list: seconds per Linear, the median over 3 passes after one warm-up pass. A mode-2 decode reads its whole model so,
where one Linear in isolation runs 10-100x faster per byte than the decode's (results/calib/h200-s32/README.md).
Rows remote_linear_footprint,linear_bf16_both_out5120_in5120_weights<L>,<bytes of all L>,bytes,3,median,min,max.

    python3 experiments/calibrate/remote_linear.py --allocator-so X.so --out remote_linear.csv
    python3 experiments/calibrate/remote_linear.py --allocator-so X.so --footprint-gib 0.05,0.5,2,8 --out footprint.csv
"""
import argparse
import ctypes
import statistics

import torch
import torch.nn.functional as F

from event_timing import all_seconds

# (in, out): Qwen2.5-3B, -7B, -14B q and k/v projections (config.json: hidden, heads x head_dim, kv heads x head_dim).
SHAPES = [(2048, 2048), (2048, 256), (3584, 3584), (3584, 512), (5120, 5120), (5120, 1024)]
NONE, PREFER_CPU_ACCESSED_BY = 0, 2  # managed_allocator.cu g_advice codes


def footprint(lib, gibs, host, rows):
    """--footprint-gib: seconds per 5120 x 5120 Linear over L host-resident weights in turn, for L weights of each GiB."""
    n = 5120  # Qwen3-14B's and Qwen2.5-14B's hidden size
    lib.tiersim_set_advice(PREFER_CPU_ACCESSED_BY)
    for gib in gibs:
        layers = max(1, round(gib * 2**30 / (2 * n * n)))
        if 2 * n * n * layers > host * 0.5:
            raise SystemExit(f"{gib} GiB would pass half of host memory")
        ws = [torch.empty(n, n, device="cuda", dtype=torch.bfloat16).normal_(0, 0.02) for _ in range(layers)]
        x = [None]

        def new_input():
            x[0] = torch.randn(1, 1, n, device="cuda", dtype=torch.bfloat16)
            torch.cuda.synchronize()

        def one_pass():
            for w in ws:
                x[0] = F.linear(x[0], w)

        per = [t / layers for t in all_seconds(one_pass, warmup=1, reps=3, setup=new_input)]
        rows.append(f"remote_linear_footprint,linear_bf16_both_out{n}_in{n}_weights{layers},{2 * n * n * layers},bytes,3,"
                    f"{statistics.median(per):.9e},{min(per):.9e},{max(per):.9e}")
        print(f"{layers:4d} weights ({2 * n * n * layers / 2**30:.2f} GiB): {statistics.median(per) * 1e3:.3f} ms per "
              f"Linear ({2 * n * n / statistics.median(per) / 1e9:.1f} GB/s)", flush=True)
        del ws
        torch.cuda.synchronize()


def shapes(lib, a, rows):
    """The q, k/v shapes: each placement, with and without the bias."""
    prefer_cpu = 1  # managed_allocator.cu g_advice: PreferredLocation=CPU alone (mode 2)
    for k, n in SHAPES:
        for placement in ("input", "both"):
            lib.tiersim_set_advice(NONE if placement == "input" else PREFER_CPU_ACCESSED_BY)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
            b = torch.randn(n, device="cuda", dtype=torch.bfloat16) * 0.02
            lib.tiersim_set_advice(PREFER_CPU_ACCESSED_BY)
            x = [torch.randn(1, 1, k, device="cuda", dtype=torch.bfloat16)]
            torch.cuda.synchronize()

            def new_input():
                lib.tiersim_set_advice(prefer_cpu)
                x[0] = torch.randn(1, 1, k, device="cuda", dtype=torch.bfloat16)

            for bias in (True, False):
                times = all_seconds(lambda: F.linear(x[0], w, b if bias else None), warmup=3, reps=a.repeats,
                                    setup=new_input if a.fresh else None)
                kind = ("fresh_" if a.fresh else "") + placement
                variant = f"linear_bf16_{kind}_{'bias' if bias else 'nobias'}_out{n}_in{k}"
                rows.append(f"remote_linear,{variant},{2 * n * k},bytes,{a.repeats},{statistics.median(times):.9e},"
                            f"{min(times):.9e},{max(times):.9e}")
                from torch.profiler import ProfilerActivity, profile
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    F.linear(x[0], w, b if bias else None)
                    torch.cuda.synchronize()
                kernels = [e.name[:60] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
                print(f"{variant:44s} {statistics.median(times) * 1e3:8.3f} ms  {' + '.join(kernels)}", flush=True)
            del w, b, x
            torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--allocator-so", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--fresh", action="store_true",
                    help="a new input vector every call, advised PreferredLocation=CPU alone (seed 000's mode 2) and "
                         "written by a kernel just before, as a decode's activations are; variants fresh_input/fresh_both")
    ap.add_argument("--leave-gib", type=float, default=0,
                    help="shrink the GPU first with the allocator's balloon (a plain cudaMalloc) to leave this much")
    ap.add_argument("--footprint-gib", help="comma list of GiB: the footprint measurement instead (see above)")
    a = ap.parse_args()
    lib = ctypes.CDLL(a.allocator_so)
    lib.tiersim_set_advice.argtypes = [ctypes.c_int]
    lib.tiersim_failed.restype = ctypes.c_int
    lib.tiersim_balloon.restype = ctypes.c_size_t
    lib.tiersim_balloon.argtypes = [ctypes.c_size_t]
    lib.tiersim_set_budget.argtypes = [ctypes.c_size_t]
    host = int(open("/proc/meminfo").read().split("MemTotal:")[1].split()[0]) * 1024
    lib.tiersim_set_budget(int(host * 0.6))
    alloc = torch.cuda.memory.CUDAPluggableAllocator(a.allocator_so, "tiersim_alloc", "tiersim_free")
    torch.cuda.memory.change_current_allocator(alloc)
    if a.leave_gib > 0 and lib.tiersim_balloon(int(a.leave_gib * 2**30)) == 0:
        raise SystemExit("the balloon failed")
    rows = ["# benchmark: PyTorch F.linear at batch 1, bf16, input vector host-resident (experiments/calibrate/remote_linear.py)",
            f"# gpu_name: {torch.cuda.get_device_name()}", f"# torch: {torch.__version__}",
            f"# fresh_input_each_call: {a.fresh}", f"# balloon_leaves_gib: {a.leave_gib}",
            "benchmark,variant,work,work_unit,repeats,median_s,min_s,max_s"]
    with torch.no_grad():
        if a.footprint_gib:
            footprint(lib, [float(g) for g in a.footprint_gib.split(",")], host, rows)
        else:
            shapes(lib, a, rows)
    if lib.tiersim_failed():
        raise SystemExit("a CUDA call in the managed allocator failed")
    with open(a.out, "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
