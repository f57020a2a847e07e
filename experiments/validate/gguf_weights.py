"""GGUF weights as ComfyUI-GGUF (city96/ComfyUI-GGUF 795e451) runs them, for the FLUX.1 harness (dit_iteration.py) and
the dequantization calibration (experiments/calibrate/gguf_dequant_rate.py). Random but well-formed blocks: no GGUF
file is read.

Which FLUX tensor gets which GGML type (flux_tensor_type): tools/convert.py writes 1-D tensors (biases, norm scales)
as F32 and 2-D weights as BF16 (from a bf16 checkpoint); llama-quantize with tools/lcpp.patch then quantizes every
2-D weight to the file type's base type (Q8_0, Q6_K, Q5_K for Q5_K_S/M, Q4_K for Q4_K_S/M, Q4_0) except names with
txt_in., img_in., time_in., vector_in., guidance_in., final_layer. (llama_model_quantize_internal's LLM_ARCH_FLUX
rules: they stay BF16), and img_tensor_get_type adjusts by name: fused qkv ("attn.qkv.weight": Q4_K_M -> Q5_K,
Q5_K_M -> Q6_K), to_v and ffn-down names (none in FLUX), and a K-quant whose row (in_features) is not a multiple of
256 falls back to F16 (none in FLUX).

At run time (ops.py GGMLLayer.cast_bias_weight, get_weight; dequant.py dequantize_tensor): every Linear's forward
moves its bias and weight with `.to(device)` (a synchronous copy from the cpu, a no-op on the GPU), turns the F32 bias
into the activations' dtype (`.to(dtype)`: F32/F16 are TORCH_COMPATIBLE_QTYPES), dequantizes the block tensor on the
GPU with torch ops (dequantize -> dequantize_blocks_<TYPE>, dtype None, then `.to(dtype)`; BF16 is not
torch-compatible there, so it goes through dequantize_blocks_BF16), then F.linear. K-quants and Q4_0/Q4_1/Q5_0/Q5_1
build `torch.tensor([...], device=...)` shift vectors inside: a small synchronous host-to-device copy per call.

Here: every nn.Linear's `weight` becomes a uint8 Parameter holding the blocks (shape (out, row bytes), as
gguf-py's GGUFReader hands them to loader.py gguf_sd_loader; requires_grad False), so LayerStreamer and DisTorch's
sizing see the stored bytes; `bias` an F32 Parameter (the bf16 values, widened); forward as above, calling the
carried dequant.py's own dequantize_tensor. Norms (RMSNorm scales: F32 in a GGUF file) are left bf16, and the
LayerNorms have no parameters. Offloaded weights: the harness's LayerStreamer copies them to cuda:0 in the module's
pre-hook (pageable: synchronous, as GGMLTensor.to is), so `.to(device)` here then finds them there.

  python3 experiments/validate/gguf_weights.py [--dequant .ext/ComfyUI-GGUF/dequant.py]   (CPU self-test)
"""
import importlib.util
import os
import sys
import types
from collections import Counter

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DEQUANT = os.path.join(os.path.dirname(os.path.dirname(HERE)), ".ext", "ComfyUI-GGUF", "dequant.py")

# llama.cpp llama_model_quantize_internal: file type -> default (base) tensor type
FILE_TYPES = {"Q8_0": "Q8_0", "Q6_K": "Q6_K", "Q5_K_S": "Q5_K", "Q5_K_M": "Q5_K", "Q4_K_S": "Q4_K",
              "Q4_K_M": "Q4_K", "Q4_0": "Q4_0"}
FLUX_UNQUANTIZED = ("txt_in.", "img_in.", "time_in.", "vector_in.", "guidance_in.", "final_layer.")
K_QUANTS = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
TORCH_COMPATIBLE = ("F32", "F16")  # dequant.py TORCH_COMPATIBLE_QTYPES (and None)
# (elements, bytes) per block: gguf-py GGML_QUANT_SIZES (the shim's copy)
SIZES = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22),
         "Q5_1": (32, 24), "Q8_0": (32, 34), "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144),
         "Q5_K": (256, 176), "Q6_K": (256, 210)}
# byte offsets of the fp16 scale fields in a block (ggml-common.h block_* structs; dequant.py split_block_dims)
SCALE_FIELDS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q2_K": (80, 82),
                "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}

_TO_V = ("attn_v.weight", ".to_v.weight", ".v.weight", ".attn.w1v.weight", ".attn.w2v.weight", "_attn.v_proj.weight")
_QKV = ("attn_qkv.weight", "attn.qkv.weight", "attention.qkv.weight")
_FFN = ("ffn_down", ".ffn.2.weight", ".ff.net.2.weight", ".mlp.layer2.weight", ".adaln_modulation_mlp.2.weight",
        ".feed_forward.w2.weight")


