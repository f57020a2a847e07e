"""A Wan 2.1 text-to-video diffusion transformer (random weights) built as ComfyUI builds its WanModel, for timing.

ComfyUI is not a dependency. This file rebuilds the structure of Comfy-Org/ComfyUI at commit
a125cd84b054a57729b5eecab930ca9408719832 (written anew, not copied):
  comfy/ldm/wan/model.py    WanModel.__init__ with model_type "t2v" (module names and registration order),
                            WanModel._forward (pad_to_patch_size, rope_encode), forward_orig, unpatchify;
                            WanSelfAttention, WanT2VCrossAttention, WanAttentionBlock, Head, repeat_e,
                            sinusoidal_embedding_1d
  comfy/ldm/flux/layers.py  EmbedND, comfy/ldm/flux/math.py rope and apply_rope1 (rotary in float32)
  comfy/ldm/modules/attention.py attention_pytorch (q, k, v as (batch, tokens, heads * head_dim), viewed to
                            (batch, heads, tokens, head_dim); output (batch, tokens, heads * head_dim)), with
                            comfy/ops.py's scaled_dot_product_attention (cuDNN-first backend priority)
  comfy/rmsnorm.py          RMSNorm (torch.nn.RMSNorm where torch has it: F.rms_norm, parameter `weight`)
  comfy/ldm/common_dit.py   pad_to_patch_size (circular)
  comfy/model_detection.py  the wan2.1 branch of detect_unet_config (num_heads = dim // 128, patch (1, 2, 2),
                            freq_dim 256, qk_norm True, cross_attn_norm True, eps 1e-6; text_len and text_dim
                            WanModel's defaults 512 and 4096)
ComfyUI's operations.Linear / Conv3d / LayerNorm / RMSNorm are plain torch modules here (the comfy ops call the
same functional ops when their weights are already on the device and dtype). ComfyUI's RMSNorm op has a `bias`
attribute (None; ops.RMSNorm.reset_parameters sets it) and so does this one: DisTorch looks for it.

Module names (= the keys of ComfyUI's Wan diffusion-model safetensors without .weight/.bias), in registration
order: patch_embedding (Conv3d, float32 even in a bf16 model: WanModel builds it with dtype=torch.float32 and
runs it on x.float()), text_embedding.{0,2}, time_embedding.{0,2}, time_projection.1, blocks.N.{self_attn.{q,k,
v,o,norm_q,norm_k}, norm3 (LayerNorm with affine: cross_attn_norm), cross_attn.{q,k,v,o,norm_q,norm_k}, ffn.0,
ffn.2} and blocks.N's own parameter `modulation` (1, 6, dim), head.head and head's own `modulation` (1, 2, dim).
norm1, norm2 and head.norm are LayerNorms without parameters (comfy ops: ComfyUI's load list keeps them).
rope_embedder has no parameters. blocks.N and head own a parameter but have children with parameters, so
ComfyUI's ModelPatcher._load_list skips them (model_patcher.py:621): see load_list_rule.

Hyperparameters come from a diffusers WanTransformer3DModel config (traces/models/wan2.1-t2v-14b.json):
dim = attention_head_dim * num_attention_heads, ffn_dim, num_layers, in_channels, out_channels, text_dim,
freq_dim, patch_size, cross_attn_norm, eps.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flux_dit  # noqa: E402  (same ComfyUI rope / EmbedND / sdpa / rms_norm)

SDPA_PRIORITY = flux_dit.SDPA_PRIORITY
TEXT_TOKENS = 512  # UMT5XXlTokenizer(min_length=512) in comfy/text_encoders/wan.py: every prompt is >= 512 tokens
TIMESTEP = 500.0   # model_base._apply_model passes model_sampling.timestep(sigma) = sigma * 1000 (FLOW), float32


def wan_params(config_path, tiny=False):
    """WanModel's constructor arguments from a diffusers WanTransformer3DModel config."""
    with open(config_path) as f:
        d = json.load(f)
    heads = d["num_attention_heads"]
    dim = d["attention_head_dim"] * heads
    patch = tuple(d.get("patch_size") or (1, 2, 2))
    p = dict(model_type="t2v", patch_size=patch, text_len=TEXT_TOKENS, in_dim=d["in_channels"], dim=dim,
             ffn_dim=d["ffn_dim"], freq_dim=d.get("freq_dim", 256), text_dim=d.get("text_dim", 4096),
             out_dim=d.get("out_channels") or d["in_channels"], num_heads=heads, num_layers=d["num_layers"],
             window_size=(-1, -1), qk_norm=True, cross_attn_norm=bool(d.get("cross_attn_norm", True)),
             eps=float(d.get("eps", 1e-6)))
    if tiny:
        p.update(num_layers=min(2, p["num_layers"]))
    if dim // heads != 128:
        # ComfyUI's detect_unet_config derives num_heads = dim // 128; another head_dim is not a ComfyUI Wan
        raise ValueError(f"{config_path}: head_dim {dim // heads}, ComfyUI's Wan assumes 128")
    return d.get("name", config_path), p


