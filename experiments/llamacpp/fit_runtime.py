#!/usr/bin/python3
"""Calibrates llama.cpp's runtime profile (calib/runtimes/llamacpp-h100.yaml) from the two calibration models
only (results/validation/llamacpp/raw/calib_bench.jsonl: made-up Qwen3-shaped models of 2 and 16 layers,
hidden 256, Q8_0, whose per-token time is the runtime's fixed costs, not bandwidth). Never from the
validation rows.

  /usr/bin/python3 experiments/llamacpp/fit_runtime.py [--write]

With --write it also writes calib/runtimes/llamacpp-h100-nographs.yaml: the same costs with CUDA graphs off
(GGML_CUDA_DISABLE_GRAPHS), from the calibration models' -ngl 99 decode rows without graphs
(raw/graphs.jsonl, run_on_gpu.sh graphs): with the kernel floor above fixed, per_step and per_launch (the host
time of each kernel launch, which graph replay saves) from the two sizes.

Also ggml's CUDA matrix kernels by weight type (raw/gpu_mul_mat.txt, test-backend-ops perf) and the cost of a
CPU/GPU crossing (raw/calib_nkvo.jsonl: the calibration models with and without --no-kv-offload).

Decode (tg128) per-token time T(L) of the L-layer model, measured with every layer on the GPU (-ngl 99) and
with none (-ngl 0), both at -t 16. tiersim's prediction is linear in the three unknowns where these models
are floor- and overhead-bound: T(L) = T0(L) + per_step + kernel_floor * K(L) (GPU) and T(L) = T0(L) +
per_step + per_cpu_op * N(L) (CPU), with T0, K, N found by running tiersim at two values of each. Two sizes
give two equations per placement: the GPU pair gives per_step and kernel_floor; the CPU pair gives
per_cpu_op (and a CPU-side fixed cost, reported to compare with per_step, not used).
"""
import csv
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy  # Debian's python3-numpy (python3-matplotlib's dependency)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAW = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "calib_bench.jsonl")
SIM = os.path.join(ROOT, "build", "bin", "sim")
OUT = os.path.join(ROOT, "calib", "runtimes", "llamacpp-h100.yaml")
OUT_NOGRAPHS = os.path.join(ROOT, "calib", "runtimes", "llamacpp-h100-nographs.yaml")
GRAPHS = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "graphs.jsonl")


def tg_seconds(path, layers, **fields):
    """Seconds per decode token (tg128) of the `layers`-layer calibration model in a llama-bench JSONL file,
    the row whose other fields equal `fields`."""
    for line in open(path):
        r = json.loads(line)
        if (f"calib-tiny-{layers}-" in r["model_filename"] and r["n_gen"] > 0
                and all(r[k] == v for k, v in fields.items())):
            return 1.0 / r["avg_ts"]
    sys.exit(f"fit_runtime.py: no tg row for {layers} layers with {fields} in {os.path.relpath(path, ROOT)}")


def graphs_row(layers, graphs):
    """A calibration model at -ngl 99 with CUDA graphs on or off (raw/graphs.jsonl)."""
    return tg_seconds(GRAPHS, layers, cuda_graphs=graphs)


MODELS = {2: "experiments/llamacpp/models/calib-tiny-2.json", 16: "experiments/llamacpp/models/calib-tiny-16.json"}


def measured(layers, ngl, threads):
    return tg_seconds(RAW, layers, n_gpu_layers=ngl, n_threads=threads)


NKVO = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "calib_nkvo.jsonl")
GPU_MM = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "gpu_mul_mat.txt")
GPU_MM_ID = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "gpu_mul_mat_id.txt")
GPU_GEMV = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "gpu_gemv.csv")
GAP_ON = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "gpu_gemv_graphs.csv")
GAP_OFF = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "gpu_gemv_nographs.csv")
GPU_GEMM = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "gpu_gemm.csv")
BYTES_PER_WEIGHT = {"f16": 2.0, "q8_0": 34 / 32, "q4_k": 144 / 256, "q6_k": 210 / 256}  # ggml block layouts


