"""tiersim against FLUX's VAE as ComfyUI runs it for FLUX.1 Kontext's job, measured on a lent H200
(experiments/validate/run_kontext_h200_lease.sh: ae_encode.py runs ComfyUI a125cd84's own model.py Encoder and Decoder,
bf16, random weights): the reference image's encode at FluxKontextImageScale's sizes and the decode at 1024 and 1328
square, the GPU part of each. tiersim predicts each with `sim run --image-job` of FLUX.1-dev on the shipped h200-measured
hardware and pytorch-hf-h200 runtime profiles (the job's vae_encode_seconds with --reference WxH, its
vae_decode_seconds with --resolution WxH), nothing fitted to these rows. Writes results/validation/flux-ae-h200/table.md.

  /usr/bin/python3 experiments/validate/ae_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "flux-ae-h200")


def predict(row):
    size = f"{row['width']}x{row['height']}"
    encode = row["stage"] == "ae_encode"
    args = ["run", "--model", "traces/models/flux.1-dev.json", "--steps", "1", "--hw", "h200-measured", "--runtime",
            "pytorch-hf-h200", "--policy", "resident", "--image-job", "--json"]
    args += ["--reference", size, "--resolution", "512x512"] if encode else ["--resolution", size]
    job = json.loads(subprocess.run([SIM] + args, cwd=ROOT, capture_output=True, text=True, check=True).stdout)["image_job"]
    return job["vae_encode_seconds" if encode else "vae_decode_seconds"]


def main():
    rows = [json.loads(line) for line in open(os.path.join(HERE, "ae_encode.jsonl"))]
    lines = ["# FLUX's VAE on an H200, the reference image's encode (FLUX.1 Kontext) and the decode: tiersim against "
             "ComfyUI's own model.py", "",
             "Measured: `ae_encode.jsonl` (`OUT=$OUT bash experiments/validate/run_kontext_h200_lease.sh`, one H200 call; "
             "median of 5 after 2 warm-ups, the GPU part). Predicted: `/usr/bin/python3 experiments/validate/ae_compare.py` "
             "(h200-measured, pytorch-hf-h200).", "", "| stage | size | measured | predicted | error |", "|---|---|---|---|---|"]
    errs = {}
    for r in rows:
        p = predict(r)
        e = (p - r["median_s"]) / r["median_s"]
        errs.setdefault(r["stage"], []).append(e)
        lines.append(f"| {r['stage']} | {r['width']}x{r['height']} | {1000 * r['median_s']:.1f} ms | {1000 * p:.1f} ms | "
                     f"{100 * e:+.1f}% |")
    lines.append("")
    for stage, e in errs.items():
        lines.append(f"- {stage}: {len(e)} rows, mean |error| {100 * sum(abs(x) for x in e) / len(e):.1f}% (worst "
                     f"{100 * max(e, key=abs):+.1f}%)")
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
