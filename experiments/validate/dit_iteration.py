"""Real seconds per diffusion iteration of a FLUX.1-shaped DiT, resident and under DisTorch-style offload, for
comparison with tiersim's predictions of the same placements.

One iteration is one forward of the diffusion transformer (batch 1, bf16, no CFG batch: FLUX.1-dev is
guidance-distilled) on one GPU: flux_dit.py's rebuild of ComfyUI's Flux (commit a125cd84b054a57729b5eecab930ca9408719832
of Comfy-Org/ComfyUI: comfy/ldm/flux/model.py Flux.forward_orig, layers.py, math.py) with random weights,
under torch.no_grad(). A W x H image is (H/16)*(W/16) image tokens (VAE /8, then 2x2 packing) plus
512 text tokens (FLUX.1-dev's T5 max_sequence_length).

  python3 experiments/validate/dit_iteration.py --model traces/models/flux.1-dev.json --distorch .ext/distorch_2.py \
      --resolutions 1024x1024 512x512 --allocations none "#cuda:0;4.0;cpu" "#cuda:0;8.0;cpu" "#cuda:0;16.0;cpu" \
      --host-memory pageable pinned --iterations 4 --warmup 2 --out OUT_DIR
  (add --tiny for a quick smoke run: 2 double + 2 single blocks)

Placement: allocation "none" keeps everything on cuda:0 (run once per resolution). Any other allocation
string goes to ComfyUI-MultiGPU's own DisTorch V2 allocation (distorch_2.py's analyze_safetensor_loading,
path given by --distorch, loaded with stubs by experiments/frameworks/distorch_allocations.py) with this
machine's totals (cuda:0's memory, host RAM) and a stand-in model patcher whose _load_list() is built as
comfy/model_patcher.py ModelPatcher._load_list builds it. Its device map, {leaf module name: 0 or "cpu"}
for every module with parameters, is written to OUT_DIR/flux_device_map_<i>.json (i: the allocation's index
in --allocations; the placement depends on neither resolution nor host memory kind), for tiersim's
--placement device_map:file=....
Runtime of the cpu leaves: older ComfyUI's casts (comfy/ops.py cast_bias_weight): a module's weight and
bias are copied to cuda:0 on the compute stream when its forward runs and freed after
(decode_latency.LayerStreamer, one unit per leaf module, no prefetch), from pageable or pinned host memory
(--host-memory). Each configuration: --warmup untimed forwards, then --iterations forwards, each timed by
wall clock between two torch.cuda.synchronize().

Writes one JSON line per (resolution, allocation, host memory) to OUT_DIR/dit_iteration.jsonl: model,
resolution ("WxH"), width, height, image_tokens, text_tokens, allocation, host_memory ("resident" for none,
else pageable | pinned), device_map_file (null for none), offloaded_bytes, offloaded_modules, model_bytes,
leaf_modules, iteration_s (every timed iteration), median_s, warmup_s, iterations, warmup, setup_s (moving
the cpu leaves to host memory), peak_bytes (torch.cuda.max_memory_allocated), torch, gpu, totals, depth,
depth_single_blocks, tiny, sdpa_priority (whether ComfyUI's cuDNN-first backend priority was applied).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "frameworks"))
import decode_latency  # noqa: E402
import flux_dit  # noqa: E402
from distorch_allocations import load_distorch  # noqa: E402


class Patcher:
    """ComfyUI's ModelPatcher as DisTorch reads it: .model, and _load_list() as comfy/model_patcher.py builds it:
    (size, name, module, parameter names) for every module whose parameters are all its own and that has
    some, or that is a comfy op (ComfyUI's LayerNorms: no parameters, size 0), in named_modules() order.
    Flux's RMSNorm (a plain nn.Module) has no `bias` attribute, so DisTorch counts it a tiny block, as in
    ComfyUI (unlike distorch_decode.Patcher, which gives HF norms one)."""

    def __init__(self, model, leaves):
        self.model = model
        sizes = {name: nbytes for name, _, _, nbytes in leaves}
        self.items = [(sizes.get(n, 0), n, m, [p for p, _ in m.named_parameters(recurse=False)])
                      for n, m in model.named_modules() if n in sizes or isinstance(m, torch.nn.LayerNorm)]

    def _load_list(self):
        return list(self.items)


def parse_resolution(s):
    w, h = (int(x) for x in s.lower().split("x"))
    return w, h


def forwards(model, inputs, n):
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        model(**inputs)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return times


def main():
    import logging
    import psutil
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="diffusers transformer config (traces/models/flux.1-dev.json)")
    ap.add_argument("--distorch", required=True, help="ComfyUI-MultiGPU's distorch_2.py")
    ap.add_argument("--resolutions", nargs="+", default=["1024x1024"])
    ap.add_argument("--allocations", nargs="+", default=["none", "#cuda:0;4.0;cpu"],
                    help='"none" (resident) or DisTorch allocation strings')
    ap.add_argument("--host-memory", nargs="+", choices=["pageable", "pinned"], default=["pageable"])
    ap.add_argument("--text-tokens", type=int, default=512)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--tiny", action="store_true", help="2 double + 2 single blocks (smoke run)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    logging.disable(logging.CRITICAL)
    os.makedirs(a.out, exist_ok=True)
    results = os.path.join(a.out, "dit_iteration.jsonl")
    resolutions = [(r, *parse_resolution(r)) for r in a.resolutions]

    totals = {"cuda:0": torch.cuda.mem_get_info(0)[1], "cpu": psutil.virtual_memory().total}
    distorch = load_distorch(a.distorch, totals)
    name, params = flux_dit.flux_params(a.model, tiny=a.tiny)
    t = time.perf_counter()
    model = flux_dit.build(params)
    leaves = flux_dit.leaf_modules(model)
    names = [n for n, _, _, _ in leaves]
    model_bytes = sum(b for _, _, _, b in leaves)
    print(f"{name}: {len(leaves)} leaf modules, {model_bytes / 1e9:.2f} GB, built in {time.perf_counter() - t:.1f} s",
          file=sys.stderr, flush=True)

    # Placements first (host-side only): one device map per allocation.
    placements = []  # (allocation, map file, offloaded leaf indices)
    patcher = Patcher(model, leaves)
    for i, alloc in enumerate(a.allocations):
        if alloc == "none":
            placements.append((alloc, None, []))
            continue
        assign = distorch.analyze_safetensor_loading(patcher, alloc, is_clip=False)["block_assignments"]
        offloaded = [k for k, n in enumerate(names) if assign.get(n) == "cpu"]
        map_file = f"flux_device_map_{i}.json"
        with open(os.path.join(a.out, map_file), "w") as f:
            json.dump({n: ("cpu" if assign.get(n) == "cpu" else 0) for n in names}, f, sort_keys=True)
        placements.append((alloc, map_file, offloaded))

    common = dict(model=name, text_tokens=a.text_tokens, iterations=a.iterations, warmup=a.warmup,
                  model_bytes=model_bytes, leaf_modules=len(leaves), torch=torch.__version__,
                  gpu=torch.cuda.get_device_name(0), totals=totals, depth=params["depth"],
                  depth_single_blocks=params["depth_single_blocks"], tiny=a.tiny,
                  sdpa_priority=flux_dit.SDPA_PRIORITY is not None)
    inputs = {r: flux_dit.make_inputs(params, w, h, a.text_tokens) for r, w, h in resolutions}
    units = [(p, m, m) for _, m, p, _ in leaves]

    def measure(res, alloc, host_memory, map_file, offloaded, setup_s):
        r, w, h = res
        torch.cuda.reset_peak_memory_stats()
        warm = forwards(model, inputs[r], a.warmup)
        times = forwards(model, inputs[r], a.iterations)
        row = dict(common, resolution=r, width=w, height=h, image_tokens=(w // 16) * (h // 16), allocation=alloc,
                   host_memory=host_memory, device_map_file=map_file,
                   offloaded_bytes=sum(leaves[k][3] for k in offloaded), offloaded_modules=len(offloaded),
                   iteration_s=times, median_s=statistics.median(times), warmup_s=warm, setup_s=setup_s,
                   peak_bytes=torch.cuda.max_memory_allocated())
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{name} {r:>9} {alloc:<18} {host_memory:<8} offloaded {row['offloaded_bytes'] / 1e9:6.2f} GB "
              f"({len(offloaded)} modules)  median {row['median_s']:.3f} s/it  "
              f"[{' '.join(f'{x:.3f}' for x in times)}]  warmup [{' '.join(f'{x:.3f}' for x in warm)}]",
              file=sys.stderr, flush=True)

    with torch.no_grad():  # not inference_mode: the streamer swaps parameters' .data between forwards
        for alloc, map_file, offloaded in placements:
            if alloc == "none":
                for res in resolutions:
                    measure(res, alloc, "resident", None, [], 0.0)
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
                continue
            for host_memory in a.host_memory:
                t = time.perf_counter()
                streamer = decode_latency.LayerStreamer(units, offloaded, 0, host_memory)
                setup_s = time.perf_counter() - t
                for res in resolutions:
                    measure(res, alloc, host_memory, map_file, offloaded, setup_s)
                streamer.restore()  # removes the hooks, weights back on cuda:0, synchronize, empty_cache
                torch.cuda.synchronize()
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
