"""Real seconds and peak memory of the two FLUX.1 stages around the diffusion transformer, as ComfyUI runs them:
the text encoders (T5-XXL and CLIP-L) and the VAE decode, on one GPU, random weights, for tiersim's whole-job
prediction (the DiT iterations themselves: flux_dit.py / dit_iteration.py).

ComfyUI is not a dependency. This file rebuilds, in plain PyTorch, the modules of Comfy-Org/ComfyUI at commit
a125cd84b054a57729b5eecab930ca9408719832 (written anew, not copied) with the same module names, parameter dtypes and
op order, so the same kernels run (comfy_stages_check.py compares the outputs with ComfyUI's own classes, same
weights, on the CPU):
  T5-XXL  comfy/text_encoders/t5.py T5, T5Stack, T5Block, T5LayerSelfAttention, T5Attention (compute_bias,
          _relative_position_bucket), T5LayerFF, T5DenseGatedActDense, T5LayerNorm; config
          comfy/text_encoders/t5_config_xxl.json (T5XXL_CONFIG below). ComfyUI's FLUX text encoder is
          comfy/text_encoders/flux.py FluxClipModel: T5XXLModel (sd3_clip.py, an SDClipModel with attention_mask
          False, so no padding mask: the only mask is the relative position bias) then CLIP-L.
          The T5 tokenizer (flux.py T5XXLTokenizer) pads to min_length 256 and never cuts (max_length 99999999):
          a prompt of n tokens is max(256, n + 1) tokens, one sequence.
  CLIP-L  comfy/clip_model.py CLIPTextModel, CLIPTextModel_, CLIPEmbeddings, CLIPEncoder, CLIPLayer, CLIPAttention,
          CLIPMLP (quick_gelu); config comfy/sd1_clip_config.json (CLIP_L_CONFIG); 77 tokens (sd1_clip.py
          SDTokenizer: max_length 77, pad_to_max_length; a longer prompt is more 77-token rows in one batch);
          causal mask only (enable_attention_masks False); layer "last", the pooled row through text_projection.
  Both    comfy/sd1_clip.py SDClipModel.process_tokens / forward: token embeddings looked up with
          out_dtype=torch.float32 and the transformer called with dtype=torch.float32, so the activations are
          float32; the modules are comfy.ops.manual_cast (SDClipModel.__init__: operations default), whose Linear /
          LayerNorm / Embedding cast their weight (and bias) to the input's dtype on every forward
          (comfy/ops.py cast_bias_weight -> model_management.cast_to -> weight.to(dtype)). So ComfyUI computes
          both text encoders in fp32 with fp16 (or fp8) weights cast per layer per call; TF32 stays off
          (ComfyUI sets neither torch.backends.cuda.matmul.allow_tf32 nor set_float32_matmul_precision).
          Attention: comfy/ldm/modules/attention.py optimized_attention_for_device(small_input=True) ->
          attention_pytorch -> comfy/ops.py scaled_dot_product_attention (backend priority cuDNN, flash,
          efficient, math where torch's sdpa_kernel takes set_priority), the mask as attn_mask.
          Weights: comfy/sd.py CLIP.__init__ dtype = model_management.text_encoder_dtype() = float16 on a GPU;
          text_encoder_device() is the GPU on an sm_80+ card (should_use_fp16) in NORMAL/HIGH_VRAM. T5's weight
          dtype is the file's (sd3_clip.py t5_xxl_detect, flux.py pick_weight_dtype): t5xxl_fp16 -> float16,
          t5xxl_fp8_e4m3fn -> float8_e4m3fn for every T5 parameter (Linear, norms, both Embeddings), still cast to
          fp32 per forward (manual_cast: an fp8 Embedding is cast whole to fp32 before the lookup), plus
          T5.forward's torch.nan_to_num of the embeddings. (t5xxl_fp8_e4m3fn_scaled, scaled_fp8_ops, is not
          rebuilt.)
  VAE     comfy/ldm/modules/diffusionmodules/model.py Decoder, ResnetBlock, AttnBlock (pytorch_attention: one head
          of C channels over H*W tokens, comfy.ops.scaled_dot_product_attention), Upsample (nearest 2x
          interpolate + conv3x3), Normalize (GroupNorm 32, eps 1e-6), nonlinearity (silu). FLUX's ae has a
          16-channel decoder.conv_in and no post_quant_conv, so comfy/sd.py VAE.__init__ takes the
          "decoder.conv_in.weight" branch with ddconfig {z_channels 16, ch 128, ch_mult [1,2,4,4],
          num_res_blocks 2, attn_resolutions [], out_ch 3} and builds ldm/models/autoencoder.py AutoencodingEngine,
          whose decode() is decoder(z) alone (no post_quant_conv; FLUX's scale/shift is the latent format's, done
          by the sampler). Ops are comfy.ops.disable_weight_init (plain torch forwards). dtype: VAE.__init__
          model_management.vae_dtype(device, working_dtypes [bf16, fp32]) = bfloat16 on an sm_80+ card
          (should_use_bf16). VAE.decode: memory_used_decode = 2178 * h * w * 64 * 2 bytes (h, w the latent's),
          load_models_gpu, batch_number = free / that; it decodes in one piece and tiles (decode_tiled_) only after
          an OOM exception. Around the decoder: the latent .to(bf16).to(cuda) from the cpu, the output
          .to(intermediate_device() = cpu).float(), process_output clamp((x + 1) / 2, 0, 1), movedim(1, -1).

Measured per configuration on --device (cuda): build the model with random weights on the device in its
parameter dtype, --warmup untimed runs, then --iterations timed runs, each the GPU part timed by wall clock between
two torch.cuda.synchronize() (times), and ComfyUI's host part after it timed apart (host_times: the text encoders'
output .to(cpu); the VAE's output to the cpu as float, clamp, movedim; the VAE's latent from cpu to GPU is host_in_times).
peak_bytes is torch.cuda.max_memory_allocated over warm-up and timed runs (weights included); base_bytes the
memory allocated before them (weights + inputs). sdpa_backend: the first backend, in ComfyUI's priority, that
accepts one attention call of the model's shape and dtype alone (probed once; null where sdpa_kernel is missing).

  umT5   (--stages umt5xxl, Wan's text encoder) the same T5 with comfy/text_encoders/umt5_config_xxl.json: a
          relative_attention_bias in every block (t5.py: relative_attention = model_type != "umt5"), a 256,384-token
          vocabulary, and wan.py UMT5XXlModel's enable_attention_masks and zero_out_masked: T5Stack turns the padding
          mask into an fp32 mask added to each block's bias, the output multiplied by the mask.
Writes one JSON line per measurement to OUT/comfy_stages.jsonl: stage (t5xxl | umt5xxl | clip_l | vae_decode), config,
weight_dtype, compute_dtype, tokens (text) or width/height/latent_width/latent_height (VAE), batch, times,
median_s, warmup_s, host_times, host_median_s, host_in_times (VAE), peak_bytes, base_bytes, param_bytes, params,
sdpa_backend, sdpa_priority, tf32_matmul, cudnn_benchmark, comfy_memory_used_decode (VAE), comfy_tiles (VAE: false,
ComfyUI tiles only after an OOM), iterations, warmup, tiny, comfyui, torch, gpu.

  python3 experiments/validate/comfy_stages.py --out OUT_DIR          (all: T5 fp16 and fp8 at 256 and 512 tokens,
        CLIP-L at 77, VAE decode 1024x1024, 512x512, 1328x1328; --iterations 5 --warmup 2 by default)
  /usr/bin/python3 experiments/validate/comfy_stages.py --tiny --device cpu --out /tmp/cs    (local smoke run)
  --kernels adds one profiled run per configuration (after the timed ones; not in times or peak_bytes):
  OUT/comfy_stages_kernels.jsonl, per configuration every device kernel / memcpy by name, count, device us.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from profiler_events import kernels_by_name

COMFYUI_COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"

# comfy/text_encoders/t5_config_xxl.json (the fields T5.__init__ reads)
T5XXL_CONFIG = {"d_ff": 10240, "d_kv": 64, "d_model": 4096, "dense_act_fn": "gelu_pytorch_tanh", "is_gated_act": True,
                "layer_norm_epsilon": 1e-06, "model_type": "t5", "num_heads": 64, "num_layers": 24,
                "relative_attention_num_buckets": 32, "vocab_size": 32128}
T5_TINY = dict(T5XXL_CONFIG, d_ff=96, d_kv=8, d_model=32, num_heads=4, num_layers=2, vocab_size=512)
# comfy/text_encoders/umt5_config_xxl.json (Wan's text encoder: comfy/text_encoders/wan.py UMT5XXlModel)
UMT5XXL_CONFIG = dict(T5XXL_CONFIG, model_type="umt5", vocab_size=256384)
UMT5_TINY = dict(T5_TINY, model_type="umt5")
# comfy/sd1_clip_config.json (openai/clip-vit-large-patch14 text model)
CLIP_L_CONFIG = {"eos_token_id": 49407, "hidden_act": "quick_gelu", "hidden_size": 768, "intermediate_size": 3072,
                 "layer_norm_eps": 1e-05, "max_position_embeddings": 77, "num_attention_heads": 12,
                 "num_hidden_layers": 12, "vocab_size": 49408}
CLIP_TINY = dict(CLIP_L_CONFIG, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_hidden_layers=2)
# comfy/sd.py VAE.__init__, the "decoder.conv_in.weight" branch: ddconfig with z_channels from conv_in (16 for FLUX)
FLUX_VAE_DDCONFIG = {"double_z": True, "z_channels": 16, "resolution": 256, "in_channels": 3, "out_ch": 3, "ch": 128,
                     "ch_mult": [1, 2, 4, 4], "num_res_blocks": 2, "attn_resolutions": [], "dropout": 0.0}
VAE_TINY = dict(FLUX_VAE_DDCONFIG, ch=32, ch_mult=[1, 2, 2], num_res_blocks=1)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
if hasattr(torch, "float8_e4m3fn"):
    DTYPES["fp8_e4m3fn"] = torch.float8_e4m3fn

# comfy/ops.py scaled_dot_product_attention: cuDNN first, then flash, efficient, math (where supported).
SDPA_PRIORITY = None
try:
    import inspect
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if "set_priority" in inspect.signature(sdpa_kernel).parameters:
        SDPA_PRIORITY = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                         SDPBackend.MATH]
except (ImportError, TypeError):
    pass


def manual_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
    """torch's math attention, for torch without F.scaled_dot_product_attention (1.13: local checks only)."""
    s = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if attn_mask is not None:
        s = s + attn_mask
    return torch.matmul(torch.softmax(s, dim=-1), v)


