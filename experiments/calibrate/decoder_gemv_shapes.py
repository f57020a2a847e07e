#!/usr/bin/python3
"""The decode GEMV shapes of the shipped dense decoders that a calibration file has not measured yet, for
`tiersim_calib --only remote_gemv --gemv-shapes FILE` (calib/src/bench_remote_gemv.cu).

    /usr/bin/python3 experiments/calibrate/decoder_gemv_shapes.py --measured results/calib/h200-s29/calib_s29.csv \
        > shapes.txt

A decode step's Linear layers at batch 1 are GEMVs (out rows x in width, bf16): per layer q (heads x head_dim,
hidden), k and v (kv_heads x head_dim, hidden), o (hidden, heads x head_dim), gate and up (intermediate, hidden),
down (hidden, intermediate), and the LM head (vocab, hidden). Every traces/models/*.json whose model_type is a dense
decoder (qwen3, qwen2, llama) contributes its shapes; shapes whose bf16 weight passes 1.6 GiB (the benchmark's limit
on a managed buffer) are left out and named on stderr. A shape measured in any --measured file (its
remote_gemv,gemv_bf16_input_out<O>_in<I> row) is left out too, so the fit can take both files (it refuses a row
measured twice). Output: one "OUT IN" line per shape, ascending, each with the models that have it. Stdlib only.
"""
import argparse
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DENSE = {"qwen3", "qwen2", "llama"}
LIMIT = 1.6 * 2**30  # bytes of one bf16 weight, bench_remote_gemv's and main.cu's limit


def shapes_of(d):
    hidden, inter = d["hidden_size"], d["intermediate_size"]
    heads, kv = d["num_attention_heads"], d.get("num_key_value_heads", d["num_attention_heads"])
    head_dim = d.get("head_dim") or hidden // heads
    return {(heads * head_dim, hidden), (kv * head_dim, hidden), (hidden, heads * head_dim), (inter, hidden),
            (hidden, inter), (d["vocab_size"], hidden)}


def measured(paths):
    done = set()
    for path in paths:
        with open(path) as f:
            for line in f:
                m = re.match(r"remote_gemv,gemv_bf16_input_out(\d+)_in(\d+),", line)
                if m:
                    done.add((int(m.group(1)), int(m.group(2))))
    return done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--measured", action="append", default=[], help="a raw calibration CSV whose shapes to skip")
    a = ap.parse_args()
    done = measured(a.measured)
    owners = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "traces", "models", "*.json"))):
        d = json.load(open(path))
        if d.get("model_type") not in DENSE:
            continue
        for s in shapes_of(d):
            owners.setdefault(s, []).append(d.get("name", os.path.basename(path)))
    print("# decode GEMV shapes (out in) of the shipped dense decoders not yet measured; "
          "experiments/calibrate/decoder_gemv_shapes.py")
    for (out, width), names in sorted(owners.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if (out, width) in done:
            continue
        if out * width * 2 > LIMIT:
            print(f"skipped {out} x {width}: {out * width * 2 / 2**30:.2f} GiB of weight ({', '.join(names)})",
                  file=sys.stderr)
            continue
        print(f"{out} {width}  # {', '.join(sorted(set(names)))}")


if __name__ == "__main__":
    main()
