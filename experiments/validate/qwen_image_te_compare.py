"""tiersim against Qwen-Image's text encoder, Qwen2.5-VL-7B, measured on a lent H200
(experiments/validate/run_qwen_image_h200_lease.sh: qwen25_vl_encode.py runs ComfyUI a125cd84's own qwen_image.py /
llama.py / sd1_clip.py with its tokenizer; bf16 and fp8_scaled weights, random; the prompt in ComfyUI's template, 39 to
1034 tokens through the encoder). tiersim predicts one encode with `sim run --image-job` of Qwen-Image on the shipped
h200-measured hardware and pytorch-hf-h200 runtime profiles, one prompt (--cfg 1, --text-tokens = the row's tokens less
the template's 34), the job's qwen2_5_vl_seconds (the encoder placed whole: 141 GB). Compared with the measured
forward (SDClipModel.encode between two synchronizes: the GPU part; the encode's template cut and copy of the output to
the cpu add 0.5-4 ms, in encode_median_s). Nothing is fitted to these rows; the fp32 GEMM, cast and other rates come
from calibrations at other shapes (results/calib/h200-*). Writes results/validation/qwen-image-te/table.md.

  /usr/bin/python3 experiments/validate/qwen_image_te_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "qwen-image-te")
TEMPLATE_PREFIX = 34  # the template's tokens before the prompt (meta.json: template_prefix, from ComfyUI's tokenizer)


def predict(row):
    out = subprocess.run([SIM, "run", "--model", "traces/models/qwen-image.json", "--resolution", "256x256", "--steps",
                          "1", "--cfg", "1", "--text-tokens", str(row["tokens"] - TEMPLATE_PREFIX), "--hw",
                          "h200-measured", "--runtime", "pytorch-hf-h200", "--policy", "resident", "--image-job",
                          "--text-encoder-dtype", row["weights"], "--json"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["image_job"]["qwen2_5_vl_seconds"]


def main():
    meta = json.load(open(os.path.join(HERE, "meta.json")))
    assert meta["template_prefix"] == TEMPLATE_PREFIX, meta
    rows = [json.loads(line) for line in open(os.path.join(HERE, "qwen25_vl_encode.jsonl"))]
    lines = ["# Qwen-Image's text encoder (Qwen2.5-VL-7B) on an H200: tiersim against ComfyUI's own encoder", "",
             "Measured: `qwen25_vl_encode.jsonl` (`OUT=$OUT bash experiments/validate/run_qwen_image_h200_lease.sh`, one "
             "H200 call; ComfyUI a125cd84's qwen_image.py / llama.py run as they are, random weights; median of 5 after "
             "2 warm-ups). Predicted: `/usr/bin/python3 experiments/validate/qwen_image_te_compare.py` (h200-measured, "
             "pytorch-hf-h200; fp32 GEMM, cast and attention rates calibrated apart, results/calib/h200-*).", "",
             "| weights | tokens | measured forward | predicted | error | encode with output to cpu |",
             "|---|---|---|---|---|---|"]
    errs = []
    for r in rows:
        p = predict(r)
        e = (p - r["forward_median_s"]) / r["forward_median_s"]
        errs.append(e)
        lines.append(f"| {r['weights']} | {r['tokens']} | {1000 * r['forward_median_s']:.1f} ms | {1000 * p:.1f} ms | "
                     f"{100 * e:+.1f}% | {1000 * r['encode_median_s']:.1f} ms |")
    lines += ["", f"{len(errs)} rows: mean |error| {100 * sum(abs(e) for e in errs) / len(errs):.1f}% (worst "
              f"{100 * max(errs, key=abs):+.1f}%)."]
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
