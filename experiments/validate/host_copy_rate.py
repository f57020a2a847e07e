"""Rate of the host-to-GPU copies the harness makes: a Qwen3-8B decoder layer's 11 weight tensors
copied to cuda:0 with `.to("cuda:0")` (blocking from pageable memory, non_blocking from pinned), from
the same layer over and over ("hot": its bytes may stay in the CPU caches) and from a different layer
each time out of 24 ("cold": as an offloaded model reads its weights once per step).

A pageable copy is staged by the driver with a CPU memcpy, so its rate depends on where the source is;
calib's pageable benchmark reads a cold footprint for that reason. This checks the framework's copies
against it.

    python3 host_copy_rate.py --out host_copy_rate.json
"""
import argparse
import json
import statistics
import time

import torch

# Qwen3-8B decoder layer: q, k, v, o projections, 3 MLP matrices, 4 norms (bf16 elements).
LAYER = [4096 * 4096, 1024 * 4096, 1024 * 4096, 4096 * 4096, 12288 * 4096, 12288 * 4096, 4096 * 12288,
         4096, 4096, 128, 128]


def copy_layer(tensors, non_blocking):
    t0 = time.perf_counter()
    out = [t.to("cuda:0", non_blocking=non_blocking) for t in tensors]
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    del out
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    nbytes = sum(LAYER) * 2
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, layer_bytes=nbytes, cases={})
    for memory in ("pageable", "pinned"):
        layers = []
        for _ in range(a.layers):
            ts = [torch.ones(n, dtype=torch.bfloat16) for n in LAYER]  # pages faulted in; values do not matter
            layers.append([t.pin_memory() for t in ts] if memory == "pinned" else ts)
        nb = memory == "pinned"
        copy_layer(layers[0], nb)  # allocator and staging buffers warmed
        hot = [copy_layer(layers[0], nb) for _ in range(a.layers * a.repeats)]
        cold = [copy_layer(layers[i % a.layers], nb) for i in range(a.layers * a.repeats)]
        for case, t in (("hot", hot), ("cold", cold)):
            med = statistics.median(t)
            result["cases"][f"{memory}_{case}"] = dict(seconds=t, median_s=med, gb_per_s=nbytes / med / 1e9)
            print(f"{memory:>8} {case:>4}: {med * 1e3:8.3f} ms per layer, {nbytes / med / 1e9:6.2f} GB/s", flush=True)
        del layers
    with open(a.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
