"""CPU check that comfy_stages.py's rebuilt T5-XXL encoder, CLIP-L text model and FLUX VAE decoder are ComfyUI's:
same module names and order, parameter shapes and dtypes, and outputs equal bit for bit with the same weights, at
tiny sizes.

How: ComfyUI's own files are read from a git mirror at comfy_stages.COMFYUI_COMMIT (git show, into a temporary
directory removed afterwards; no ComfyUI code is committed here) and imported as the package `comfy`:
comfy/ops.py, comfy/rmsnorm.py (run as they are: manual_cast / disable_weight_init, cast_bias_weight),
comfy/text_encoders/t5.py, comfy/clip_model.py, comfy/ldm/modules/diffusionmodules/model.py. Stubbed: comfy.cli_args
(args.fast empty), comfy.float, comfy.model_management (cast_to is ComfyUI's own, cut out of model_management.py
with ast; no offload stream; pytorch attention on, xformers off, as on an NVIDIA GPU with torch >= 2), and
comfy.ldm.modules.attention, whose optimized_attention_for_device returns ComfyUI's own attention_pytorch cut out of
attention.py (without its wrap_attn decorator, which only looks for a transformer_options override). The text
encoders run through ComfyUI's own SDClipModel.process_tokens and SDClipModel.forward (cut out of sd1_clip.py, bound
to a stand-in holding the attributes FluxClipModel's T5XXLModel / SDClipModel set). torch 1.13 has no
F.scaled_dot_product_attention: it is set to comfy_stages.manual_sdpa for both sides.

Compared: T5 (tiny T5 config, fp16 and fp32 weights, fp32 compute) z; umT5 (the same, model_type umt5, attention
masks and zero_out_masked on, as Wan's UMT5XXlModel) z; CLIP-L (tiny, vocab 49408, 77 tokens with
start/end/pad tokens, fp16 weights) z and pooled output; VAE Decoder (tiny: ch 32, ch_mult [1,2,2], 1 res block;
fp32, and bf16 where the cpu build supports it) output; then the full-size configurations (T5-XXL, CLIP-L on the
meta device, FLUX's VAE decoder on the cpu) for module names, order, shapes and dtypes. Not checked: the fp8_e4m3fn
T5 weights (torch 1.13 has no float8; the same code path with the weight cast from fp8). Exit status 0 when all are equal, 1 otherwise; 0 with
a message when ComfyUI's files cannot be read or imported (skipped).

  /usr/bin/python3 experiments/validate/comfy_stages_check.py
Environment: COMFYUI_GIT (default /work/.mirror/Comfy-Org+ComfyUI/repo), a git dir holding that commit.
"""
import ast
import enum
import importlib
import numbers
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import comfy_stages as cs  # noqa: E402

COMFYUI_GIT = os.environ.get("COMFYUI_GIT", "/work/.mirror/Comfy-Org+ComfyUI/repo")
FILES = ["comfy/ops.py", "comfy/rmsnorm.py", "comfy/text_encoders/t5.py", "comfy/clip_model.py",
         "comfy/ldm/modules/diffusionmodules/model.py"]


def git_show(path):
    return subprocess.run(["git", "-C", COMFYUI_GIT, "show", f"{cs.COMFYUI_COMMIT}:{path}"], check=True,
                          capture_output=True).stdout


def cut(path, cls, fn, ns):
    """One function (or method of `cls`) of a ComfyUI file, without decorators, executed in namespace ns."""
    src = git_show(path).decode()
    body = ast.parse(src).body
    if cls:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == fn)
    seg = ast.get_source_segment(src, node)
    if cls:
        seg = "\n".join(line[4:] if line.startswith("    ") else line for line in seg.splitlines())
    exec(compile(seg, f"{cs.COMFYUI_COMMIT[:8]}:{path}", "exec"), ns)
    return ns[fn]


