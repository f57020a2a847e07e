"""A FLUX.1-shaped diffusion transformer (random weights) built as ComfyUI builds its Flux model, for timing.

ComfyUI is not a dependency. This file rebuilds the structure of Comfy-Org/ComfyUI at commit
a125cd84b054a57729b5eecab930ca9408719832 (written anew, not copied):
  comfy/ldm/flux/model.py   Flux.__init__ (module names and registration order), Flux.forward_orig (the
                            forward), Flux.process_img / Flux._forward (image and text position ids)
  comfy/ldm/flux/layers.py  EmbedND, timestep_embedding, MLPEmbedder, RMSNorm (parameter `scale`), QKNorm,
                            SelfAttention, Modulation, apply_mod, DoubleStreamBlock, SingleStreamBlock, LastLayer
  comfy/ldm/flux/math.py    attention (rope applied inline to q and k in float32, then optimized_attention),
                            rope
  comfy/ldm/common_dit.py   rms_norm (= comfy/rmsnorm.py: torch.nn.functional.rms_norm)
  comfy/ldm/modules/attention.py attention_pytorch (skip_reshape=True: q, k, v as (batch, heads, tokens,
                            head_dim); output (batch, tokens, heads * head_dim)), with comfy/ops.py's
                            scaled_dot_product_attention (backend priority cuDNN, flash, efficient, math,
                            where torch's sdpa_kernel takes set_priority)
ComfyUI's operations.Linear / operations.LayerNorm are plain torch.nn.Linear / torch.nn.LayerNorm here (the
comfy ops call the same functional ops when their weights are already on the device and dtype).

Module names (tiersim's traces and device maps use them): img_in, time_in.{in,out}_layer,
vector_in.{in,out}_layer, guidance_in.{in,out}_layer (with guidance), txt_in, double_blocks.N.{img_mod.lin,
img_norm1, img_attn.qkv, img_attn.norm.{query,key}_norm, img_attn.proj, img_norm2, img_mlp.0, img_mlp.2, and
the same for txt_}, single_blocks.N.{linear1, linear2, norm.{query,key}_norm, pre_norm, modulation.lin},
final_layer.{norm_final, linear, adaLN_modulation.1}. LayerNorms have no parameters.

Hyperparameters come from a diffusers FluxTransformer2DModel config (traces/models/flux.1-dev.json): the input
is the 2x2-packed latent (in_channels 64 = 16 latent channels x 2 x 2), as Flux.process_img makes it.
"""
import inspect
import json
import math

import torch
import torch.nn.functional as F
from torch import nn

# comfy/ops.py scaled_dot_product_attention: cuDNN first, then flash, efficient, math (where supported).
SDPA_PRIORITY = None
try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if "set_priority" in inspect.signature(sdpa_kernel).parameters:
        SDPA_PRIORITY = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                         SDPBackend.MATH]
except (ImportError, TypeError):
    pass


def sdpa(q, k, v):
    if SDPA_PRIORITY is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=False)
    with sdpa_kernel(SDPA_PRIORITY, set_priority=True):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=False)


def rms_norm(x, weight, eps=1e-6):
    """comfy/rmsnorm.py rms_norm (the weight is already on x's device and dtype)."""
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, weight.shape, weight=weight.to(x.dtype), eps=eps)
    return x * torch.rsqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + eps) * weight.to(x.dtype)  # torch < 2.4


def flux_params(config_path, tiny=False):
    """Flux's constructor arguments (FluxParams, patch already applied) from a diffusers transformer config."""
    with open(config_path) as f:
        d = json.load(f)
    heads = d["num_attention_heads"]
    hidden = d["attention_head_dim"] * heads
    p = dict(in_channels=d["in_channels"], out_channels=d.get("out_channels") or d["in_channels"],
             vec_in_dim=d["pooled_projection_dim"], context_in_dim=d["joint_attention_dim"], hidden_size=hidden,
             mlp_ratio=4.0, num_heads=heads, depth=d["num_layers"], depth_single_blocks=d["num_single_layers"],
             axes_dim=list(d.get("axes_dims_rope") or [16, 56, 56]), theta=10000, qkv_bias=True,
             guidance_embed=bool(d.get("guidance_embeds", False)))
    if tiny:
        p.update(depth=min(2, p["depth"]), depth_single_blocks=min(2, p["depth_single_blocks"]))
    if sum(p["axes_dim"]) != hidden // heads:
        raise ValueError(f"{config_path}: axes_dim {p['axes_dim']} does not sum to head_dim {hidden // heads}")
    return d.get("name", config_path), p


