"""Calibration (not validation): how fast ComfyUI-GGUF dequantizes GGUF weights to bf16 on this GPU, against a plain
bf16 copy, and how many kernels and host-to-device copies each type issues.

ComfyUI-GGUF (city96/ComfyUI-GGUF 795e451) dequantizes every Linear's weight when its forward runs (ops.py
GGMLLayer.cast_bias_weight -> get_weight -> dequant.py dequantize_tensor(tensor, bf16, None) -> dequantize ->
dequantize_blocks_<TYPE>, then .to(bf16)): a chain of small torch elementwise kernels, and for the K-quants and Q4_0
a `torch.tensor([...], device=...)` per shift vector, i.e. a synchronous host-to-device copy. This times that very
call (gguf_weights.dequant_weight on the carried dequant.py, weight already on the GPU; the F32 -> bf16 bias cast is
not part of it) for Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and BF16 (FLUX's unquantized 2-D weights) at FLUX.1's weight
shapes, and a bf16 clone of the same shape as the memory-rate reference (as cast_rate.py):
  kernel_s   the sum of the CUDA kernel durations of one call (torch.profiler, CPU+CUDA activities; each call in
             its own record_function range, synchronized inside it), median over 20 calls after 3 warm-ups;
             also kernels_per_call, memcpy_per_call (of which host-to-device), memset_per_call, memcpy_s
  event_s    one call between two CUDA events (sdpa_rate.timed: median of 20 after 5 warm-ups): kernels, copies
             and the gaps the synchronous copies leave
  GBps       nominal bytes (the stored block bytes read + 2 bytes per element written) / kernel_s;
  ratio      GBps / the bf16 clone's (4 bytes per element / its GPU time: a contiguous clone is one device-to-device
             memcpy, no kernel, so its gpu_s, kernels + memcpys + memsets, is used).
Per type, a summary over all shapes: total nominal bytes / total kernel time, its ratio to the clones' (total bytes
/ total kernel time), kernels_per_call and memcpy_per_call (the median over shapes; *_set: every value seen), and
the counts read off dequant.py (expected_kernels, expected_memcpy).

  PYTHONPATH=experiments/validate/gguf_shim python3 experiments/calibrate/gguf_dequant_rate.py --out OUT.json \
      [--dequant .ext/ComfyUI-GGUF/dequant.py]
  ... --device cpu --shapes small --out /tmp/g.json   (smoke test: wall-clock times, no profiler)
"""
import argparse
import bisect
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "validate"))
import gguf_weights  # noqa: E402
from profiler_events import chrome_events  # noqa: E402