def cast_to(weight, dtype, device):
    """comfy.model_management.cast_to(weight, dtype, device) with copy=False: the weight itself when it is
    already there (the streamer of dit_iteration.py puts cpu weights on the GPU before the module runs)."""
    if weight.device == device and weight.dtype == dtype:
        return weight
    return weight.to(device=device, dtype=dtype)


def sinusoidal_embedding_1d(dim, position):
    assert dim % 2 == 0
    half = dim // 2
    position = position.type(torch.float32)
    sinusoid = torch.outer(position, torch.pow(10000, -torch.arange(half).to(position).div(half)))
    return torch.cat([torch.cos(sinusoid), torch.sin(sinusoid)], dim=1)


def apply_rope1(x, freqs_cis):
    """flux/math.py apply_rope1: rotary in freqs_cis's dtype (float32), back to x's dtype."""
    x_ = x.to(dtype=freqs_cis.dtype).reshape(*x.shape[:-1], -1, 1, 2)
    x_out = freqs_cis[..., 0] * x_[..., 0]
    x_out.addcmul_(freqs_cis[..., 1], x_[..., 1])
    return x_out.reshape(*x.shape).type_as(x)


def optimized_attention(q, k, v, heads):
    """attention_pytorch without skip_reshape, mask or batch split (SDP_BATCH_LIMIT 2**15 > any batch here)."""
    b, _, dim_head = q.shape
    dim_head //= heads
    q, k, v = (t.view(b, -1, heads, dim_head).transpose(1, 2) for t in (q, k, v))
    return flux_dit.sdpa(q, k, v).transpose(1, 2).reshape(b, -1, heads * dim_head)


def pad_to_patch_size(img, patch_size):
    """common_dit.pad_to_patch_size (circular); a no-op pad (still a copy) when the sizes divide."""
    pad = ()
    for i in range(img.ndim - 2):
        pad = (0, (patch_size[i] - img.shape[i + 2] % patch_size[i]) % patch_size[i]) + pad
    return F.pad(img, pad, mode="circular")


class RMSNorm(nn.Module):
    """comfy.ops RMSNorm (torch.nn.RMSNorm, elementwise_affine=True): parameter `weight` over the full dim,
    attribute bias = None."""

    def __init__(self, dim, eps, dd):
        super().__init__()
        self.normalized_shape, self.eps = (dim,), eps
        self.weight = nn.Parameter(torch.empty(dim, **dd))
        self.bias = None

    def forward(self, x):
        return flux_dit.rms_norm(x, self.weight, self.eps)


def layer_norm(dim, eps, affine, dd):
    return nn.LayerNorm(dim, eps, elementwise_affine=affine, **dd)