def sdpa(q, k, v, attn_mask=None):
    """comfy/ops.py scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False)."""
    fn = getattr(F, "scaled_dot_product_attention", None)
    if fn is None:
        return manual_sdpa(q, k, v, attn_mask=attn_mask)
    if SDPA_PRIORITY is None or q.device.type != "cuda":
        return fn(q, k, v, attn_mask=attn_mask, dropout_p=0.0, is_causal=False)
    with sdpa_kernel(SDPA_PRIORITY, set_priority=True):
        return fn(q, k, v, attn_mask=attn_mask, dropout_p=0.0, is_causal=False)


def attention_pytorch(q, k, v, heads, mask=None):
    """comfy/ldm/modules/attention.py attention_pytorch (skip_reshape False, batch <= SDP_BATCH_LIMIT)."""
    b, _, dim_head = q.shape
    dim_head //= heads
    q, k, v = map(lambda t: t.view(b, -1, heads, dim_head).transpose(1, 2), (q, k, v))
    if mask is not None:
        if mask.ndim == 2:
            mask = mask.unsqueeze(0)
        if mask.ndim == 3:
            mask = mask.unsqueeze(1)
    out = sdpa(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).reshape(b, -1, heads * dim_head)


def cast_to(w, dtype, copy=False):
    """comfy/model_management.py cast_to for a weight already on the input's device."""
    if w is None:
        return None
    if not copy and (dtype is None or w.dtype == dtype):
        return w
    return w.to(dtype=dtype, copy=copy)


