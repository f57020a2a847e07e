"""tiersim against Qwen-Image's other two stages measured on a lent H200, models tiersim had validated on an H100 only
(experiments/validate/run_qwen_image_h200_lease.sh, one call): the Wan 2.1 VAE's decode as ComfyUI a125cd84's own
comfy/ldm/wan/vae.py runs it (wan_vae_decode.py: Qwen-Image's 1328x1328 and 1024x1024 single frames, Wan's 832x480 x
17 frames; bf16, random weights) and Qwen-Image's DiT resident (dit_iteration.py: ComfyUI's model rebuilt, bf16, cfg
2.5 with the prompt's 100 tokens and the empty negative prompt's 5 as two forwards). tiersim predicts each on the shipped
h200-measured hardware (its convolution rates from conv_rate.py at other sizes, results/calib/h200-convolution) and
pytorch-hf-h200 runtime profiles, resident: the VAE's prefill_seconds, the DiT's median s/iteration. Nothing is fitted
to these rows. Writes results/validation/qwen-image-h200/table.md.

  /usr/bin/python3 experiments/validate/qwen_image_h200_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "qwen-image-h200")
MACHINE = ["--hw", "h200-measured", "--runtime", "pytorch-hf-h200", "--policy", "resident", "--json"]


def sim(args):
    return json.loads(subprocess.run([SIM] + args + MACHINE, cwd=ROOT, capture_output=True, text=True, check=True).stdout)


def main():
    lines = ["# Qwen-Image's VAE decode and DiT iterations on an H200: tiersim against measured runs", "",
             "Measured: `wan_vae_decode.jsonl`, `dit_iteration.jsonl` (`OUT=$OUT bash "
             "experiments/validate/run_qwen_image_h200_lease.sh`, one H200 call; VAE: ComfyUI a125cd84's own "
             "comfy/ldm/wan/vae.py, median of 3 after 1 warm-up; DiT: median of 3 iterations after 1). Predicted: "
             "`/usr/bin/python3 experiments/validate/qwen_image_h200_compare.py` (h200-measured, pytorch-hf-h200, "
             "resident).", "", "| stage | size | measured | predicted | error |", "|---|---|---|---|---|"]
    errs = {}
    for line in open(os.path.join(HERE, "wan_vae_decode.jsonl")):
        r = json.loads(line)
        model = "qwen-image-vae" if r["frames"] == 1 else "wan2.1-vae"
        p = sim(["--model", f"traces/models/{model}.json", "--resolution", f"{r['width']}x{r['height']}",
                 "--frames", str(r["frames"])])["prefill_seconds"]
        e = (p - r["median_s"]) / r["median_s"]
        errs.setdefault("VAE decode", []).append(e)
        lines.append(f"| VAE decode | {r['width']}x{r['height']}x{r['frames']} | {1000 * r['median_s']:.1f} ms | "
                     f"{1000 * p:.1f} ms | {100 * e:+.1f}% |")
    for line in open(os.path.join(HERE, "dit_iteration.jsonl")):
        r = json.loads(line)
        j = sim(["--model", "traces/models/qwen-image.json", "--resolution", r["resolution"], "--steps", "3", "--cfg",
                 str(r["cfg"]), "--text-tokens", str(r["text_tokens"]), "--negative-tokens", str(r["negative_tokens"])])
        p = j["step_kinds"]["iteration"]["median_seconds"]
        e = (p - r["median_s"]) / r["median_s"]
        errs.setdefault("DiT iteration", []).append(e)
        lines.append(f"| DiT iteration (bf16, cfg {r['cfg']}) | {r['resolution']} | {r['median_s']:.3f} s | {p:.3f} s | "
                     f"{100 * e:+.1f}% |")
    lines.append("")
    for stage, e in errs.items():
        lines.append(f"- {stage}: {len(e)} rows, mean |error| {100 * sum(abs(x) for x in e) / len(e):.1f}% (worst "
                     f"{100 * max(e, key=abs):+.1f}%)")
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