def gpu_kernels():
    """ggml's CUDA MUL_MAT by weight type from test-backend-ops perf: (gemv B/s at n=1, gemm FLOP/s at n=512)."""
    text = open(GPU_MM).read()
    gemv, gemm = {}, {}
    for m in re.finditer(r"MUL_MAT\(type_a=(\w+),type_b=f32,m=(\d+),n=(\d+),k=(\d+)[^)]*\):.*?([\d.]+) us/run", text, re.S):
        t, rows, n, k, us = m.group(1).lower(), int(m.group(2)), int(m.group(3)), int(m.group(4)), float(m.group(5))
        if t not in BYTES_PER_WEIGHT:
            continue
        if n == 1:
            gemv[t] = rows * k * BYTES_PER_WEIGHT[t] / (us * 1e-6)
        elif n == 512:
            gemm[t] = 2.0 * rows * k * n / (us * 1e-6)
    if not gemv or not gemm:
        sys.exit("fit_runtime.py: no MUL_MAT n=1 / n=512 rows in " + GPU_MM)
    return gemv, gemm


@functools.lru_cache(maxsize=None)  # one fit per run: the runtime texts and the report all read it
def gpu_gemv_rows():
    """ggml's CUDA matrix-vector product by weight type, measured at the models' decode shapes with the weights
    streamed from HBM (raw/gpu_gemv.csv: cpu_matmul_bench --backend gpu, run_on_gpu.sh calib-gemv): one block per
    output row, so the time is fixed + rows x (time of one row), and a row's time depends on its length. For each
    type, least squares on the relative error over its shapes, linear in the unknowns: the fixed time and one row
    time per row length measured (a point wherever the rows are a tenth of some shape's time or more). Returns {type: (fixed s, [(bytes per row, B/s), ...] ascending)} and a report."""
    by_type = read_gpu_products(GPU_GEMV, 1)
    out, report = {}, []
    for t, v in sorted(by_type.items()):
        widths = sorted({c for _, c, _ in v})
        # unknowns: fixed, then one row time per width; each row i: (fixed + rows_i x r_w) / T_i = 1
        n = 1 + len(widths)
        a = [[0.0] * n for _ in range(n)]
        b = [0.0] * n
        for rows, cols, sec in v:
            x = [1.0 / sec] + [rows / sec if c == cols else 0.0 for c in widths]
            for i in range(n):
                b[i] += x[i]
                for j in range(n):
                    a[i][j] += x[i] * x[j]
        try:
            sol = [float(x) for x in numpy.linalg.solve(numpy.array(a), numpy.array(b))]
        except numpy.linalg.LinAlgError:
            sys.exit(f"fit_runtime.py: {t}: the GEMV rows do not determine the row costs (a singular system)")
        fixed, per_row = sol[0], dict(zip(widths, sol[1:]))
        if fixed < 0 or min(per_row.values()) <= 0:
            sys.exit(f"fit_runtime.py: {t}: a negative fixed or row time; the rows do not fit fixed + rows x row time")
        # A width whose shapes are all bound by the fixed time (its rows under a tenth of the time: 768 wide, 256 rows)
        # leaves its row time undetermined; it stays in the fit (it tells the fixed time) but gives no point.
        shown = [c for c in widths if max(rows * per_row[c] / sec for rows, cc, sec in v if cc == c) >= 0.1]
        points = [(c * BYTES_PER_WEIGHT[t], c * BYTES_PER_WEIGHT[t] / per_row[c]) for c in shown]
        errs = [(fixed + rows * per_row[cols]) / sec - 1 for rows, cols, sec in v]
        out[t] = (fixed, points)
        report.append(f"{t}: fixed {fixed * 1e6:.2f} us; per row " +
                      ", ".join(f"{c} wide {per_row[c] * 1e9:.2f} ns" + ("" if c in shown else " (fixed-bound, no point)") for c in widths) +
                      f"; {len(v)} shapes, mean |error| {sum(map(abs, errs)) / len(errs):.1%}, worst {max(errs, key=abs):+.1%}")
    return out, report