def flux_tensor_type(name, file_type, in_features=None, counters=None):
    """GGML type of a FLUX Linear's weight (ComfyUI module name, e.g. "double_blocks.0.img_attn.qkv", or the tensor
    name with ".weight") in a GGUF of `file_type` (FILE_TYPES' keys, or BF16 for the unquantized file):
    tools/lcpp.patch's FLUX rules and img_tensor_get_type, for the file types above. counters: img_tensor_get_type's
    i_attention_wv (only Q4_K_S's to_v rule reads it; FLUX has no to_v)."""
    key = name if name.endswith(".weight") else name + ".weight"
    if file_type == "BF16" or any(s in key for s in FLUX_UNQUANTIZED):
        return "BF16"
    t = FILE_TYPES[file_type]
    counters = {} if counters is None else counters
    if any(s in key for s in _TO_V):
        if file_type in ("Q4_K_M", "Q5_K_M"):
            t = "Q6_K"
        elif file_type == "Q4_K_S" and counters.get("i_attention_wv", 0) < 4:
            t = "Q5_K"
        counters["i_attention_wv"] = counters.get("i_attention_wv", 0) + 1
    elif any(s in key for s in _QKV):
        t = {"Q4_K_M": "Q5_K", "Q5_K_M": "Q6_K"}.get(file_type, t)
    elif any(s in key for s in _FFN) or ("experts." in key and ".w2.weight" in key):
        t = {"Q4_K_S": "Q5_K", "Q4_K_M": "Q6_K", "Q5_K_M": "Q6_K", "Q4_0": "Q4_1"}.get(file_type, t)
    if t in K_QUANTS and in_features is not None and in_features % 256:
        t = "F16"  # img_tensor_get_type: convert_incompatible_tensor
    return t


def stored_bytes(type_name, out_features, in_features):
    bs, ts = SIZES[type_name]
    return out_features * in_features // bs * ts


