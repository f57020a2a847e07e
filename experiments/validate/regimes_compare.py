#!/usr/bin/python3
"""Measured against predicted for the compute-bound and batched regimes of a resident model
(experiments/validate/regimes.py: prefill at long prompts, decode at batch 1..64), with the shipped
profiles unchanged: nothing is fitted here.

    /usr/bin/python3 experiments/validate/regimes_compare.py     (repository root; TIERSIM_SIM=another sim)

Reads results/validation/regimes/regimes.jsonl (the `run_on_gpu.sh regimes` call: the headline) and, if
present, regimes_decode48.jsonl (decode measured again in a later call, 48 tokens a point, batches in
another order: shown beside the headline); writes results/validation/regimes/{table.md, comparison.csv}.
A batch size measured again in one process (repeat > 0: batch 1 again after batch 64, the host's drift)
is shown, not counted in the means.
Per point, `sim run` with the flags compare.py uses for a resident row (--model, --hw, --runtime,
--policy resident, --engine, --lengths, --json), plus:
  prefill: --batch 1 --prompt P --decode 1, the JSON's prefill_seconds (the first step: the forward over
           the prompt, last-token logits and the sample, as regimes.py times it);
  decode:  --batch B --prompt 128 --decode warmup+tokens, the JSON's step_seconds (median decode step).
Headline regime: warm (--lengths warm: the process has run these shapes, no cuDNN plan build), which is
what the warm measurements are. Fresh (--lengths fresh: the runtime's new_length_attention once per step)
is reported beside it. Hardware: the GPU the rows were measured on picks h100-measured + pytorch-hf-h100
or h200-measured + pytorch-hf-h200.
Error = (predicted time - measured time) / measured time (positive: tiersim predicts slower), for decode
the error of the step, as in compare.py; the tokens/s columns are 1/step per sequence and B/step together.
The GPU columns set the profiler's summed kernel time (regimes.py, one extra untimed forward) beside
tiersim's GPU time of the same step, both split into matmul (GEMM/GEMV, LM head included), attention
and other kernels: tiersim's from a --timeline of the run (the cuda:0 compute lane, per step).
"""
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
DIR = os.path.join(ROOT, "results", "validation", "regimes")
MODELS = {"Qwen3-8B": "traces/models/qwen3-8b.json", "Qwen3-14B": "traces/models/qwen3-14b.json",
          "Llama-3.1-8B": "traces/models/llama-3.1-8b.json"}
KIND = {"matmul": ("gemm", "gemv"), "attention": ("attention",)}


def profiles(gpu):
    kind = "h100" if "H100" in gpu else "h200" if "H200" in gpu else None
    if kind is None:
        sys.exit(f"no shipped profile for {gpu}")
    return f"calib/profiles/{kind}-measured.yaml", f"calib/runtimes/pytorch-hf-{kind}.yaml"


def sim(row, engine, lengths, timeline=None):
    hw, rt = profiles(row["gpu"])
    decode = 1 if row["regime"] == "prefill" else row["warmup"] + row["tokens"]
    args = [SIM, "run", "--model", MODELS[row["model"]], "--batch", str(row["batch"]), "--prompt", str(row["prompt"]),
            "--decode", str(decode), "--hw", hw, "--runtime", rt, "--policy", "resident", "--engine", engine,
            "--lengths", lengths, "--json"]
    if timeline:
        args += ["--timeline", timeline, "--timeline-steps", "2"]
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        sys.exit(f"sim failed for {row['model']} {row['regime']} {row['prompt']} x{row['batch']}: {p.stderr}")
    d = json.loads(p.stdout)
    return d["prefill_seconds"] if row["regime"] == "prefill" else d["step_seconds"]


