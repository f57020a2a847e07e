"""Real decode latency under DisTorch-style offload, for tiersim's DisTorch presets.

A Hugging Face model with random weights (decode_latency.build) is split as ComfyUI-MultiGPU's DisTorch
V2 splits it: its own allocation function (distorch_2.py's analyze_safetensor_loading, path given,
run with stubs for ComfyUI as experiments/frameworks/distorch_allocations.py does) on the model's leaf
modules with this machine's real device totals. Leaf modules assigned to the cpu are kept as ordinary
pageable host tensors and copied to the GPU when their forward runs, on the compute stream, freed
after (older ComfyUI's cast per forward; decode_latency.LayerStreamer with one unit per leaf module).
Each allocation is timed at fresh and warm sequence lengths; the device map it ran is written next to
the results so tiersim can predict exactly that placement (--placement device_map:file=...).

  python3 experiments/validate/distorch_decode.py --model traces/models/qwen3-8b.json \
      --distorch .ext/distorch_2.py --allocations "#cuda:0;4.0;cpu" "#cuda:0;8.0;cpu" --out OUT_DIR
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "frameworks"))
import decode_latency  # noqa: E402
from distorch_allocations import load_distorch  # noqa: E402


class Patcher:
    """ComfyUI's model patcher as DisTorch reads it: the load list of leaf modules with their bytes."""

    def __init__(self, model):
        self.model = model
        self.leaves = []
        for name, m in model.named_modules():
            params = list(m.parameters(recurse=False))
            if not params:
                continue
            if not hasattr(m, "bias"):
                m.bias = None  # comfy ops modules all have the attribute; HF's norms and embeddings do not
            self.leaves.append((sum(p.numel() * p.element_size() for p in params), name, m, params))

    def _load_list(self):
        return [(size, name, m, [("weight", p) for p in params]) for size, name, m, params in self.leaves]


def main():
    import logging
    import psutil
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--distorch", required=True)
    ap.add_argument("--allocations", nargs="+", default=["#cuda:0;4.0;cpu"])
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    logging.disable(logging.CRITICAL)
    os.makedirs(a.out, exist_ok=True)
    totals = {"cuda:0": torch.cuda.mem_get_info(0)[1], "cpu": psutil.virtual_memory().total}
    distorch = load_distorch(a.distorch, totals)
    name, cfg = decode_latency.load_config(a.model)
    model = decode_latency.build(cfg)
    patcher = Patcher(model)
    names = [n for _, n, _, _ in patcher.leaves]
    for i, alloc in enumerate(a.allocations):
        t = time.perf_counter()
        assign = distorch.analyze_safetensor_loading(patcher, alloc, is_clip=False)["block_assignments"]
        units = [(params, m, m) for _, _, m, params in patcher.leaves]
        offloaded = [k for k, n in enumerate(names) if assign.get(n) == "cpu"]
        label = "distorch:" + alloc
        device_map = {n: ("cpu" if assign.get(n) == "cpu" else 0) for n in names}
        map_file = f"device_map_{i}.json"
        with open(os.path.join(a.out, map_file), "w") as f:
            json.dump(device_map, f, sort_keys=True)
        streamer = decode_latency.LayerStreamer(units, offloaded, 0, "pageable")
        row = decode_latency.measure(model, cfg.vocab_size, 96 + 8 * i, a.tokens, a.warmup)
        streamer.restore()
        offloaded_bytes = sum(patcher.leaves[k][0] for k in offloaded)
        decode_latency.record(os.path.join(a.out, "distorch_decode.jsonl"), model=name, config=label, allocation=alloc,
                              totals=totals, device_map_file=map_file, offloaded_bytes=offloaded_bytes,
                              offloaded_modules=len(offloaded), setup_s=time.perf_counter() - t,
                              versions={"torch": torch.__version__}, **row)


if __name__ == "__main__":
    main()