def random_blocks(type_name, out_features, in_features, device="cuda", seed=0, scale=(1e-4, 4e-4)):
    """A weight of shape (out, in) as GGUF stores it: quantized types and BF16 as a uint8 tensor (out, row bytes)
    of random bytes whose fp16 scale fields (d, dmin; Q6_K's d is the block's last 2 bytes) are small finite
    values; F16 / F32 as a (out, in) tensor of that dtype (loader.py views torch-compatible types in their shape)."""
    g = torch.Generator(device=device).manual_seed(seed)
    if type_name in ("BF16", "F16", "F32"):
        dt = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}[type_name]
        w = (torch.randn((out_features, in_features), generator=g, device=device) * 0.02).to(dt)
        return w.view(torch.uint8) if type_name == "BF16" else w
    bs, ts = SIZES[type_name]
    if in_features % bs:
        raise ValueError(f"{type_name}: in_features {in_features} is not a multiple of the block size {bs}")
    n = out_features * in_features // bs
    b = torch.randint(0, 256, (n, ts), generator=g, device=device, dtype=torch.uint8)
    lo, hi = scale
    for off in SCALE_FIELDS[type_name]:
        d = (torch.rand(n, generator=g, device=device) * (hi - lo) + lo).to(torch.float16)
        b[:, off:off + 2] = d.view(torch.uint8).view(n, 2)
    return b.view(out_features, in_features // bs * ts)


def load_dequant(path=DEFAULT_DEQUANT):
    """ComfyUI-GGUF's dequant.py as a module. It does `import gguf`: where no gguf package is importable, the shim
    (gguf_shim/, see its README) is put on sys.path first."""
    try:
        import gguf  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "gguf_shim"))
        import gguf  # noqa: F401
    if not os.path.exists(path):
        sys.exit(f"{path}: ComfyUI-GGUF's dequant.py is missing (mkdir -p .ext/ComfyUI-GGUF && git -C "
                 "/work/.mirror/city96+ComfyUI-GGUF/repo show 795e451:dequant.py > .ext/ComfyUI-GGUF/dequant.py)")
    spec = importlib.util.spec_from_file_location("comfyui_gguf_dequant", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dequant_weight(dq, w, type_name, shape, dtype):
    """get_weight's dequantize_tensor(tensor, dtype, dequant_dtype=None) on a tensor tagged as GGMLTensor is
    (tensor_type, tensor_shape): F32/F16 -> .to(dtype); the others -> dequantize(data, qtype, shape, None).to(dtype)."""
    w.tensor_type = dq.gguf.GGMLQuantizationType[type_name]
    w.tensor_shape = torch.Size(shape)
    return dq.dequantize_tensor(w, dtype, None)


def _forward(self, x):
    """ops.py GGMLOps.Linear.forward_ggml_cast_weights -> GGMLLayer.cast_bias_weight (bias, then weight; comfy's
    cast_to afterwards is a no-op: already on x's device and dtype) -> F.linear."""
    bias = None
    if self.bias is not None:
        bias = dequant_weight(self._gguf_dq, self.bias.to(x.device), "F32", self.bias.shape, x.dtype)
    w = self.weight.to(x.device)  # GGMLTensor.to: synchronous from the cpu, a no-op on the GPU
    weight = dequant_weight(self._gguf_dq, w, self.gguf_type, (self.out_features, self.in_features), x.dtype)
    return F.linear(x, weight, bias)


def gguf_weights(model, file_type, dequant_module, seed=0):
    """Every nn.Linear of a FLUX model (flux_dit.build; ComfyUI's module names) in ComfyUI-GGUF's runtime form for a
    GGUF of `file_type`: weight -> uint8 blocks of flux_tensor_type's type (random, on the weight's device), bias ->
    F32, forward -> _forward. dequant_module: load_dequant()'s module (or a path to dequant.py). Sets
    model.gguf_tensor_types = {type: Linear count}; returns the model."""
    dq = load_dequant(dequant_module) if isinstance(dequant_module, str) else dequant_module
    counts, counters = Counter(), {}
    for i, (name, m) in enumerate(model.named_modules()):
        if not isinstance(m, torch.nn.Linear):
            continue
        t = flux_tensor_type(name, file_type, m.in_features, counters)
        dev = m.weight.device
        blocks = random_blocks(t, m.out_features, m.in_features, device=dev, seed=seed + i)
        m.weight = torch.nn.Parameter(blocks, requires_grad=False)
        if m.bias is not None:
            m.bias = torch.nn.Parameter(m.bias.detach().float(), requires_grad=False)
        m.gguf_type, m._gguf_dq = t, dq
        m.forward = types.MethodType(_forward, m)
        counts[t] += 1
    model.gguf_tensor_types = dict(counts)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return model


def _self_test(dequant_path):
    dq = load_dequant(dequant_path)
    for t in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "BF16", "F16"):
        for out_f, in_f in ((64, 512), (3, 256)):
            b = random_blocks(t, out_f, in_f, device="cpu", seed=1)
            if t != "F16":
                assert b.dtype == torch.uint8 and b.numel() == stored_bytes(t, out_f, in_f), (t, b.shape)
            w = dequant_weight(dq, b, t, (out_f, in_f), torch.bfloat16)
            assert w.shape == (out_f, in_f) and w.dtype == torch.bfloat16, (t, w.shape, w.dtype)
            assert torch.isfinite(w.float()).all(), t
            assert w.float().abs().max() < 50, (t, w.float().abs().max())
        print(f"{t:5s} ok: {stored_bytes(t, 64, 512)} bytes for 64x512, |w| max {w.float().abs().max():.3g}")
    expect = [("double_blocks.0.img_attn.qkv", "Q4_K_M", 3072, "Q5_K"),
              ("double_blocks.0.txt_attn.qkv", "Q5_K_M", 3072, "Q6_K"),
              ("double_blocks.0.img_attn.qkv", "Q4_K_S", 3072, "Q4_K"),
              ("double_blocks.3.img_attn.proj", "Q4_K_M", 3072, "Q4_K"),
              ("double_blocks.0.img_mlp.2", "Q4_K_S", 12288, "Q4_K"),
              ("double_blocks.0.img_mod.lin", "Q8_0", 3072, "Q8_0"),
              ("single_blocks.5.linear1", "Q5_K_M", 3072, "Q5_K"),
              ("single_blocks.5.linear2", "Q6_K", 15360, "Q6_K"),
              ("single_blocks.5.modulation.lin", "Q4_0", 3072, "Q4_0"),
              ("img_in", "Q4_K_S", 64, "BF16"), ("txt_in", "Q8_0", 4096, "BF16"),
              ("time_in.in_layer", "Q4_0", 256, "BF16"), ("vector_in.out_layer", "Q4_K_M", 3072, "BF16"),
              ("guidance_in.in_layer", "Q6_K", 256, "BF16"), ("final_layer.linear", "Q8_0", 3072, "BF16"),
              ("final_layer.adaLN_modulation.1", "Q4_K_M", 3072, "BF16"),
              ("blocks.0.ffn.2", "Q4_K_S", 13824, "Q5_K"),  # not FLUX: the ffn rule itself
              ("x.linear", "Q4_K_S", 100, "F16")]  # row not a multiple of 256
    for name, ft, in_f, want in expect:
        got = flux_tensor_type(name, ft, in_f)
        assert got == want, (name, ft, got, want)
    print(f"flux_tensor_type: {len(expect)} names ok")
    # one converted Linear under a FLUX name (fp32 activations on the cpu: the dequantized weight follows x.dtype)
    lin = torch.nn.Linear(512, 64)
    lin.weight.data = lin.weight.data.to(torch.bfloat16)
    lin.bias.data = lin.bias.data.to(torch.bfloat16)
    wrapper = torch.nn.Module()
    wrapper.add_module("double_blocks", torch.nn.ModuleList([torch.nn.Module()]))
    wrapper.double_blocks[0].add_module("img_attn", torch.nn.Module())
    wrapper.double_blocks[0].img_attn.add_module("qkv", lin)
    gguf_weights(wrapper, "Q4_K_M", dq)
    y = lin(torch.randn(2, 512, dtype=torch.float32))
    assert lin.weight.dtype == torch.uint8 and lin.bias.dtype == torch.float32 and lin.gguf_type == "Q5_K"
    assert y.shape == (2, 64) and torch.isfinite(y).all()
    print(f"gguf_weights: {wrapper.gguf_tensor_types}, forward ok")


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="CPU self-test of the random blocks and the FLUX type rule")
    ap.add_argument("--dequant", default=DEFAULT_DEQUANT)
    _self_test(ap.parse_args().dequant)
