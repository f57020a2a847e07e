"""Real seconds and peak memory of the Wan 2.1 VAE's decode (the VAE Qwen-Image uses too) as ComfyUI runs it, on one
GPU, random weights: the validation rows of tiersim's Wan VAE decoder trace (sim/model/vae/wan_vae_decoder_*).

This script runs ComfyUI's own module file, comfy/ldm/wan/vae.py of Comfy-Org/ComfyUI at commit a125cd84 (WanVAE,
Decoder3d, ResidualBlock, CausalConv3d, RMS_norm, Resample, AttentionBlock), given with --comfy-vae (not part of
tiersim: extract it with `git show a125cd84:comfy/ldm/wan/vae.py`). Its three imports from ComfyUI are stood in for:
  comfy.ops.disable_weight_init   Conv2d / Conv3d whose forward is torch's (ComfyUI's only skip weight init)
  comfy.ldm.modules.diffusionmodules.model.vae_attention
                                  pytorch_attention (what vae_attention() returns with PyTorch attention enabled, the
                                  default on an NVIDIA GPU): q, k, v viewed (B, 1, C, HW), transposed, made contiguous,
                                  comfy.ops.scaled_dot_product_attention (comfy_stages.sdpa: ComfyUI's backend
                                  priority), the output transposed back and reshaped.
The model is comfy/sd.py VAE.__init__'s "Wan 2.1 VAE" branch: WanVAE(dim=96, z_dim=16, dim_mult=[1, 2, 4, 4],
num_res_blocks=2, attn_scales=[], temperal_downsample=[False, True, True]) in vae_dtype = bfloat16 on an sm_80+ card
(working_dtypes bf16, fp16, fp32). VAE.decode decodes the whole latent in one call (tiles only after an OOM): the latent
.to(bf16).to(cuda), first_stage_model.decode (WanVAE.decode: conv2, then Decoder3d per latent frame with the causal
feature cache, torch.cat of the output so far), the output .to(cpu).float(), process_output clamp((x + 1) / 2).

Measured per size (WIDTHxHEIGHTxFRAMES; frames = 1 + 4 (latent frames - 1)): --warmup untimed runs, --iterations
timed ones, each the GPU part (latent in, decode) between two torch.cuda.synchronize() and the host part (output to the
cpu as float, clamp) after it. peak_bytes: torch.cuda.max_memory_allocated over the runs (weights included);
reserved_bytes: torch.cuda.max_memory_reserved over the same runs, after empty_cache before them; base_bytes: allocated
before them (the weights). --kernels adds one profiled run per size: every device kernel by name, count, device us.

  python3 experiments/validate/wan_vae_decode.py --comfy-vae .ext/comfy_wan_vae.py --out OUT_DIR
  /usr/bin/python3 experiments/validate/wan_vae_decode.py --comfy-vae .ext/comfy_wan_vae.py --tiny --device cpu \
      --out /tmp/wv          (local smoke run)
Writes OUT/wan_vae_decode.jsonl (one line per size) and, with --kernels, OUT/wan_vae_decode_kernels.jsonl.
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
import types

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import einops  # noqa: F401  (ComfyUI's vae.py imports einops.rearrange)
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "einops_shim"))
from comfy_stages import COMFYUI_COMMIT, Conv2d, probe_sdpa, sdpa  # noqa: E402
from profiler_events import kernels_by_name  # noqa: E402

# comfy/sd.py VAE.__init__, "Wan 2.1 VAE" branch (the same file for Qwen-Image's VAE)
WAN21_DDCONFIG = {"dim": 96, "z_dim": 16, "dim_mult": [1, 2, 4, 4], "num_res_blocks": 2, "attn_scales": [],
                  "temperal_downsample": [False, True, True], "dropout": 0.0}
TINY_DDCONFIG = dict(WAN21_DDCONFIG, dim=8)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def pytorch_attention(q, k, v):
    """comfy/ldm/modules/diffusionmodules/model.py pytorch_attention (the path without an OOM)."""
    shape = q.shape
    b, c = shape[0], shape[1]
    q, k, v = (t.view(b, 1, c, -1).transpose(2, 3).contiguous() for t in (q, k, v))
    return sdpa(q, k, v).transpose(2, 3).reshape(shape)


def load_comfy_wan_vae(path):
    """ComfyUI's comfy/ldm/wan/vae.py as a module, its comfy imports stood in for (see the docstring)."""
    class Conv3d(nn.Conv3d):  # comfy.ops.disable_weight_init.Conv3d (Conv2d: comfy_stages')
        def reset_parameters(self):
            return None

    comfy = types.ModuleType("comfy")
    ops = types.ModuleType("comfy.ops")
    ops.disable_weight_init = types.SimpleNamespace(Conv2d=Conv2d, Conv3d=Conv3d)
    comfy.ops = ops
    model = types.ModuleType("comfy.ldm.modules.diffusionmodules.model")
    model.vae_attention = lambda: pytorch_attention
    for name, mod in (("comfy", comfy), ("comfy.ops", ops), ("comfy.ldm", types.ModuleType("comfy.ldm")),
                      ("comfy.ldm.modules", types.ModuleType("comfy.ldm.modules")),
                      ("comfy.ldm.modules.diffusionmodules", types.ModuleType("comfy.ldm.modules.diffusionmodules")),
                      ("comfy.ldm.modules.diffusionmodules.model", model)):
        sys.modules[name] = mod
    spec = importlib.util.spec_from_file_location("comfy_wan_vae", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def init_random(model, dtype, device, seed=0):
    """Random weights of a sane scale (conv: N(0, 1/fan_in); norms' gamma 1), in `dtype` on `device`."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)
            elif name.endswith("gamma"):
                p.fill_(1.0)
            else:
                p.zero_()
    return model.to(device=device, dtype=dtype).eval()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--comfy-vae", required=True, help="ComfyUI a125cd84's comfy/ldm/wan/vae.py")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", nargs="+", default=None,
                    help="WIDTHxHEIGHTxFRAMES, default 832x480x1 832x480x5 832x480x17 832x480x33 832x480x81 "
                         "1280x720x17 1328x1328x1 1024x1024x1")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--kernels", nargs="*", default=None,
                    help="sizes to profile once more (kernel names, counts, device us); no value: every size")
    ap.add_argument("--ops", nargs="*", default=[],
                    help="sizes to profile once more by PyTorch op and input shapes (count, device us): "
                         "OUT/wan_vae_decode_ops.jsonl")
    ap.add_argument("--tiny", action="store_true", help="a small model (dim 8) for a smoke run")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    device = torch.device(a.device)
    if device.type == "cpu" and not a.tiny:
        sys.exit("--device cpu only with --tiny")
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device")
    if not os.path.isfile(a.comfy_vae):
        sys.exit(f"{a.comfy_vae}: no such file (ComfyUI a125cd84's comfy/ldm/wan/vae.py)")
    os.makedirs(a.out, exist_ok=True)
    sizes = a.sizes or (["64x32x1", "64x32x5"] if a.tiny else
                        ["832x480x1", "832x480x5", "832x480x17", "832x480x33", "832x480x81", "1280x720x17",
                         "1328x1328x1", "1024x1024x1"])
    kernel_sizes = sizes if a.kernels == [] else (a.kernels or [])
    vae_mod = load_comfy_wan_vae(a.comfy_vae)
    cfg = TINY_DDCONFIG if a.tiny else WAN21_DDCONFIG
    dt = DTYPES[a.dtype]
    model = init_random(vae_mod.WanVAE(**cfg), dt, device)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    decoder_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters()
                        if n.startswith("decoder.") or n.startswith("conv2."))
    common = dict(comfyui=COMFYUI_COMMIT, comfy_file="comfy/ldm/wan/vae.py", config=cfg, dtype=a.dtype,
                  torch=torch.__version__, cudnn=torch.backends.cudnn.version() if device.type == "cuda" else None,
                  cudnn_benchmark=torch.backends.cudnn.benchmark,
                  gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                  iterations=a.iterations, warmup=a.warmup, tiny=a.tiny, param_bytes=param_bytes,
                  decoder_param_bytes=decoder_bytes, params=sum(p.numel() for p in model.parameters()))
    g = torch.Generator().manual_seed(1)
    out_path = os.path.join(a.out, "wan_vae_decode.jsonl")
    for size in sizes:
        w, h, frames = (int(s) for s in size.lower().split("x"))
        if w % 8 or h % 8 or (frames - 1) % 4:
            sys.exit(f"{size}: sides multiples of 8, frames 1 + 4k")
        lat_t = 1 + (frames - 1) // 4
        latent = torch.randn(1, cfg["z_dim"], lat_t, h // 8, w // 8, generator=g)  # the sampler's output, cpu fp32
        backend = None
        if device.type == "cuda":
            c_mid = cfg["dim"] * cfg["dim_mult"][-1]
            qv = torch.randn(1, 1, (h // 8) * (w // 8), c_mid, device=device, dtype=dt)
            backend = probe_sdpa(qv, qv, qv)
            del qv
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()

        def gpu_part():
            return model.decode(latent.to(dt).to(device))

        def host_part(out):
            return torch.clamp((out.to("cpu").float() + 1.0) / 2.0, min=0.0, max=1.0).movedim(1, -1)

        times, host_times = [], []
        with torch.no_grad():
            for i in range(a.warmup + a.iterations):
                sync(device)
                t0 = time.perf_counter()
                out = gpu_part()
                sync(device)
                t1 = time.perf_counter()
                pix = host_part(out)
                t2 = time.perf_counter()
                if i >= a.warmup:
                    times.append(t1 - t0)
                    host_times.append(t2 - t1)
                out_shape = list(pix.shape)
                del out, pix
        row = dict(common, width=w, height=h, frames=frames, latent_frames=lat_t, latent_width=w // 8,
                   latent_height=h // 8, output_shape=out_shape, times=times, median_s=statistics.median(times),
                   host_times=host_times, host_median_s=statistics.median(host_times), sdpa_backend=backend)
        if device.type == "cuda":
            row.update(peak_bytes=torch.cuda.max_memory_allocated(), reserved_bytes=torch.cuda.max_memory_reserved(),
                       base_bytes=base)
        if size in kernel_sizes and device.type == "cuda":
            from torch.profiler import ProfilerActivity, profile
            sync(device)
            with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                out = gpu_part()
                sync(device)
            del out
            with open(os.path.join(a.out, "wan_vae_decode_kernels.jsonl"), "a") as f:
                f.write(json.dumps(dict(width=w, height=h, frames=frames, **kernels_by_name(prof))) + "\n")
        if size in a.ops and device.type == "cuda":
            from torch.profiler import ProfilerActivity, profile
            sync(device)
            with torch.no_grad(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                          record_shapes=True) as prof:
                out = gpu_part()
                sync(device)
            del out
            ops = []
            for e in prof.key_averages(group_by_input_shape=True):
                dev_us = getattr(e, "device_time_total", None)
                if dev_us is None:
                    dev_us = getattr(e, "cuda_time_total", 0)
                ops.append([e.key, str(e.input_shapes), e.count, round(dev_us, 1)])
            with open(os.path.join(a.out, "wan_vae_decode_ops.jsonl"), "a") as f:
                f.write(json.dumps(dict(width=w, height=h, frames=frames, ops=ops)) + "\n")
        with open(out_path, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{size:<14} median {row['median_s'] * 1e3:9.1f} ms  host {row['host_median_s'] * 1e3:7.1f} ms  peak "
              f"{(row.get('peak_bytes') or 0) / 1e9:6.2f} GB  reserved {(row.get('reserved_bytes') or 0) / 1e9:6.2f} GB"
              f"  sdpa {backend}  [{' '.join(f'{x * 1e3:.0f}' for x in times)}]", file=sys.stderr, flush=True)
    print(f"wrote {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
