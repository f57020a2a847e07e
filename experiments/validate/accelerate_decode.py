"""Real decode latency under Hugging Face accelerate's own offload, for tiersim's `accelerate` preset.

A model built from a tiersim model description with random weights (decode_latency.build) is saved to
local disk once (safetensors), then loaded back with transformers' from_pretrained(device_map=MODE,
max_memory={0: CAP, "cpu": ...}): accelerate's device map and its AlignDevicesHook runtime (offloaded
leaves copied to the GPU before each forward, freed after) exactly as users run it. Each cap is timed
at fresh and warm sequence lengths (decode_latency.measure); the resident row (every module on cuda:0,
no hooks) is timed in the same process to give this host's speed. One JSON line per configuration,
with the device map's bytes per device.

  python3 experiments/validate/accelerate_decode.py --model traces/models/qwen3-8b.json \
      --caps 12GiB,8GiB --out accelerate_decode.jsonl
"""
import argparse
import collections
import gc
import json
import os
import shutil
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_latency  # noqa: E402


def bytes_per_device(model):
    per = collections.Counter()
    for name, p in model.named_parameters():
        # Offloaded parameters sit on the meta device between forwards; the hook's weights map says where.
        per[str(p.device)] += p.numel() * p.element_size()
    hooks = collections.Counter()
    for module in model.modules():
        hook = getattr(module, "_hf_hook", None)
        if hook is not None and getattr(hook, "offload", False):
            for p in module.parameters(recurse=False):
                hooks["offloaded"] += p.numel() * p.element_size()
    return dict(per), dict(hooks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--caps", default="12GiB,8GiB")
    ap.add_argument("--mode", default="auto")
    ap.add_argument("--host", default="100GiB")
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--dir", default="/tmp/tiersim-random-model")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import accelerate
    import transformers
    name, cfg = decode_latency.load_config(a.model)
    t0 = time.perf_counter()
    model = decode_latency.build(cfg)
    shutil.rmtree(a.dir, ignore_errors=True)
    model.save_pretrained(a.dir, safe_serialization=True)
    del model
    gc.collect()
    torch.cuda.empty_cache()
    print(f"built and saved {name} in {time.perf_counter() - t0:.1f} s", flush=True)
    cls = getattr(transformers, decode_latency.ARCHITECTURES[cfg.model_type][1])
    configs = [("resident", {"": 0}, None)] + [(f"accelerate:{a.mode}:{cap}", a.mode, {0: cap, "cpu": a.host})
                                                for cap in a.caps.split(",")]
    for i, (label, device_map, max_memory) in enumerate(configs):
        t = time.perf_counter()
        model = cls.from_pretrained(a.dir, device_map=device_map, max_memory=max_memory, dtype=torch.bfloat16)
        model.eval()
        load_s = time.perf_counter() - t
        dm = getattr(model, "hf_device_map", {"": 0})
        placed, offloaded = bytes_per_device(model)
        row = decode_latency.measure(model, cfg.vocab_size, 96 + 8 * i, a.tokens, a.warmup)
        decode_latency.record(a.out, model=name, config=label, max_memory=max_memory, load_s=load_s,
                              device_map=dm, bytes_by_device=placed, offloaded_param_bytes=offloaded,
                              versions={"torch": torch.__version__, "transformers": transformers.__version__,
                                        "accelerate": accelerate.__version__}, **row)
        del model
        gc.collect()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
