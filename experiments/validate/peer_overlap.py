"""Does a PyTorch copy from cuda:1 to cuda:0, issued on a side stream, overlap work on cuda:0's compute
stream? (In the profiled offloaded step, copies from cuda:1 issued one layer ahead never did, while
copies from pinned host memory did.)

Each case queues ~20 ms of matmuls on cuda:0's current (default) stream, then a 1 GiB copy in one of
several ways, and times both from the host (synchronising both devices). Overlapped: ~max(compute,
copy); serialised: their sum. The compute and the copy are also timed alone.

    python3 peer_overlap.py --out peer_overlap.json
"""
import argparse
import json
import statistics
import time

import torch


def busy(a, n):
    for _ in range(n):
        a = a @ a
        a = a * 0.5
    return a


def sync():
    torch.cuda.synchronize("cuda:0")
    torch.cuda.synchronize("cuda:1")


def timed(fn, repeats=5):
    out = []
    for _ in range(repeats + 1):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t)
    return statistics.median(out[1:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if torch.cuda.device_count() < 2:
        raise SystemExit("needs two GPUs")
    torch.cuda.set_device(0)
    m = torch.randn(4096, 4096, device="cuda:0", dtype=torch.bfloat16) * 0.01
    n = 1
    while timed(lambda: busy(m, n), 2) < 0.02:  # about 20 ms of compute
        n *= 2
    src1 = torch.randn(2 ** 29, device="cuda:1", dtype=torch.bfloat16)  # 1 GiB on cuda:1
    host = torch.empty(2 ** 29, dtype=torch.bfloat16).pin_memory()
    dst = torch.empty(2 ** 29, device="cuda:0", dtype=torch.bfloat16)
    side0 = torch.cuda.Stream(device="cuda:0")
    side1 = torch.cuda.Stream(device="cuda:1")

    def on(stream, fn):
        with torch.cuda.stream(stream):
            return fn()

    cases = {
        "compute alone": lambda: busy(m, n),
        "peer copy alone (.to on a cuda:0 side stream)": lambda: on(side0, lambda: src1.to("cuda:0", non_blocking=True)),
        "compute, then peer .to() on a cuda:0 side stream": lambda: (busy(m, n), on(side0, lambda: src1.to("cuda:0", non_blocking=True))),
        "compute, then peer copy_ into a preallocated tensor on a cuda:0 side stream":
            lambda: (busy(m, n), on(side0, lambda: dst.copy_(src1, non_blocking=True))),
        "compute, then peer copy_ issued with cuda:1's side stream current":
            lambda: (busy(m, n), on(side1, lambda: dst.copy_(src1, non_blocking=True))),
        "compute, then pinned host .to() on a cuda:0 side stream (control)":
            lambda: (busy(m, n), on(side0, lambda: host.to("cuda:0", non_blocking=True))),
        "pinned copy alone": lambda: on(side0, lambda: host.to("cuda:0", non_blocking=True)),
    }
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, matmuls=n, cases={})
    for name, fn in cases.items():
        t = timed(fn)
        result["cases"][name] = t
        print(f"{name:>80}: {t * 1e3:8.2f} ms", flush=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