class WanSelfAttention(nn.Module):
    def __init__(self, dim, num_heads, eps, dd):
        super().__init__()
        self.dim, self.num_heads, self.head_dim, self.eps = dim, num_heads, dim // num_heads, eps
        self.q = nn.Linear(dim, dim, **dd)
        self.k = nn.Linear(dim, dim, **dd)
        self.v = nn.Linear(dim, dim, **dd)
        self.o = nn.Linear(dim, dim, **dd)
        self.norm_q = RMSNorm(dim, eps, dd)
        self.norm_k = RMSNorm(dim, eps, dd)

    def forward(self, x, freqs):
        b, s, n, d = *x.shape[:2], self.num_heads, self.head_dim
        q = apply_rope1(self.norm_q(self.q(x)).view(b, s, n, d), freqs)  # all of q first, then k, as ComfyUI
        k = apply_rope1(self.norm_k(self.k(x)).view(b, s, n, d), freqs)
        x = optimized_attention(q.view(b, s, n * d), k.view(b, s, n * d), self.v(x).view(b, s, n * d), n)
        return self.o(x)


class WanT2VCrossAttention(WanSelfAttention):
    def forward(self, x, context):
        q = self.norm_q(self.q(x))
        k = self.norm_k(self.k(context))
        v = self.v(context)
        return self.o(optimized_attention(q, k, v, self.num_heads))


def repeat_e(e, x):
    repeats = x.size(1) // e.size(1) if e.size(1) > 1 else 1
    if repeats == 1:
        return e
    if repeats * e.size(1) == x.size(1):
        return torch.repeat_interleave(e, repeats, dim=1)
    return torch.repeat_interleave(e, repeats + 1, dim=1)[:, :x.size(1)]


class WanAttentionBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, cross_attn_norm, eps, dd):
        super().__init__()
        self.dim, self.ffn_dim, self.num_heads, self.eps = dim, ffn_dim, num_heads, eps
        self.norm1 = layer_norm(dim, eps, False, dd)
        self.self_attn = WanSelfAttention(dim, num_heads, eps, dd)
        self.norm3 = layer_norm(dim, eps, True, dd) if cross_attn_norm else nn.Identity()
        self.cross_attn = WanT2VCrossAttention(dim, num_heads, eps, dd)
        self.norm2 = layer_norm(dim, eps, False, dd)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim, **dd), nn.GELU(approximate="tanh"),
                                 nn.Linear(ffn_dim, dim, **dd))
        self.modulation = nn.Parameter(torch.empty(1, 6, dim, **dd))

    def forward(self, x, e, freqs, context):
        mod = cast_to(self.modulation, x.dtype, x.device)
        e = (mod + e).chunk(6, dim=1) if e.ndim < 4 else (mod.unsqueeze(0) + e).unbind(2)
        y = self.self_attn(torch.addcmul(repeat_e(e[0], x), self.norm1(x), 1 + repeat_e(e[1], x)), freqs)
        x = torch.addcmul(x, y, repeat_e(e[2], x))
        del y
        x = x + self.cross_attn(self.norm3(x), context)
        y = self.ffn(torch.addcmul(repeat_e(e[3], x), self.norm2(x), 1 + repeat_e(e[4], x)))
        return torch.addcmul(x, y, repeat_e(e[5], x))


class Head(nn.Module):
    def __init__(self, dim, out_dim, patch_size, eps, dd):
        super().__init__()
        self.dim, self.out_dim, self.patch_size, self.eps = dim, out_dim, patch_size, eps
        self.norm = layer_norm(dim, eps, False, dd)
        self.head = nn.Linear(dim, math.prod(patch_size) * out_dim, **dd)
        self.modulation = nn.Parameter(torch.empty(1, 2, dim, **dd))

    def forward(self, x, e):
        mod = cast_to(self.modulation, x.dtype, x.device)
        e = (mod + e.unsqueeze(1)).chunk(2, dim=1) if e.ndim < 3 else (mod.unsqueeze(0) + e.unsqueeze(2)).unbind(2)
        return self.head(torch.addcmul(repeat_e(e[0], x), self.norm(x), 1 + repeat_e(e[1], x)))


