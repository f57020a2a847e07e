"""ComfyUI a125cd84's own model management, run between the nodes of a FLUX.1-dev text-to-image job, as fixtures for
tiersim's sim/pipeline/comfy_model_management (the rules in experiments/frameworks/comfyui_model_management.md).

  TIERSIM_SIM=./build-helper/bin/sim /usr/bin/python3 experiments/frameworks/comfyui_job_fixtures.py \\
      tests/fixtures/comfyui_job.jsonl COMFYUI_DIR
  with COMFYUI_DIR made by
      mkdir -p COMFYUI_DIR && git -C /work/.mirror/Comfy-Org+ComfyUI/repo archive a125cd84 \\
          comfy/{cli_args,options,model_management,model_patcher,patcher_extension,ops,utils}.py | tar -x -C COMFYUI_DIR
  (ComfyUI is not a dependency and its files are not committed; TIERSIM_SIM defaults to build/bin/sim.)
  ... comfyui_job_fixtures.py --wan-experts tests/fixtures/comfyui_expert_job.jsonl COMFYUI_DIR: Wan 2.2 A14B's two
  fp8 experts through two videos' KSamplerAdvanced nodes (high, low, high, low) at 832x480 x 81 frames, free VRAM
  80e9, 40e9, 24.5e9, 16e9, 12e9 (tiersim's sim/pipeline/expert_job).
  ... comfyui_job_fixtures.py --wan-video tests/fixtures/comfyui_video_job.jsonl COMFYUI_DIR: a Wan video's whole job
  (sim run --video-job): umT5-XXL (fp16), Wan 2.2 A14B's two fp8 experts and the Wan 2.1 VAE (bf16) through two videos
  of one prompt (text, high, low, vae, high, low, vae: the next video's CLIPTextEncode is cached), and Wan 2.1 14B fp8
  with them (text, sampler, vae, sampler, vae), 832x480 x 81 frames, at the same free VRAM sizes; the text node's
  request is 0, the VAE node's comfy/sd.py VAE.decode's memory_used_decode (7000 x latent height x width x 64 x 2
  bytes) with no minimum.
  ... comfyui_job_fixtures.py --qwen-image tests/fixtures/comfyui_qwen_image_job.jsonl COMFYUI_DIR: a Qwen-Image
  image's whole job (sim run --image-job) with the template's files: Qwen2.5-VL-7B fp8_scaled (the language model and
  its vision tower, leaves as sim/model/text_encoder/llm_text_encoder_trace_generator.cpp lays them out), Qwen-Image
  fp8 and its VAE (bf16) at 1328x1328, cfg 2.5, through the FLUX job's two sequences at the same free VRAM sizes.
  ... comfyui_job_fixtures.py --kontext tests/fixtures/comfyui_kontext_job.jsonl COMFYUI_DIR: FLUX's three models with a
  1024x1024 reference image: VAEEncode (memory_used_encode 1767 x 1024 x 1024 x 2, no minimum) after CLIPTextEncode,
  cached for the next image; the sampler's estimate with the reference latent.

What runs unchanged: ComfyUI's comfy/model_management.py (load_models_gpu, free_memory, LoadedModel.model_load /
model_unload, minimum_inference_memory, get_free_memory, ...) and comfy/model_patcher.py (ModelPatcher.load,
partially_load, partially_unload, detach, unpatch_model, _load_list), as the modules they are, with cli_args.py,
options.py and patcher_extension.py; comfy/ops.py's CastWeightBiasOp class and comfy/utils.py's get_attr are taken out
with `ast`, unchanged. The loader, the fake torch (devices, dtypes, parameters, torch.cuda) and the stubs of the comfy
modules that play no part in loading (hooks, lora, float, quant_ops, comfy_types, ...) are those of
comfyui_partial_loads.py (imported from it: make_torch, build_model, load_comfy). NVIDIA, Linux, default flags
(NORMAL_VRAM, lowvram available, MIN_WEIGHT_MEMORY_RATIO 0, no --reserve-vram), 128 GiB of host RAM (read only by
code paths these calls do not take).

Free VRAM follows what is loaded: torch.cuda.mem_get_info returns (F - bytes on the fake GPU, F + 512 MiB), where the
bytes on the fake GPU are the sum of every stand-in parameter whose device is "cuda" right now. Parameters move only
through ComfyUI's own module .to() calls (a leaf's m.to(device) in ModelPatcher.load / partially_unload, the whole
model's .to() in a full load or in unpatch_model at a detach; the fake Module.to sets the device of every parameter
below it), so ComfyUI's get_free_memory sees exactly what its own code moved, leaf by leaf, between and within calls
(free_memory re-reads it before each candidate). The caching allocator holds nothing (memory_stats reserved = active
= 0). No activations: each node's own working memory is gone when the next node loads, as in ComfyUI between nodes.
"loaded" per model is that same count (its parameters on cuda); "patcher_loaded" is ComfyUI's own
model_loaded_weight_memory, recorded as a check (equal to "loaded" in every call of the committed fixture).
h2d / d2h of a call: each model's increase / decrease of "loaded" over the call (within a call a model only loads
or only unloads).

Stand-in models: three ModelPatchers (load device cuda:0, offload device cpu), each over its own module tree of leaves
built from dotted names (intermediate modules hold no parameters); every leaf is a comfy op (CastWeightBiasOp, one
weight Parameter of the leaf's bytes, bias None: ComfyUI moves a module's weight and bias together, so one tensor of
their summed size moves the same bytes). The leaf class names (Linear / Embedding / RMSNorm) are cosmetic. ComfyUI's
own models have a few tiny non-comfy-op leaves (FLUX's RMSNorm scale, T5LayerNorm: 256 B to 8 KiB each) that load()
places by fit instead of offloading; treated as comfy ops here, this moves at most a few KB.
- te: ComfyUI's FluxClipModel (one patcher: clip_l + t5xxl), fp16. Leaves computed in Python exactly as tiersim's
  sim/model/text_encoder/text_encoder_trace_generator.cpp lays out its weight tensors (there is no CLI that dumps a
  text-encoder trace): per T5 layer layer.0.layer_norm (d), SelfAttention q/k/v/o (d x inner), layer 0's
  relative_attention_bias (32 x heads), layer.1.layer_norm, DenseReluDense wi_0/wi_1/wo (d x ff); shared (vocab x d),
  encoder.final_layer_norm; CLIP token/position embeddings, per layer layer_norm1/2 (weight+bias: 2d), q/k/v/out_proj
  and mlp.fc1/fc2 with biases, final_layer_norm, text_projection (d x d); 2 bytes a parameter; configs
  traces/models/t5-v1_1-xxl.json and clip-vit-large-patch14.json; names prefixed "t5xxl." / "clip_l.".
  2 x (4,762,310,656 + 123,650,304) = 9,771,921,920 B (asserted).
- flux: the weight tensors of `sim gen --model traces/models/flux.1-dev.json --steps 1` (tiersim's own trace: id,
  kind, bytes, layer, name), bf16, 466 leaves, 23,802,816,640 B.
- vae: FLUX's ae in bf16 as ComfyUI builds it (comfy/ldm/modules/diffusionmodules/model.py Encoder/Decoder names), one
  leaf per conv (weight + bias), GroupNorm (weight + bias) and mid-attention q/k/v/proj_out (1x1 convs), counted as
  sim/model/vae/vae_config.cpp counts them from traces/models/flux.1-vae.json (no quant convs): 2 x 83,819,683 =
  167,639,366 B (asserted against VaeConfig::params()'s formula).

Per-node requests at 1024x1024, batch 1 (latent 1x16x128x128), as ComfyUI a125cd84 passes them:
- text (CLIPTextEncode -> CLIP.load_model -> load_model_gpu): load_models_gpu([te]), memory_required 0, minimum None.
- sampler (sampler_helpers._prepare_sampling): memory_required = model_base.memory_required(batch 2 shape) =
  (2 x 128 x 128) x 2 (bf16) x 0.01 x 3.1 (Flux memory_usage_factor) x 1024 x 1024; minimum = the same at batch 1
  (no additional models: inference_memory 0).
- vae (VAE.decode): memory_required = memory_used_decode = 2178 x 128 x 128 x 64 x 2 (bf16); VAE.decode passes no
  minimum (None: ComfyUI then uses max(I, memory_required + R), the same as passing memory_required).
Sequences: "first,same" = text, sampler, vae, sampler, vae (a second image, same prompt: CLIPTextEncode is cached);
"first,new" = text, sampler, vae, text, sampler, vae. Free VRAM F (nothing loaded) in 80e9, 24.5e9, 23e9, 16e9, 12e9.

free_memory sorts its candidates by (-offloaded bytes, sys.getrefcount(patcher), size); ComfyUI's refcounts are
runtime state. Here the three patchers are held alike (one dict entry each), so equal-offload ties fall to the
smaller model first (vae before te). Deterministic: the same input gives the same file, byte for byte.

Output: one JSON line per (F, sequence):
  comfyui "a125cd84", free F, sequence, total (VRAM total mem_get_info reports), models {te, flux, vae: bytes},
  leaves {te, flux, vae: count}, constants {extra_reserved_vram, minimum_inference_memory, min_weight_memory_ratio,
  vram_state}, estimates {sampler_memory_required, sampler_minimum_memory_required, vae_memory_required},
  calls: [{node, model, memory_required, minimum_memory_required (null = None), free_before (get_free_memory before
  the call), lowvram_model_memory (the budget load_models_gpu gave LoadedModel.model_load: 0 = full load; a float as
  ComfyUI has it), free_after, loaded, patcher_loaded, h2d, d2h: {te, flux, vae: bytes}}]
"""
import json
import logging
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from comfyui_partial_loads import GIB, MIB, build_model, load_comfy  # noqa: E402  (ComfyUI loaded unchanged)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
COMMIT = "a125cd84"
FREES = [80e9, 24.5e9, 23.0e9, 16e9, 12e9]
SEQUENCES = {"first,same": ["text", "sampler", "vae", "sampler", "vae"],
             "first,new": ["text", "sampler", "vae", "text", "sampler", "vae"]}
