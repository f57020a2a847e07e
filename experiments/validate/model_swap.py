"""Real seconds of ComfyUI's whole-model moves between a two-expert model's sampler nodes (Wan 2.2 A14B on a small
card), for comparison with sim/pipeline/expert_job's pricing of them.

ComfyUI a125cd84 (comfy/model_patcher.py) unloads a model it evicts whole with ModelPatcher.detach ->
unpatch_model(offload_device): `self.model.to(device_to)` (l.786), every parameter copied to fresh pageable host
memory; and loads one with ModelPatcher.load: each module of its load list, largest first, `.to(device_to)` (l.722).
This builds Wan2.1/2.2-14B's transformer as wan_dit.py does (ComfyUI's WanModel, random weights) with fp8 Linear
weights (dit_iteration.fp8_weights: the template's fp8_scaled files less their scales), then repeats: the whole
model to the CPU (one `.to("cpu")`, timed to a synchronize), then back leaf by leaf, largest first (timed the same
way). Nothing is pinned, as in ComfyUI at that commit.

  python3 experiments/validate/model_swap.py --model traces/models/wan2.2-t2v-a14b.json --repeats 3 --out OUT.jsonl

One JSON line per move: direction (d2h | h2d), bytes, leaves, seconds, repeat, torch, gpu.
"""
import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import wan_dit  # noqa: E402
from dit_iteration import fp8_weights  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    _, params = wan_dit.wan_params(a.model)
    model = fp8_weights(wan_dit.build(params))
    leaves = sorted(wan_dit.leaf_modules(model), key=lambda x: (-x[3], x[0]))
    total = sum(b for _, _, _, b in leaves)
    print(f"{len(leaves)} leaves, {total / 1e9:.2f} GB", file=sys.stderr, flush=True)
    common = dict(model=a.model, leaves=len(leaves), bytes=total, torch=torch.__version__,
                  gpu=torch.cuda.get_device_name(0))
    with open(a.out, "w") as f:
        for r in range(a.repeats):
            torch.cuda.synchronize()
            t = time.perf_counter()
            model.to("cpu")
            torch.cuda.synchronize()
            d2h = time.perf_counter() - t
            t = time.perf_counter()
            for _, m, _, _ in leaves:
                m.to("cuda")
            torch.cuda.synchronize()
            h2d = time.perf_counter() - t
            for direction, s in (("d2h", d2h), ("h2d", h2d)):
                f.write(json.dumps(dict(common, direction=direction, seconds=s, repeat=r)) + "\n")
            print(f"repeat {r}: d2h {d2h:.3f} s ({total / d2h / 1e9:.2f} GB/s), h2d {h2d:.3f} s "
                  f"({total / h2d / 1e9:.2f} GB/s)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
