"""DisTorch V2's own allocation code, run on tiersim's models, as fixtures for tiersim's distorch rules.

ComfyUI-MultiGPU is not a dependency: give this script the path of its distorch_2.py (the search tool's
fetch of pollockjj/ComfyUI-MultiGPU; not committed here). Its analyze_safetensor_loading runs unchanged
with small stubs for what it imports (torch.device, comfy.model_management.get_total_memory,
the package's get_device_list and logging helper) and a stand-in model patcher whose _load_list() holds
one leaf module per weight tensor of a tiersim trace (sizes, names and module kinds from `sim gen`),
as ComfyUI's load list does for a text encoder or DiT built from comfy ops (which all have a `bias`
attribute). Writes one JSON line per case: the allocation string, device totals, and DisTorch's
block -> device assignments.

  /usr/bin/python3 experiments/frameworks/distorch_allocations.py PATH/distorch_2.py OUT.jsonl
"""
import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
GIB = 1 << 30
TOTALS = {"1gpu": {"cuda:0": 24 * GIB, "cpu": 64 * GIB},                      # the rtx4090 preset
          "2gpu": {"cuda:0": 24 * GIB, "cuda:1": 24 * GIB, "cpu": 64 * GIB}}  # rtx3090x2-nvlink
CASES = [  # (machine, allocation string as the node builds it, is_clip)
    ("1gpu", "#cuda:0;4.0;cpu", False),               # the DisTorch2 node's defaults
    ("1gpu", "#cuda:0;8.0;cpu", False),
    ("1gpu", "#cuda:0;12.5;cpu", False),
    ("1gpu", "cuda:0,16gb;cpu,*#cuda:0", False),
    ("1gpu", "cuda:0,10gb;cpu,*#cuda:0", False),
    ("1gpu", "cuda:0,75%;cpu,25%#cuda:0", False),
    ("1gpu", "cuda:0,50%;cpu,50%#cuda:0", False),
    ("1gpu", "cuda:0,0.8;cpu,0.5#cuda:0", False),
    ("1gpu", "#cuda:0;4.0;cpu", True),                # a text encoder (CLIP head rule)
    ("1gpu", "cuda:0,60%;cpu,40%#cuda:0", True),
    ("2gpu", "cuda:0,60%;cuda:1,40%#cuda:0", False),
    ("2gpu", "cuda:0,8gb;cuda:1,8gb;cpu,*#cuda:0", False),
    ("2gpu", "#cuda:0;8.0;cuda:1", False),
]
MODELS = ["qwen3-8b", "qwen3-14b", "llama-3.1-8b"]


class Tensor:
    def __init__(self, nbytes):
        self.nbytes = nbytes

    def numel(self):
        return self.nbytes // 2

    def element_size(self):
        return 2


def leaf_kind(name):
    last = name.rsplit(".", 1)[-1]
    if "embed" in last:
        return "Embedding"
    if "norm" in last:
        return "RMSNorm"
    return "Linear"


def load_distorch(path, totals):
    """distorch_2.py as the package module it is, with stubs for what it imports: ComfyUI, the package's
    helpers, and torch where it is not installed (DisTorch's allocation uses only torch.device)."""
    try:
        import torch
    except ImportError:
        torch = types.ModuleType("torch")
        torch.device = lambda s: s
    comfy = types.ModuleType("comfy")
    mm = types.ModuleType("comfy.model_management")
    mm.get_total_memory = lambda dev: totals[str(dev)]
    patcher = types.ModuleType("comfy.model_patcher")
    patcher.ModelPatcher = type("ModelPatcher", (), {})
    comfy.model_management, comfy.model_patcher = mm, patcher
    pkg = types.ModuleType("multigpu")
    pkg.__path__ = []
    device_utils = types.ModuleType("multigpu.device_utils")
    device_utils.get_device_list = lambda: ["cpu"] + sorted(d for d in totals if d != "cpu")
    mgpu = types.ModuleType("multigpu.model_management_mgpu")
    mgpu.multigpu_memory_log = lambda *a, **k: None
    sys.modules.update({"torch": torch, "comfy": comfy, "comfy.model_management": mm, "comfy.model_patcher": patcher,
                        "multigpu": pkg, "multigpu.device_utils": device_utils,
                        "multigpu.model_management_mgpu": mgpu})
    spec = importlib.util.spec_from_file_location("multigpu.distorch_2", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tensors_of(model):
    """(name, bytes) of every weight of the model, in tiersim's (= HF's module) order."""
    with tempfile.NamedTemporaryFile(suffix=".trace") as f:
        subprocess.run([SIM, "gen", "--model", os.path.join(ROOT, "traces", "models", model + ".json"), "--prompt", "0",
                        "--decode", "1", "-o", f.name], check=True, capture_output=True)
        out = []
        for line in open(f.name):
            parts = line.split()
            if parts[:1] == ["tensor"] and parts[2] == "weight":
                out.append((parts[5], int(parts[3])))
        return out


class Patcher:
    def __init__(self, weights):
        self.modules = []
        for name, nbytes in weights:
            m = type(leaf_kind(name), (), {})()
            m.weight, m.bias = Tensor(nbytes), None
            self.modules.append((name, m, nbytes))
        root = self
        self.model = types.SimpleNamespace(named_modules=lambda: [("", root)] + [(n, m) for n, m, _ in root.modules])

    def _load_list(self):
        return [(nbytes, name, m, [("weight", m.weight)]) for name, m, nbytes in self.modules]


def main(distorch_path, out_path):
    logging.disable(logging.CRITICAL)
    rows = []
    for model in MODELS:
        weights = tensors_of(model)
        for machine, alloc, clip in CASES:
            distorch = load_distorch(distorch_path, TOTALS[machine])
            result = distorch.analyze_safetensor_loading(Patcher(weights), alloc, is_clip=clip)
            rows.append({"model": model, "machine": machine, "allocation": alloc, "is_clip": clip,
                         "totals": TOTALS[machine], "assignments": result["block_assignments"]})
    with open(out_path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    print(f"{len(rows)} cases")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