NODE_MODEL = {"text": "te", "sampler": "flux", "vae": "vae"}
NAMES = ["te", "flux", "vae"]


# ---------------------------------------------------------------------------------------------- stand-in weights
def config(name):
    return json.load(open(os.path.join(ROOT, "traces", "models", name)))


def t5_weights(c, prefix, nb=2):
    """text_encoder_trace_generator.cpp's T5 tensors (v1.1: gated FFN, relative bias in layer 0 only; umT5: in every
    block), bytes."""
    d, ff, heads, inner = c["d_model"], c["d_ff"], c["num_heads"], c["num_heads"] * c["d_kv"]
    buckets = c["relative_attention_num_buckets"]
    out = [("shared", c["vocab_size"] * d)]
    for l in range(c["num_layers"]):
        p, att = "encoder.block.%d." % l, "encoder.block.%d.layer.0.SelfAttention." % l
        out.append((p + "layer.0.layer_norm", d))
        out += [(att + n, d * inner) for n in "qkv"] + [(att + "o", inner * d)]
        if l == 0 or c.get("model_type") == "umt5":
            out.append((att + "relative_attention_bias", buckets * heads))
        out.append((p + "layer.1.layer_norm", d))
        f = p + "layer.1.DenseReluDense."
        out += [(f + "wi_0", d * ff), (f + "wi_1", d * ff), (f + "wo", ff * d)]
    out.append(("encoder.final_layer_norm", d))
    return [(prefix + n, p * nb) for n, p in out]