def gpu_split(row):
    """tiersim's GPU seconds of the prefill (step 1) or of the first decode step (step 2), by kernel kind."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "timeline.json")
        sim(row, "event", "warm", path)
        with open(path) as f:
            d = json.load(f)
    events = d["traceEvents"] if isinstance(d, dict) else d
    # The cuda:0 compute track, found by its name (the timeline's track numbers moved when it gained a steps track).
    compute = [e["tid"] for e in events if e.get("ph") == "M" and e.get("args", {}).get("name") == "cuda:0 compute"]
    lane = [e for e in events if e.get("ph") == "X" and e.get("tid") == compute[0]]
    steps, cur = [], {"matmul": 0.0, "attention": 0.0, "other": 0.0}
    for e in lane:
        name = e["name"]
        if name.startswith("end-of-step"):
            steps.append(cur)
            cur = {"matmul": 0.0, "attention": 0.0, "other": 0.0}
            continue
        op = name.split()[0]
        kind = next((k for k, ops in KIND.items() if op in ops), "other")
        cur[kind] += e["dur"] * 1e-6
    return steps[0] if row["regime"] == "prefill" else steps[1]


def err(pred, meas):
    return (pred - meas) / meas


def main():
    rows = []
    with open(os.path.join(DIR, "regimes.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    again = {}
    path48 = os.path.join(DIR, "regimes_decode48.jsonl")
    if os.path.exists(path48):
        with open(path48) as f:
            for line in f:
                if line.strip():
                    x = json.loads(line)
                    again[(x["model"], x["batch"], x.get("repeat", 0))] = x
    first_forward = {}  # each model runs in its own process: its first row is that process's first forward
    for r in rows:
        first_forward.setdefault(r["model"], r)
    out = []
    for r in rows:
        meas_w = r["median_s"]
        meas_f = r["fresh_s"] if r["regime"] == "prefill" else r["fresh_median_s"]
        ev_w, an_w = sim(r, "event", "warm"), sim(r, "analytic", "warm")
        ev_f = sim(r, "event", "fresh")
        split = gpu_split(r)
        prof = r.get("profile", {})
        a = again.get((r["model"], r["batch"], r.get("repeat", 0))) if r["regime"] == "decode" else None
        out.append(dict(model=r["model"], regime=r["regime"], prompt=r["prompt"], batch=r["batch"], gpu=r["gpu"],
                        repeat=r.get("repeat", 0), measured_s=meas_w, min_s=r["min_s"], max_s=r["max_s"],
                        spread=r["spread"], event_s=ev_w, event_err=err(ev_w, meas_w), min_err=err(ev_w, r["min_s"]),
                        analytic_s=an_w, analytic_err=err(an_w, meas_w),
                        again_s=a["median_s"] if a else None, again_spread=a["spread"] if a else None,
                        again_err=err(ev_w, a["median_s"]) if a else None,
                        fresh_measured_s=meas_f, fresh_event_s=ev_f, fresh_err=err(ev_f, meas_f),
                        # the first forward of the process (one-time start-up), or a pass at lengths and batch
                        # already run (a repeat): not fresh in tiersim's sense
                        fresh_valid=not (r.get("repeat", 0) or r is first_forward.get(r["model"])),
                        kernels_measured_s=prof.get("gpu_busy_s"),
                        matmul_measured_s=prof.get("kernel_s", {}).get("matmul"),
                        attention_measured_s=prof.get("kernel_s", {}).get("attention"),
                        other_measured_s=prof.get("kernel_s", {}).get("other"),
                        gpu_predicted_s=sum(split.values()),
                        gpu_err=err(sum(split.values()), prof["gpu_busy_s"]) if prof else None,
                        matmul_predicted_s=split["matmul"],
                        attention_predicted_s=split["attention"], other_predicted_s=split["other"]))
    with open(os.path.join(DIR, "comparison.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0].keys()))
        w.writeheader()
        w.writerows(out)
    report(out)


def ms(x):
    return "-" if x is None else f"{x * 1e3:.1f}"


def mae(xs, key):
    v = [abs(x[key]) for x in xs if x[key] is not None]
    return 100 * statistics.mean(v) if v else None


def mae_s(xs, key):
    m = mae(xs, key)
    return "-" if m is None else f"{m:.1f}%"


def spread_pct(x):
    return "-" if x is None else f"{100 * x:.0f}%"


def pct(x):
    return "-" if x is None else f"{100 * x:+.1f}%"


def fresh_extra(out):
    d = [x["fresh_measured_s"] - x["measured_s"] for x in out
         if x["regime"] == "decode" and x["batch"] > 1 and not x["repeat"]]
    return f"{min(d) * 1e3:.0f}-{max(d) * 1e3:.0f} ms" if d else "(no such point)"


def report(out):
    gpus = sorted({x["gpu"] for x in out})
    hw_rt = sorted({profiles(g) for g in gpus})
    pre = [x for x in out if x["regime"] == "prefill"]
    dec = [x for x in out if x["regime"] == "decode" and not x["repeat"]]
    counted = pre + dec
    L = [f"# Resident model: prefill at long prompts and batched decode, measured against predicted",
         "",
         f"Measured on {', '.join(gpus)} (eager PyTorch + transformers, random bf16 weights, "
         f"experiments/validate/regimes.py); predicted by `sim run` with "
         + "; ".join(f"`--hw {h} --runtime {r}`" for h, r in hw_rt)
         + " unchanged, `--policy resident`, event engine (analytic beside it). Warm regime: the process "
         "had run the same shapes before (no cuDNN plan build), `--lengths warm`. Error = (predicted time - "
         "measured time) / measured time: positive means tiersim predicts slower. Spread = (slowest - fastest) "
         "/ median over the timed repeats (prefill) or timed tokens (decode).",
         "",
         "## Mean absolute error per regime (warm)",
         "",
         "| regime | points | event engine | analytic engine | worst (event) | decode measured again (later call) | "
         "against each point's fastest step | GPU time only: tiersim's GPU time vs the profiler's kernel sum |",
         "|---|---|---|---|---|---|---|---|"]
    for label, xs in (("prefill (batch 1, prompt 512-8192)", pre), ("decode (prompt 128, batch 1-64)", dec),
                      ("all", counted)):
        if xs:
            worst = max(xs, key=lambda x: abs(x["event_err"]))
            L.append(f"| {label} | {len(xs)} | {mae(xs, 'event_err'):.1f}% | {mae(xs, 'analytic_err'):.1f}% | "
                     f"{100 * worst['event_err']:+.1f}% ({worst['model']}, "
                     f"{'prompt ' + str(worst['prompt']) if worst['regime'] == 'prefill' else 'batch ' + str(worst['batch'])}) | "
                     f"{mae_s(xs, 'again_err')} | {mae_s(xs, 'min_err')} | {mae_s(xs, 'gpu_err')} |")
    for model in MODELS:
        for label, xs in (("prefill", pre), ("decode", dec)):
            sub = [x for x in xs if x["model"] == model]
            if sub:
                L.append(f"| {model} {label} | {len(sub)} | {mae(sub, 'event_err'):.1f}% | {mae(sub, 'analytic_err'):.1f}% | "
                         f"{max((100 * x['event_err'] for x in sub), key=abs):+.1f}% | {mae_s(sub, 'again_err')} | "
                         f"{mae_s(sub, 'min_err')} | {mae_s(sub, 'gpu_err')} |")
    L += ["", "Means over the points above (decode: batch 1 measured again at the end of a process is shown below, "
          "not counted). 'Against each point's fastest step': the prediction against the fastest timed repeat or "
          "token instead of the median (a diagnostic for the host's jitter, not the headline). 'GPU time only': "
          "tiersim's GPU time of the step (its cuda:0 compute lane) against the summed kernel time of one profiled "
          "forward at the same point, whatever bounds the step."]
    L += ["", "## Prefill (batch 1, warm)", "",
          "| model | prompt | measured | spread | predicted (event) | error | analytic | error | "
          "GPU kernels measured: all / matmul / attention / other | tiersim GPU: all / matmul / attention / other | "
          "GPU error |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in pre:
        L.append(f"| {x['model']} | {x['prompt']} | {ms(x['measured_s'])} ms | {100 * x['spread']:.0f}% | "
                 f"{ms(x['event_s'])} ms | {100 * x['event_err']:+.1f}% | {ms(x['analytic_s'])} ms | "
                 f"{100 * x['analytic_err']:+.1f}% | {ms(x['kernels_measured_s'])} / {ms(x['matmul_measured_s'])} / "
                 f"{ms(x['attention_measured_s'])} / {ms(x['other_measured_s'])} ms | {ms(x['gpu_predicted_s'])} / "
                 f"{ms(x['matmul_predicted_s'])} / {ms(x['attention_predicted_s'])} / {ms(x['other_predicted_s'])} ms | "
                 f"{pct(x['gpu_err'])} |")
    L += ["", "## Decode (prompt 128, greedy, KV cache, warm)", "",
          "| model | batch | measured step | spread | tok/s per sequence | tok/s aggregate | predicted step (event) | "
          "predicted tok/s per sequence | predicted aggregate | error | analytic | error | measured again (later call) | "
          "spread | error | fastest step | error | "
          "GPU kernels per step measured: all / matmul / attention / other | tiersim GPU: all / matmul / attention / other |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in (x for x in out if x["regime"] == "decode"):
        m, p = x["measured_s"], x["event_s"]
        tag = " (again, last)" if x["repeat"] else ""
        L.append(f"| {x['model']} | {x['batch']}{tag} | {ms(m)} ms | {100 * x['spread']:.0f}% | {1 / m:.2f} | {x['batch'] / m:.1f} | "
                 f"{ms(p)} ms | {1 / p:.2f} | {x['batch'] / p:.1f} | {100 * x['event_err']:+.1f}% | "
                 f"{ms(x['analytic_s'])} ms | {100 * x['analytic_err']:+.1f}% | {ms(x['again_s'])} ms | "
                 f"{spread_pct(x['again_spread'])} | {pct(x['again_err'])} | "
                 f"{ms(x['min_s'])} ms | {pct(x['min_err'])} | "
                 f"{ms(x['kernels_measured_s'])} / {ms(x['matmul_measured_s'])} / {ms(x['attention_measured_s'])} / "
                 f"{ms(x['other_measured_s'])} ms | {ms(x['gpu_predicted_s'])} / {ms(x['matmul_predicted_s'])} / "
                 f"{ms(x['attention_predicted_s'])} / {ms(x['other_predicted_s'])} ms |")
    L += ["", "## Fresh regime (beside the headline)", "",
          "The first forward at a prompt length (prefill), or the first decode pass at a batch size (decode), "
          "against `--lengths fresh` (the runtime's new_length_attention once per step). The first prefill of a "
          "process (prompt 512) also pays one-time start-up costs. At batch > 1 the decode lengths 129.. had "
          "been run at batch 1 in the same process; the first pass at a new batch size still cost "
          + fresh_extra(out) + " a step more than the warm pass, so the cuDNN plan is per shape, batch included.",
          "",
          "| model | regime | prompt | batch | measured fresh | predicted fresh | error |",
          "|---|---|---|---|---|---|---|"]
    for x in out:
        note = "" if x["fresh_valid"] else (" (not fresh: lengths already run)" if x["repeat"] else
                                            " (first forward of the process: start-up costs)")
        L.append(f"| {x['model']} | {x['regime']} | {x['prompt']} | {x['batch']}{note} | {ms(x['fresh_measured_s'])} ms | "
                 f"{ms(x['fresh_event_s'])} ms | {100 * x['fresh_err']:+.1f}% |")
    for label in ("prefill", "decode"):
        xs = [x for x in out if x["regime"] == label and x["fresh_valid"]]
        if xs:
            L.append(f"\nFresh {label}: mean absolute error {mae(xs, 'fresh_err'):.1f}% over {len(xs)} points "
                     f"(the points marked in brackets left out).")
    with open(os.path.join(DIR, "table.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L))


if __name__ == "__main__":
    main()