class WanModel(nn.Module):
    def __init__(self, model_type="t2v", patch_size=(1, 2, 2), text_len=512, in_dim=16, dim=2048, ffn_dim=8192,
                 freq_dim=256, text_dim=4096, out_dim=16, num_heads=16, num_layers=32, window_size=(-1, -1),
                 qk_norm=True, cross_attn_norm=True, eps=1e-6, dtype=None, device=None):
        super().__init__()
        if model_type != "t2v" or not qk_norm or tuple(window_size) != (-1, -1):
            raise ValueError("rebuilt: t2v with qk_norm and global attention only")
        dd = dict(dtype=dtype, device=device)
        self.dtype = dtype
        self.model_type, self.patch_size, self.text_len = model_type, tuple(patch_size), text_len
        self.in_dim, self.dim, self.ffn_dim, self.freq_dim = in_dim, dim, ffn_dim, freq_dim
        self.text_dim, self.out_dim, self.num_heads, self.num_layers = text_dim, out_dim, num_heads, num_layers
        self.cross_attn_norm, self.eps = cross_attn_norm, eps
        self.patch_embedding = nn.Conv3d(in_dim, dim, kernel_size=patch_size, stride=patch_size, device=device,
                                         dtype=torch.float32)
        self.text_embedding = nn.Sequential(nn.Linear(text_dim, dim, **dd), nn.GELU(approximate="tanh"),
                                            nn.Linear(dim, dim, **dd))
        self.time_embedding = nn.Sequential(nn.Linear(freq_dim, dim, **dd), nn.SiLU(), nn.Linear(dim, dim, **dd))
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(dim, dim * 6, **dd))
        self.blocks = nn.ModuleList([WanAttentionBlock(dim, ffn_dim, num_heads, cross_attn_norm, eps, dd)
                                     for _ in range(num_layers)])
        self.head = Head(dim, out_dim, self.patch_size, eps, dd)
        d = dim // num_heads
        self.rope_embedder = flux_dit.EmbedND(dim=d, theta=10000.0, axes_dim=[d - 4 * (d // 6), 2 * (d // 6),
                                                                             2 * (d // 6)])
        self.img_emb = None
        self.ref_conv = None

    def forward_orig(self, x, t, context, freqs):
        x = self.patch_embedding(x.float()).to(x.dtype)
        grid_sizes = x.shape[2:]
        x = x.flatten(2).transpose(1, 2)
        e = self.time_embedding(sinusoidal_embedding_1d(self.freq_dim, t.flatten()).to(dtype=x[0].dtype))
        e = e.reshape(t.shape[0], -1, e.shape[-1])
        e0 = self.time_projection(e).unflatten(2, (6, self.dim))
        context = self.text_embedding(context)
        for block in self.blocks:
            x = block(x, e=e0, freqs=freqs, context=context)
        x = self.head(x, e)
        return self.unpatchify(x, grid_sizes)

    def rope_encode(self, t, h, w, device=None, dtype=None):
        p = self.patch_size
        t_len, h_len, w_len = ((t + p[0] // 2) // p[0]), ((h + p[1] // 2) // p[1]), ((w + p[2] // 2) // p[2])
        ids = torch.zeros((t_len, h_len, w_len, 3), device=device, dtype=dtype)
        ids[:, :, :, 0] = ids[:, :, :, 0] + torch.linspace(0, t_len - 1, steps=t_len, device=device,
                                                           dtype=dtype).reshape(-1, 1, 1)
        ids[:, :, :, 1] = ids[:, :, :, 1] + torch.linspace(0, h_len - 1, steps=h_len, device=device,
                                                           dtype=dtype).reshape(1, -1, 1)
        ids[:, :, :, 2] = ids[:, :, :, 2] + torch.linspace(0, w_len - 1, steps=w_len, device=device,
                                                           dtype=dtype).reshape(1, 1, -1)
        ids = ids.reshape(1, -1, ids.shape[-1])
        return self.rope_embedder(ids).movedim(1, 2)

    def forward(self, x, timestep, context):
        """WanModel._forward for t2v (no clip_fea, time_dim_concat, reference latent or transformer_options)."""
        bs, c, t, h, w = x.shape
        x = pad_to_patch_size(x, self.patch_size)
        freqs = self.rope_encode(t, h, w, device=x.device, dtype=x.dtype)
        return self.forward_orig(x, timestep, context, freqs)[:, :, :t, :h, :w]

    def unpatchify(self, x, grid_sizes):
        c, b = self.out_dim, x.shape[0]
        u = x[:, :math.prod(grid_sizes)].view(b, *grid_sizes, *self.patch_size, c)
        u = torch.einsum("bfhwpqrc->bcfphqwr", u)
        return u.reshape(b, c, *[i * j for i, j in zip(grid_sizes, self.patch_size)])


def build(params, device="cuda", dtype=torch.bfloat16, seed=0, std=0.02):
    """The model with random weights (normal(0, std)), made on the meta device and given storage on `device`
    directly (nothing through host memory). patch_embedding stays float32, as ComfyUI builds it."""
    return flux_dit.random_weights(WanModel(**params, dtype=dtype, device="meta"), device, seed, std)


leaf_modules = flux_dit.leaf_modules


def load_list_rule(model):
    """Names of the modules ComfyUI's ModelPatcher._load_list keeps (model_patcher.py:621): every module whose
    parameters are all its own, if it has some or is a comfy op (here: the parameterless LayerNorms)."""
    out = []
    for n, m in model.named_modules():
        own = {name for name, _ in m.named_parameters(recurse=False)}
        if any(name not in own for name, _ in m.named_parameters(recurse=True)):
            continue
        if own or isinstance(m, (nn.Linear, nn.LayerNorm, nn.Conv3d, RMSNorm)):
            out.append(n)
    return out


def vae_spatial(params):
    """The VAE's spatial downscale, as ComfyUI takes it from the latent channels: 48 (Wan 2.2's TI2V-5B:
    comfy/supported_models.py WAN22_T2V, latent_formats.Wan22; comfy_extras/nodes_wan.py Wan22ImageToVideoLatent's
    latent is H/16 x W/16) or 16 (Wan 2.1: H/8 x W/8)."""
    return 16 if params["out_dim"] == 48 else 8


def latent_frames(frames):
    """Wan VAE: 4x temporal compression with the first frame alone: (F - 1) // 4 + 1 latent frames."""
    return (frames - 1) // 4 + 1


def tokens(params, width, height, frames):
    p = params["patch_size"]
    s = vae_spatial(params)
    return (latent_frames(frames) // p[0]) * (height // s // p[1]) * (width // s // p[2])


def make_inputs(params, width, height, frames, batch=1, text_tokens=TEXT_TOKENS, device="cuda",
                dtype=torch.bfloat16, seed=0, start_image=False):
    """WanModel.forward's arguments for a width x height video of `frames` frames: the latent x (batch, in_dim,
    (F-1)//4+1, H/s, W/s; s the VAE's 8 or 16) in the model dtype (model_base._apply_model's xc.to(dtype)), timestep (batch,) float32,
    UMT5 text states (batch, text_tokens, text_dim) in the model dtype. batch 2 is cond and uncond in one
    forward, as comfy/samplers.py _calc_cond_batch concatenates them when memory allows."""
    s = vae_spatial(params)
    if width % (2 * s) or height % (2 * s):
        raise ValueError(f"{width}x{height}: width and height must be multiples of {2 * s}")
    if frames < 1:
        raise ValueError(f"{frames} frames")
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((batch, params["in_dim"], latent_frames(frames), height // s, width // s), generator=g,
                    device=device, dtype=dtype)
    context = torch.randn((batch, text_tokens, params["text_dim"]), generator=g, device=device, dtype=dtype)
    if start_image:
        # Wan 2.2 TI2V with a start image (comfy_extras/nodes_wan.py Wan22ImageToVideoLatent's noise mask 0 on the
        # first latent frame): model_base.WAN22.process_timestep gives a timestep per latent frame, the image's 0.
        t = torch.full((batch, latent_frames(frames)), TIMESTEP, device=device, dtype=torch.float32)
        t[:, 0] = 0.0
        return dict(x=x, timestep=t, context=context)
    return dict(x=x, timestep=torch.full((batch,), TIMESTEP, device=device, dtype=torch.float32), context=context)