def clip_weights(c, prefix, nb=2):
    """text_encoder_trace_generator.cpp's CLIP text-model tensors (biases in each Linear; LayerNorm weight+bias)."""
    d, ff, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    out = [("text_model.embeddings.token_embedding", c["vocab_size"] * d),
           ("text_model.embeddings.position_embedding", c["max_position_embeddings"] * d)]
    for l in range(L):
        p = "text_model.encoder.layers.%d." % l
        out.append((p + "layer_norm1", 2 * d))
        out += [(p + "self_attn." + n, d * d + d) for n in ("q_proj", "k_proj", "v_proj", "out_proj")]
        out.append((p + "layer_norm2", 2 * d))
        out += [(p + "mlp.fc1", d * ff + ff), (p + "mlp.fc2", ff * d + d)]
    out += [("text_model.final_layer_norm", 2 * d), ("text_projection", d * d)]
    return [(prefix + n, p * nb) for n, p in out]


def vae_weights(c, nb=2):
    """FLUX's ae as ComfyUI names it (Encoder/Decoder of ldm's model.py), one leaf per conv / norm, bf16 bytes,
    parameters counted as sim/model/vae/vae_config.cpp counts them."""
    ch, R, z = c["block_out_channels"], c["layers_per_block"], c["latent_channels"]
    cin, cout = c.get("in_channels", 3), c.get("out_channels", 3)
    out = []

    def conv(name, i, o, k):
        out.append((name, i * o * k * k + o))

    def norm(name, ch_):
        out.append((name, 2 * ch_))

    def resnet(p, i, o):
        norm(p + ".norm1", i)
        conv(p + ".conv1", i, o, 3)
        norm(p + ".norm2", o)
        conv(p + ".conv2", o, o, 3)
        if i != o:
            conv(p + ".nin_shortcut", i, o, 1)

    def mid(p, c_):
        resnet(p + ".mid.block_1", c_, c_)
        norm(p + ".mid.attn_1.norm", c_)
        for n in ("q", "k", "v", "proj_out"):
            conv(p + ".mid.attn_1." + n, c_, c_, 1)
        resnet(p + ".mid.block_2", c_, c_)

    conv("encoder.conv_in", cin, ch[0], 3)
    cur = ch[0]
    for i, o in enumerate(ch):
        for b in range(R):
            resnet("encoder.down.%d.block.%d" % (i, b), cur, o)
            cur = o
        if i + 1 != len(ch):
            conv("encoder.down.%d.downsample.conv" % i, cur, cur, 3)
    mid("encoder", cur)
    norm("encoder.norm_out", cur)
    conv("encoder.conv_out", cur, 2 * z, 3)
    if c.get("use_quant_conv", True):
        raise RuntimeError("FLUX's ae has no quant convs")
    top = ch[-1]
    conv("decoder.conv_in", z, top, 3)
    mid("decoder", top)
    cur = top
    for i in reversed(range(len(ch))):
        for b in range(R + 1):
            resnet("decoder.up.%d.block.%d" % (i, b), cur, ch[i])
            cur = ch[i]
        if i != 0:
            conv("decoder.up.%d.upsample.conv" % i, cur, cur, 3)
    norm("decoder.norm_out", cur)
    conv("decoder.conv_out", cur, cout, 3)
    return [(n, p * nb) for n, p in out]


