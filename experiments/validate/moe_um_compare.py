"""tiersim against transformers' Qwen3Moe decode in CUDA managed memory, measured on an H100
(results/validation/moe-um/run.sh: experiments/validate/decode_latency.py --managed none|accessed-by|prefer-cpu
with the per-tensor cudaMallocManaged allocator, weights starting in host memory, under transformers 5's
grouped_mm and eager experts implementations, one process per row; a resident row of each implementation on
the same host). Qwen3-30B-A3B's first 24 layers, random bf16 weights, batch 1, 128-token prompt, 3 + 8 decode
steps, each at fresh lengths then again warm in the same process.

tiersim predicts `--model experiments/llamacpp/models/qwen3-30b-a3b-L24.json --policy um|um-accessedby|um-cpu
--allocator per-tensor` (resident: `--policy resident`) on the shipped h100-measured + pytorch-hf-h100 profiles,
nothing fitted, each row with `--routing replay:` the routing its own timed decode made (routing.jsonl, written
by decode_latency.py --routing-out: the prompt's tokens, then each decode step's), so the prediction faults in
and reads the experts the measured run did, and `--experts-impl` the row's experts implementation (grouped_mm,
eager: their kernels and eager's host syncs, counted by experiments/validate/moe_experts_kernels.py). Columns "over resident": the step minus the resident step of the same implementation
and regime, measured on the same host / predicted, which isolates what managed memory adds from what tiersim
gets wrong about the framework's kernels and host (results/validation/moe-hf).

Writes results/validation/moe-um/table.md and prints it.
  /usr/bin/python3 experiments/validate/moe_um_compare.py   (after building; TIERSIM_SIM=path/to/sim)
"""
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "moe-um")
MODEL = "experiments/llamacpp/models/qwen3-30b-a3b-L24.json"
POLICY = {"resident": "resident", "managed:none": "um", "managed:accessed-by": "um-accessedby",
          "managed:prefer-cpu": "um-cpu"}
ROUTING_KEYS = ("tiersim_routing", "num_experts", "experts_per_token", "layers", "source", "sequences")


def sim_args(row, regime, routing_path):
    args = ["--json", "--model", MODEL, "--prompt", str(row["prompt"]), "--decode", str(row["warmup"] + row["tokens"]),
            "--hw", "h100-measured", "--runtime", "pytorch-hf-h100", "--lengths", regime,
            "--policy", POLICY[row["config"]]]
    if row["config"].startswith("managed:"):
        # The harness's weights: random-initialised by GPU kernels, then prefetched to host memory, so a
        # PreferredLocation=CPU block is already mapped (experiments/validate/managed_first_read.cu).
        args += ["--allocator", "per-tensor", "--um-filled", "gpu"]
    return args + ["--routing", f"replay:{routing_path}", "--experts-impl", row["experts_implementation"]]


def predict(row, regime, routing, tmp):
    """tiersim's result for one row and regime, its routing replayed from the measured decode."""
    key = (row["config"], row["experts_implementation"], regime)
    path = os.path.join(tmp, "routing.json")
    with open(path, "w") as f:
        json.dump({k: routing[key][k] for k in ROUTING_KEYS}, f)
    out = subprocess.run([SIM] + sim_args(row, regime, path), capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"sim failed for {key}: {out.stderr}")
    return json.loads(out.stdout)


def pct(pred, meas):
    return f"{100 * (pred - meas) / meas:+.1f}%"


def main():
    rows = [json.loads(line) for line in open(os.path.join(HERE, "moe_um.jsonl"))]
    routing = {}
    for line in open(os.path.join(HERE, "routing.jsonl")):
        r = json.loads(line)
        routing[(r["config"], r["experts_implementation"], r["regime"])] = r
    with tempfile.TemporaryDirectory() as tmp:
        pred = {(r["config"], r["experts_implementation"], g): predict(r, g, routing, tmp)
                for r in rows for g in ("fresh", "warm")}
    resident = {r["experts_implementation"]: r for r in rows if r["config"] == "resident"}

    step = ["| configuration | experts | regime | measured | predicted | error | measured over resident | "
            "predicted over resident |", "|---|---|---|---|---|---|---|---|"]
    errors = []
    for r in rows:
        impl = r["experts_implementation"]
        for g, key in (("fresh", "decode_median_s"), ("warm", "warm_decode_median_s")):
            m, p = r[key], pred[(r["config"], impl, g)]["step_seconds"]
            if r["config"] == "resident":
                over = "", ""
            else:
                over = (f"{(m - resident[impl][key]) * 1e3:+.1f} ms",
                        f"{(p - pred[('resident', impl, g)]['step_seconds']) * 1e3:+.1f} ms")
                errors.append(abs(p - m) / m)
            step.append(f"| {r['config']} | {impl} | {g} | {m * 1e3:.1f} ms | {p * 1e3:.1f} ms | {pct(p, m)} | "
                        f"{over[0]} | {over[1]} |")

    # The resident process's own first prefill (its first forward, as every managed row's is) where it ran the
    # same prompt length: what managed memory adds is the difference, measured and predicted.
    first = ["| configuration | experts | measured prefill (128 tokens, cold) | predicted | error | "
             "measured over resident | predicted over resident | "
             "predicted: migrated to GPU / mapping faults | predicted remote reads per decode step |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        impl = r["experts_implementation"]
        d = pred[(r["config"], impl, "fresh")]
        if r["config"] == "resident":
            first.append(f"| resident | {impl} | {r['prefill_s']:.3f} s ({r['prompt']} tokens) | "
                         f"{d['prefill_seconds']:.3f} s | {pct(d['prefill_seconds'], r['prefill_s'])} | | | | |")
            continue
        mm = d["managed_memory"]
        base = resident[impl]
        over = ("", "")
        if base["prompt"] == r["prompt"]:
            over = (f"+{(r['prefill_s'] - base['prefill_s']) * 1e3:.0f} ms",
                    f"+{(d['prefill_seconds'] - pred[('resident', impl, 'fresh')]['prefill_seconds']) * 1e3:.0f} ms")
        first.append(f"| {r['config']} | {impl} | {r['prefill_s']:.3f} s | "
                     f"{d['prefill_seconds']:.3f} s | {pct(d['prefill_seconds'], r['prefill_s'])} | {over[0]} | {over[1]} | "
                     f"{mm['migrated_to_gpu_bytes'] / 1e9:.2f} GB / {mm['mapping_faults']} | "
                     f"{d['remote_read_bytes_per_step'] / 1e9:.2f} GB |")

    r0 = rows[0]
    lines = ["Decode step (median of the 8 timed steps after 3 warm-up steps; tiersim: median of its 11 decode "
             "steps):", ""] + step + [
        "", f"Managed rows: mean |error| {100 * sum(errors) / len(errors):.1f}% over {len(errors)} rows, worst "
        f"{100 * max(errors):.1f}%.", "",
        "First step of each managed process (the fresh decode's prefill, weights starting in host memory):", ""] + first + [
        "", f"transformers {r0['transformers']}, torch {r0['torch']}, {r0['gpu']}. Resident prompts: grouped_mm 128, "
        "eager 192 (one process, context stride 64); every managed row 128 (a process each). Each row: `sim "
        + " ".join(sim_args(r0, "REGIME", "ROW.json")[1:]).replace(" --policy resident", " --policy POLICY")
        + "` with the row's policy (um, um-accessedby, um-cpu, and `--allocator per-tensor --um-filled gpu`: the harness initialises its weights on the GPU, then prefetches them to host memory) and its routing "
        "(ROW.json: the row's line of routing.jsonl, keys tiersim_routing ... sequences)."]
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