# ---- comfy.ops.manual_cast (the text encoders' operations): weights cast to the input's dtype per forward ----
class CastLinear(nn.Linear):
    def reset_parameters(self):
        return None

    def forward(self, x):
        return F.linear(x, cast_to(self.weight, x.dtype), cast_to(self.bias, x.dtype))


class CastLayerNorm(nn.LayerNorm):
    def reset_parameters(self):
        return None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, cast_to(self.weight, x.dtype), cast_to(self.bias, x.dtype),
                            self.eps)


class CastEmbedding(nn.Embedding):
    def reset_parameters(self):
        return None

    def forward(self, ids, out_dtype=None):
        output_dtype = out_dtype
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            out_dtype = None
        w = cast_to(self.weight, out_dtype)
        return F.embedding(ids, w, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                           self.sparse).to(dtype=output_dtype)


# ---- comfy.ops.disable_weight_init (the VAE's operations): plain torch forwards ----
class Conv2d(nn.Conv2d):
    def reset_parameters(self):
        return None


class GroupNorm(nn.GroupNorm):
    def reset_parameters(self):
        return None


# ---- T5 encoder: comfy/text_encoders/t5.py ----
class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6, dtype=None, device=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden_size, dtype=dtype, device=device))
        self.variance_epsilon = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        return cast_to(self.weight, x.dtype, copy=True) * x  # comfy.ops.cast_to_input (copy=True)


class T5DenseGatedActDense(nn.Module):
    def __init__(self, model_dim, ff_dim, dd):
        super().__init__()
        self.wi_0 = CastLinear(model_dim, ff_dim, bias=False, **dd)
        self.wi_1 = CastLinear(model_dim, ff_dim, bias=False, **dd)
        self.wo = CastLinear(ff_dim, model_dim, bias=False, **dd)

    def forward(self, x):
        hidden_gelu = F.gelu(self.wi_0(x), approximate="tanh")
        hidden_linear = self.wi_1(x)
        x = hidden_gelu * hidden_linear
        return self.wo(x)


class T5LayerFF(nn.Module):
    def __init__(self, model_dim, ff_dim, dd):
        super().__init__()
        self.DenseReluDense = T5DenseGatedActDense(model_dim, ff_dim, dd)
        self.layer_norm = T5LayerNorm(model_dim, **dd)

    def forward(self, x):
        x += self.DenseReluDense(self.layer_norm(x))
        return x


class T5Attention(nn.Module):
    def __init__(self, model_dim, inner_dim, num_heads, relative_attention_bias, dd):
        super().__init__()
        self.q = CastLinear(model_dim, inner_dim, bias=False, **dd)
        self.k = CastLinear(model_dim, inner_dim, bias=False, **dd)
        self.v = CastLinear(model_dim, inner_dim, bias=False, **dd)
        self.o = CastLinear(inner_dim, model_dim, bias=False, **dd)
        self.num_heads = num_heads
        self.relative_attention_bias = None
        if relative_attention_bias:
            self.relative_attention_num_buckets = 32
            self.relative_attention_max_distance = 128
            self.relative_attention_bias = CastEmbedding(self.relative_attention_num_buckets, num_heads, **dd)

    @staticmethod
    def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)).to(torch.long)
        relative_position_if_large = torch.min(relative_position_if_large,
                                               torch.full_like(relative_position_if_large, num_buckets - 1))
        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets

    def compute_bias(self, query_length, key_length, device, dtype):
        context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        relative_position = memory_position - context_position
        bucket = self._relative_position_bucket(relative_position, bidirectional=True,
                                                num_buckets=self.relative_attention_num_buckets,
                                                max_distance=self.relative_attention_max_distance)
        values = self.relative_attention_bias(bucket, out_dtype=dtype)  # (q, k, heads)
        values = values.permute([2, 0, 1]).unsqueeze(0)               # (1, heads, q, k)
        return values.contiguous()

    def forward(self, x, mask=None, past_bias=None):
        q = self.q(x)
        k = self.k(x)
        v = self.v(x)
        if self.relative_attention_bias is not None:
            past_bias = self.compute_bias(x.shape[1], x.shape[1], x.device, x.dtype)
        if past_bias is not None:
            mask = mask + past_bias if mask is not None else past_bias
        out = attention_pytorch(q, k * ((k.shape[-1] / self.num_heads) ** 0.5), v, self.num_heads, mask)
        return self.o(out), past_bias


class T5LayerSelfAttention(nn.Module):
    def __init__(self, model_dim, inner_dim, num_heads, relative_attention_bias, dd):
        super().__init__()
        self.SelfAttention = T5Attention(model_dim, inner_dim, num_heads, relative_attention_bias, dd)
        self.layer_norm = T5LayerNorm(model_dim, **dd)

    def forward(self, x, mask=None, past_bias=None):
        output, past_bias = self.SelfAttention(self.layer_norm(x), mask=mask, past_bias=past_bias)
        x += output
        return x, past_bias


class T5Block(nn.Module):
    def __init__(self, model_dim, inner_dim, ff_dim, num_heads, relative_attention_bias, dd):
        super().__init__()
        self.layer = nn.ModuleList([T5LayerSelfAttention(model_dim, inner_dim, num_heads, relative_attention_bias, dd),
                                    T5LayerFF(model_dim, ff_dim, dd)])

    def forward(self, x, mask=None, past_bias=None):
        x, past_bias = self.layer[0](x, mask, past_bias)
        x = self.layer[-1](x)
        return x, past_bias


