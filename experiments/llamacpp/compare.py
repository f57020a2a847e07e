#!/usr/bin/python3
"""Predicts every llama-bench row of the llama.cpp validation run with tiersim and writes the error table.

  /usr/bin/python3 experiments/llamacpp/compare.py [--runtime NAME|FILE] [--out results/validation/llamacpp/table.md]
  /usr/bin/python3 experiments/llamacpp/compare.py --graphs --runtime llamacpp-h100 \
      --runtime-nographs llamacpp-h100-nographs --out results/validation/llamacpp/graphs.md

  /usr/bin/python3 experiments/llamacpp/compare.py --moe-routing --runtime llamacpp-h100 \
      --out results/validation/llamacpp/moe_routing.md

--moe-routing: the MoE rows (raw/bench_moe.jsonl, 2026-11-23; raw/routing/bench_moe_routing.jsonl, measured
2026-11-24 beside the capture; raw/routing/bench_moe_long.jsonl, 2048-token prompts on a later machine that day, "(b)")
each predicted twice: with tiersim's uniform routing and with the routing llama.cpp
itself chose for this file (raw/routing/routing_pp512.json, routing_pp2048.json and routing_tg128.json: capture_routing.cpp, run as
llama-bench runs its tests; `run_on_gpu.sh moe-routing`). The file is the one the rows ran (make_random_gguf.py
is seeded, llama-quantize deterministic); the tokens are other random draws from the same distribution.

--graphs: the rows of raw/graphs.jsonl instead (run_on_gpu.sh graphs: the Q4_K_M files at -ngl 99 and half,
CUDA graphs on and off, measured the same day); a row without graphs is predicted with --runtime-nographs.

Rows: results/validation/llamacpp/raw/bench_q4.jsonl and bench_q8.jsonl (experiments/llamacpp/run_on_gpu.sh
validate-q4 validate-q8 on the lent H100: llama.cpp 34af94cd9, random-weight GGUFs of Qwen3-4B and
Llama-3.1-8B in Q4_K_M and Q8_0). Each row becomes one `sim run` with the strategy the row ran:
`--policy llamacpp --ngl N --threads T` plus --no-kv-offload or --override-tensor, on h100-measured (whose
host.cpu_kernels were measured by cpu_matmul_bench, apart from these rows). pp512 is predicted as 512 /
prefill seconds of a 512-token prompt from an empty cache (one micro-batch); tg128 as the decode tokens/s
of 128 tokens from an empty cache (--prompt 0 --decode 128). Nothing here is fitted to the rows.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAW = os.path.join(ROOT, "results", "validation", "llamacpp", "raw")
SIM = os.path.join(ROOT, "build", "bin", "sim")
MODELS = {"qwen3-4b": "traces/models/qwen3-4b.json", "llama-3.1-8b": "traces/models/llama-3.1-8b.json",
          "qwen3-30b-a3b-L24": "experiments/llamacpp/models/qwen3-30b-a3b-L24.json"}


def rows(graphs=False, moe=False):
    names = ("graphs.jsonl",) if graphs else ("bench_moe.jsonl",) if moe else ("bench_q4.jsonl", "bench_q8.jsonl")
    for name in names:
        with open(os.path.join(RAW, name)) as f:
            for line in f:
                r = json.loads(line)
                if graphs and "calib-tiny" in r["model_filename"]:
                    continue  # calibration rows (fit_runtime.py), not validation
                yield r


def describe(r):
    base = os.path.basename(r["model_filename"])[: -len(".gguf")]
    model, quant = base.rsplit("-", 1)
    if quant in ("K_M", "0"):  # Q4_K_M / Q8_0 split at the last '-'
        model, q2 = model.rsplit("-", 1)
        quant = q2 + "_" + quant
    ot = r.get("tensor_buft_overrides", "none")
    return model, quant, ot


def predict(r, runtime, routing=""):
    model, quant, ot = describe(r)
    args = [SIM, "run", "--model", MODELS[model], "--dtype", quant, "--hw", "h100-measured", "--policy", "llamacpp",
            "--ngl", str(r["n_gpu_layers"]), "--threads", str(r["n_threads"]), "--json",
            # llama-bench never fits (no -fitt) and allocates n_prompt + n_gen tokens of context per test.
            "--fit", "off", "--ctx-size", str(r["n_prompt"] + r["n_gen"])]
    if runtime:
        args += ["--runtime", runtime]
    if r["no_kv_offload"]:
        args.append("--no-kv-offload")
    if r.get("n_cpu_moe", 0) > 0:
        args += ["--n-cpu-moe", str(r["n_cpu_moe"])]
    if ot and ot != "none":
        # llama-bench writes the overrides as PATTERN=BUFT joined with ';'
        for item in ot.split(";"):
            args += ["--override-tensor", item]
    pp = r["n_prompt"] > 0
    if routing:
        name = f"routing_pp{r['n_prompt']}.json" if pp else f"routing_tg{r['n_gen']}.json"
        if not os.path.exists(os.path.join(RAW, "routing", name)):
            sys.exit(f"compare.py: no captured routing for a pp{r['n_prompt']}/tg{r['n_gen']} row ({name})")
        args += ["--routing", "replay:" + os.path.relpath(os.path.join(RAW, "routing", name), ROOT)]
    args += ["--prompt", str(r["n_prompt"]), "--decode", "0"] if pp else ["--prompt", "0", "--decode", str(r["n_gen"])]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("compare.py: " + " ".join(args) + "\n" + out.stderr + out.stdout)
    d = json.loads(out.stdout)
    return (r["n_prompt"] / d["prefill_seconds"]) if pp else d["tps"], " ".join(args[1:]).replace(SIM, "sim")


def moe_routing(runtime, out):
    """The MoE rows with uniform and with captured routing, side by side."""
    lines = ["| measured | llama-bench | test | measured t/s | ± | tiersim, uniform routing | error | "
             "tiersim, llama.cpp's routing | error |", "|---|---|---|---|---|---|---|---|---|"]
    errs = {"uniform": [], "captured": []}
    groups = {}
    for label, path in (("2026-11-23", os.path.join(RAW, "bench_moe.jsonl")),
                        ("2026-11-24", os.path.join(RAW, "routing", "bench_moe_routing.jsonl")),
                        ("2026-11-24 (b)", os.path.join(RAW, "routing", "bench_moe_long.jsonl"))):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                uni, _ = predict(r, runtime)
                cap, _ = predict(r, runtime, routing=True)
                meas = r["avg_ts"]
                test = f"pp{r['n_prompt']}" if r["n_prompt"] > 0 else f"tg{r['n_gen']}"
                setup = f"-ngl {r['n_gpu_layers']} -t {r['n_threads']}"
                if r.get("n_cpu_moe", 0) > 0:
                    setup += f" -ncmoe {r['n_cpu_moe']}"
                eu, ec = (uni - meas) / meas, (cap - meas) / meas
                errs["uniform"].append(abs(eu))
                errs["captured"].append(abs(ec))
                key = test + (" GPU only" if "-ncmoe" not in setup and setup.startswith("-ngl 99") else " experts or layers on the CPU")
                groups.setdefault(key, []).append((abs(eu), abs(ec)))
                lines.append(f"| {label} | `{setup}` | {test} | {meas:.1f} | {100 * r['stddev_ts'] / meas:.1f}% | "
                             f"{uni:.1f} | {100 * eu:+.1f}% | {cap:.1f} | {100 * ec:+.1f}% |")
    lines += ["", "| rows | n | uniform routing | llama.cpp's routing |", "|---|---|---|---|"]
    n = len(errs["uniform"])
    lines.append(f"| all | {n} | {100 * sum(errs['uniform']) / n:.1f}% | {100 * sum(errs['captured']) / n:.1f}% |")
    for key in sorted(groups):
        g = groups[key]
        lines.append(f"| {key} | {len(g)} | {100 * sum(x[0] for x in g) / len(g):.1f}% | "
                     f"{100 * sum(x[1] for x in g) / len(g):.1f}% |")
    text = "\n".join(lines) + "\n"
    if out:
        with open(out, "w") as f:
            f.write(text)
    sys.stdout.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--graphs", action="store_true")
    ap.add_argument("--runtime-nographs", default="")
    ap.add_argument("--moe", action="store_true")
    ap.add_argument("--moe-routing", action="store_true")
    a = ap.parse_args()
    if a.moe_routing:
        if not a.runtime:
            sys.exit("compare.py: --moe-routing needs --runtime (the rows were predicted with llamacpp-h100)")
        moe_routing(a.runtime, a.out)
        return
    table = []
    for r in rows(a.graphs, a.moe):
        model, quant, ot = describe(r)
        off = a.graphs and not r["cuda_graphs"]
        pred, cmd = predict(r, a.runtime_nographs if off else a.runtime)
        meas = r["avg_ts"]
        test = f"pp{r['n_prompt']}" if r["n_prompt"] > 0 else f"tg{r['n_gen']}"
        setup = f"-ngl {r['n_gpu_layers']} -t {r['n_threads']}"
        if r["no_kv_offload"]:
            setup += " -nkvo 1"
        if r.get("n_cpu_moe", 0) > 0:
            setup += f" -ncmoe {r['n_cpu_moe']}"
        if ot and ot != "none":
            setup += f" -ot {ot}"
        if a.graphs:
            setup += " (CUDA graphs off)" if off else " (CUDA graphs on)"
        table.append((model, quant, setup, test, meas, r["stddev_ts"] / meas, pred, (pred - meas) / meas))
    lines = ["| model | file | llama-bench | test | measured t/s | ± | tiersim t/s | error |", "|---|---|---|---|---|---|---|---|"]
    for m, q, s, t, meas, sd, pred, err in table:
        cell = s.replace("|", "\\|")  # a pipe inside a table cell ends the cell, even in backticks
        lines.append(f"| {m} | {q} | `{cell}` | {t} | {meas:.1f} | {100 * sd:.1f}% | {pred:.1f} | {100 * err:+.1f}% |")

    def mape(sel):
        e = [abs(x[7]) for x in table if sel(x)]
        return (100 * sum(e) / len(e), len(e)) if e else (float("nan"), 0)

    summary = ["", "| rows | n | mean abs error |", "|---|---|---|"]
    for label, sel in [("all", lambda x: True), ("tg128 (decode)", lambda x: x[3].startswith("tg")),
                       ("pp512 (prompt)", lambda x: x[3].startswith("pp")),
                       ("-ngl all, GPU only", lambda x: x[2].startswith("-ngl 99") and "-ot" not in x[2] and "nkvo" not in x[2]),
                       ("--no-kv-offload", lambda x: "nkvo" in x[2]),
                       ("-ot FFN on the CPU", lambda x: "-ot" in x[2]),
                       ("-ngl half", lambda x: x[2].startswith("-ngl 18") or x[2].startswith("-ngl 16")),
                       ("-ngl 0 (CPU)", lambda x: x[2].startswith("-ngl 0")),
                       ("-ncmoe (experts on the CPU)", lambda x: "-ncmoe" in x[2]),
                       ("CUDA graphs on", lambda x: "graphs on" in x[2]),
                       ("CUDA graphs off", lambda x: "graphs off" in x[2])]:
        m, n = mape(sel)
        if n == 0:
            continue
        summary.append(f"| {label} | {n} | {m:.1f}% |")
    if a.graphs:
        # The effect itself: tokens/s without graphs over with, measured the same day, against tiersim's.
        summary += ["", "| model | llama-bench | test | measured off/on | tiersim off/on |", "|---|---|---|---|---|"]
        for m, q, s_, t, meas, sd, pred, err in table:
            if "graphs on" not in s_:
                continue
            twin = [x for x in table if x[0] == m and x[1] == q and x[3] == t and x[2] == s_.replace("graphs on", "graphs off")]
            if twin:
                setup = s_.replace(" (CUDA graphs on)", "")
                summary.append(f"| {m} {q} | `{setup}` | {t} | {twin[0][4] / meas:.3f} | {twin[0][6] / pred:.3f} |")
    text = "\n".join(lines + summary) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