def qwen25_vl_weights(c, scaled=True):
    """llm_text_encoder_trace_generator.cpp's Qwen2.5-VL tensors, one per module (a Linear's weight, bias and, in a
    scaled fp8 file, its float32 scale together), bytes: fp8_scaled's Linears 1 byte a parameter + 4, everything else
    bf16; or bf16 throughout."""
    t, v = c.get("text_config", c), c["vision_config"]
    d, ff, heads, kvh = t["hidden_size"], t["intermediate_size"], t["num_attention_heads"], t["num_key_value_heads"]
    hd = t.get("head_dim", d // heads)
    inner, kv = heads * hd, kvh * hd

    def linear(name, i, o, bias):
        p = i * o + (o if bias else 0)
        return (name, p + 4 if scaled else 2 * p)

    def plain(name, p):
        return (name, 2 * p)

    out = [plain("model.embed_tokens", t["vocab_size"] * d)]
    for l in range(t["num_hidden_layers"]):
        p = "model.layers.%d." % l
        out += [plain(p + "input_layernorm", d), linear(p + "self_attn.q_proj", d, inner, True),
                linear(p + "self_attn.k_proj", d, kv, True), linear(p + "self_attn.v_proj", d, kv, True),
                linear(p + "self_attn.o_proj", inner, d, False), plain(p + "post_attention_layernorm", d),
                linear(p + "mlp.gate_proj", d, ff, False), linear(p + "mlp.up_proj", d, ff, False),
                linear(p + "mlp.down_proj", ff, d, False)]
    out.append(plain("model.norm", d))
    vd, vff = v["hidden_size"], v["intermediate_size"]
    out.append(plain("visual.patch_embed.proj",
                     v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2 * vd))
    for b in range(v["depth"]):
        p = "visual.blocks.%d." % b
        out += [plain(p + "norm1", vd), plain(p + "norm2", vd), linear(p + "attn.qkv", vd, 3 * vd, True),
                linear(p + "attn.proj", vd, vd, True), linear(p + "mlp.gate_proj", vd, vff, True),
                linear(p + "mlp.up_proj", vd, vff, True), linear(p + "mlp.down_proj", vff, vd, True)]
    merged = vd * v["spatial_merge_size"] ** 2
    out += [plain("visual.merger.ln_q", vd), linear("visual.merger.mlp.0", merged, merged, True),
            linear("visual.merger.mlp.2", merged, v["out_hidden_size"], True)]
    return out


def flux_weights():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "flux.trace")
        model = os.path.join(ROOT, "traces", "models", "flux.1-dev.json")
        subprocess.run([SIM, "gen", "--model", model, "--steps", "1", "-o", path], check=True, capture_output=True)
        out = []
        for line in open(path):
            parts = line.split()
            if parts[:1] == ["tensor"] and parts[2] == "weight":
                out.append((parts[5], int(parts[3])))
        return out


