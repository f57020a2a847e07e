"""tiersim against FLUX's other stages measured on a lent H100 (experiments/validate/comfy_stages.py, run by
run_comfy_stages_lease.sh): T5-XXL (fp16 and fp8 weights, 256 and 512 tokens), CLIP-L (77 tokens) and the VAE decode
(512, 1024 and 1328 square), each rebuilt as ComfyUI a125cd84 runs it. tiersim predicts each with
`sim --model traces/models/flux.1-dev.json --image-job` on the shipped h100-measured hardware and pytorch-hf-h100
runtime profiles (the job's t5_seconds, clip_seconds and vae_decode_seconds; nothing calibrated on these rows).
Writes results/validation/comfy_stages/table.md.

  /usr/bin/python3 experiments/validate/stages_compare.py   (after building)
  /usr/bin/python3 experiments/validate/stages_compare.py --dir results/validation/comfy_stages_h200 \
      --hw h200-measured --runtime pytorch-hf-h200 --gpu "an H200"
      (the same stages and Wan's umT5-XXL measured on an H200 by experiments/calibrate/run_fp32_sweep_lease.sh; umT5
       predicted by `sim run --video-job` of Wan 2.1 1.3B at cfg 1, its first video's text_encode seconds)
"""
import argparse
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "comfy_stages")
HW, RUNTIME = "h100-measured", "pytorch-hf-h100"


def command(row):
    if row["stage"] == "umt5xxl":
        return ["--model", "traces/models/wan2.1-t2v-1.3b.json", "--steps", "1", "--cfg", "1", "--text-tokens",
                str(row["tokens"]), "--resolution", "480x320", "--frames", "5", "--hw", HW, "--runtime", RUNTIME,
                "--policy", "resident", "--video-job", "--text-encoder-dtype",
                "fp8" if row["weight_dtype"].startswith("fp8") else "fp16"]
    args = ["--model", "traces/models/flux.1-dev.json", "--steps", "1", "--hw", HW, "--runtime",
            RUNTIME, "--policy", "resident", "--image-job"]
    if row["stage"] == "t5xxl":
        args += ["--text-tokens", str(row["tokens"])]
        if row["weight_dtype"] != "fp16":
            args += ["--text-encoder-dtype", "fp8"]
    if row["stage"] == "vae_decode":
        args += ["--resolution", f"{row['width']}x{row['height']}"]
    return args


def predict(row):
    out = subprocess.run([SIM] + command(row) + ["--json"], cwd=ROOT, capture_output=True, text=True, check=True)
    if row["stage"] == "umt5xxl":
        return json.loads(out.stdout)["video_job"]["first_video"]["text_encode"]["compute_seconds"]
    job = json.loads(out.stdout)["image_job"]
    return {"t5xxl": job["t5_seconds"], "clip_l": job["clip_seconds"], "vae_decode": job["vae_decode_seconds"]}[row["stage"]]


def main():
    global HERE, HW, RUNTIME
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=HERE)
    ap.add_argument("--hw", default=HW)
    ap.add_argument("--runtime", default=RUNTIME)
    ap.add_argument("--gpu", default="an H100")
    ap.add_argument("--lease", default="bash experiments/validate/run_comfy_stages_lease.sh",
                    help="the command that measured the rows, as the table names it")
    a = ap.parse_args()
    HERE, HW, RUNTIME = os.path.join(ROOT, a.dir), a.hw, a.runtime
    rows = [json.loads(line) for line in open(os.path.join(HERE, "comfy_stages.jsonl"))]
    title = "FLUX's and Wan's text encoders" if any(r["stage"] == "umt5xxl" for r in rows) else \
        "FLUX's text encoders and VAE decode"
    lines = [f"# {title} on {a.gpu}: tiersim against measured forwards", "",
             f"Measured: `comfy_stages.jsonl` (`{a.lease}`, see README.md).", "",
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
    lines.append("")
    flux = next((r for r in reversed(rows) if r["stage"] != "umt5xxl"), None)
    wan = next((r for r in reversed(rows) if r["stage"] == "umt5xxl"), None)
    if flux:
        lines.append("Each FLUX row: `sim " + " ".join(command(flux)) + "` (that row's settings), its image_job's stage "
                     "seconds.")
    if wan:
        lines.append("Each umT5 row: `sim " + " ".join(command(wan)) + "` (that row's settings), its video_job's "
                     "first_video.text_encode.compute_seconds.")
    lines.append("")
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