class T5Stack(nn.Module):
    def __init__(self, num_layers, model_dim, inner_dim, ff_dim, num_heads, dd, relative_attention=True):
        super().__init__()
        # relative_attention (model_type "t5"): only block 0 owns relative_attention_bias; umT5: every block
        self.block = nn.ModuleList([T5Block(model_dim, inner_dim, ff_dim, num_heads,
                                            (not relative_attention) or i == 0, dd) for i in range(num_layers)])
        self.final_layer_norm = T5LayerNorm(model_dim, **dd)

    def forward(self, x, attention_mask=None):
        mask, past_bias = None, None  # attention_mask None for FLUX's T5XXLModel (attention_mask=False)
        if attention_mask is not None:  # umT5 (UMT5XXlModel: enable_attention_masks=True)
            mask = 1.0 - attention_mask.to(x.dtype).reshape((attention_mask.shape[0], 1, -1, attention_mask.shape[-1])) \
                .expand(attention_mask.shape[0], 1, attention_mask.shape[-1], attention_mask.shape[-1])
            mask = mask.masked_fill(mask.to(torch.bool), -torch.finfo(x.dtype).max)
        for block in self.block:
            x, past_bias = block(x, mask, past_bias)
        return self.final_layer_norm(x), None


class T5(nn.Module):
    def __init__(self, config, dtype, device):
        super().__init__()
        dd = dict(dtype=dtype, device=device)
        self.num_layers = config["num_layers"]
        assert config["is_gated_act"] and config["dense_act_fn"] == "gelu_pytorch_tanh"
        self.encoder = T5Stack(self.num_layers, config["d_model"], config["d_kv"] * config["num_heads"],
                               config["d_ff"], config["num_heads"], dd,
                               relative_attention=config.get("model_type", "t5") != "umt5")
        self.dtype = dtype
        self.shared = CastEmbedding(config["vocab_size"], config["d_model"], **dd)

    def get_input_embeddings(self):
        return self.shared

    def forward(self, embeds, attention_mask=None):
        x = embeds
        if self.dtype not in [torch.float32, torch.float16, torch.bfloat16]:
            x = torch.nan_to_num(x)  # "Fix for fp8 T5 base"
        return self.encoder(x, attention_mask)


# ---- CLIP-L text model: comfy/clip_model.py ----
class CLIPAttention(nn.Module):
    def __init__(self, embed_dim, heads, dd):
        super().__init__()
        self.heads = heads
        self.q_proj = CastLinear(embed_dim, embed_dim, bias=True, **dd)
        self.k_proj = CastLinear(embed_dim, embed_dim, bias=True, **dd)
        self.v_proj = CastLinear(embed_dim, embed_dim, bias=True, **dd)
        self.out_proj = CastLinear(embed_dim, embed_dim, bias=True, **dd)

    def forward(self, x, mask=None):
        q = self.q_proj(x)
        k = self.k_proj(x)
        v = self.v_proj(x)
        return self.out_proj(attention_pytorch(q, k, v, self.heads, mask))


class CLIPMLP(nn.Module):
    def __init__(self, embed_dim, intermediate_size, dd):
        super().__init__()
        self.fc1 = CastLinear(embed_dim, intermediate_size, bias=True, **dd)
        self.fc2 = CastLinear(intermediate_size, embed_dim, bias=True, **dd)

    def forward(self, x):
        x = self.fc1(x)
        x = x * torch.sigmoid(1.702 * x)  # ACTIVATIONS["quick_gelu"]
        return self.fc2(x)


class CLIPLayer(nn.Module):
    def __init__(self, embed_dim, heads, intermediate_size, dd):
        super().__init__()
        self.layer_norm1 = CastLayerNorm(embed_dim, **dd)
        self.self_attn = CLIPAttention(embed_dim, heads, dd)
        self.layer_norm2 = CastLayerNorm(embed_dim, **dd)
        self.mlp = CLIPMLP(embed_dim, intermediate_size, dd)

    def forward(self, x, mask=None):
        x += self.self_attn(self.layer_norm1(x), mask)
        x += self.mlp(self.layer_norm2(x))
        return x


class CLIPEncoder(nn.Module):
    def __init__(self, num_layers, embed_dim, heads, intermediate_size, dd):
        super().__init__()
        self.layers = nn.ModuleList([CLIPLayer(embed_dim, heads, intermediate_size, dd) for _ in range(num_layers)])

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return x, None


class CLIPEmbeddings(nn.Module):
    def __init__(self, embed_dim, vocab_size, num_positions, dd):
        super().__init__()
        self.token_embedding = CastEmbedding(vocab_size, embed_dim, **dd)
        self.position_embedding = CastEmbedding(num_positions, embed_dim, **dd)


class CLIPTextModel_(nn.Module):
    def __init__(self, config, dd):
        super().__init__()
        assert config["hidden_act"] == "quick_gelu"
        embed_dim = config["hidden_size"]
        self.embeddings = CLIPEmbeddings(embed_dim, config["vocab_size"], config["max_position_embeddings"], dd)
        self.encoder = CLIPEncoder(config["num_hidden_layers"], embed_dim, config["num_attention_heads"],
                                   config["intermediate_size"], dd)
        self.final_layer_norm = CastLayerNorm(embed_dim, **dd)

    def forward(self, embeds, num_tokens, dtype=torch.float32):
        x = embeds + cast_to(self.embeddings.position_embedding.weight, dtype)
        causal_mask = torch.full((x.shape[1], x.shape[1]), -torch.finfo(x.dtype).max, dtype=x.dtype,
                                 device=x.device).triu_(1)
        x, i = self.encoder(x, mask=causal_mask)
        x = self.final_layer_norm(x)
        pooled_output = x[list(range(x.shape[0])), list(map(lambda a: a - 1, num_tokens))]
        return x, i, pooled_output