def rope(pos, dim, theta):
    """math.py rope: (..., n) positions -> (..., n, dim/2, 2, 2) rotation matrices, float32."""
    assert dim % 2 == 0
    scale = torch.linspace(0, (dim - 2) / dim, steps=dim // 2, dtype=torch.float64, device=pos.device)
    omega = 1.0 / (theta ** scale)
    out = pos.to(torch.float32)[..., None] * omega  # einsum("...n,d->...nd"), float64 as ComfyUI's
    out = torch.stack([torch.cos(out), -torch.sin(out), torch.sin(out), torch.cos(out)], dim=-1)
    return out.reshape(*out.shape[:-1], 2, 2).to(torch.float32)


class EmbedND(nn.Module):
    def __init__(self, dim, theta, axes_dim):
        super().__init__()
        self.dim, self.theta, self.axes_dim = dim, theta, axes_dim

    def forward(self, ids):
        emb = torch.cat([rope(ids[..., i], self.axes_dim[i], self.theta) for i in range(ids.shape[-1])], dim=-3)
        return emb.unsqueeze(1)


def timestep_embedding(t, dim, max_period=10000, time_factor=1000.0):
    t = time_factor * t
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(0, half, dtype=torch.float32, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb.to(t) if torch.is_floating_point(t) else emb


def attention(q, k, v, pe):
    """math.py attention: rope on q and k in pe's dtype (float32), then attention_pytorch(skip_reshape=True)."""
    q_shape, k_shape = q.shape, k.shape
    q = q.to(dtype=pe.dtype).reshape(*q.shape[:-1], -1, 1, 2)
    k = k.to(dtype=pe.dtype).reshape(*k.shape[:-1], -1, 1, 2)
    q = (pe[..., 0] * q[..., 0] + pe[..., 1] * q[..., 1]).reshape(*q_shape).type_as(v)
    k = (pe[..., 0] * k[..., 0] + pe[..., 1] * k[..., 1]).reshape(*k_shape).type_as(v)
    b, heads, _, dim_head = q.shape
    return sdpa(q, k, v).transpose(1, 2).reshape(b, -1, heads * dim_head)


def apply_mod(x, mult, add=None):
    return torch.addcmul(add, x, mult) if add is not None else x * mult


def layer_norm(hidden, dd):
    return nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6, **dd)


class MLPEmbedder(nn.Module):
    def __init__(self, in_dim, hidden_dim, dd):
        super().__init__()
        self.in_layer = nn.Linear(in_dim, hidden_dim, bias=True, **dd)
        self.silu = nn.SiLU()
        self.out_layer = nn.Linear(hidden_dim, hidden_dim, bias=True, **dd)

    def forward(self, x):
        return self.out_layer(self.silu(self.in_layer(x)))


class RMSNorm(nn.Module):
    def __init__(self, dim, dd):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim, **dd))

    def forward(self, x):
        return rms_norm(x, self.scale, 1e-6)


class QKNorm(nn.Module):
    def __init__(self, dim, dd):
        super().__init__()
        self.query_norm = RMSNorm(dim, dd)
        self.key_norm = RMSNorm(dim, dd)

    def forward(self, q, k, v):
        return self.query_norm(q).to(v), self.key_norm(k).to(v)