def sizes_of(weights):
    """Each model's bytes: the sum of its leaves'."""
    return {k: sum(b for _, b in v) for k, v in weights.items()}


def write_rows(out_path, rows):
    with open(out_path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n")
    print("%d cases" % len(rows))


def stand_ins():
    te = clip_weights(config("clip-vit-large-patch14.json"), "clip_l.") + \
        t5_weights(config("t5-v1_1-xxl.json"), "t5xxl.")
    weights = {"te": te, "flux": flux_weights(), "vae": vae_weights(config("flux.1-vae.json"))}
    sizes = sizes_of(weights)
    assert sizes["te"] == 2 * (4762310656 + 123650304), sizes["te"]
    assert sizes["vae"] == 2 * 83819683, sizes["vae"]
    assert abs(sizes["flux"] - 23.80e9) < 0.01e9, sizes["flux"]
    return weights, sizes


# ---------------------------------------------------------------------------------------------- estimates
def estimates():
    # model_base.memory_required, flash/SDPA branch: (area * dtype_size * 0.01 * memory_usage_factor) * (1024 * 1024),
    # area = batch * 128 * 128 (input_shape[0] * prod(input_shape[2:])), bf16, Flux memory_usage_factor 3.1.
    def flux_mem(batch):
        area = batch * 128 * 128
        return (area * 2 * 0.01 * 3.1) * (1024 * 1024)

    return {"sampler_memory_required": flux_mem(2), "sampler_minimum_memory_required": flux_mem(1),
            "vae_memory_required": (2178 * 128 * 128 * 64) * 2}


# ---------------------------------------------------------------------------------------------- one case
FLUX_JOB = {"names": NAMES, "sequences": SEQUENCES, "node_model": NODE_MODEL}


def run_case(src, weights, sizes, est, free, sequence, job=FLUX_JOB):
    names, node_model = job["names"], job["node_model"]
    hw = {"platform": "linux", "vendor": "nvidia", "vram_total": int(free) + 512 * MIB, "vram_free": int(free),
          "ram_total": 128 * GIB, "args": {}}
    torch, mm, mp, cast_op = load_comfy(src, hw)
    params = {}
    patchers = {}
    for name in names:
        root, leaves = build_model(weights[name], torch, cast_op)
        params[name] = [leaf.weight for _, leaf in leaves]
        patchers[name] = mp.ModelPatcher(root, load_device=torch.device(torch.cuda.current_device()),
                                         offload_device=torch.device("cpu"))
        del root, leaves

    def on_gpu(name):
        return sum(p.nbytes for p in params[name] if p.device.type == "cuda")

    torch.cuda.mem_get_info = lambda dev=None: (int(free) - sum(on_gpu(n) for n in names), hw["vram_total"])
    seen = {}
    real_model_load = mm.LoadedModel.model_load

    def model_load(self, lowvram_model_memory=0, force_patch_weights=False):
        seen["lowvram_model_memory"] = lowvram_model_memory
        return real_model_load(self, lowvram_model_memory, force_patch_weights)

    mm.LoadedModel.model_load = model_load
    gpu = torch.device(torch.cuda.current_device())
    requests = job.get("requests") or {"text": (0, None), "sampler": (est["sampler_memory_required"], est["sampler_minimum_memory_required"]),
                "vae": (est["vae_memory_required"], None)}
    calls = []
    for node in job["sequences"][sequence]:
        model = node_model[node]
        mem, minimum = requests[node]
        before = {n: on_gpu(n) for n in names}
        free_before = mm.get_free_memory(gpu)
        seen.clear()
        mm.load_models_gpu([patchers[model]], memory_required=mem, minimum_memory_required=minimum)
        after = {n: on_gpu(n) for n in names}
        calls.append({
            "node": node, "model": model, "memory_required": mem, "minimum_memory_required": minimum,
            "free_before": free_before, "lowvram_model_memory": seen.get("lowvram_model_memory"),
            "free_after": mm.get_free_memory(gpu), "loaded": after,
            "patcher_loaded": {n: patchers[n].model.model_loaded_weight_memory for n in names},
            "h2d": {n: max(0, after[n] - before[n]) for n in names},
            "d2h": {n: max(0, before[n] - after[n]) for n in names}})
    return {
        "comfyui": COMMIT, "free": free, "sequence": sequence, "total": hw["vram_total"], "models": sizes,
        "leaves": {n: len(weights[n]) for n in names},
        "constants": {"extra_reserved_vram": mm.extra_reserved_memory(),
                      "minimum_inference_memory": mm.minimum_inference_memory(),
                      "min_weight_memory_ratio": mm.MIN_WEIGHT_MEMORY_RATIO, "vram_state": mm.vram_state.name},
        "estimates": est, "calls": calls}


# ---------------------------------------------------------------------------------------------- Wan 2.2 A14B
# Its two experts, each its own UNETLoader's model (fp8: the template's fp8_scaled files' bytes less their scales), and
# the two KSamplerAdvanced nodes of a video, then the next video's (sampler_helpers._prepare_sampling: load_models_gpu
# of the node's expert with estimate_memory's pair: model_base.memory_required at the batch doubled and at the batch).
WAN_FREES = [80e9, 40e9, 24.5e9, 16e9, 12e9]
WAN_JOB = {"names": ["high", "low"], "sequences": {"two videos": ["high", "low", "high", "low"]},
           "node_model": {"high": "high", "low": "low"}}


def gen_weights(model, extra):
    """A model's weight tensors from `sim gen` (name, bytes), and its meta comfy_memory_per_cond where it has one."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.trace")
        subprocess.run([SIM, "gen", "--model", os.path.join(ROOT, "traces", "models", model), "-o", path] + extra,
                       check=True, capture_output=True)
        weights, per_cond = [], None
        for line in open(path):
            parts = line.split()
            if parts[:1] == ["tensor"] and parts[2] == "weight":
                weights.append((parts[5], int(parts[3])))
            if parts[:2] == ["meta", "comfy_memory_per_cond"]:
                per_cond = float(parts[2])
        # A tensor the trace names by a description ("decoder (loaded, not read by this decode)": the Wan VAE's
        # time_conv weights a one-frame decode never reads) is one leaf; where its first word is also a module above
        # other leaves, it gets a name of its own, not that module's.
        names = {n for n, _ in weights}
        weights = [(n + "_unread" if any(m.startswith(n + ".") for m in names) else n, b) for n, b in weights]
        return weights, per_cond


def wan_experts(shape="832x480", frames=81):
    """The expert's weight tensors and its trace's sampler estimate, from `sim gen` of wan2.2-t2v-a14b.json."""
    return gen_weights("wan2.2-t2v-a14b.json", ["--dtype", "fp8", "--resolution", shape, "--frames", str(frames),
                                                "--cfg", "3.5", "--steps", "2"])


def main_wan(out_path, src):
    logging.disable(logging.CRITICAL)
    expert, per_cond = wan_experts()
    weights = {"high": expert, "low": list(expert)}
    sizes = sizes_of(weights)
    est = {"sampler_memory_required": 2 * per_cond, "sampler_minimum_memory_required": per_cond}
    job = dict(WAN_JOB, requests={n: (2 * per_cond, per_cond) for n in ("high", "low")})
    rows = [run_case(src, weights, sizes, est, free, seq, job) for free in WAN_FREES for seq in WAN_JOB["sequences"]]
    write_rows(out_path, rows)


def main_wan_video(out_path, src):
    logging.disable(logging.CRITICAL)
    video = ["--resolution", "832x480", "--frames", "81"]
    vae, _ = gen_weights("wan2.1-vae.json", video)
    vae_request = (7000 * 60 * 104 * 64 * 2, None)  # comfy/sd.py VAE.decode: memory_used_decode, no minimum
    te = t5_weights(config("umt5-xxl.json"), "")     # umt5_xxl_fp16
    rows = []
    expert, per_cond = wan_experts()
    weights = {"te": te, "high": expert, "low": list(expert), "vae": vae}
    sizes = sizes_of(weights)
    est = {"sampler_memory_required": 2 * per_cond, "sampler_minimum_memory_required": per_cond}
    job = {"names": ["te", "high", "low", "vae"],
           "sequences": {"two videos": ["text", "high", "low", "vae", "high", "low", "vae"]},
           "node_model": {"text": "te", "high": "high", "low": "low", "vae": "vae"},
           "requests": {"text": (0, None), "high": (2 * per_cond, per_cond), "low": (2 * per_cond, per_cond),
                        "vae": vae_request}}
    rows += [dict(run_case(src, weights, sizes, est, free, seq, job), model="wan2.2-t2v-a14b")
             for free in WAN_FREES for seq in job["sequences"]]
    one, per_cond = gen_weights("wan2.1-t2v-14b.json", video + ["--dtype", "fp8", "--cfg", "6", "--steps", "2"])
    weights = {"te": te, "dit": one, "vae": vae}
    sizes = sizes_of(weights)
    est = {"sampler_memory_required": 2 * per_cond, "sampler_minimum_memory_required": per_cond}
    job = {"names": ["te", "dit", "vae"], "sequences": {"two videos": ["text", "sampler", "vae", "sampler", "vae"]},
           "node_model": {"text": "te", "sampler": "dit", "vae": "vae"},
           "requests": {"text": (0, None), "sampler": (2 * per_cond, per_cond), "vae": vae_request}}
    rows += [dict(run_case(src, weights, sizes, est, free, seq, job), model="wan2.1-t2v-14b")
             for free in WAN_FREES for seq in job["sequences"]]
    write_rows(out_path, rows)


# ---------------------------------------------------------------------------------------------- Qwen-Image
# The template's files (ComfyUI's Qwen-Image workflow): qwen_2.5_vl_7b_fp8_scaled (CLIPLoader type qwen_image),
# qwen_image_fp8_e4m3fn (UNETLoader), qwen_image_vae, at 1328x1328, cfg 2.5: CLIPTextEncode (positive, then negative:
# one load, request 0), KSampler (estimate_memory: model_base.memory_required at the batch doubled and at the batch,
# Qwen-Image's memory_usage_factor 1.8, from the trace's meta), VAEDecode (memory_used_decode of the Wan 2.1 VAE:
# 7000 x 166 x 166 x 64 x 2, no minimum).
def main_qwen_image(out_path, src):
    logging.disable(logging.CRITICAL)
    te = qwen25_vl_weights(config("qwen2.5-vl-7b.json"))
    dit, per_cond = gen_weights("qwen-image.json", ["--dtype", "fp8", "--resolution", "1328x1328", "--cfg", "2.5",
                                                    "--steps", "2"])
    vae, _ = gen_weights("qwen-image-vae.json", ["--resolution", "1328x1328"])
    weights = {"te": te, "dit": dit, "vae": vae}
    sizes = sizes_of(weights)
    # The language model and vision tower as ComfyUI builds them (7,070,619,136 and 676,550,144 parameters), fp8 Linears
    assert sizes["te"] == 8_293_960_856, sizes["te"]
    est = {"sampler_memory_required": 2 * per_cond, "sampler_minimum_memory_required": per_cond,
           "vae_memory_required": 7000 * 166 * 166 * 64 * 2}
    job = {"names": ["te", "dit", "vae"], "sequences": SEQUENCES,
           "node_model": {"text": "te", "sampler": "dit", "vae": "vae"},
           "requests": {"text": (0, None), "sampler": (2 * per_cond, per_cond), "vae": (est["vae_memory_required"], None)}}
    rows = [dict(run_case(src, weights, sizes, est, free, seq, job), model="qwen-image")
            for free in FREES for seq in SEQUENCES]
    write_rows(out_path, rows)


# ---------------------------------------------------------------------------------------------- FLUX.1 Kontext
# FLUX's job with a 1024x1024 reference image (ComfyUI's Kontext template: LoadImage, FluxKontextImageScale, VAEEncode,
# ReferenceLatent): after CLIPTextEncode, VAEEncode loads the VAE with memory_used_encode (1767 x 1024 x 1024 x 2, no
# minimum) and encodes; the sampler's estimate counts the reference latent (model_base.Flux memory_usage_factor_conds:
# ref_latents; the trace's meta); the next image keeps the reference (VAEEncode cached). The same models as FLUX's.
KONTEXT_SEQUENCES = {"first,same": ["text", "encode", "sampler", "vae", "sampler", "vae"],
                     "first,new": ["text", "encode", "sampler", "vae", "text", "sampler", "vae"]}


def main_kontext(out_path, src):
    logging.disable(logging.CRITICAL)
    weights, sizes = stand_ins()
    _, per_cond = gen_weights("flux.1-dev.json", ["--reference", "1024x1024", "--steps", "1"])
    est = {"sampler_memory_required": 2 * per_cond, "sampler_minimum_memory_required": per_cond,
           "vae_memory_required": (2178 * 128 * 128 * 64) * 2, "encode_memory_required": 1767 * 1024 * 1024 * 2}
    job = dict(FLUX_JOB, sequences=KONTEXT_SEQUENCES, node_model=dict(NODE_MODEL, encode="vae"),
               requests={"text": (0, None), "encode": (est["encode_memory_required"], None),
                         "sampler": (2 * per_cond, per_cond), "vae": (est["vae_memory_required"], None)})
    rows = [dict(run_case(src, weights, sizes, est, free, seq, job), model="flux.1-kontext")
            for free in FREES for seq in KONTEXT_SEQUENCES]
    write_rows(out_path, rows)


def main(out_path, src):
    logging.disable(logging.CRITICAL)
    weights, sizes = stand_ins()
    est = estimates()
    rows = [run_case(src, weights, sizes, est, free, seq) for free in FREES for seq in SEQUENCES]
    write_rows(out_path, rows)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--wan-experts":
        main_wan(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "--wan-video":
        main_wan_video(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "--qwen-image":
        main_qwen_image(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "--kontext":
        main_kontext(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3:
        main(sys.argv[1], sys.argv[2])
    else:
        sys.exit(__doc__)