class CLIPTextModel(nn.Module):
    def __init__(self, config, dtype, device):
        super().__init__()
        dd = dict(dtype=dtype, device=device)
        self.num_layers = config["num_hidden_layers"]
        self.text_model = CLIPTextModel_(config, dd)
        embed_dim = config["hidden_size"]
        self.text_projection = CastLinear(embed_dim, embed_dim, bias=False, **dd)
        self.dtype = dtype

    def get_input_embeddings(self):
        return self.text_model.embeddings.token_embedding

    def forward(self, embeds, num_tokens):
        x = self.text_model(embeds, num_tokens)
        out = self.text_projection(x[2])
        return (x[0], x[1], out, x[2])


def num_tokens(tokens, end_token):
    """comfy/sd1_clip.py SDClipModel.process_tokens: each row's tokens up to and including its first end token."""
    out = []
    for row in tokens:
        n = len(row)
        if end_token in row:
            n = row.index(end_token) + 1
        out.append(n)
    return out


def encode_text(transformer, tokens, end_token, masks=False):
    """comfy/sd1_clip.py SDClipModel.forward for plain integer tokens (process_tokens then the transformer), layer
    "last": z = outputs[0].float(); the pooled output (CLIP: outputs[3], return_projected_pooled False). masks: umT5's
    enable_attention_masks and zero_out_masked (1 up to each row's end token, 0 after; z times the mask)."""
    device = transformer.get_input_embeddings().weight.device
    ids = torch.tensor(tokens, device=device, dtype=torch.long)
    embeds = transformer.get_input_embeddings()(ids, out_dtype=torch.float32)
    if isinstance(transformer, T5) and masks:
        attention_mask = torch.tensor([[1] * n + [0] * (len(row) - n) for row, n in
                                       zip(tokens, num_tokens(tokens, end_token))], device=device, dtype=torch.long)
        outputs = transformer(embeds, attention_mask)
        z = outputs[0].float()
        z *= attention_mask.unsqueeze(-1).float()
        return z, None
    if isinstance(transformer, T5):
        outputs = transformer(embeds)
    else:
        outputs = transformer(embeds, num_tokens(tokens, end_token))
    z = outputs[0].float()
    pooled = outputs[3].float() if len(outputs) >= 4 and outputs[3] is not None else None
    return z, pooled


# ---- VAE decoder: comfy/ldm/modules/diffusionmodules/model.py ----
def Normalize(in_channels, num_groups=32):
    return GroupNorm(num_groups=num_groups, num_channels=in_channels, eps=1e-6, affine=True)


def nonlinearity(x):
    return F.silu(x)


class Upsample(nn.Module):
    def __init__(self, in_channels, with_conv, scale_factor=2.0):
        super().__init__()
        self.with_conv = with_conv
        self.scale_factor = scale_factor
        if self.with_conv:
            self.conv = Conv2d(in_channels, in_channels, kernel_size=3, stride=1, padding=1)

    def forward(self, x):
        scale_factor = (self.scale_factor,) * (x.ndim - 2)
        x = F.interpolate(x, scale_factor=scale_factor, mode="nearest")  # interpolate_up
        if self.with_conv:
            x = self.conv(x)
        return x


class ResnetBlock(nn.Module):
    def __init__(self, *, in_channels, out_channels=None, dropout=0.0):
        super().__init__()
        self.in_channels = in_channels
        out_channels = in_channels if out_channels is None else out_channels
        self.out_channels = out_channels
        self.swish = nn.SiLU(inplace=True)
        self.norm1 = Normalize(in_channels)
        self.conv1 = Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.norm2 = Normalize(out_channels)
        self.dropout = nn.Dropout(dropout, inplace=True)
        self.conv2 = Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1)
        if self.in_channels != self.out_channels:
            self.nin_shortcut = Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, x, temb=None):
        h = x
        h = self.norm1(h)
        h = self.swish(h)
        h = self.conv1(h)
        h = self.norm2(h)
        h = self.swish(h)
        h = self.dropout(h)
        h = self.conv2(h)
        if self.in_channels != self.out_channels:
            x = self.nin_shortcut(x)
        return x + h


def pytorch_attention(q, k, v):
    """model.py pytorch_attention: one head, head_dim C, H*W tokens."""
    orig_shape = q.shape
    B, C = orig_shape[0], orig_shape[1]
    q, k, v = map(lambda t: t.view(B, 1, C, -1).transpose(2, 3).contiguous(), (q, k, v))
    out = sdpa(q, k, v, attn_mask=None)
    return out.transpose(2, 3).reshape(orig_shape)


class AttnBlock(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.in_channels = in_channels
        self.norm = Normalize(in_channels)
        self.q = Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)
        self.k = Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)
        self.v = Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)
        self.proj_out = Conv2d(in_channels, in_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, x):
        h_ = self.norm(x)
        q = self.q(h_)
        k = self.k(h_)
        v = self.v(h_)
        h_ = pytorch_attention(q, k, v)
        h_ = self.proj_out(h_)
        return x + h_