def read_gpu_products(path, batch):
    """cpu_matmul_bench --backend gpu rows at `batch` tokens: {type: [(rows, cols, seconds), ...]}."""
    by_type = {}
    with open(path) as f:
        if f.readline().strip() != "kind,type,rows,cols,batch,threads,seconds,bytes,gbps,gflops":
            sys.exit("fit_runtime.py: unexpected header in " + path)
        for line in f:
            k, t, rows, cols, b, _, sec = line.strip().split(",")[:7]
            if k == "gpu_gemv" and b == str(batch) and t in BYTES_PER_WEIGHT:
                by_type.setdefault(t, []).append((int(rows), int(cols), float(sec)))
    if not by_type:
        sys.exit(f"fit_runtime.py: no gpu_gemv rows at batch {batch} in {path}")
    return by_type


@functools.lru_cache(maxsize=None)
def gpu_gemm_rows():
    """ggml's CUDA prompt-sized product (MMQ; cuBLAS for F16) by weight type at 512 tokens, the models' shapes
    (raw/gpu_gemm.csv: cpu_matmul_bench --backend gpu --batch 512, run_on_gpu.sh calib-gemm). MMQ tiles the weight's
    rows and runs a stream-k fix-up that does not shrink with them, so a matrix of few rows runs far below the rate:
    time = fixed + FLOPs x (rows + extra_rows) / rows / rate. Least squares on the relative error over each type's
    shapes: a grid over extra_rows (0-8000, step 25) and fixed (0-20 us, step 0.25 us), the rate solved for each.
    Returns {type: (fixed s, rate FLOP/s, extra_rows)} and a report."""
    out, report = {}, []
    for t, v in sorted(read_gpu_products(GPU_GEMM, 512).items()):
        best = None
        for ci in range(321):
            c = 25.0 * ci
            a = [2.0 * 512 * cols * (rows + c) for rows, cols, _ in v]
            for fi in range(81):
                t0 = 0.25e-6 * fi
                # residual (t0 + a_i x) / s_i - 1, x = 1 / rate: linear least squares in x
                num = sum(ai / s * (1 - t0 / s) for ai, (_, _, s) in zip(a, v))
                den = sum((ai / s) ** 2 for ai, (_, _, s) in zip(a, v))
                x = num / den
                if x <= 0:
                    continue
                err = sum(((t0 + ai * x) / s - 1) ** 2 for ai, (_, _, s) in zip(a, v))
                if best is None or err < best[0]:
                    best = (err, t0, 1 / x, c)
        _, t0, rate, c = best
        errs = [(t0 + 2.0 * 512 * cols * (rows + c) / rate) / s - 1 for rows, cols, s in v]
        out[t] = (t0, rate, c)
        report.append(f"{t}: fixed {t0 * 1e6:.2f} us, {rate / 1e12:.1f} TFLOP/s, extra rows {c:.0f}; {len(v)} shapes, "
                      f"mean |error| {sum(map(abs, errs)) / len(errs):.1%}, worst {max(errs, key=abs):+.1%}")
    return out, report


def gpu_expert_kernels():
    """ggml's CUDA MUL_MAT_ID by weight type (test-backend-ops perf, Qwen3-30B-A3B's 128 experts, 8 used, 768 x 2048,
    ids uniform per token; run_on_gpu.sh calib-gpu-moe): (B/s of the used experts' weights at n=1, FLOP/s at n=512)."""
    text = open(GPU_MM_ID).read()
    gemv, gemm = {}, {}
    pat = r"MUL_MAT_ID\(type_a=(\w+),type_b=f32,n_mats=(\d+),n_used=(\d+),b=0,m=(\d+),n=(\d+),k=(\d+)\):.*?([\d.]+) us/run"
    for m in re.finditer(pat, text, re.S):
        t, used, rows, n, k, us = m.group(1).lower(), int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6)), float(m.group(7))
        if t not in BYTES_PER_WEIGHT:
            continue
        if n == 1:
            gemv[t] = used * rows * k * BYTES_PER_WEIGHT[t] / (us * 1e-6)
        elif n == 512:
            gemm[t] = 2.0 * used * rows * k * n / (us * 1e-6)
    if not gemv or not gemm:
        sys.exit("fit_runtime.py: no MUL_MAT_ID n=1 / n=512 rows in " + GPU_MM_ID)
    return gemv, gemm


def measured_nkvo(layers, nkvo):
    return tg_seconds(NKVO, layers, no_kv_offload=nkvo)


