"""Real decode latency under DisTorch-style offload, for tiersim's DisTorch presets.

A Hugging Face model with random weights (decode_latency.build) is split as ComfyUI-MultiGPU's DisTorch
V2 splits it: its own allocation function (distorch_2.py's analyze_safetensor_loading, path given,
run with stubs for ComfyUI as experiments/frameworks/distorch_allocations.py does) on the model's leaf
modules with this machine's real device totals. Leaf modules assigned to the cpu are kept as ordinary
pageable host tensors and copied to the GPU when their forward runs, freed after: on the compute stream
(--streams compute: older ComfyUI's cast per forward; decode_latency.LayerStreamer with one unit per
leaf module) or on two offload streams taken in turn (--streams offload: current ComfyUI).
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


class OffloadStreamCasts:
    """Current ComfyUI's casts (comfy/ops.py cast_bias_weight with offload streams, NUM_STREAMS = 2): each
    cpu leaf module's weights are copied when its forward runs, on one of two offload streams taken in
    turn (the stream used last first waits for the compute stream's work so far, so a copy may overlap
    the previous module's kernels and a stream's buffer is not overwritten early), and the compute
    stream waits for the copy. Freed after the forward, as a cast is."""

    def __init__(self, units, offloaded):
        self.units, self.offloaded = units, set(offloaded)
        self.streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        self.counter = -1
        self.host = {}
        self.handles = []
        for i in self.offloaded:
            params = units[i][0]
            self.host[i] = (params, [p.data.to("cpu") for p in params])  # plain pageable tensors, as DisTorch's .to("cpu")
            for p in params:
                p.data = torch.empty(0, device="cuda", dtype=p.dtype)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        for i, (_, module, _) in enumerate(units):
            if i in self.offloaded:
                self.handles.append(module.register_forward_pre_hook(lambda m, a, i=i: self.before(i)))
                self.handles.append(module.register_forward_hook(lambda m, a, o, i=i: self.after(i)))

    def next_stream(self):
        cur = torch.cuda.current_stream()
        if self.counter >= 0:
            self.streams[self.counter].wait_stream(cur)
        self.counter = (self.counter + 1) % len(self.streams)
        return self.streams[self.counter]

    def before(self, i):
        cur = torch.cuda.current_stream()
        s = self.next_stream()
        params, hosted = self.host[i]
        with torch.cuda.stream(s):
            copies = [h.to("cuda:0", non_blocking=True) for h in hosted]
        cur.wait_stream(s)
        for p, c in zip(params, copies):
            c.record_stream(cur)
            p.data = c

    def after(self, i):
        for p in self.host[i][0]:
            p.data = torch.empty(0, device="cuda", dtype=p.dtype)

    def restore(self):
        for h in self.handles:
            h.remove()
        for params, hosted in self.host.values():
            for p, h in zip(params, hosted):
                p.data = h.to("cuda:0")
        self.host.clear()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


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
    ap.add_argument("--streams", choices=["compute", "offload"], default="compute",
                    help="compute: older ComfyUI's casts on the compute stream; offload: current ComfyUI's two offload streams")
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
        label = f"distorch:{alloc}:{a.streams}"
        device_map = {n: ("cpu" if assign.get(n) == "cpu" else 0) for n in names}
        map_file = f"device_map_{i}.json" if a.streams == "compute" else f"device_map_{i}_{a.streams}.json"
        with open(os.path.join(a.out, map_file), "w") as f:
            json.dump(device_map, f, sort_keys=True)
        streamer = (decode_latency.LayerStreamer(units, offloaded, 0, "pageable") if a.streams == "compute"
                    else OffloadStreamCasts(units, offloaded))
        row = decode_latency.measure(model, cfg.vocab_size, 96 + 8 * i, a.tokens, a.warmup)
        streamer.restore()
        offloaded_bytes = sum(patcher.leaves[k][0] for k in offloaded)
        results = "distorch_decode.jsonl" if a.streams == "compute" else f"distorch_decode_{a.streams}.jsonl"
        decode_latency.record(os.path.join(a.out, results), model=name, config=label, allocation=alloc, streams=a.streams,
                              totals=totals, device_map_file=map_file, offloaded_bytes=offloaded_bytes,
                              offloaded_modules=len(offloaded), setup_s=time.perf_counter() - t,
                              versions={"torch": torch.__version__}, **row)


if __name__ == "__main__":
    main()