class Decoder(nn.Module):
    def __init__(self, *, ch, out_ch, ch_mult, num_res_blocks, attn_resolutions, dropout=0.0, resamp_with_conv=True,
                 in_channels, resolution, z_channels, **ignore):
        super().__init__()
        self.ch = ch
        self.num_resolutions = len(ch_mult)
        self.num_res_blocks = num_res_blocks
        block_in = ch * ch_mult[self.num_resolutions - 1]
        curr_res = resolution // 2 ** (self.num_resolutions - 1)
        self.conv_in = Conv2d(z_channels, block_in, kernel_size=3, stride=1, padding=1)
        self.mid = nn.Module()
        self.mid.block_1 = ResnetBlock(in_channels=block_in, out_channels=block_in, dropout=dropout)
        self.mid.attn_1 = AttnBlock(block_in)
        self.mid.block_2 = ResnetBlock(in_channels=block_in, out_channels=block_in, dropout=dropout)
        self.up = nn.ModuleList()
        for i_level in reversed(range(self.num_resolutions)):
            block, attn = nn.ModuleList(), nn.ModuleList()
            block_out = ch * ch_mult[i_level]
            for _ in range(self.num_res_blocks + 1):
                block.append(ResnetBlock(in_channels=block_in, out_channels=block_out, dropout=dropout))
                block_in = block_out
                if curr_res in attn_resolutions:
                    attn.append(AttnBlock(block_in))
            up = nn.Module()
            up.block = block
            up.attn = attn
            if i_level != 0:
                up.upsample = Upsample(block_in, resamp_with_conv)
                curr_res = curr_res * 2
            self.up.insert(0, up)
        self.norm_out = Normalize(block_in)
        self.conv_out = Conv2d(block_in, out_ch, kernel_size=3, stride=1, padding=1)

    def forward(self, z):
        temb = None
        h = self.conv_in(z)
        h = self.mid.block_1(h, temb)
        h = self.mid.attn_1(h)
        h = self.mid.block_2(h, temb)
        for i_level in reversed(range(self.num_resolutions)):
            for i_block in range(self.num_res_blocks + 1):
                h = self.up[i_level].block[i_block](h, temb)
                if len(self.up[i_level].attn) > 0:
                    h = self.up[i_level].attn[i_block](h)
            if i_level != 0:
                h = self.up[i_level].upsample(h)
        h = self.norm_out(h)
        h = nonlinearity(h)
        return self.conv_out(h)


class FluxVAE(nn.Module):
    """ldm/models/autoencoder.py AutoencodingEngine, decode side only: decode(z) = decoder(z)."""
    def __init__(self, ddconfig):
        super().__init__()
        self.decoder = Decoder(**ddconfig)

    def decode(self, z):
        return self.decoder(z)


def comfy_memory_used_decode(latent_shape, dtype):
    """comfy/sd.py VAE.__init__ default memory_used_decode: 2178 * h * w * 64 * dtype_size bytes."""
    return 2178 * latent_shape[2] * latent_shape[3] * 64 * torch.tensor([], dtype=dtype).element_size()


# ---- random weights ----
@torch.no_grad()
def randomize(model, dtype, seed=0):
    """Random weights in `dtype` (drawn in fp32 on the parameter's device, then cast): Linear/Conv weights
    N(0, 1/fan_in), biases N(0, 0.02), norm weights 1 and biases 0, embeddings N(0, 1)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    for name, m in model.named_modules():
        for pname, p in list(m.named_parameters(recurse=False)):
            if isinstance(m, (nn.Linear, nn.Conv2d)) and pname == "weight":
                std = 1.0 / math.sqrt(p[0].numel())
            elif isinstance(m, (nn.GroupNorm, nn.LayerNorm, T5LayerNorm)):
                std = None
            elif isinstance(m, nn.Embedding):
                std = 1.0
            else:
                std = 0.02
            if std is None:
                val = torch.ones if pname == "weight" else torch.zeros
                p.data = val(p.shape, dtype=torch.float32, device=p.device).to(dtype)
            else:
                # draw on the cpu in chunks (seeded, device independent), cast, copy
                flat = torch.empty(p.numel(), dtype=dtype, device=p.device)
                step = 1 << 24
                for i in range(0, p.numel(), step):
                    n = min(step, p.numel() - i)
                    flat[i:i + n] = (torch.randn(n, generator=g) * std).to(p.device).to(dtype)
                p.data = flat.view(p.shape)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def fast_randomize(model, dtype):
    """Like randomize, but drawn on the GPU (the full-size models: the cpu draw of 4.8 B values takes minutes)."""
    with torch.no_grad():
        for m in model.modules():
            for pname, p in list(m.named_parameters(recurse=False)):
                shape, dev = p.shape, p.device
                if isinstance(m, (nn.GroupNorm, nn.LayerNorm, T5LayerNorm)):
                    t = (torch.ones if pname == "weight" else torch.zeros)(shape, device=dev)
                else:
                    std = (1.0 / math.sqrt(p[0].numel()) if isinstance(m, (nn.Linear, nn.Conv2d)) and pname == "weight"
                           else 1.0 if isinstance(m, nn.Embedding) else 0.02)
                    t = torch.empty(shape, device=dev, dtype=torch.float32)
                    if t.numel() > (1 << 26):  # draw big tensors in rows to bound the fp32 temporary
                        out = torch.empty(shape, device=dev, dtype=dtype)
                        rows = max(1, (1 << 26) // max(1, t[0].numel()))
                        del t
                        for i in range(0, shape[0], rows):
                            out[i:i + rows] = (torch.randn((min(rows, shape[0] - i),) + tuple(shape[1:]), device=dev)
                                               * std).to(dtype)
                        p.data = out
                        continue
                    t.normal_(0.0, std)
                p.data = t.to(dtype)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def param_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())


# ---- measurement ----
def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def probe_sdpa(q, k, v, mask=None):
    """The first backend in ComfyUI's priority that runs this attention call alone (None without sdpa_kernel)."""
    if SDPA_PRIORITY is None or q.device.type != "cuda":
        return None
    for backend in SDPA_PRIORITY:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with sdpa_kernel([backend]):
                    F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False)
            torch.cuda.synchronize()
            return backend.name
        except RuntimeError:
            continue
    return "none"