TYPES = ["Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "BF16"]
SHAPES = {"flux": [(3072, 3072), (9216, 3072), (12288, 3072), (3072, 12288), (18432, 3072), (21504, 3072),
                   (3072, 15360)],
          "small": [(256, 512), (512, 1024)]}
# read off dequant.py (dtype None, then .to(bf16)): elementwise / cat kernels, torch.tensor shift vectors
EXPECTED = {"Q8_0": (2, 0), "Q4_0": (6, 1), "Q4_K": (19, 1), "Q5_K": (23, 2), "Q6_K": (11, 2), "BF16": (3, 0)}


def wall_timed(fn, warmup=3, reps=20):
    """CPU stand-in for sdpa_rate.timed: median wall time of reps calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def profile_calls(fn, warmup=3, reps=20):
    """Medians per call of: kernel seconds, gpu_s (kernels + memcpys + memsets), kernels, memcpy seconds, memcpys,
    of which host-to-device, memsets; from one profiler session over reps calls, each in its own record_function
    range with a synchronize inside. A GPU event goes to the last range begun before it starts (CPU and GPU
    timestamps share kineto's clock). Falls back to totals / reps (grouping "total/reps") when some GPU event lands
    in no range or a range is missing."""
    from torch.profiler import ProfilerActivity, profile, record_function
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(reps):
            with record_function(f"gguf_call_{i}"):
                fn()
                torch.cuda.synchronize()
    return per_call(chrome_events(prof), reps)


def per_call(events, reps):
    """profile_calls' grouping of a chrome trace's events (kineto: cat kernel / gpu_memcpy / gpu_memset on the GPU;
    the ranges are the CPU-side gguf_call_<i> events, not their gpu_user_annotation projections)."""
    first = {}
    for e in events:
        name = str(e.get("name", ""))
        if name.startswith("gguf_call_") and not str(e.get("cat", "")).lower().startswith("gpu"):
            first[name] = min(first.get(name, float("inf")), float(e["ts"]))
    starts = sorted(first.values())
    per = [[0.0, 0, 0.0, 0, 0, 0, 0.0] for _ in starts]
    total = [0.0, 0, 0.0, 0, 0, 0, 0.0]
    n_gpu, n_assigned = 0, 0
    for e in events:
        cat = str(e.get("cat", "")).lower()
        if cat not in ("kernel", "gpu_memcpy", "gpu_memset") or e.get("ph", "X") != "X":
            continue
        n_gpu += 1
        ts, dur = float(e["ts"]), float(e.get("dur", 0)) * 1e-6
        name = str(e.get("name", ""))
        j = bisect.bisect_right(starts, ts) - 1  # the last range begun before it (calls are synchronized apart)
        if j < 0 and starts and ts >= starts[0] - 50:  # tolerate 50 us of clock skew before the first
            j = 0
        slot = per[j] if j >= 0 else None
        n_assigned += slot is not None
        for acc in ([slot] if slot is not None else []) + [total]:
            if cat == "kernel":
                acc[0] += dur
                acc[1] += 1
            elif cat == "gpu_memcpy":
                acc[2] += dur
                acc[3] += 1
                acc[4] += "HtoD" in name
            else:
                acc[5] += 1
                acc[6] += dur
    grouped = len(starts) == reps and n_assigned == n_gpu
    rows = per if grouped else [[v / reps for v in total]]
    med = [statistics.median(r[k] for r in rows) for k in range(7)]
    gpu = statistics.median(r[0] + r[2] + r[6] for r in rows)
    return dict(kernel_s=med[0], gpu_s=gpu, kernels_per_call=med[1], memcpy_s=med[2], memcpy_per_call=med[3],
                htod_per_call=med[4], memset_per_call=med[5], grouping="per call" if grouped else "total/reps",
                gpu_events=n_gpu)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dequant", default=gguf_weights.DEFAULT_DEQUANT, help="ComfyUI-GGUF's dequant.py")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--shapes", choices=sorted(SHAPES), default="flux")
    ap.add_argument("--types", nargs="+", default=TYPES, choices=TYPES)
    a = ap.parse_args()
    dq = gguf_weights.load_dequant(a.dequant)
    cuda = torch.device(a.device).type == "cuda"
    if cuda:
        sys.path.insert(0, HERE)
        from sdpa_rate import timed  # the median of 20 CUDA-event-timed calls after 5 warm-ups
    else:
        timed = wall_timed
    shapes = SHAPES[a.shapes]
    dt = torch.bfloat16

    clones = {}
    for out_f, in_f in shapes:
        w16 = torch.randn((out_f, in_f), device=a.device, dtype=dt) * 0.02
        c = dict(event_s=timed(lambda: w16.clone()))
        c.update(profile_calls(lambda: w16.clone()) if cuda else dict(kernel_s=None))
        c["basis_s"] = c["gpu_s"] if cuda else c["event_s"]  # a contiguous clone is a DtoD memcpy, not a kernel
        c["GBps"] = 4 * w16.numel() / c["basis_s"] / 1e9
        clones[(out_f, in_f)] = c
        del w16
    out = dict(gpu=torch.cuda.get_device_name(0) if cuda else "cpu", torch=torch.__version__, device=a.device,
               dequant=a.dequant, basis="kernel_s (bf16 clone: gpu_s)" if cuda else "event_s (cpu wall clock)", shapes=a.shapes,
               bf16_clone=[dict(shape=list(s), **c) for s, c in clones.items()], types={}, summary={})
    print(f"{'type':5s} {'shape':>12s} {'kernel us':>10s} {'event us':>10s} {'kern':>5s} {'cpy':>4s} "
          f"{'GB/s':>7s} {'ratio':>6s}", flush=True)
    for t in a.types:
        rows = []
        for out_f, in_f in shapes:
            w = gguf_weights.random_blocks(t, out_f, in_f, device=a.device)
            n = out_f * in_f
            fn = (lambda w=w, t=t, s=(out_f, in_f): gguf_weights.dequant_weight(dq, w, t, s, dt))
            y = fn()
            assert y.shape == (out_f, in_f) and y.dtype == dt
            del y
            r = dict(shape=[out_f, in_f], elements=n, stored_bytes=w.numel(), nominal_bytes=w.numel() + 2 * n,
                     event_s=timed(fn))
            r.update(profile_calls(fn) if cuda else dict(kernel_s=None, kernels_per_call=None, memcpy_per_call=None))
            basis = r["kernel_s"] if cuda else r["event_s"]
            r["GBps"] = r["nominal_bytes"] / basis / 1e9
            r["ratio"] = r["GBps"] / clones[(out_f, in_f)]["GBps"]
            rows.append(r)
            ks = f"{r['kernel_s'] * 1e6:10.1f}" if cuda else f"{'-':>10s}"
            kc = f"{r['kernels_per_call']:5.0f} {r['memcpy_per_call']:4.0f}" if cuda else f"{'-':>5s} {'-':>4s}"
            print(f"{t:5s} {f'{out_f}x{in_f}':>12s} {ks} {r['event_s'] * 1e6:10.1f} {kc} {r['GBps']:7.0f} "
                  f"{r['ratio']:6.3f}", flush=True)
            del w
            if cuda:
                torch.cuda.empty_cache()
        basis_key = "kernel_s" if cuda else "event_s"
        tb = sum(r["nominal_bytes"] for r in rows)
        tt = sum(r[basis_key] for r in rows)
        cb = sum(4 * r["elements"] for r in rows)
        ct = sum(clones[tuple(r["shape"])]["basis_s"] for r in rows)
        s = dict(GBps=tb / tt / 1e9, clone_GBps=cb / ct / 1e9, event_s_total=sum(r["event_s"] for r in rows),
                 kernel_s_total=tt if cuda else None, expected_kernels=EXPECTED[t][0], expected_memcpy=EXPECTED[t][1])
        s["ratio"] = s["GBps"] / s["clone_GBps"]
        if cuda:
            for k in ("kernels_per_call", "memcpy_per_call", "htod_per_call", "memset_per_call"):
                s[k] = statistics.median(r[k] for r in rows)
                s[k + "_set"] = sorted({r[k] for r in rows})
        out["types"][t] = rows
        out["summary"][t] = s
    print("over all shapes (GB/s on " + out["basis"] + "):")
    for t, s in out["summary"].items():
        counts = (f"kernels {s['kernels_per_call']:.0f} (read {s['expected_kernels']}), memcpy "
                  f"{s['memcpy_per_call']:.0f} (read {s['expected_memcpy']})") if cuda else \
            f"kernels read {s['expected_kernels']}, memcpy read {s['expected_memcpy']}"
        print(f"  {t:5s} {s['GBps']:7.0f} GB/s, clone {s['clone_GBps']:7.0f} GB/s, ratio {s['ratio']:.3f}; {counts}")
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