BASE_RUNTIME = None  # the runtime being calibrated, with its measured kernels: written once, then --set


def base_runtime(gemv, gemm):
    """The runtime file tiersim runs with while calibrating: every key as the written one will have it."""
    fd, path = tempfile.mkstemp(suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(runtime_text("calibrating", 0, 0, 0, 0, gemv, gemm))
    return path


def runtime_text(source, per_step, per_copy, cpu_op, floor, gemv, gemm, per_launch=0.0, graphs=True, gap=0.0):
    us = 1e-6
    name = "llamacpp-h100" if graphs else "llamacpp-h100-nographs"
    head = ("# llama.cpp's host costs on the H100 validation host, calibrated by experiments/llamacpp/fit_runtime.py from\n"
            "# two made-up calibration models only (results/validation/llamacpp/raw/calib_bench.jsonl and calib_nkvo.jsonl)\n"
            "# and ggml's kernels (test-backend-ops: raw/gpu_mul_mat.txt, gpu_mul_mat_id.txt; cpu_matmul_bench --backend gpu:\n"
            "# raw/gpu_gemv.csv, gpu_gemm.csv), never from the validation rows.\n")
    if not graphs:
        head = ("# llama.cpp's host costs on the H100 validation host with CUDA graphs off (GGML_CUDA_DISABLE_GRAPHS),\n"
                "# calibrated by experiments/llamacpp/fit_runtime.py from two made-up calibration models only\n"
                "# (results/validation/llamacpp/raw/calib_bench.jsonl, calib_nkvo.jsonl, graphs.jsonl) and ggml's\n"
                "# kernels (raw/gpu_mul_mat.txt, gpu_mul_mat_id.txt, gpu_gemv.csv, gpu_gemm.csv, gpu_gemv_graphs.csv,\n"
                "# gpu_gemv_nographs.csv), never from the validation rows.\n")
    what = "" if graphs else ", CUDA graphs off (GGML_CUDA_DISABLE_GRAPHS)"
    gemv_id, gemm_id = gpu_expert_kernels()
    rows_text = "".join(
        f'  {t}: {{fixed: "{fixed * 1e6:.3f} us", rows: [' + ", ".join(f'["{b:g} B", "{r / 1e9:.1f} GB/s"]' for b, r in pts) + "]}\n"
        for t, (fixed, pts) in sorted(gpu_gemv_rows()[0].items()))
    gemm_text = "".join(f'  {t}: {{fixed: "{t0 * 1e6:.2f} us", rate: "{rate / 1e12:.1f} TFLOP/s", extra_rows: {c:.0f}}}\n'
                        for t, (t0, rate, c) in sorted(gpu_gemm_rows()[0].items()))
    launch_text = "0 us" if per_launch == 0 else f"{per_launch / us:.3f} us"
    gap_text = "" if gap == 0 else f'gpu_launch_gap: "{gap / us:.3f} us"\n'
    return f"""{head}# Regenerate: /usr/bin/python3 experiments/llamacpp/fit_runtime.py --write
tiersim_runtime: 1
name: {name}
description: "llama.cpp 34af94cd9 (ggml CUDA + CPU){what}, host costs calibrated on the H100 validation host"
source: "{source}"
per_launch: "{launch_text}"
per_copy: "{per_copy / us:.2f} us"
per_prefetch: "0 us"
per_step: "{per_step / us:.2f} us"
new_length_attention: "0 us"
peer_copy_sync: "0 us"
peer_copy_overlaps_compute: true
per_cpu_op: "{cpu_op / us:.3f} us"
kernel_floor: "{floor / us:.3f} us"
{gap_text}gpu_gemv: {{{", ".join(f'{t}: "{gemv[t] / 1e9:.0f} GB/s"' for t in sorted(gemv))}}}
gpu_gemm: {{{", ".join(f'{t}: "{gemm[t] / 1e12:.1f} TFLOP/s"' for t in sorted(gemm))}}}
gpu_gemv_id: {{{", ".join(f'{t}: "{gemv_id[t] / 1e9:.0f} GB/s"' for t in sorted(gemv_id))}}}
gpu_gemm_id: {{{", ".join(f'{t}: "{gemm_id[t] / 1e12:.1f} TFLOP/s"' for t in sorted(gemm_id))}}}
gpu_gemv_rows:
  source: "ggml's CUDA matrix-vector products at 20 decode shapes of the validation and calibration models, weights streamed from HBM (cpu_matmul_bench --backend gpu, raw/gpu_gemv.csv; fit_runtime.py: fixed + rows x row time, least squares per type)"
{rows_text}gpu_gemm_rows:
  source: "ggml's CUDA matrix products at 512 tokens (MMQ; cuBLAS for f16) at the same 20 shapes, weights in GPU memory (cpu_matmul_bench --backend gpu --batch 512, raw/gpu_gemm.csv; fit_runtime.py: fixed + FLOPs x (rows + extra_rows) / rows / rate, least squares per type)"
{gemm_text}"""


def launch_gap():
    """The GPU's own gap per host-launched kernel: ggml's quantized matrix-vector products (quantize_q8_1 and MMVQ,
    two kernels a product) timed with CUDA graphs and with GGML_CUDA_DISABLE_GRAPHS=1, one after the other
    (raw/gpu_gemv_graphs.csv, gpu_gemv_nographs.csv), on the shapes where the GPU, not the host's two launches,
    is the bottleneck (8 us or more a product with graphs): the median difference, per kernel."""
    def read(path):
        with open(path) as f:
            return {(r["type"], r["rows"], r["cols"]): float(r["seconds"]) for r in csv.DictReader(f)}
    on, off = read(GAP_ON), read(GAP_OFF)
    diffs = sorted(off[k] - on[k] for k in on if k[0] in ("q4_k", "q8_0") and k in off and on[k] >= 8e-6)
    if len(diffs) < 5:
        sys.exit("fit_runtime.py: too few GPU-bound products in " + os.path.relpath(GAP_ON, ROOT))
    gap = statistics.median(diffs) / 2
    return gap, (f"launch gap: {len(diffs)} GPU-bound q4_k/q8_0 products, median {statistics.median(diffs) * 1e6:.3f} us "
                 f"slower per product without graphs (two kernels) -> gpu_launch_gap {gap * 1e6:.3f} us")


def sim_step(layers, ngl, per_step, floor, cpu_op, per_copy=0.0, dtype="Q8_0", extra=(), per_launch=0.0, gap=0.0):
    args = [SIM, "run", "--model", MODELS[layers], "--dtype", dtype, "--hw", "h100-measured", "--policy", "llamacpp",
            "--runtime", BASE_RUNTIME,
            "--ngl", str(ngl), "--threads", "16", "--prompt", "0", "--decode", "128", "--json",
            "--fit", "off", "--ctx-size", "128",  # llama-bench: no fit, n_prompt + n_gen tokens of context
            "--set", f'runtime.per_step={per_step * 1e6:.6f} us', "--set", f'runtime.kernel_floor={floor * 1e6:.6f} us',
            "--set", f'runtime.per_cpu_op={cpu_op * 1e6:.6f} us', "--set", f'runtime.per_launch={per_launch * 1e6:.6f} us',
            "--set", f'runtime.per_copy={per_copy * 1e6:.6f} us', "--set", f'runtime.gpu_launch_gap={gap * 1e6:.6f} us', *extra]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("fit_runtime.py: " + " ".join(args) + "\n" + out.stderr)
    d = json.loads(out.stdout)
    return 1.0 / d["tps"]


def solve(t_a, t_b, base_a, base_b, slope_a, slope_b):
    """t = base + fixed + x * slope for two sizes a, b: returns (fixed, x)."""
    x = ((t_b - base_b) - (t_a - base_a)) / (slope_b - slope_a)
    return (t_a - base_a) - x * slope_a, x


def main():
    global BASE_RUNTIME
    us = 1e-6
    gemv, gemm = gpu_kernels()
    BASE_RUNTIME = base_runtime(gemv, gemm)
    # GPU: every layer on the GPU (-ngl 99); the embedding lookup alone runs on the CPU.
    g = {L: (sim_step(L, 99, 0, 0, 0), (sim_step(L, 99, 0, us, 0) - sim_step(L, 99, 0, 0, 0)) / us) for L in (2, 16)}
    per_step, floor = solve(measured(2, 99, 16), measured(16, 99, 16), g[2][0], g[16][0], g[2][1], g[16][1])
    # CPU: nothing on the GPU (-ngl 0), 16 threads.
    c = {L: (sim_step(L, 0, 0, floor, 0), (sim_step(L, 0, 0, floor, us) - sim_step(L, 0, 0, floor, 0)) / us) for L in (2, 16)}
    cpu_fixed, cpu_op = solve(measured(2, 0, 16), measured(16, 0, 16), c[2][0], c[16][0], c[2][1], c[16][1])
    # A CPU/GPU copy: the calibration models (F16) with --no-kv-offload (each layer's new keys and values copied to
    # the host and stored by the CPU, the cache's views copied back in for the GPU's attention: four synchronous
    # copies a layer) against without, per layer (16 layers less 2), against tiersim's with per_copy 0; the slope is
    # the host time per_copy adds per token on tiersim's critical path.
    nk = ["--no-kv-offload"]
    d_meas = (measured_nkvo(16, True) - measured_nkvo(16, False)) - (measured_nkvo(2, True) - measured_nkvo(2, False))
    def d_sim(pc):
        return ((sim_step(16, 99, per_step, floor, cpu_op, pc, "F16", nk) - sim_step(16, 99, per_step, floor, cpu_op, pc, "F16"))
                - (sim_step(2, 99, per_step, floor, cpu_op, pc, "F16", nk) - sim_step(2, 99, per_step, floor, cpu_op, pc, "F16")))
    crossings = (d_sim(us) - d_sim(0)) / us
    per_copy = (d_meas - d_sim(0)) / crossings
    os.unlink(BASE_RUNTIME)
    report = (f"GPU rows: per-token {measured(2, 99, 16) / us:.1f} us (2 layers), {measured(16, 99, 16) / us:.1f} us (16); "
              f"kernels per token {g[2][1]:.0f} and {g[16][1]:.0f} -> kernel_floor {floor / us:.3f} us, per_step {per_step / us:.1f} us\n"
              f"CPU rows: per-token {measured(2, 0, 16) / us:.1f} us, {measured(16, 0, 16) / us:.1f} us; CPU ops per token "
              f"{c[2][1]:.0f} and {c[16][1]:.0f} -> per_cpu_op {cpu_op / us:.3f} us (CPU-side fixed cost {cpu_fixed / us:.1f} us, "
              f"not used; per_step above is)\n"
              f"4 threads, for reference: {measured(2, 0, 4) / us:.1f} and {measured(16, 0, 4) / us:.1f} us per token\n"
              f"--no-kv-offload: {d_meas / us:.1f} us more per token for 14 more layers, {crossings:.0f} more crossings "
              f"-> per_copy {per_copy / us:.2f} us\n"
              f"GPU MUL_MAT 4096x14336 (test-backend-ops perf): "
              + ", ".join(f"{t} {gemv[t] / 1e12:.2f} TB/s at n=1, {gemm[t] / 1e12:.0f} TFLOP/s at n=512" for t in sorted(gemv))
              + "\nGPU matrix-vector products by rows (raw/gpu_gemv.csv):\n  " + "\n  ".join(gpu_gemv_rows()[1])
              + "\nGPU matrix products at 512 tokens by shape (raw/gpu_gemm.csv):\n  " + "\n  ".join(gpu_gemm_rows()[1]))
    print(report)
    if min(per_step, floor, cpu_op, per_copy) < 0:
        sys.exit("fit_runtime.py: a negative cost: the model does not describe these rows")
    source = ("per-token times of 2- and 16-layer models (hidden 256) under llama-bench tg128, -t 16: per_step and "
              "kernel_floor from -ngl 99 (Q8_0), per_cpu_op from -ngl 0 (Q8_0), per_copy (the host time tiersim charges "
              "per CPU/GPU hand-over and per op-offload weight copy: ggml_backend_sched's synchronous split copies) from "
              "--no-kv-offload against without (F16); per_launch 0 (decode graphs are replayed as CUDA graphs); gpu_gemv "
              "and gpu_gemm from ggml's test-backend-ops perf MUL_MAT 4096x14336 on the H100 (raw/gpu_mul_mat.txt), gpu_gemv_id "
              "and gpu_gemm_id from its MUL_MAT_ID over 128 experts of 768x2048, 8 used, at 1 and 512 tokens (raw/gpu_mul_mat_id.txt); "
              "gpu_gemv_rows (the dense matrix-vector products of a decode, priced by rows) and gpu_gemm_rows (a prompt's, by shape) "
              "from cpu_matmul_bench --backend gpu (raw/gpu_gemv.csv, gpu_gemm.csv). "
              + report.splitlines()[2])
    text = runtime_text(source, per_step, per_copy, cpu_op, floor, gemv, gemm)
    # CUDA graphs off: every kernel launched by the host. Same kernel floor, CPU and copy costs; per_step and
    # per_launch from the two calibration models' -ngl 99 decode rows without graphs (same-day rows with
    # graphs are in graphs.jsonl too, for reference).
    BASE_RUNTIME = base_runtime(gemv, gemm)
    off = {L: graphs_row(L, False) for L in (2, 16)}
    on = {L: graphs_row(L, True) for L in (2, 16)}
    # Launch costs hide behind the GPU's kernels while the host keeps ahead, so the token time is not linear
    # in per_launch: for each per_launch, per_step takes the 2-layer row exactly (it adds once per token;
    # held at 0 where the row is already exceeded, which only the bisection's upper probes reach);
    # bisection finds the per_launch that then gives the 16-layer row.
    gap, report_gap = launch_gap()
    def step_for(launch, clamp=True):
        step = off[2] - sim_step(2, 99, 0, floor, cpu_op, per_copy, per_launch=launch, gap=gap)
        return max(0.0, step) if clamp else step
    def miss(launch):
        return sim_step(16, 99, step_for(launch), floor, cpu_op, per_copy, per_launch=launch, gap=gap) - off[16]
    lo, hi = 0.0, 100 * us
    if miss(lo) > 0 or miss(hi) < 0:
        sys.exit(f"fit_runtime.py: no per_launch in 0-100 us gives both rows without graphs ({miss(lo) / us:+.1f}, {miss(hi) / us:+.1f} us)")
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if miss(mid) < 0 else (lo, mid)
    launch = (lo + hi) / 2
    step_off = step_for(launch, clamp=False)
    n = {L: (sim_step(L, 99, 0, floor, cpu_op, per_copy, per_launch=launch + us, gap=gap) -
             sim_step(L, 99, 0, floor, cpu_op, per_copy, per_launch=launch, gap=gap)) / us for L in (2, 16)}
    os.unlink(BASE_RUNTIME)
    report_off = (f"CUDA graphs off: per-token {off[2] / us:.1f} us (2 layers), {off[16] / us:.1f} us (16) "
                  f"[with graphs the same day: {on[2] / us:.1f} and {on[16] / us:.1f}]; host-bound launches per token {n[2]:.0f} "
                  f"and {n[16]:.0f} -> per_launch {launch / us:.3f} us, per_step {step_off / us:.1f} us; " + report_gap)
    print(report_off)
    if min(step_off, launch) < 0:
        sys.exit("fit_runtime.py: a negative cost without graphs: the model does not describe these rows")
    source_off = ("per-token times of 2- and 16-layer models (hidden 256) under llama-bench tg128, -t 16, -ngl 99, "
                  "GGML_CUDA_DISABLE_GRAPHS=1 (raw/graphs.jsonl): per_step and per_launch with kernel_floor, per_cpu_op, "
                  "per_copy and the GPU kernels of llamacpp-h100; gpu_launch_gap from cpu_matmul_bench --backend gpu with "
                  "and without graphs (raw/gpu_gemv_graphs.csv, gpu_gemv_nographs.csv). " + report_off)
    text_off = runtime_text(source_off, step_off, per_copy, cpu_op, floor, gemv, gemm, launch, graphs=False, gap=gap)
    if "--write" in sys.argv:
        with open(OUT, "w") as f:
            f.write(text)
        print("wrote", os.path.relpath(OUT, ROOT))
        with open(OUT_NOGRAPHS, "w") as f:
            f.write(text_off)
        print("wrote", os.path.relpath(OUT_NOGRAPHS, ROOT))


if __name__ == "__main__":
    main()