def stub(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    if "." in name:
        parent, child = name.rsplit(".", 1)
        setattr(sys.modules[parent], child, m)
    return m


def import_comfy(tmp):
    for path in FILES:
        os.makedirs(os.path.join(tmp, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(tmp, path), "wb") as f:
            f.write(git_show(path))
    comfy = stub("comfy")
    comfy.__path__ = [os.path.join(tmp, "comfy")]
    stub("comfy.ldm").__path__ = [os.path.join(tmp, "comfy", "ldm")]
    stub("comfy.ldm.modules").__path__ = [os.path.join(tmp, "comfy", "ldm", "modules")]
    stub("comfy.ldm.modules.diffusionmodules").__path__ = [os.path.join(tmp, "comfy", "ldm", "modules",
                                                                        "diffusionmodules")]
    stub("comfy.text_encoders").__path__ = [os.path.join(tmp, "comfy", "text_encoders")]

    class PerformanceFeature(enum.Enum):
        Fp16Accumulation = "fp16_accumulation"
        Fp8MatrixMultiplication = "fp8_matrix_mult"
        CublasOps = "cublas_ops"
        AutoTune = "autotune"
    stub("comfy.cli_args", args=types.SimpleNamespace(fast=set()), PerformanceFeature=PerformanceFeature)
    stub("comfy.float")
    mm = stub("comfy.model_management", get_offload_stream=lambda device: None,
              device_supports_non_blocking=lambda device: False, sync_stream=lambda device, stream: None,
              xformers_enabled_vae=lambda: False, pytorch_attention_enabled_vae=lambda: True,
              pytorch_attention_enabled=lambda: True, intermediate_device=lambda: torch.device("cpu"),
              OOM_EXCEPTION=torch.cuda.OutOfMemoryError if hasattr(torch.cuda, "OutOfMemoryError") else MemoryError)
    mm.cast_to = cut("comfy/model_management.py", None, "cast_to", {"torch": torch})
    ops = importlib.import_module("comfy.ops")
    ns = {"torch": torch, "comfy": comfy, "SDP_BATCH_LIMIT": 2 ** 15}
    attention_pytorch = cut("comfy/ldm/modules/attention.py", None, "attention_pytorch", ns)
    stub("comfy.ldm.modules.attention",
         optimized_attention_for_device=lambda device, mask=False, small_input=False: attention_pytorch)
    sd1 = {"torch": torch, "numbers": numbers, "logging": logging, "comfy": comfy}
    process_tokens = cut("comfy/sd1_clip.py", "SDClipModel", "process_tokens", sd1)
    forward = cut("comfy/sd1_clip.py", "SDClipModel", "forward", sd1)
    t5 = importlib.import_module("comfy.text_encoders.t5")
    clip_model = importlib.import_module("comfy.clip_model")
    model = importlib.import_module("comfy.ldm.modules.diffusionmodules.model")
    return ops, t5, clip_model, model, process_tokens, forward


class SDClipStandIn(torch.nn.Module):
    """The attributes SDClipModel.__init__ sets that process_tokens / forward read, layer "last"."""
    def __init__(self, transformer, special_tokens, return_projected_pooled, process_tokens, forward, masks=False):
        super().__init__()
        self.transformer = transformer
        self.special_tokens = special_tokens
        self.enable_attention_masks = masks  # umT5 (wan.py UMT5XXlModel): True, with zero_out_masked
        self.zero_out_masked = masks
        self.layer = "last"
        self.layer_idx = None
        self.layer_norm_hidden_state = True
        self.return_projected_pooled = return_projected_pooled
        self.return_attention_masks = False
        self._process_tokens, self._forward = process_tokens, forward

    def process_tokens(self, tokens, device):
        return self._process_tokens(self, tokens, device)

    def forward(self, tokens):
        return self._forward(self, tokens)


def structure(model):
    return ([n for n, _ in model.named_modules()],
            [(k, tuple(v.shape), v.dtype) for k, v in model.state_dict().items()])


def same(name, a, b):
    ok = a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    diff = (a.float() - b.float()).abs().max().item() if a.shape == b.shape else float("nan")
    print(f"  {name:<44} {'equal' if ok else 'DIFFERENT'}  shape {tuple(a.shape)} {a.dtype}  max|diff| {diff:.3g}")
    return ok


def main():
    if not os.path.isdir(COMFYUI_GIT):
        print(f"skipped: no ComfyUI mirror at {COMFYUI_GIT} (set COMFYUI_GIT)")
        return 0
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        torch.nn.functional.scaled_dot_product_attention = cs.manual_sdpa
    tmp = tempfile.mkdtemp()
    try:
        try:
            ops, t5, clip_model, vae_model, process_tokens, forward = import_comfy(tmp)
        except Exception as e:  # noqa: BLE001
            print(f"skipped: ComfyUI's modules could not be imported with stubs: {type(e).__name__}: {e}")
            return 0
        ok = True
        g = torch.Generator().manual_seed(0)
        dev = torch.device("cpu")

        # T5: tokens as T5XXLTokenizer gives them (no start token, end 1, pad 0 up to min_length); umT5 (Wan's encoder):
        # model_type umt5 (a bias in every block), attention masks and zero_out_masked on
        for label, base, words, pad, masks in (("T5", cs.T5_TINY, 19, 12, False), ("umT5", cs.UMT5_TINY, 9, 22, True)):
            for wd in ("fp16", "fp32"):
                dt = cs.DTYPES[wd]
                cfg = dict(base)
                mine = cs.randomize(cs.T5(cfg, dt, dev), dt)
                theirs = t5.T5(dict(cfg), dt, dev, ops.manual_cast)
                s_m, s_t = structure(mine), structure(theirs)
                ok &= s_m == s_t
                print(f"{label} tiny {wd}: modules and parameters {'equal' if s_m == s_t else 'DIFFERENT'} "
                      f"({len(s_m[0])} modules, {len(s_m[1])} tensors)")
                theirs.load_state_dict(mine.state_dict())
                tokens = [torch.randint(2, cfg["vocab_size"], (words,), generator=g).tolist() + [1] + [0] * pad]
                z_m, _ = cs.encode_text(mine, tokens, 1, masks=masks)
                wrapper = SDClipStandIn(theirs, {"end": 1, "pad": 0}, True, process_tokens, forward, masks=masks)
                z_t, _ = wrapper(tokens)
                ok &= same(f"{label} z ({wd} weights, fp32 compute{', masks' if masks else ''})", z_m, z_t)

        # CLIP-L: SDTokenizer's 77 tokens: start, words, end, end-as-pad
        cfg = dict(cs.CLIP_TINY)
        dt = torch.float16
        mine = cs.randomize(cs.CLIPTextModel(cfg, dt, dev), dt)
        theirs = clip_model.CLIPTextModel(dict(cfg), dt, dev, ops.manual_cast)
        s_m, s_t = structure(mine), structure(theirs)
        ok &= s_m == s_t
        print(f"CLIP-L tiny fp16: modules and parameters {'equal' if s_m == s_t else 'DIFFERENT'} "
              f"({len(s_m[0])} modules, {len(s_m[1])} tensors)")
        theirs.load_state_dict(mine.state_dict())
        tokens = [[49406] + torch.randint(0, 49406, (20,), generator=g).tolist() + [49407] * 56]
        z_m, pooled_m = cs.encode_text(mine, tokens, 49407)
        wrapper = SDClipStandIn(theirs, {"start": 49406, "end": 49407, "pad": 49407}, False, process_tokens, forward)
        z_t, pooled_t = wrapper(tokens)
        ok &= same("CLIP-L z (fp16 weights, fp32 compute)", z_m, z_t)
        ok &= same("CLIP-L pooled", pooled_m, pooled_t)

        # VAE decoder (FLUX ddconfig shape, tiny)
        for vd in ("fp32", "bf16"):
            dt = cs.DTYPES[vd]
            mine = cs.randomize(cs.FluxVAE(dict(cs.VAE_TINY)), dt)
            theirs = vae_model.Decoder(**dict(cs.VAE_TINY)).to(dt).eval()
            s_m = structure(mine.decoder)
            s_t = structure(theirs)
            ok &= s_m == s_t
            print(f"VAE Decoder tiny {vd}: modules and parameters {'equal' if s_m == s_t else 'DIFFERENT'} "
                  f"({len(s_m[0])} modules, {len(s_m[1])} tensors)")
            theirs.load_state_dict(mine.decoder.state_dict())
            z = torch.randn(1, 16, 8, 12, generator=g).to(dt)
            try:
                with torch.no_grad():
                    out_m = mine.decode(z)
                    out_t = theirs(z)
            except RuntimeError as e:
                print(f"  VAE {vd}: not runnable on this cpu build ({e}); skipped")
                continue
            ok &= same(f"VAE decode ({vd})", out_m, out_t)

        # full-size configurations: module names, order, shapes and dtypes (meta device; the VAE on the cpu, 0.2 GB)
        meta = torch.device("meta")
        for name, mine, theirs in [
                ("T5-XXL fp16", lambda: cs.T5(dict(cs.T5XXL_CONFIG), torch.float16, meta),
                 lambda: t5.T5(dict(cs.T5XXL_CONFIG), torch.float16, meta, ops.manual_cast)),
                ("CLIP-L fp16", lambda: cs.CLIPTextModel(dict(cs.CLIP_L_CONFIG), torch.float16, meta),
                 lambda: clip_model.CLIPTextModel(dict(cs.CLIP_L_CONFIG), torch.float16, meta, ops.manual_cast)),
                ("FLUX VAE decoder bf16", lambda: cs.FluxVAE(dict(cs.FLUX_VAE_DDCONFIG)).decoder.to(torch.bfloat16),
                 lambda: vae_model.Decoder(**dict(cs.FLUX_VAE_DDCONFIG)).to(torch.bfloat16))]:
            m, t = mine(), theirs()
            s_m, s_t = structure(m), structure(t)
            ok &= s_m == s_t
            print(f"{name} full size: modules and parameters {'equal' if s_m == s_t else 'DIFFERENT'} "
                  f"({len(s_m[0])} modules, {len(s_m[1])} tensors, {sum(p.numel() for p in m.parameters()):,} "
                  f"parameters)")
            del m, t
        print("all equal" if ok else "MISMATCH")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for k in [k for k in sys.modules if k == "comfy" or k.startswith("comfy.")]:
            del sys.modules[k]


if __name__ == "__main__":
    sys.exit(main())
