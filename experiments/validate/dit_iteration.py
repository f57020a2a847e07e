"""Real seconds per diffusion iteration of a FLUX.1- or Wan 2.1-shaped DiT, resident and under DisTorch-style
offload, for comparison with tiersim's predictions of the same placements.

One iteration is one forward of the diffusion transformer (bf16) on one GPU, under torch.no_grad(), with random
weights, built as ComfyUI (Comfy-Org/ComfyUI a125cd84b054a57729b5eecab930ca9408719832) builds it. Weights
(--weight-dtype): bf16; fp8 (every Linear's weight float8_e4m3fn, cast per forward: fp8_weights); or, FLUX only, a
GGUF file type run by ComfyUI-GGUF (city96/ComfyUI-GGUF 795e451): Q8_0, Q6_K, Q5_K_S, Q5_K_M, Q4_K_S, Q4_K_M, Q4_0
(gguf_weights.py). Its type rule (tools/convert.py, then llama-quantize with tools/lcpp.patch): biases and norm
scales F32; the 2-D weights of txt_in., img_in., time_in., vector_in., guidance_in., final_layer. stay BF16; every
other Linear weight gets the file type's base type (Q8_0, Q6_K, Q5_K, Q4_K, Q4_0), except "attn.qkv.weight"
(img_attn.qkv, txt_attn.qkv) in Q4_K_M -> Q5_K and in Q5_K_M -> Q6_K (img_tensor_get_type). Each Linear's forward
runs ComfyUI-GGUF's own dequantize_tensor from the carried dequant.py (--gguf-dequant; it imports `gguf`, which
gguf_shim/ stands in for): ops.py GGMLLayer.cast_bias_weight, F32 bias .to(bf16), weight .to(device) then
dequantized to bf16 on the GPU, then F.linear. Norms stay bf16. The builder
follows the config's _class_name:
  FluxTransformer2DModel  flux_dit.py (comfy/ldm/flux: Flux.forward_orig, layers.py, math.py). A W x H image is
                          (H/16)*(W/16) image tokens (VAE /8, then 2x2 packing) plus 512 text tokens (T5).
  WanTransformer3DModel   wan_dit.py (comfy/ldm/wan/model.py: WanModel t2v, _forward). A W x H video of F frames
                          (--frames, default 81) is a latent (16, (F-1)//4+1, H/8, W/8) (Wan VAE: 4x temporal,
                          8x spatial), latent_frames*(H/16)*(W/16) tokens (1x2x2 patches), cross-attending to
                          512 UMT5 tokens (the tokenizer's min_length).
  QwenImageTransformer2DModel  qwen_image_dit.py (comfy/ldm/qwen_image/model.py). A W x H image is (H/16)*(W/16)
                          image tokens plus --text-tokens Qwen2.5-VL tokens (no padding: the prompt's own length).
Classifier-free guidance (--cfg, default 1.0): with cfg != 1 ComfyUI runs cond and uncond in ONE forward at
batch 2 when memory allows (--cond-batch together, the default, assumes it does; --cond-batch comfy decides as
ComfyUI does, from this process's free memory, below) (comfy/samplers.py: sampling_function drops uncond only when
math.isclose(cond_scale, 1.0); _calc_cond_batch concatenates the conds that can_concat_cond allows, i.e. same
latent shape and same context shape, into one apply_model call if model.memory_required(batch shape) * 1.5 <
free memory). So cfg != 1 doubles the batch here. FLUX.1-dev is guidance-distilled (run at cfg 1: batch 1).
Qwen-Image's text is a CONDRegular (model_base.py QwenImage.extra_conds), which concatenates only with a cond of the
same shape: with --negative-tokens N other than --text-tokens, cond and uncond run as two forwards of batch 1 each
(the positive prompt's, then the negative one's), and an iteration is both.

  python3 experiments/validate/dit_iteration.py --model traces/models/flux.1-dev.json --distorch .ext/distorch_2.py \
      --resolutions 1024x1024 512x512 --allocations none "#cuda:0;4.0;cpu" "#cuda:0;8.0;cpu" "#cuda:0;16.0;cpu" \
      --host-memory pageable pinned --iterations 4 --warmup 2 --out OUT_DIR
  python3 experiments/validate/dit_iteration.py --model traces/models/wan2.1-t2v-14b.json --distorch .ext/distorch_2.py \
      --resolutions 832x480 --frames 17 33 --cfg 6 --allocations none "#cuda:0;8.0;cpu" "#cuda:0;16.0;cpu" \
      --host-memory pageable pinned --iterations 3 --warmup 1 --out OUT_DIR
  (add --tiny for a quick smoke run: 2 double + 2 single blocks for FLUX, 2 blocks for Wan)

--cond-batch comfy: at the start of each configuration (its placement made, before the warm-up) the harness takes
ComfyUI's own decision (comfy/samplers.py _calc_cond_batch at a125cd84): cond and uncond as one forward of batch 2
when model.memory_required(batch-2 shape) * 1.5 < model_management.get_free_memory() (torch.cuda.mem_get_info's free
plus the caching allocator's reserved-but-inactive bytes), else two forwards of batch 1 (the positive prompt's, then
the negative one's). model_base.memory_required's flash/SDPA branch: area x 2 (bf16) x 0.01 x memory_usage_factor
MiB, area = batch x prod(latent shape[2:]), memory_usage_factor FLUX 3.1, Qwen-Image 1.8, Wan dim / 2222
(comfy/supported_models.py). --occupy-gb G allocates and holds G GB on cuda:0 once a placement is made (before its
first measurement), standing for a smaller card's free memory; tiersim is given the GPU's memory less it.

Placement: allocation "none" keeps everything on cuda:0 (run once per resolution and frame count). Any other
allocation string goes to ComfyUI-MultiGPU's own DisTorch V2 allocation (distorch_2.py's
analyze_safetensor_loading, path given by --distorch, loaded with stubs by
experiments/frameworks/distorch_allocations.py) with this machine's totals (cuda:0's memory, host RAM) and a
stand-in model patcher whose _load_list() is built as comfy/model_patcher.py ModelPatcher._load_list builds it.
Parameters of modules outside that load list (Wan: blocks.N.modulation, head.modulation; FLUX: none) are never
moved by DisTorch's partially_load, so they stay on ComfyUI's offload device, the cpu (comfy/sd.py
load_diffusion_model_state_dict: model.to(unet_offload_device())), and WanAttentionBlock / Head cast them to the
GPU each forward (comfy.model_management.cast_to): here they are cpu leaves like DisTorch's. Its device map,
{leaf module name: 0 or "cpu"} for every module with parameters of its own, is written to
OUT_DIR/<short>_device_map_<i>.json (short: flux | wan; i: the allocation's index in --allocations; the
placement depends on neither resolution, frames nor host memory kind), for tiersim's
--placement device_map:file=....
Runtime of the cpu leaves: older ComfyUI's casts (comfy/ops.py cast_bias_weight): a module's weight and
bias are copied to cuda:0 on the compute stream when its forward runs and freed after
(decode_latency.LayerStreamer, one unit per leaf module, no prefetch), from pageable or pinned host memory
(--host-memory). Each configuration: --warmup untimed forwards, then --iterations forwards, each timed by
wall clock between two torch.cuda.synchronize().

Writes one JSON line per (resolution, frames, allocation, host memory) to OUT_DIR/dit_iteration.jsonl: model,
class_name, negative_tokens (Qwen-Image; null otherwise), forwards (per iteration: 2 when the negative prompt runs
apart), resolution ("WxH"), width, height, frames (video frames; null for images), latent_frames (null for
images), image_tokens (DiT tokens per batch item: video latent_frames*(H/16)*(W/16)), text_tokens, batch, cfg,
allocation, host_memory ("resident" for none, else pageable | pinned), device_map_file (null for none),
offloaded_bytes, offloaded_modules (every cpu leaf, the unlisted ones included), unlisted_bytes,
unlisted_modules (of those, the leaves outside ComfyUI's load list), model_bytes, leaf_modules, cond_batch
(together | comfy), occupied_bytes (--occupy-gb: held from the placement's first measurement on, and counted in
peak_bytes), comfy_estimate_bytes and comfy_free_bytes (--cond-batch comfy:
the two numbers of its decision; null otherwise), iteration_s
(every timed iteration: all its forwards), median_s, warmup_s, iterations, warmup, setup_s (moving the cpu leaves to host
memory), peak_bytes (torch.cuda.max_memory_allocated), reserved_bytes (torch.cuda.max_memory_reserved; rows from
2026-11-25 on, each shape measured after torch.cuda.empty_cache()), reload_weights (--reload-weights: the weights
moved to host memory and back once built), torch, gpu, totals, depth (Wan: num_layers),
depth_single_blocks (null for Wan), weight_dtype (bf16 | fp8 | fp8_scaled | the GGUF file type as given, e.g. Q8_0), tiny,
sdpa_priority (whether ComfyUI's cuDNN-first backend priority was applied); GGUF rows also gguf_tensor_types
({GGML type: Linear weights of it}).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
import types

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "frameworks"))
import decode_latency  # noqa: E402
import flux_dit  # noqa: E402
import gguf_weights  # noqa: E402
import qwen_image_dit  # noqa: E402
import wan_dit  # noqa: E402
from distorch_allocations import load_distorch  # noqa: E402


class Patcher:
    """ComfyUI's ModelPatcher as DisTorch reads it: .model, and _load_list() as comfy/model_patcher.py builds it:
    (size, name, module, parameter names) for every module whose parameters are all its own and that has
    some, or that is a comfy op (ComfyUI's LayerNorms: no parameters, size 0), in named_modules() order.
    Modules owning a parameter beside children with parameters (Wan's blocks.N and head: `modulation`) are
    skipped, as ComfyUI skips them. Flux's RMSNorm (a plain nn.Module) has no `bias` attribute, so DisTorch
    counts it a tiny block, as in ComfyUI (unlike distorch_decode.Patcher, which gives HF norms one); Wan's
    RMSNorm is a comfy op with bias = None (wan_dit.RMSNorm)."""

    def __init__(self, model, leaves):
        self.model = model
        sizes = {name: nbytes for name, _, _, nbytes in leaves}
        listed = set(wan_dit.load_list_rule(model))
        self.items = [(sizes.get(n, 0), n, m, [p for p, _ in m.named_parameters(recurse=False)])
                      for n, m in model.named_modules() if n in listed]

    def _load_list(self):
        return list(self.items)


class Family:
    """What differs between the DiTs: the builder module, its constructor arguments and inputs."""

    def __init__(self, config_path, tiny):
        with open(config_path) as f:
            self.class_name = json.load(f).get("_class_name")
        if self.class_name == "FluxTransformer2DModel":
            self.short, self.module, self.video = "flux", flux_dit, False
            self.name, self.params = flux_dit.flux_params(config_path, tiny=tiny)
            self.depth, self.depth_single = self.params["depth"], self.params["depth_single_blocks"]
        elif self.class_name == "WanTransformer3DModel":
            self.short, self.module, self.video = "wan", wan_dit, True
            self.name, self.params = wan_dit.wan_params(config_path, tiny=tiny)
            self.depth, self.depth_single = self.params["num_layers"], None
        elif self.class_name == "QwenImageTransformer2DModel":
            self.short, self.module, self.video = "qwen", qwen_image_dit, False
            self.name, self.params = qwen_image_dit.qwen_image_params(config_path, tiny=tiny)
            self.depth, self.depth_single = self.params["num_layers"], None
        else:
            sys.exit(f"{config_path}: _class_name {self.class_name!r}: the harness builds FluxTransformer2DModel "
                     "(flux_dit.py), WanTransformer3DModel (wan_dit.py) and QwenImageTransformer2DModel (qwen_image_dit.py)")

    def latent_frames(self, frames):
        return wan_dit.latent_frames(frames) if self.video else None

    def tokens(self, w, h, frames):
        return wan_dit.tokens(self.params, w, h, frames) if self.video else (w // 16) * (h // 16)

    def make_inputs(self, w, h, frames, batch, text_tokens, reference=None, start_image=False):
        if reference is not None:
            if self.short != "flux":
                sys.exit("--reference: the harness appends a reference image to FLUX's inputs only")
            # Flux._forward with ref_latents (ComfyUI's ReferenceLatent, method "offset"): the reference latent packed
            # as the image's (process_img, index 1) and concatenated after it, tokens and ids, before forward_orig.
            if batch != 1:
                sys.exit("--reference: batch 1 (cfg 1) only")
            inputs = flux_dit.make_inputs(self.params, w, h, text_tokens)
            ref = flux_dit.make_inputs(self.params, reference[0], reference[1], text_tokens, seed=1)
            ref["img_ids"][:, :, 0] = 1
            inputs["img"] = torch.cat([inputs["img"], ref["img"]], dim=1)
            inputs["img_ids"] = torch.cat([inputs["img_ids"], ref["img_ids"]], dim=1)
            return inputs
        if self.video:
            return wan_dit.make_inputs(self.params, w, h, frames, batch=batch, text_tokens=text_tokens,
                                       start_image=start_image)
        if self.short == "qwen":
            return qwen_image_dit.make_inputs(self.params, w, h, text_tokens, batch=batch)
        inputs = flux_dit.make_inputs(self.params, w, h, text_tokens)  # batch 1
        if batch == 1:
            return inputs
        # cond and uncond in one batch (samplers.py cond_cat + torch.cat of x and timestep; Flux._forward
        # repeats img_ids / txt_ids to the batch)
        return {k: (torch.cat([v] * batch) if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}


def fp8_weights(model):
    """ComfyUI's fp8_e4m3fn weights (UNETLoader weight_dtype fp8_e4m3fn, or an fp8 checkpoint): every Linear's weight
    stored as float8_e4m3fn and cast to the activations' dtype when its forward runs (comfy/ops.py manual_cast
    Linear.forward_comfy_cast_weights: cast_bias_weight, then torch.nn.functional.linear); biases and norms stay
    bf16 (an fp8 checkpoint's are bf16; a bf16 bias needs no cast)."""
    def forward(self, x):
        return F.linear(x, self.weight.to(x.dtype), self.bias)
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.weight.data = m.weight.data.to(torch.float8_e4m3fn)
            m.forward = types.MethodType(forward, m)
    torch.cuda.synchronize()
    return model


def fp8_scaled_weights(model):
    """A scaled fp8 checkpoint (ComfyUI's *_fp8_scaled files: Wan's repackaged weights), as comfy/ops.py a125cd84
    scaled_fp8_ops runs it without --fast fp8 (fp8_matrix_mult off): every Linear's weight float8_e4m3fn with a
    per-tensor fp32 `scale_weight` (here max|w| / 448, as a quantizer would choose), and forward_comfy_cast_weights:
    cast_bias_weight (the weight to bf16), then `weight * scale` when the weight has fewer elements than the input,
    else `input * scale`, each after scale_weight.to(device, dtype) (a cast kernel of its own), then F.linear."""
    def forward(self, x):
        weight = self.weight.to(x.dtype)
        scale = self.scale_weight.to(device=weight.device, dtype=weight.dtype)
        if weight.numel() < x.numel():
            return F.linear(x, weight * scale, self.bias)
        return F.linear(x * scale, weight, self.bias)
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            w = m.weight.data
            scale = (w.abs().max().float() / 448.0).clamp(min=1e-12)
            m.weight.data = (w.float() / scale).to(torch.float8_e4m3fn)
            m.scale_weight = torch.nn.Parameter(scale.reshape(()), requires_grad=False)
            m.forward = types.MethodType(forward, m)
    torch.cuda.synchronize()
    return model


def reload_weights(model):
    """ComfyUI's load for --reload-weights: every parameter to host memory, the allocator's cache emptied, then each back
    to the GPU in registration order, so the GPU holds the weights as a load from host memory leaves them (fp8 weights
    made by converting bf16 ones on the GPU leave the freed bf16 blocks in the weights' segments otherwise)."""
    params = list(model.parameters())
    for p in params:
        p.data = p.data.to("cpu")
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    for p in params:
        p.data = p.data.to("cuda")
    torch.cuda.synchronize()
    return model


def parse_resolution(s):
    w, h = (int(x) for x in s.lower().split("x"))
    return w, h


def comfy_memory_required(fam, w, h, frames, batch):
    """comfy/model_base.py BaseModel.memory_required (flash/SDPA branch, bf16 compute) for a latent of `batch`."""
    if fam.video:
        s = wan_dit.vae_spatial(fam.params)
        area, factor = batch * wan_dit.latent_frames(frames) * (h // s) * (w // s), fam.params["dim"] / 2222
    else:
        area, factor = batch * (h // 8) * (w // 8), 3.1 if fam.short == "flux" else 1.8
    return area * 2 * 0.01 * factor * 1024 * 1024


def comfy_free_memory():
    """comfy/model_management.py get_free_memory on CUDA: mem_get_info's free + reserved - active (torch's cache)."""
    stats = torch.cuda.memory_stats()
    return torch.cuda.mem_get_info()[0] + stats["reserved_bytes.all.current"] - stats["active_bytes.all.current"]


def forwards(model, passes, n):
    """n iterations, each the forwards of `passes` (one input dict per forward) in turn."""
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for inputs in passes:
            model(**inputs)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return times


def main():
    import logging
    import psutil
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True,
                    help="diffusers transformer config (traces/models/flux.1-dev.json, wan2.1-t2v-14b.json)")
    ap.add_argument("--distorch", required=True, help="ComfyUI-MultiGPU's distorch_2.py")
    ap.add_argument("--resolutions", nargs="+", default=["1024x1024"])
    ap.add_argument("--frames", nargs="+", type=int, default=None,
                    help="video frames (video models only; default 81)")
    ap.add_argument("--start-image", action="store_true",
                    help="Wan 2.2 TI2V: image-to-video, a timestep per latent frame (the first frame's 0)")
    ap.add_argument("--cfg", type=float, default=1.0,
                    help="CFG scale: other than 1.0 runs cond + uncond as one batch of 2, as ComfyUI does")
    ap.add_argument("--allocations", nargs="+", default=["none", "#cuda:0;4.0;cpu"],
                    help='"none" (resident) or DisTorch allocation strings')
    ap.add_argument("--host-memory", nargs="+", choices=["pageable", "pinned"], default=["pageable"])
    ap.add_argument("--text-tokens", type=int, default=512)
    ap.add_argument("--reference", default=None,
                    help="FLUX: a reference image WxH (Kontext's ReferenceLatent) whose tokens run beside the image's")
    ap.add_argument("--negative-tokens", type=int, default=None,
                    help="Qwen-Image: the negative prompt's tokens; other than --text-tokens (with cfg != 1) the "
                         "negative prompt runs as a second forward")
    ap.add_argument("--weight-dtype", choices=["bf16", "fp8", "fp8_scaled"] + list(gguf_weights.FILE_TYPES), default="bf16",
                    help="fp8: every Linear's weight in float8_e4m3fn, cast to bf16 per forward, as ComfyUI does; "
                         "fp8_scaled: the same with a per-tensor scale applied after the cast (scaled_fp8_ops); "
                         "Q8_0 ... Q4_0 (FLUX only): a GGUF file of that type, dequantized per forward as "
                         "ComfyUI-GGUF does")
    ap.add_argument("--gguf-dequant", default=gguf_weights.DEFAULT_DEQUANT,
                    help="ComfyUI-GGUF's dequant.py (default .ext/ComfyUI-GGUF/dequant.py under the repository root), "
                         "used with a GGUF --weight-dtype")
    ap.add_argument("--cond-batch", choices=["together", "comfy"], default="together",
                    help="cfg != 1: cond and uncond as one batch of 2 (together), or as ComfyUI decides from the free "
                         "memory (comfy: one batch when memory_required(batch 2) x 1.5 < free, else two forwards)")
    ap.add_argument("--occupy-gb", type=float, default=0.0,
                    help="allocate and hold this many GB on cuda:0 before anything else (a smaller card's free memory)")
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reload-weights", action="store_true",
                    help="move the built weights to host memory and back (ComfyUI's load from host memory: no "
                         "conversion leftovers in the weights' segments); rows record reload_weights")
    ap.add_argument("--tiny", action="store_true", help="2 double + 2 single blocks (FLUX), 2 blocks (Wan): smoke run")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    logging.disable(logging.CRITICAL)
    fam = Family(a.model, a.tiny)
    gguf = a.weight_dtype in gguf_weights.FILE_TYPES
    if gguf and fam.short != "flux":
        sys.exit(f"--weight-dtype {a.weight_dtype}: GGUF file types are modelled for FLUX.1 only (lcpp.patch's "
                 f"LLM_ARCH_FLUX rules in gguf_weights.flux_tensor_type); {a.model} is {fam.class_name}")
    dequant = gguf_weights.load_dequant(a.gguf_dequant) if gguf else None
    if fam.video:
        frames_list = a.frames or [81]
    elif a.frames:
        sys.exit(f"--frames: {fam.class_name} is an image model")
    else:
        frames_list = [None]
    batch = 1 if math.isclose(a.cfg, 1.0) else 2  # samplers.py sampling_function: uncond only when cfg != 1
    if a.negative_tokens is not None and fam.short != "qwen":
        sys.exit("--negative-tokens: only Qwen-Image's encoder leaves prompts unpadded")
    separate = batch == 2 and a.negative_tokens is not None and a.negative_tokens != a.text_tokens
    if separate:
        batch = 1
    os.makedirs(a.out, exist_ok=True)
    results = os.path.join(a.out, "dit_iteration.jsonl")
    shapes = [(r, *parse_resolution(r), fr) for r in a.resolutions for fr in frames_list]
    reference = parse_resolution(a.reference) if a.reference else None
    if reference and (fam.short != "flux" or batch != 1):
        sys.exit("--reference: the harness appends a reference image to FLUX's inputs only, at batch 1 (cfg 1)")

    totals = {"cuda:0": torch.cuda.mem_get_info(0)[1], "cpu": psutil.virtual_memory().total}
    # The held memory is taken once a placement is made (the model is built whole on the GPU first) and given back
    # before its offloaded leaves return to the GPU.
    held = {}
    occupied_bytes = int(a.occupy_gb * 1e9)
    if a.cond_batch == "comfy" and (batch != 2 or separate):
        sys.exit("--cond-batch comfy: for a guided run whose two prompts may share a batch (cfg != 1, equal lengths)")
    distorch = load_distorch(a.distorch, totals)
    name, params = fam.name, fam.params
    t = time.perf_counter()
    model = fam.module.build(params)
    if a.weight_dtype == "fp8":
        model = fp8_weights(model)
    elif a.weight_dtype == "fp8_scaled":
        model = fp8_scaled_weights(model)
    elif gguf:
        model = gguf_weights.gguf_weights(model, a.weight_dtype, dequant)
        print(f"{a.weight_dtype}: Linear weights {model.gguf_tensor_types}", file=sys.stderr, flush=True)
    if a.reload_weights:
        if gguf:
            sys.exit("--reload-weights: bf16 and fp8 weights (GGUF blocks are not parameters to move)")
        model = reload_weights(model)
    leaves = fam.module.leaf_modules(model)
    names = [n for n, _, _, _ in leaves]
    model_bytes = sum(b for _, _, _, b in leaves)
    print(f"{name}: {len(leaves)} leaf modules, {model_bytes / 1e9:.2f} GB, built in {time.perf_counter() - t:.1f} s",
          file=sys.stderr, flush=True)

    # Placements first (host-side only): one device map per allocation.
    placements = []  # (allocation, map file, offloaded leaf indices)
    patcher = Patcher(model, leaves)
    listed = {n for _, n, _, _ in patcher.items}
    unlisted = {k for k, n in enumerate(names) if n not in listed}  # stay on ComfyUI's offload device (cpu)
    for i, alloc in enumerate(a.allocations):
        if alloc == "none":
            placements.append((alloc, None, []))
            continue
        assign = distorch.analyze_safetensor_loading(patcher, alloc, is_clip=False)["block_assignments"]
        offloaded = [k for k, n in enumerate(names) if assign.get(n) == "cpu" or k in unlisted]
        map_file = f"{fam.short}_device_map_{i}.json"
        on_cpu = set(offloaded)
        with open(os.path.join(a.out, map_file), "w") as f:
            json.dump({n: ("cpu" if k in on_cpu else 0) for k, n in enumerate(names)}, f, sort_keys=True)
        placements.append((alloc, map_file, offloaded))

    common = dict(model=name, class_name=fam.class_name, text_tokens=a.text_tokens, batch=batch, cfg=a.cfg,
                  start_image=a.start_image,
                  negative_tokens=a.negative_tokens, forwards=2 if separate else 1, weight_dtype=a.weight_dtype,
                  iterations=a.iterations, warmup=a.warmup, model_bytes=model_bytes, leaf_modules=len(leaves),
                  torch=torch.__version__, gpu=torch.cuda.get_device_name(0), totals=totals, depth=fam.depth,
                  depth_single_blocks=fam.depth_single, tiny=a.tiny, reload_weights=a.reload_weights,
                  sdpa_priority=flux_dit.SDPA_PRIORITY is not None, cond_batch=a.cond_batch,
                  occupied_bytes=occupied_bytes, comfy_estimate_bytes=None, comfy_free_bytes=None)
    if gguf:
        common["gguf_tensor_types"] = model.gguf_tensor_types
    if reference:
        common.update(reference=a.reference, reference_tokens=(reference[0] // 16) * (reference[1] // 16))
    inputs = {(r, fr): [fam.make_inputs(w, h, fr, batch, a.text_tokens, reference, a.start_image)] +
              ([fam.make_inputs(w, h, fr, batch, a.negative_tokens)] if separate else [])
              for r, w, h, fr in shapes}
    # The two prompts apart (--cond-batch comfy): a forward of batch 1 each, the negative prompt's text of its own.
    apart = {(r, fr): [fam.make_inputs(w, h, fr, 1, a.text_tokens), fam.make_inputs(w, h, fr, 1, a.text_tokens)]
             for r, w, h, fr in shapes} if a.cond_batch == "comfy" else {}
    units = [(p, m, m) for _, m, p, _ in leaves]

    def measure(shape, alloc, host_memory, map_file, offloaded, setup_s):
        r, w, h, fr = shape
        if occupied_bytes and "blob" not in held:
            held["blob"] = torch.empty(occupied_bytes, dtype=torch.uint8, device="cuda")
        passes, decision = inputs[(r, fr)], {}
        if a.cond_batch == "comfy":
            estimate, free = comfy_memory_required(fam, w, h, fr, 2), comfy_free_memory()
            together = estimate * 1.5 < free
            passes = inputs[(r, fr)] if together else apart[(r, fr)]
            decision = dict(comfy_estimate_bytes=estimate, comfy_free_bytes=free, batch=2 if together else 1,
                            forwards=1 if together else 2)
        # The caching allocator's free blocks back to the driver first (the cpu leaves' GPU copies, freed when the
        # streamer moved them, and an earlier shape's activations): ComfyUI never had the offloaded leaves on the GPU,
        # and each shape's reserved peak is then its own.
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        warm = forwards(model, passes, a.warmup)
        times = forwards(model, passes, a.iterations)
        off_unlisted = [k for k in offloaded if k in unlisted]
        row = dict(common, resolution=r, width=w, height=h, frames=fr, latent_frames=fam.latent_frames(fr),
                   image_tokens=fam.tokens(w, h, fr), allocation=alloc,
                   host_memory=host_memory, device_map_file=map_file,
                   offloaded_bytes=sum(leaves[k][3] for k in offloaded), offloaded_modules=len(offloaded),
                   unlisted_bytes=sum(leaves[k][3] for k in off_unlisted), unlisted_modules=len(off_unlisted),
                   iteration_s=times, median_s=statistics.median(times), warmup_s=warm, setup_s=setup_s,
                   peak_bytes=torch.cuda.max_memory_allocated(), reserved_bytes=torch.cuda.max_memory_reserved(),
                   **decision)
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
        video = (f" {fr:3d}f" if fr is not None else "") + (f" b{row['batch']}x{row['forwards']}" if fam.video or batch != 1 else "")
        print(f"{name} {r:>9}{video} {alloc:<18} {host_memory:<8} offloaded "
              f"{row['offloaded_bytes'] / 1e9:6.2f} GB ({len(offloaded)} modules)  median {row['median_s']:.3f} s/it  "
              f"[{' '.join(f'{x:.3f}' for x in times)}]  warmup [{' '.join(f'{x:.3f}' for x in warm)}]",
              file=sys.stderr, flush=True)

    with torch.no_grad():  # not inference_mode: the streamer swaps parameters' .data between forwards
        for alloc, map_file, offloaded in placements:
            if alloc == "none":
                for shape in shapes:
                    measure(shape, alloc, "resident", None, [], 0.0)
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
                held.clear()
                torch.cuda.empty_cache()
                continue
            for host_memory in a.host_memory:
                t = time.perf_counter()
                streamer = decode_latency.LayerStreamer(units, offloaded, 0, host_memory)
                setup_s = time.perf_counter() - t
                for shape in shapes:
                    measure(shape, alloc, host_memory, map_file, offloaded, setup_s)
                held.clear()
                torch.cuda.empty_cache()
                streamer.restore()  # removes the hooks, weights back on cuda:0, synchronize, empty_cache
                torch.cuda.synchronize()
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
