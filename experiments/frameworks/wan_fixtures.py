"""ComfyUI's own Wan 2.1 text-to-video model and load list, and DisTorch V2's own placement of it, as fixtures for tiersim.

What
  tests/fixtures/wan_modules.jsonl   one line per model (wan2.1-t2v-14b, wan2.1-t2v-1.3b, wan2.2-ti2v-5b):
      {"model", "comfyui": <commit>, "modules": [[name, numel, element_size], ...],
       "all_parameters": [[name, numel, element_size], ...]}
      "modules": the modules of ComfyUI's load list (ModelPatcher._load_list) in its order, which is
      named_modules() order, with the number of parameters each owns and their element size in bytes
      (numel * element_size = comfy.model_management.module_size of the module, asserted). Every parameter
      is bf16 (2) except patch_embedding's, which WanModel builds with dtype=torch.float32 (4) whatever the
      model dtype (comfy/ldm/wan/model.py:475-476). The list includes the LayerNorms built with
      elementwise_affine=False (blocks.N.norm1, blocks.N.norm2, head.norm) with numel 0 and element_size 0
      (they own no parameters, so have no element size, but carry comfy_cast_weights, so _load_list keeps
      them). Names are relative to ComfyUI's WanModel, i.e. the keys of the diffusion-model safetensors file
      without ".weight"/".bias"; inside ComfyUI the patcher's model is model_base.WAN21 and the same names
      carry a "diffusion_model." prefix.
      "all_parameters": every parameter of the model in named_parameters() order, so that what the load
      list leaves out can be seen: the `modulation` nn.Parameter that each WanAttentionBlock
      (model.py:209, shape (1, 6, dim)) and the Head (model.py:346, shape (1, 2, dim)) own directly. By
      _load_list's rule ("skip random weights in non leaf modules": a module that owns parameters and also
      has children with parameters is skipped) the blocks and the head are not in the load list, and so
      their modulations are in no module of it; ComfyUI's forward casts them to the compute device on use
      (comfy.model_management.cast_to, model.py:229/356).
  tests/fixtures/distorch_wan.jsonl  one line per case (Wan2.1-T2V-14B, bf16 with the fp32 patch_embedding):
      {"model", "machine", "allocation", "is_clip": false, "totals", "assignments": {module: device}}
      (sort_keys), the shape of tests/fixtures/distorch_flux.jsonl.

How
  1. experiments/frameworks/flux_fixtures.py's import_comfy (imported, unchanged) reads comfy/ldm/flux/
     {model.py,layers.py,math.py} from a ComfyUI git mirror at COMFYUI_COMMIT into a temporary directory
     (removed afterwards; no ComfyUI code is committed here), imports them as comfy.ldm.flux with stubs for
     what is used only in forward passes (comfy.ops, comfy.ldm.common_dit, comfy.model_management,
     comfy.patcher_extension, comfy.ldm.modules.attention, einops when not installed), and cuts ComfyUI's
     own ModelPatcher._load_list (comfy/model_patcher.py:621-634) and comfy.model_management.module_size
     (model_management.py:440-446) out of their files with ast, to run unchanged. Wan imports EmbedND from
     comfy.ldm.flux.layers and apply_rope1 from comfy.ldm.flux.math, which is why flux is needed.
     Here comfy/rmsnorm.py and comfy/ldm/wan/model.py are read from the same commit and imported as
     comfy.rmsnorm and comfy.ldm.wan.model.
  2. `operations` is a stand-in for comfy.ops.disable_weight_init (comfy/ops.py:97-208; pick_operations
     gives it for bf16 weights computed in bf16): Linear / LayerNorm / Conv2d / Conv3d subclass the torch
     classes, RMSNorm subclasses comfy.rmsnorm.RMSNorm (the real module from the mirror), all with
     comfy_cast_weights = False and a no-op reset_parameters (RMSNorm's sets bias = None, as ops.py:192-194).
     torch 1.13 has no torch.nn.RMSNorm / functional.rms_norm, so comfy/rmsnorm.py:8-13 falls back to its
     own RMSNorm (rmsnorm.py:30-54: weight of normalized_shape when elementwise_affine, bias = None), which
     is what ComfyUI itself uses on such a torch; on torch >= 2.4 it is torch.nn.RMSNorm with the same
     weight and (via reset_parameters) the same bias = None, so the load list and DisTorch's
     hasattr(module, "bias") see the same thing either way.
     WanModel is built on the meta device with dtype=torch.bfloat16 (as model_base.BaseModel does,
     model_base.py:134-140, with unet_config["dtype"] set by set_inference_dtype; model_base.py:1098-1100
     class WAN21 passes unet_model=comfy.ldm.wan.model.WanModel), patch_embedding staying float32.
     Configuration, from comfy/model_detection.py:377-422 (detect_unet_config, the Wan 2.1 branch) at that
     commit, with the shapes of the released checkpoints: dim = head.modulation.shape[-1] (5120 / 1536),
     out_dim = head.head.weight.shape[0] // 4 = 64 // 4 = 16, num_heads = dim // 128 (40 / 12),
     ffn_dim = blocks.0.ffn.0.weight.shape[0] (13824 / 8960), num_layers = count of blocks.N (40 / 30),
     patch_size (1, 2, 2), freq_dim 256, window_size (-1, -1), qk_norm True, cross_attn_norm True, eps 1e-6,
     in_dim = patch_embedding.weight.shape[1] = 16, model_type "t2v" (no vace / control_adapter / audio /
     face_adapter keys, no img_emb.proj.0.bias), no flf_pos_embed_token_number, no in_dim_ref_conv;
     text_len 512 and text_dim 4096 are WanModel's defaults (model.py:392-415; detection does not set them).
     comfy/supported_models.py:985-1016 class WAN21_T2V: unet_config {"image_model": "wan2.1",
     "model_type": "t2v"}, supported_inference_dtypes [float16, bfloat16, float32], get_model ->
     model_base.WAN21.
  3. The load list is ComfyUI's own _load_list run against the meta model, (module_size, name, module,
     [param names]) per entry.
  4. DisTorch V2: ComfyUI-MultiGPU's distorch_2.py (path given on the command line; the copy read was
     pollockjj/ComfyUI-MultiGPU a38cbda5fb64232bfa67867d55ae473d2c44d54e, blob 093f9fe9886d, printed at run
     time) is loaded by load_distorch of experiments/frameworks/distorch_allocations.py (stubs for its imports,
     get_total_memory from the machine's totals) and analyze_safetensor_loading(patcher, allocation,
     is_clip=False) runs unchanged with flux_fixtures.Patcher, whose _load_list() returns the list of step 3
     and whose .model is the meta WanModel (DisTorch's virtual-VRAM mode sums weight/bias of
     model.named_modules(), so it too misses the modulations, which sit on no module's weight/bias).
     DisTorch sees the real module objects: hasattr(module, "bias") is True for all of Wan's (Linear,
     Conv3d, LayerNorm with None when affine is off, RMSNorm with None), so only its tiny-block threshold
     (0.01% of the load list's bytes) sends blocks to the compute device unconditionally.

Commits read
  ComfyUI (Comfy-Org/ComfyUI) a125cd84b054a57729b5eecab930ca9408719832 (2025-10-12): comfy/ldm/wan/model.py,
  comfy/rmsnorm.py, comfy/ldm/flux/{model,layers,math}.py (blob ids printed at run time);
  comfy/model_patcher.py, comfy/model_management.py (executed parts); comfy/ops.py, comfy/model_detection.py,
  comfy/supported_models.py, comfy/model_base.py (read for the configuration and the stand-ins).
  ComfyUI-MultiGPU (pollockjj/ComfyUI-MultiGPU) a38cbda5fb64232bfa67867d55ae473d2c44d54e: distorch_2.py.

Command (repo root; torch for /usr/bin/python3 is Debian's python3-torch 1.13, CPU is enough):
  /usr/bin/python3 experiments/frameworks/wan_fixtures.py .ext/distorch_2.py tests/fixtures
Environment: COMFYUI_GIT (default /work/.mirror/Comfy-Org+ComfyUI/repo), a git dir holding COMFYUI_COMMIT.
"""
import importlib
import importlib.util
import json
import logging
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import flux_fixtures as ff  # noqa: E402  (git_show, blob_id, stub, import_comfy, StandInOps, Patcher)
from flux_fixtures import COMFYUI_COMMIT, COMFYUI_GIT  # noqa: E402

