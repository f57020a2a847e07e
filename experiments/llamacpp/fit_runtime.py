#!/usr/bin/python3
"""Calibrates llama.cpp's runtime profile (calib/runtimes/llamacpp-h100.yaml) from the two calibration models
only (results/validation/llamacpp/raw/calib_bench.jsonl: made-up Qwen3-shaped models of 2 and 16 layers,
hidden 256, Q8_0, whose per-token time is the runtime's fixed costs, not bandwidth). Never from the
validation rows.

  /usr/bin/python3 experiments/llamacpp/fit_runtime.py [--write]

Also ggml's CUDA matrix kernels by weight type (raw/gpu_mul_mat.txt, test-backend-ops perf) and the cost of a
CPU/GPU crossing (raw/calib_nkvo.jsonl: the calibration models with and without --no-kv-offload).

Decode (tg128) per-token time T(L) of the L-layer model, measured with every layer on the GPU (-ngl 99) and
with none (-ngl 0), both at -t 16. tiersim's prediction is linear in the three unknowns where these models
are floor- and overhead-bound: T(L) = T0(L) + per_step + kernel_floor * K(L) (GPU) and T(L) = T0(L) +
per_step + per_cpu_op * N(L) (CPU), with T0, K, N found by running tiersim at two values of each. Two sizes
give two equations per placement: the GPU pair gives per_step and kernel_floor; the CPU pair gives
per_cpu_op (and a CPU-side fixed cost, reported to compare with per_step, not used).
"""
import json
import os
import re
import subprocess
import tempfile
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAW = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "calib_bench.jsonl")
SIM = os.path.join(ROOT, "build", "bin", "sim")
OUT = os.path.join(ROOT, "calib", "runtimes", "llamacpp-h100.yaml")
MODELS = {2: "experiments/llamacpp/models/calib-tiny-2.json", 16: "experiments/llamacpp/models/calib-tiny-16.json"}


def measured(layers, ngl, threads):
    for line in open(RAW):
        r = json.loads(line)
        if (f"calib-tiny-{layers}-" in r["model_filename"] and r["n_gpu_layers"] == ngl and r["n_threads"] == threads
                and r["n_gen"] > 0):
            return 1.0 / r["avg_ts"]
    sys.exit(f"fit_runtime.py: no tg row for {layers} layers, -ngl {ngl}, -t {threads}")


NKVO = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "calib_nkvo.jsonl")
GPU_MM = os.path.join(ROOT, "results", "validation", "llamacpp", "raw", "gpu_mul_mat.txt")
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


def measured_nkvo(layers, nkvo):
    for line in open(NKVO):
        r = json.loads(line)
        if f"calib-tiny-{layers}-" in r["model_filename"] and r["no_kv_offload"] == nkvo and r["n_gen"] > 0:
            return 1.0 / r["avg_ts"]
    sys.exit(f"fit_runtime.py: no tg row for {layers} layers, nkvo {nkvo}")


BASE_RUNTIME = None  # the runtime being calibrated, with its measured kernels: written once, then --set


def base_runtime(gemv, gemm):
    """The runtime file tiersim runs with while calibrating: every key as the written one will have it."""
    fd, path = tempfile.mkstemp(suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(runtime_text("calibrating", 0, 0, 0, 0, gemv, gemm))
    return path


def runtime_text(source, per_step, per_copy, cpu_op, floor, gemv, gemm):
    us = 1e-6
    return f"""# llama.cpp's host costs on the H100 validation host, calibrated by experiments/llamacpp/fit_runtime.py from
# two made-up calibration models only (results/validation/llamacpp/raw/calib_bench.jsonl and calib_nkvo.jsonl)
# and ggml's test-backend-ops (raw/gpu_mul_mat.txt), never from the validation rows.
# Regenerate: /usr/bin/python3 experiments/llamacpp/fit_runtime.py --write
tiersim_runtime: 1
name: llamacpp-h100
description: "llama.cpp 34af94cd9 (ggml CUDA + CPU), host costs calibrated on the H100 validation host"
source: "{source}"
per_launch: "0 us"
per_copy: "{per_copy / us:.2f} us"
per_prefetch: "0 us"
per_step: "{per_step / us:.2f} us"
new_length_attention: "0 us"
peer_copy_sync: "0 us"
peer_copy_overlaps_compute: true
per_cpu_op: "{cpu_op / us:.3f} us"
kernel_floor: "{floor / us:.3f} us"
gpu_gemv: {{{", ".join(f'{t}: "{gemv[t] / 1e9:.0f} GB/s"' for t in sorted(gemv))}}}
gpu_gemm: {{{", ".join(f'{t}: "{gemm[t] / 1e12:.1f} TFLOP/s"' for t in sorted(gemm))}}}
"""


def sim_step(layers, ngl, per_step, floor, cpu_op, per_copy=0.0, dtype="Q8_0", extra=()):
    args = [SIM, "run", "--model", MODELS[layers], "--dtype", dtype, "--hw", "h100-measured", "--policy", "llamacpp",
            "--runtime", BASE_RUNTIME,
            "--ngl", str(ngl), "--threads", "16", "--prompt", "0", "--decode", "128", "--json",
            "--set", f'runtime.per_step={per_step * 1e6:.6f} us', "--set", f'runtime.kernel_floor={floor * 1e6:.6f} us',
            "--set", f'runtime.per_cpu_op={cpu_op * 1e6:.6f} us', "--set", 'runtime.per_launch=0 us',
            "--set", f'runtime.per_copy={per_copy * 1e6:.6f} us', *extra]
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
    # A CPU/GPU crossing: the calibration models (F16) with --no-kv-offload (attention on the CPU) against
    # without, per layer (16 layers less 2), against tiersim's with per_copy 0; the slope is the host time
    # per_copy adds per token on tiersim's critical path (one hand-over a layer: the other overlaps).
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
              + ", ".join(f"{t} {gemv[t] / 1e12:.2f} TB/s at n=1, {gemm[t] / 1e12:.0f} TFLOP/s at n=512" for t in sorted(gemv)))
    print(report)
    if min(per_step, floor, cpu_op, per_copy) < 0:
        sys.exit("fit_runtime.py: a negative cost: the model does not describe these rows")
    source = ("per-token times of 2- and 16-layer models (hidden 256) under llama-bench tg128, -t 16: per_step and "
              "kernel_floor from -ngl 99 (Q8_0), per_cpu_op from -ngl 0 (Q8_0), per_copy (the host time tiersim charges "
              "per CPU/GPU hand-over and per op-offload weight copy: ggml_backend_sched's synchronous split copies) from "
              "--no-kv-offload against without (F16); per_launch 0 (decode graphs are replayed as CUDA graphs); gpu_gemv "
              "and gpu_gemm from ggml's test-backend-ops perf MUL_MAT 4096x14336 on the H100 (raw/gpu_mul_mat.txt). "
              + report.splitlines()[2])
    text = runtime_text(source, per_step, per_copy, cpu_op, floor, gemv, gemm)
    if "--write" in sys.argv:
        with open(OUT, "w") as f:
            f.write(text)
        print("wrote", os.path.relpath(OUT, ROOT))


if __name__ == "__main__":
    main()
