"""Real decode latency under ComfyUI's native partial loading, for tiersim's comfyui preset.

A Hugging Face model with random weights (decode_latency.build) is partially loaded as ComfyUI v0.19.3
loads it (--disable-dynamic-vram): which leaf modules stay on the GPU is read from
tests/fixtures/comfyui_partial_loads.jsonl, i.e. what ComfyUI's own load_models_gpu / ModelPatcher.load
decided for this model on a card of that size (experiments/frameworks/comfyui_partial_loads.py); the
card is emulated by that budget, the lent GPU is larger. Offloaded modules are kept in pinned host
memory (ComfyUI pins them with cudaHostRegister within 0.9 x RAM) and cast when their forward runs on
two offload streams taken in turn (comfy/ops.py cast_bias_weight; distorch_decode.OffloadStreamCasts),
non-blocking, into fresh allocations; PyTorch's allocator backend is cudaMallocAsync, as ComfyUI's
cuda_malloc.py sets it. Both regimes (fresh and warm lengths) are timed.

  python3 experiments/validate/comfyui_decode.py --model traces/models/qwen3-8b.json \
      --cases linux-16g linux-12g --out OUT_DIR
"""
import os

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync")  # before torch initialises CUDA

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import decode_latency  # noqa: E402
from distorch_decode import OffloadStreamCasts, Patcher  # noqa: E402


class PinnedOffloadStreamCasts(OffloadStreamCasts):
    """OffloadStreamCasts with the host copies pinned, as ComfyUI's pin_memory leaves them."""

    def __init__(self, units, offloaded):
        super().__init__(units, offloaded)
        for i, (params, hosted) in self.host.items():
            self.host[i] = (params, [h.pin_memory() for h in hosted])
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--fixture", default=os.path.join(ROOT, "tests/fixtures/comfyui_partial_loads.jsonl"))
    ap.add_argument("--version", default="v0.19.3")
    ap.add_argument("--cases", nargs="+", default=["linux-16g", "linux-12g"])
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    name, cfg = decode_latency.load_config(a.model)
    model_key = os.path.splitext(os.path.basename(a.model))[0]
    rows = {}
    with open(a.fixture) as f:
        for line in f:
            r = json.loads(line)
            if r["model"] == model_key and r["comfyui"].startswith(a.version):
                rows[r["case"]] = r
    model = decode_latency.build(cfg)
    patcher = Patcher(model)
    names = [n for _, n, _, _ in patcher.leaves]
    for i, case in enumerate(a.cases):
        if case not in rows:
            raise SystemExit(f"{a.fixture}: no case {case} for {model_key} {a.version}")
        r = rows[case]
        on_gpu = {m[0]: m[3] == 1 for m in r["modules"]}
        pinned = {m[0]: m[5] == 1 for m in r["modules"]}
        missing = [n for n in names if n not in on_gpu]
        if missing:
            raise SystemExit(f"fixture modules do not cover the model: {missing[:3]}")
        offloaded = [k for k, n in enumerate(names) if not on_gpu[n]]
        if not all(pinned[names[k]] for k in offloaded):
            raise SystemExit(f"{case}: ComfyUI left some weights pageable; this script pins all")
        t = time.perf_counter()
        units = [(params, m, m) for _, _, m, params in patcher.leaves]
        device_map = {n: ("cpu" if not on_gpu[n] else 0) for n in names}
        map_file = f"device_map_{model_key}_{case}.json"
        with open(os.path.join(a.out, map_file), "w") as f:
            json.dump(device_map, f, sort_keys=True)
        casts = PinnedOffloadStreamCasts(units, offloaded)
        row = decode_latency.measure(model, cfg.vocab_size, 96 + 8 * i, a.tokens, a.warmup)
        casts.restore()
        offloaded_bytes = sum(patcher.leaves[k][0] for k in offloaded)
        if offloaded_bytes != r["offloaded_bytes"]:
            raise SystemExit(f"{case}: offloaded {offloaded_bytes} B, ComfyUI {r['offloaded_bytes']} B")
        decode_latency.record(os.path.join(a.out, "comfyui_decode.jsonl"), model=name, config=f"comfyui:{case}",
                              case=case, comfyui=r["comfyui"], vram_free=r["inputs"]["vram_free"],
                              device_map_file=map_file, offloaded_bytes=offloaded_bytes,
                              offloaded_modules=len(offloaded), setup_s=time.perf_counter() - t,
                              allocator=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                              versions={"torch": torch.__version__}, **row)


if __name__ == "__main__":
    main()