WAN_FILES = ["comfy/rmsnorm.py", "comfy/ldm/wan/model.py"]

# detect_unet_config's Wan 2.1 branch with the shapes of the released checkpoints (see the docstring)
WAN_CONFIG = dict(image_model="wan2.1", model_type="t2v", patch_size=(1, 2, 2), text_len=512, in_dim=16,
                  out_dim=16, freq_dim=256, text_dim=4096, window_size=(-1, -1), qk_norm=True,
                  cross_attn_norm=True, eps=1e-6)
# Wan 2.2's TI2V-5B: the same branch with a 48-channel latent in and out (detect_unet_config reads in_dim from
# patch_embedding, out_dim from head.head; supported_models.WAN22_T2V matches out_dim 48).
MODELS = {"wan2.1-t2v-14b": dict(WAN_CONFIG, dim=5120, ffn_dim=13824, num_heads=40, num_layers=40),
          "wan2.1-t2v-1.3b": dict(WAN_CONFIG, dim=1536, ffn_dim=8960, num_heads=12, num_layers=30),
          "wan2.2-ti2v-5b": dict(WAN_CONFIG, dim=3072, ffn_dim=14336, num_heads=24, num_layers=30, in_dim=48,
                                 out_dim=48)}
EXPECTED_PARAMS = {"wan2.1-t2v-14b": 14_288_491_584, "wan2.1-t2v-1.3b": 1_418_996_800,
                   "wan2.2-ti2v-5b": 4_999_787_712}