class SelfAttention(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias, dd):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias, **dd)
        self.norm = QKNorm(dim // num_heads, dd)
        self.proj = nn.Linear(dim, dim, **dd)


class Modulation(nn.Module):
    def __init__(self, dim, double, dd):
        super().__init__()
        self.is_double = double
        self.multiplier = 6 if double else 3
        self.lin = nn.Linear(dim, self.multiplier * dim, bias=True, **dd)

    def forward(self, vec):
        """(shift, scale, gate) twice for a double block, once for a single block."""
        if vec.ndim == 2:
            vec = vec[:, None, :]
        out = self.lin(F.silu(vec)).chunk(self.multiplier, dim=-1)
        return out[:3], (out[3:] if self.is_double else None)


class DoubleStreamBlock(nn.Module):
    def __init__(self, hidden, num_heads, mlp_ratio, qkv_bias, dd):
        super().__init__()
        mlp_hidden = int(hidden * mlp_ratio)
        self.num_heads, self.hidden_size = num_heads, hidden
        for s in ("img", "txt"):  # registration order: img_mod, img_norm1, img_attn, img_norm2, img_mlp, then txt_
            setattr(self, f"{s}_mod", Modulation(hidden, True, dd))
            setattr(self, f"{s}_norm1", layer_norm(hidden, dd))
            setattr(self, f"{s}_attn", SelfAttention(hidden, num_heads, qkv_bias, dd))
            setattr(self, f"{s}_norm2", layer_norm(hidden, dd))
            setattr(self, f"{s}_mlp", nn.Sequential(nn.Linear(hidden, mlp_hidden, bias=True, **dd),
                                                   nn.GELU(approximate="tanh"),
                                                   nn.Linear(mlp_hidden, hidden, bias=True, **dd)))

    def qkv(self, x, norm1, attn, mod1):
        x = apply_mod(norm1(x), 1 + mod1[1], mod1[0])
        qkv = attn.qkv(x)
        q, k, v = qkv.view(qkv.shape[0], qkv.shape[1], 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k = attn.norm(q, k, v)
        return q, k, v

    def forward(self, img, txt, vec, pe):
        img_mod1, img_mod2 = self.img_mod(vec)
        txt_mod1, txt_mod2 = self.txt_mod(vec)
        img_q, img_k, img_v = self.qkv(img, self.img_norm1, self.img_attn, img_mod1)
        txt_q, txt_k, txt_v = self.qkv(txt, self.txt_norm1, self.txt_attn, txt_mod1)
        attn = attention(torch.cat((txt_q, img_q), dim=2), torch.cat((txt_k, img_k), dim=2),
                         torch.cat((txt_v, img_v), dim=2), pe=pe)
        txt_attn, img_attn = attn[:, :txt.shape[1]], attn[:, txt.shape[1]:]
        img = img + apply_mod(self.img_attn.proj(img_attn), img_mod1[2])
        img = img + apply_mod(self.img_mlp(apply_mod(self.img_norm2(img), 1 + img_mod2[1], img_mod2[0])), img_mod2[2])
        txt += apply_mod(self.txt_attn.proj(txt_attn), txt_mod1[2])
        txt += apply_mod(self.txt_mlp(apply_mod(self.txt_norm2(txt), 1 + txt_mod2[1], txt_mod2[0])), txt_mod2[2])
        return img, txt


class SingleStreamBlock(nn.Module):
    def __init__(self, hidden, num_heads, mlp_ratio, dd):
        super().__init__()
        self.hidden_dim, self.num_heads = hidden, num_heads
        self.mlp_hidden_dim = int(hidden * mlp_ratio)
        self.linear1 = nn.Linear(hidden, hidden * 3 + self.mlp_hidden_dim, **dd)
        self.linear2 = nn.Linear(hidden + self.mlp_hidden_dim, hidden, **dd)
        self.norm = QKNorm(hidden // num_heads, dd)
        self.hidden_size = hidden
        self.pre_norm = layer_norm(hidden, dd)
        self.mlp_act = nn.GELU(approximate="tanh")
        self.modulation = Modulation(hidden, False, dd)

    def forward(self, x, vec, pe):
        (shift, scale, gate), _ = self.modulation(vec)
        qkv, mlp = torch.split(self.linear1(apply_mod(self.pre_norm(x), 1 + scale, shift)),
                               [3 * self.hidden_size, self.mlp_hidden_dim], dim=-1)
        q, k, v = qkv.view(qkv.shape[0], qkv.shape[1], 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        q, k = self.norm(q, k, v)
        attn = attention(q, k, v, pe=pe)
        x += apply_mod(self.linear2(torch.cat((attn, self.mlp_act(mlp)), 2)), gate)
        return x


class LastLayer(nn.Module):
    def __init__(self, hidden, patch_size, out_channels, dd):
        super().__init__()
        self.norm_final = layer_norm(hidden, dd)
        self.linear = nn.Linear(hidden, patch_size * patch_size * out_channels, bias=True, **dd)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden, 2 * hidden, bias=True, **dd))

    def forward(self, x, vec):
        if vec.ndim == 2:
            vec = vec[:, None, :]
        shift, scale = self.adaLN_modulation(vec).chunk(2, dim=-1)
        return self.linear(apply_mod(self.norm_final(x), 1 + scale, shift))


class Flux(nn.Module):
    def __init__(self, in_channels, out_channels, vec_in_dim, context_in_dim, hidden_size, mlp_ratio, num_heads,
                 depth, depth_single_blocks, axes_dim, theta, qkv_bias, guidance_embed, dtype=None, device=None):
        super().__init__()
        dd = dict(dtype=dtype, device=device)
        self.vec_in_dim, self.guidance_embed = vec_in_dim, guidance_embed
        self.hidden_size, self.num_heads = hidden_size, num_heads
        self.pe_embedder = EmbedND(dim=hidden_size // num_heads, theta=theta, axes_dim=axes_dim)
        self.img_in = nn.Linear(in_channels, hidden_size, bias=True, **dd)
        self.time_in = MLPEmbedder(256, hidden_size, dd)
        self.vector_in = MLPEmbedder(vec_in_dim, hidden_size, dd)
        self.guidance_in = MLPEmbedder(256, hidden_size, dd) if guidance_embed else nn.Identity()
        self.txt_in = nn.Linear(context_in_dim, hidden_size, **dd)
        self.double_blocks = nn.ModuleList([DoubleStreamBlock(hidden_size, num_heads, mlp_ratio, qkv_bias, dd)
                                            for _ in range(depth)])
        self.single_blocks = nn.ModuleList([SingleStreamBlock(hidden_size, num_heads, mlp_ratio, dd)
                                            for _ in range(depth_single_blocks)])
        self.final_layer = LastLayer(hidden_size, 1, out_channels, dd)

    def forward(self, img, img_ids, txt, txt_ids, timesteps, y, guidance=None):
        """Flux.forward_orig without patches, control or attention mask."""
        img = self.img_in(img)
        vec = self.time_in(timestep_embedding(timesteps, 256).to(img.dtype))
        if self.guidance_embed and guidance is not None:
            vec = vec + self.guidance_in(timestep_embedding(guidance, 256).to(img.dtype))
        vec = vec + self.vector_in(y[:, :self.vec_in_dim])
        txt = self.txt_in(txt)
        pe = self.pe_embedder(torch.cat((txt_ids, img_ids), dim=1))
        for block in self.double_blocks:
            img, txt = block(img=img, txt=txt, vec=vec, pe=pe)
        img = torch.cat((txt, img), 1)
        for block in self.single_blocks:
            img = block(img, vec=vec, pe=pe)
        img = img[:, txt.shape[1]:, ...]
        return self.final_layer(img, vec)


def build(params, device="cuda", dtype=torch.bfloat16, seed=0, std=0.02):
    """The model with random weights (normal(0, std), not zeros: zeros can run faster than real data), made on
    the meta device and given storage on `device` directly (nothing through host memory)."""
    return random_weights(Flux(**params, dtype=dtype, device="meta"), device, seed, std)


def random_weights(model, device, seed, std):
    """A model built on the meta device given storage on `device` and filled with normal(0, std) (shared by
    wan_dit.build)."""
    model = model.to_empty(device=device)
    model.eval().requires_grad_(False)
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    return model


def leaf_modules(model):
    """(name, module, parameters, bytes) of every module with parameters of its own, in named_modules() order."""
    out = []
    for name, m in model.named_modules():
        params = list(m.parameters(recurse=False))
        if params:
            out.append((name, m, params, sum(p.numel() * p.element_size() for p in params)))
    return out


def make_inputs(params, width, height, text_tokens=512, device="cuda", dtype=torch.bfloat16, seed=0):
    """forward_orig's arguments for a width x height image: the VAE's /8 latent packed 2x2 (one token per 16x16
    pixels), ids as Flux.process_img / Flux._forward make them (in the model's dtype: txt zeros, img
    (0, row, col)), T5 text states (text_tokens x context_in_dim), the pooled CLIP vector, a timestep
    (float32, as model_base.apply_model passes it) and guidance 3.5 (model dtype)."""
    if width % 16 or height % 16:
        raise ValueError(f"{width}x{height}: width and height must be multiples of 16")
    h, w = height // 16, width // 16
    g = torch.Generator(device=device).manual_seed(seed)
    img_ids = torch.zeros((h, w, 3), device=device, dtype=dtype)
    img_ids[:, :, 1] = torch.arange(h, device=device, dtype=torch.float32)[:, None]  # exact in bf16 up to 256
    img_ids[:, :, 2] = torch.arange(w, device=device, dtype=torch.float32)[None, :]
    return dict(img=torch.randn((1, h * w, params["in_channels"]), generator=g, device=device, dtype=dtype),
                img_ids=img_ids.reshape(1, h * w, 3),
                txt=torch.randn((1, text_tokens, params["context_in_dim"]), generator=g, device=device, dtype=dtype),
                txt_ids=torch.zeros((1, text_tokens, 3), device=device, dtype=dtype),
                timesteps=torch.full((1,), 0.5, device=device, dtype=torch.float32),
                y=torch.randn((1, params["vec_in_dim"]), generator=g, device=device, dtype=dtype),
                guidance=torch.full((1,), 3.5, device=device, dtype=dtype) if params["guidance_embed"] else None)
