"""tiersim against FLUX's other stages measured on a lent H100 (experiments/validate/comfy_stages.py, run by
run_comfy_stages_lease.sh): T5-XXL (fp16 and fp8 weights, 256 and 512 tokens), CLIP-L (77 tokens) and the VAE decode
(512, 1024 and 1328 square), each rebuilt as ComfyUI a125cd84 runs it. tiersim predicts each with
`sim --model traces/models/flux.1-dev.json --image-job` on the shipped h100-measured hardware and pytorch-hf-h100
runtime profiles (the job's t5_seconds, clip_seconds and vae_decode_seconds; nothing calibrated on these rows).
Writes results/validation/comfy_stages/table.md.

  /usr/bin/python3 experiments/validate/stages_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "comfy_stages")


def command(row):
    args = ["--model", "traces/models/flux.1-dev.json", "--steps", "1", "--hw", "h100-measured", "--runtime",
            "pytorch-hf-h100", "--policy", "resident", "--image-job"]
    if row["stage"] == "t5xxl":
        args += ["--text-tokens", str(row["tokens"])]
        if row["weight_dtype"] != "fp16":
            args += ["--text-encoder-dtype", "fp8"]
    if row["stage"] == "vae_decode":
        args += ["--resolution", f"{row['width']}x{row['height']}"]
    return args


def predict(row):
    out = subprocess.run([SIM] + command(row) + ["--json"], cwd=ROOT, capture_output=True, text=True, check=True)
    job = json.loads(out.stdout)["image_job"]
    return {"t5xxl": job["t5_seconds"], "clip_l": job["clip_seconds"], "vae_decode": job["vae_decode_seconds"]}[row["stage"]]


def main():
    rows = [json.loads(line) for line in open(os.path.join(HERE, "comfy_stages.jsonl"))]
    lines = ["# FLUX's text encoders and VAE decode on an H100: tiersim against measured forwards", "",
             "Measured: `comfy_stages.jsonl` (`bash experiments/validate/run_comfy_stages_lease.sh`, see README.md).", "",
             "| stage | weights | size | measured | predicted | error |", "|---|---|---|---|---|---|"]
    errors = {}
    for r in rows:
        if r.get("tiny"):
            continue
        p = predict(r)
        err = (p - r["median_s"]) / r["median_s"]
        errors.setdefault(r["stage"], []).append(err)
        size = f"{r['tokens']} tokens" if r["stage"] != "vae_decode" else f"{r['width']}x{r['height']}"
        lines.append(f"| {r['stage']} | {r['weight_dtype']} | {size} | {1000 * r['median_s']:.1f} ms | {1000 * p:.1f} ms | "
                     f"{100 * err:+.1f}% |")
    lines += [""]
    for stage, errs in errors.items():
        lines.append(f"- {stage}: {len(errs)} rows, mean absolute error {100 * sum(abs(e) for e in errs) / len(errs):.1f}%")
    lines += ["", "Each row: `sim " + " ".join(command(rows[-1])) + "` (that row's settings), its image_job's stage seconds.", ""]
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