DISTORCH_MODEL = "wan2.1-t2v-14b"
CASES = [  # (machine, allocation string as the DisTorch2 nodes build it); totals: distorch_allocations.TOTALS
    ("1gpu", "#cuda:0;4.0;cpu"),              # the DisTorch2 node's defaults (virtual_vram_gb 4, donor cpu)
    ("1gpu", "#cuda:0;8.0;cpu"),
    ("1gpu", "#cuda:0;16.0;cpu"),
    ("1gpu", "cuda:0,50%;cpu,50%#cuda:0"),     # expert ratio mode
    ("2gpu", "#cuda:0;12.0;cuda:1"),
]


def make_ops(rmsnorm):
    """comfy.ops.disable_weight_init's Linear / LayerNorm / RMSNorm / Conv2d / Conv3d as far as construction,
    the load list and DisTorch see them."""
    class WanOps(ff.StandInOps):
        class RMSNorm(rmsnorm.RMSNorm):
            comfy_cast_weights = False
            weight_function = []
            bias_function = []

            def reset_parameters(self):
                self.bias = None
                return None

        class Conv2d(torch.nn.Conv2d):
            comfy_cast_weights = False
            weight_function = []
            bias_function = []

            def reset_parameters(self):
                return None

        class Conv3d(torch.nn.Conv3d):
            comfy_cast_weights = False
            weight_function = []
            bias_function = []

            def reset_parameters(self):
                return None
    return WanOps


def import_wan(tmp):
    """comfy.ldm.wan.model and comfy.rmsnorm from the mirror (on top of flux_fixtures.import_comfy's flux
    package and stubs), ComfyUI's _load_list, and the operations stand-in."""
    _, load_list = ff.import_comfy(tmp)
    os.makedirs(os.path.join(tmp, "comfy", "ldm", "wan"))
    for path in WAN_FILES:
        data = ff.git_show(path)
        print(f"  {path} blob {ff.blob_id(data)[:12]}")
        with open(os.path.join(tmp, path), "wb") as f:
            f.write(data)
    # comfy.rmsnorm: ComfyUI's module itself (its torch-without-RMSNorm fallback on torch 1.13)
    spec = importlib.util.spec_from_file_location("comfy.rmsnorm", os.path.join(tmp, "comfy", "rmsnorm.py"))
    rmsnorm = importlib.util.module_from_spec(spec)
    sys.modules["comfy.rmsnorm"] = rmsnorm
    sys.modules["comfy"].rmsnorm = rmsnorm
    logging.disable(logging.WARNING)  # its "Please update pytorch to use native RMSNorm"
    spec.loader.exec_module(rmsnorm)
    logging.disable(logging.NOTSET)
    print(f"  comfy.rmsnorm.RMSNorm is {rmsnorm.RMSNorm.__module__}.{rmsnorm.RMSNorm.__qualname__} "
          f"(torch {torch.__version__})")
    ff.stub("comfy.ldm.wan").__path__ = [os.path.join(tmp, "comfy", "ldm", "wan")]
    wan_model = importlib.import_module("comfy.ldm.wan.model")
    return wan_model, load_list, make_ops(rmsnorm)