def run_timed(gpu_part, host_part, device, n, host_in=None):
    """n runs: each host_in (optional, timed), the GPU part between two synchronizes, then the host part."""
    times, host_times, in_times = [], [], []
    for _ in range(n):
        sync(device)
        t0 = time.perf_counter()
        x = host_in() if host_in else None
        sync(device)
        t1 = time.perf_counter()
        out = gpu_part(x)
        sync(device)
        t2 = time.perf_counter()
        host_part(out)
        sync(device)
        t3 = time.perf_counter()
        times.append(t2 - t1)
        host_times.append(t3 - t2)
        in_times.append(t1 - t0)
        del out, x
    return times, host_times, in_times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory (comfy_stages.jsonl is appended to)")
    ap.add_argument("--stages", nargs="+", default=["t5xxl", "clip_l", "vae_decode"],
                    choices=["t5xxl", "umt5xxl", "clip_l", "vae_decode"])
    ap.add_argument("--umt5-tokens", nargs="+", type=int, default=None, help="umT5 tokens, default 512 1024 (tiny: 16)")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--tiny", action="store_true", help="small configs for a smoke run")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (with --tiny)")
    ap.add_argument("--t5-tokens", nargs="+", type=int, default=None, help="default 256 512 (tiny: 16 32)")
    ap.add_argument("--t5-dtypes", nargs="+", default=["fp16", "fp8_e4m3fn"], choices=["fp16", "fp8_e4m3fn", "fp32"],
                    help="T5 weight dtypes (t5xxl_fp16, t5xxl_fp8_e4m3fn)")
    ap.add_argument("--clip-dtype", default="fp16", help="CLIP-L weight dtype (text_encoder_dtype: fp16)")
    ap.add_argument("--vae-sizes", nargs="+", default=None,
                    help="image WxH, default 1024x1024 512x512 1328x1328 (tiny: 64x64 128x128)")
    ap.add_argument("--vae-dtype", default="bf16", help="VAE dtype (vae_dtype on sm_80+: bf16)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--kernels", action="store_true",
                    help="also profile one run per configuration: kernel names, counts, device time "
                         "(OUT/comfy_stages_kernels.jsonl)")
    a = ap.parse_args()

    device = torch.device(a.device)
    if device.type == "cpu" and not a.tiny:
        sys.exit("--device cpu only with --tiny")
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device")
    os.makedirs(a.out, exist_ok=True)
    results = os.path.join(a.out, "comfy_stages.jsonl")
    t5_tokens = a.t5_tokens or ([16, 32] if a.tiny else [256, 512])
    vae_sizes = a.vae_sizes or (["64x64", "128x128"] if a.tiny else ["1024x1024", "512x512", "1328x1328"])
    gpu = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    common = dict(batch=a.batch, iterations=a.iterations, warmup=a.warmup, tiny=a.tiny, comfyui=COMFYUI_COMMIT,
                  torch=torch.__version__, gpu=gpu, sdpa_priority=SDPA_PRIORITY is not None,
                  tf32_matmul=torch.backends.cuda.matmul.allow_tf32, cudnn_benchmark=torch.backends.cudnn.benchmark)
    init = fast_randomize if device.type == "cuda" else (lambda m, dt: randomize(m, dt))

    def measure(row, gpu_part, host_part, host_in=None):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        with torch.no_grad():
            warm = run_timed(gpu_part, host_part, device, a.warmup, host_in)[0]
            times, host_times, in_times = run_timed(gpu_part, host_part, device, a.iterations, host_in)
        row = dict(row, **common, times=times, median_s=statistics.median(times), warmup_s=warm,
                   host_times=host_times, host_median_s=statistics.median(host_times),
                   peak_bytes=torch.cuda.max_memory_allocated() if device.type == "cuda" else None,
                   base_bytes=base if device.type == "cuda" else None)
        if host_in is not None:
            row["host_in_times"] = in_times
        if a.kernels:
            row["kernels_file"] = "comfy_stages_kernels.jsonl"
            kernel_table(row, gpu_part, host_in)
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")
        what = row.get("tokens") if row["stage"] != "vae_decode" else f"{row['width']}x{row['height']}"
        print(f"{row['stage']:<10} {row['weight_dtype']:<10} {what!s:>9}  median {row['median_s'] * 1e3:8.2f} ms  "
              f"host {row['host_median_s'] * 1e3:6.2f} ms  peak "
              f"{(row['peak_bytes'] or 0) / 1e9:6.2f} GB  params {row['param_bytes'] / 1e9:.2f} GB  "
              f"sdpa {row['sdpa_backend']}  [{' '.join(f'{x * 1e3:.1f}' for x in times)}]", file=sys.stderr,
              flush=True)
        return row

    def kernel_table(row, gpu_part, host_in):
        """One more GPU part under torch.profiler: every device kernel/memcpy/memset by name with its count and
        total device microseconds, to OUT/comfy_stages_kernels.jsonl (one line per configuration)."""
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        x = host_in() if host_in else None
        sync(device)
        with torch.no_grad(), profile(activities=acts) as prof:
            gpu_part(x)
            sync(device)
        keys = ("stage", "weight_dtype", "tokens", "width", "height")
        with open(os.path.join(a.out, "comfy_stages_kernels.jsonl"), "a") as f:
            f.write(json.dumps(dict({k: row.get(k) for k in keys},
                                    **kernels_by_name(prof, device_only=device.type == "cuda"))) + "\n")

    to_host = (lambda out: out[0].to("cpu")) if device.type == "cuda" else (lambda out: out[0].clone())
    g = torch.Generator(device="cpu").manual_seed(1)

    if "t5xxl" in a.stages:
        cfg = T5_TINY if a.tiny else T5XXL_CONFIG
        for wd in a.t5_dtypes:
            if wd not in DTYPES or (wd.startswith("fp8") and device.type == "cpu"):
                print(f"t5xxl {wd}: not available with torch {torch.__version__} on {device.type}, skipped",
                      file=sys.stderr)
                continue
            model = init(T5(cfg, DTYPES[wd], device), DTYPES[wd])
            heads, dk = cfg["num_heads"], cfg["d_kv"]
            for n in t5_tokens:
                # T5XXLTokenizer: the prompt's tokens, end (1), pad (0) up to min_length 256
                words = min(n - 1, max(1, n // 2))
                tokens = [torch.randint(2, cfg["vocab_size"], (words,), generator=g).tolist() + [1] +
                          [0] * (n - words - 1) for _ in range(a.batch)]
                backend = None
                if device.type == "cuda":
                    q = torch.randn(a.batch, n, heads * dk, device=device).view(a.batch, -1, heads, dk).transpose(1, 2)
                    backend = probe_sdpa(q, q, q, torch.randn(1, heads, n, n, device=device))
                    del q
                measure(dict(stage="t5xxl", config="comfy/text_encoders/t5_config_xxl.json" + (" (tiny)" if a.tiny
                             else ""), weight_dtype=wd, compute_dtype="fp32", tokens=n,
                             param_bytes=param_bytes(model), params=sum(p.numel() for p in model.parameters()),
                             sdpa_backend=backend),
                        lambda _x, tokens=tokens: encode_text(model, tokens, 1), to_host)
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()

    if "umt5xxl" in a.stages:
        # Wan's encoder (comfy/text_encoders/wan.py): umT5 with attention masks on and zero_out_masked; the tokenizer
        # pads to min_length 512 with pad 0 after the end token 1; the weight dtypes of umt5_xxl_fp16 and
        # umt5_xxl_fp8_e4m3fn (the _scaled file's extra multiply is not rebuilt), still computed in fp32.
        cfg = UMT5_TINY if a.tiny else UMT5XXL_CONFIG
        for wd in a.t5_dtypes:
            if wd not in DTYPES or (wd.startswith("fp8") and device.type == "cpu"):
                continue
            model = init(T5(cfg, DTYPES[wd], device), DTYPES[wd])
            for n in a.umt5_tokens or ([16] if a.tiny else [512, 1024]):
                words = min(n - 1, max(1, n // 4))
                tokens = [torch.randint(2, cfg["vocab_size"], (words,), generator=g).tolist() + [1] +
                          [0] * (n - words - 1) for _ in range(a.batch)]
                measure(dict(stage="umt5xxl", config="comfy/text_encoders/umt5_config_xxl.json" + (" (tiny)" if a.tiny
                             else ""), weight_dtype=wd, compute_dtype="fp32", tokens=n, prompt_tokens=words + 1,
                             param_bytes=param_bytes(model), params=sum(p.numel() for p in model.parameters()),
                             sdpa_backend=None),
                        lambda _x, tokens=tokens: encode_text(model, tokens, 1, masks=True), to_host)
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()

    if "clip_l" in a.stages:
        cfg = CLIP_TINY if a.tiny else CLIP_L_CONFIG
        wd = a.clip_dtype
        model = init(CLIPTextModel(cfg, DTYPES[wd], device), DTYPES[wd])
        n = cfg["max_position_embeddings"]
        # SDTokenizer: start (49406), the prompt's tokens, end (49407), end as pad up to 77
        start, end = cfg["eos_token_id"] - 1, cfg["eos_token_id"]
        tokens = [[start] + torch.randint(0, min(start, cfg["vocab_size"]), (30,), generator=g).tolist() + [end] *
                  (n - 31) for _ in range(a.batch)]
        backend = None
        if device.type == "cuda":
            heads = cfg["num_attention_heads"]
            dk = cfg["hidden_size"] // heads
            q = torch.randn(a.batch, n, heads * dk, device=device).view(a.batch, -1, heads, dk).transpose(1, 2)
            backend = probe_sdpa(q, q, q, torch.randn(1, 1, n, n, device=device))
            del q
        measure(dict(stage="clip_l", config="comfy/sd1_clip_config.json" + (" (tiny)" if a.tiny else ""),
                     weight_dtype=wd, compute_dtype="fp32", tokens=n, param_bytes=param_bytes(model),
                     params=sum(p.numel() for p in model.parameters()), sdpa_backend=backend),
                lambda _x: encode_text(model, tokens, end), to_host)
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()

    if "vae_decode" in a.stages:
        cfg = VAE_TINY if a.tiny else FLUX_VAE_DDCONFIG
        vd = DTYPES[a.vae_dtype]
        model = init(FluxVAE(cfg).to(device), vd)
        up = 2 ** (len(cfg["ch_mult"]) - 1)
        c_mid = cfg["ch"] * cfg["ch_mult"][-1]
        for size in vae_sizes:
            w, h = (int(s) for s in size.lower().split("x"))
            lw, lh = w // up, h // up
            latent = torch.randn(a.batch, cfg["z_channels"], lh, lw, generator=g)  # KSampler's output: cpu, fp32
            backend = None
            if device.type == "cuda":
                qv = torch.randn(a.batch, 1, lh * lw, c_mid, device=device, dtype=vd)
                backend = probe_sdpa(qv, qv, qv)
                del qv

            def host_in():
                return latent.to(vd).to(device)

            def host_out(out):
                pix = torch.clamp((out.to("cpu").float() + 1.0) / 2.0, min=0.0, max=1.0)  # process_output
                pixel_samples = torch.empty((latent.shape[0],) + tuple(pix.shape[1:]))
                pixel_samples[0:latent.shape[0]] = pix
                return pixel_samples.movedim(1, -1)

            measure(dict(stage="vae_decode", config="comfy/sd.py VAE ddconfig (16-channel decoder.conv_in)" +
                         (" (tiny)" if a.tiny else ""), weight_dtype=a.vae_dtype, compute_dtype=a.vae_dtype,
                         width=w, height=h, latent_width=lw, latent_height=lh, param_bytes=param_bytes(model),
                         params=sum(p.numel() for p in model.parameters()), sdpa_backend=backend,
                         comfy_memory_used_decode=comfy_memory_used_decode(latent.shape, vd), comfy_tiles=False),
                    lambda x: model.decode(x), host_out, host_in)
        del model
    print(f"wrote {results}", file=sys.stderr)


if __name__ == "__main__":
    main()