def element_size(m):
    sizes = {p.element_size() for p in m.parameters(recurse=False)}
    assert len(sizes) <= 1, sizes
    return sizes.pop() if sizes else 0


def build(wan_model, load_list, ops, config):
    model = wan_model.WanModel(dtype=torch.bfloat16, device="meta", operations=ops, **config)
    for n, p in model.named_parameters():
        want = torch.float32 if n.startswith("patch_embedding.") else torch.bfloat16
        assert p.device.type == "meta" and p.dtype == want, (n, p.device, p.dtype)
    items = load_list(ff.Patcher(model, []))  # _load_list reads only self.model
    for size, name, m, params in items:
        numel = sum(p.numel() for p in m.parameters(recurse=False))
        assert size == numel * element_size(m), (name, size, numel)
    return model, items


def main(distorch_path, out_dir):
    print(f"ComfyUI {COMFYUI_COMMIT} from {COMFYUI_GIT}")
    with tempfile.TemporaryDirectory() as tmp:
        wan_model, load_list, ops = import_wan(tmp)
        built = {name: build(wan_model, load_list, ops, cfg) for name, cfg in MODELS.items()}

    rows = []
    for name, (model, items) in built.items():
        modules = [[n, sum(p.numel() for p in m.parameters(recurse=False)), element_size(m)]
                   for _, n, m, _ in items]
        params = [[n, p.numel(), p.element_size()] for n, p in model.named_parameters()]
        in_list = {f"{n}.{p}" if n else p for _, n, _, ps in items for p in ps}
        left_out = [x for x in params if x[0] not in in_list]
        assert in_list <= {x[0] for x in params}
        total, listed = sum(x[1] for x in params), sum(x[1] for x in modules)
        assert listed == total - sum(x[1] for x in left_out)
        zero = sum(1 for x in modules if x[1] == 0)
        print(f"{name}: {len(modules)} modules in the load list ({zero} with no parameters), "
              f"{listed:,} parameters, {sum(x[0] for x in items):,} bytes (module_size); "
              f"all parameters {total:,} ({len(params)} tensors, "
              f"{sum(x[1] * x[2] for x in params):,} bytes)")
        names = sorted({x[0].rsplit(".", 1)[-1] if x[0].startswith("blocks.") else x[0] for x in left_out})
        print(f"  left out of the load list: {len(left_out)} tensors, {sum(x[1] for x in left_out):,} "
              f"parameters, {sum(x[1] * x[2] for x in left_out):,} bytes ({', '.join(names)})")
        fp32 = [x for x in modules if x[2] == 4]
        print(f"  fp32 modules: " + ", ".join(f"{x[0]} ({x[1]:,} parameters)" for x in fp32))
        assert total == EXPECTED_PARAMS[name], (name, total)
        rows.append({"model": name, "comfyui": COMFYUI_COMMIT, "modules": modules, "all_parameters": params})
    with open(os.path.join(out_dir, "wan_modules.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")

    model, items = built[DISTORCH_MODEL]
    n = ff.distorch_cases(distorch_path, DISTORCH_MODEL, model, items, CASES, os.path.join(out_dir, "distorch_wan.jsonl"))
    print(f"wrote {out_dir}/wan_modules.jsonl ({len(built)} models), {out_dir}/distorch_wan.jsonl "
          f"({n} cases)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
