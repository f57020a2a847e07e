#!/usr/bin/env python3
"""Writes a random-weight GGUF that llama.cpp loads, for a model described by a tiersim model JSON
(traces/models/*.json: Hugging Face config.json fields), to time llama.cpp without the real weights.

  make_random_gguf.py MODEL -o OUT.gguf [--layers N] [--dtype f16|bf16|f32] [--seed S]
                      [--llama3-rope-factor F] [--ctx N]

MODEL is a path to a JSON file or a name in traces/models/ (qwen3-4b, llama-3.1-8b, ...). Architectures:
'qwen3' (q_norm/k_norm), 'llama', and 'qwen3_moe' (written as llama.cpp's qwen3moe: the router
ffn_gate_inp in F32 as convert_hf_to_gguf.py keeps it, each expert kind fused in one 3-D tensor
ffn_{gate,up,down}_exps, src/models/qwen3moe.cpp's shapes). Tensors and metadata follow what convert_hf_to_gguf.py writes for those
models; the vocabulary is SYNTHETIC: a GPT-2 style byte-level BPE one with vocab_size tokens (256 byte
tokens, generated 2- and 3-character merges, control tokens at the end), tokenizer.ggml.pre 'qwen2' or
'llama-bpe'. It loads and tokenizes but means nothing: for timing only.

Weights (2-D tensors) are F16 (default) or BF16 bit patterns with random sign and mantissa and an exponent
bounded to magnitudes 2^-9..2^-5 (0.002 to 0.03): finite and modest. They are drawn from a seeded pool of
64 Mi random values, each tensor a run of slices at seeded random offsets, written straight from the pool,
so an 8 B model is written at disk speed and memory stays near the pool's 128 MiB. Norm weights are F32
near 1.

Uses the gguf-py carried with llama.cpp (carry/llama.cpp/gguf-py, made by assemble_source.sh) and numpy.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
GGUF_PY = HERE / "carry" / "llama.cpp" / "gguf-py"
MODELS_DIR = REPO / "traces" / "models"

if not (GGUF_PY / "gguf" / "__init__.py").is_file():
    sys.exit(f"make_random_gguf: no gguf-py at {GGUF_PY}: run experiments/llamacpp/assemble_source.sh first")
sys.path.insert(0, str(GGUF_PY))
try:
    import yaml  # noqa: F401  (gguf.metadata imports it; model cards only, unused here)
except ImportError:
    sys.modules["yaml"] = types.ModuleType("yaml")
import gguf  # noqa: E402

POOL_ELEMS = 1 << 26  # 64 Mi values (128 MiB of 16-bit patterns)


def load_config(model: str) -> tuple[dict, str]:
    p = Path(model)
    if not p.is_file():
        p = MODELS_DIR / (model if model.endswith(".json") else model + ".json")
    if not p.is_file():
        sys.exit(f"make_random_gguf: no model JSON '{model}' (nor {p})")
    with open(p) as f:
        return json.load(f), p.stem


def need(cfg: dict, key: str):
    if key not in cfg:
        sys.exit(f"make_random_gguf: the model JSON has no '{key}'")
    return cfg[key]


# ---------------------------------------------------------------------------------------------------------
# Synthetic byte-level BPE vocabulary


def bytes_to_unicode() -> list[str]:
    """GPT-2's byte -> printable character table, indexed by byte value."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, (chr(c) for c in cs)))
    return [table[b] for b in range(256)]


def synthetic_vocab(n_vocab: int, specials: list[str]) -> tuple[list[str], list[int], list[str]]:
    """tokens, token types, merges. The byte tokens first (ids 0..255), then 2-character merges of byte
    characters, then 3-character ones (a 2-character token + a byte character), then `specials` (CONTROL)."""
    n_regular = n_vocab - len(specials)
    if n_regular < 256:
        sys.exit(f"make_random_gguf: vocab_size {n_vocab} leaves fewer than 256 regular tokens")
    base = bytes_to_unicode()
    tokens = list(base)
    merges: list[str] = []
    two: list[str] = []
    i = 0
    while len(tokens) < n_regular:
        if i < 256 * 256:
            a, b = base[i // 256], base[i % 256]
            tok = a + b
            two.append(tok)
            merges.append(f"{a} {b}")
        else:
            j = i - 256 * 256
            if j // 256 >= len(two):
                sys.exit("make_random_gguf: vocab too large for the synthetic scheme")
            a, b = two[j // 256], base[j % 256]
            tok = a + b
            merges.append(f"{a} {b}")
        tokens.append(tok)
        i += 1
    token_types = [int(gguf.TokenType.NORMAL)] * len(tokens)
    for s in specials:
        tokens.append(s)
        token_types.append(int(gguf.TokenType.CONTROL))
    assert len(tokens) == n_vocab and len(set(tokens)) == n_vocab
    return tokens, token_types, merges


def specials_for(arch: str) -> tuple[list[str], dict]:
    if arch == "llama":  # Llama 3: 256 special tokens after the regular ones
        named = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
        named += [f"<|reserved_special_token_{k}|>" for k in range(256 - len(named))]
        return named, {"bos": "<|begin_of_text|>", "eos": "<|end_of_text|>", "eot": "<|eot_id|>", "add_bos": True,
                       "pre": "llama-bpe"}
    named = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # Qwen
    return named, {"bos": "<|endoftext|>", "eos": "<|im_end|>", "pad": "<|endoftext|>", "add_bos": False,
                   "pre": "qwen2"}


# ---------------------------------------------------------------------------------------------------------
# Random weights


class WeightSource:
    """Seeded 16-bit patterns (F16 or BF16) of magnitude 2^-9..2^-5, served as slices of one pool."""

    def __init__(self, dtype: str, seed: int):
        self.rng = np.random.Generator(np.random.PCG64(seed))
        r = self.rng.integers(0, 1 << 16, size=POOL_ELEMS, dtype=np.uint16)
        pool = np.empty(POOL_ELEMS, dtype=np.uint16)
        ex = r >> 10 if dtype == "f16" else r >> 7
        ex &= 3  # 2 random bits choose one of 4 exponents
        if dtype == "f16":  # sign(1) exponent(5) mantissa(10); exponent field 6..9 = 2^-9..2^-6 (x 1..2)
            np.bitwise_and(r, 0x83FF, out=pool)
            ex += 6
            ex <<= 10
        else:  # bf16: sign(1) exponent(8) mantissa(7); exponent field 118..121
            np.bitwise_and(r, 0x807F, out=pool)
            ex += 118
            ex <<= 7
        pool |= ex
        self.pool = pool

    def run(self, n: int, as_f32: bool = False) -> "PoolRun":
        """n values as a run of pool slices at seeded random offsets."""
        slices = []
        off = int(self.rng.integers(0, POOL_ELEMS))
        left = n
        while left > 0:
            k = min(left, POOL_ELEMS - off)
            slices.append(self.pool[off:off + k])
            left -= k
            off = int(self.rng.integers(0, POOL_ELEMS // 2))
        return PoolRun(slices, as_f32)


class PoolRun:
    """What GGUFWriter.write_tensor_data needs of a tensor (nbytes, tofile), written slice by slice: no
    tensor is ever whole in memory."""

    def __init__(self, slices: list[np.ndarray], as_f32: bool):
        self.slices = slices
        self.as_f32 = as_f32
        n = sum(len(x) for x in slices)
        self.nbytes = n * (4 if as_f32 else 2)

    def tofile(self, fout) -> None:
        for x in self.slices:
            if self.as_f32:
                x = x.view(np.float16).astype(np.float32)
            fout.write(memoryview(x).cast("B"))


# ---------------------------------------------------------------------------------------------------------


def llama3_rope_factors(head_dim: int, base: float, factor: float, low: float = 1.0, high: float = 4.0,
                        orig_ctx: int = 8192) -> np.ndarray:
    """rope_freqs.weight as convert_hf_to_gguf.py computes it for rope_type 'llama3'."""
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    low_wl, high_wl = orig_ctx / low, orig_ctx / high
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (orig_ctx / wl - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="tiersim model JSON: a path, or a name in traces/models/ (qwen3-4b, llama-3.1-8b)")
    ap.add_argument("-o", "--output", required=True, help="the .gguf to write")
    ap.add_argument("--layers", type=int, help="keep only the first N layers (quick tests)")
    ap.add_argument("--dtype", choices=["f16", "bf16", "f32"], default="f16", help="2-D weights (default f16)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ctx", type=int, help="context_length to record (default max_position_embeddings)")
    ap.add_argument("--llama3-rope-factor", type=float,
                    help="add rope_freqs.weight as for rope_type 'llama3' with this factor (Llama-3.1: 8); "
                         "default: from the JSON's rope_scaling, if any")
    args = ap.parse_args()

    cfg, stem = load_config(args.model)
    arch = need(cfg, "model_type")
    if arch not in ("qwen3", "llama", "qwen3_moe"):
        sys.exit(f"make_random_gguf: model_type '{arch}' not supported (qwen3, llama, qwen3_moe)")
    moe = arch == "qwen3_moe"
    n_expert = int(need(cfg, "num_experts")) if moe else 0
    n_expert_used = int(need(cfg, "num_experts_per_tok")) if moe else 0
    n_ff_exp = int(need(cfg, "moe_intermediate_size")) if moe else 0
    gguf_arch = "qwen3moe" if moe else arch
    n_embd = int(need(cfg, "hidden_size"))
    n_ff = int(need(cfg, "intermediate_size"))
    n_layer = int(need(cfg, "num_hidden_layers"))
    n_head = int(need(cfg, "num_attention_heads"))
    n_head_kv = int(cfg.get("num_key_value_heads", n_head))
    head_dim = int(cfg.get("head_dim") or n_embd // n_head)
    n_vocab = int(need(cfg, "vocab_size"))
    tied = bool(cfg.get("tie_word_embeddings", False))
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    rope_theta = float(cfg.get("rope_theta", 10000.0))
    n_ctx = int(args.ctx or cfg.get("max_position_embeddings", 4096))
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        sys.exit("make_random_gguf: biases not supported")
    if args.layers is not None:
        if not 1 <= args.layers <= n_layer:
            sys.exit(f"make_random_gguf: --layers must be 1..{n_layer}")
        n_layer = args.layers
    rope_factor = args.llama3_rope_factor
    rs = cfg.get("rope_scaling") or {}
    if rope_factor is None and str(rs.get("rope_type", rs.get("type", ""))).lower() == "llama3":
        rope_factor = float(rs.get("factor", 8.0))
    if rope_factor is not None and arch != "llama":
        sys.exit("make_random_gguf: --llama3-rope-factor is for llama models")

    t0 = time.time()
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(out, gguf_arch)

    # general
    name = cfg.get("name", stem) + " (random weights)"
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name)
    file_type = {"f16": gguf.LlamaFileType.MOSTLY_F16, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
                 "f32": gguf.LlamaFileType.ALL_F32}[args.dtype]
    w.add_file_type(int(file_type))
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    # hyperparameters
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(rope_theta)
    w.add_layer_norm_rms_eps(eps)
    if moe:
        w.add_expert_count(n_expert)
        w.add_expert_used_count(n_expert_used)
        w.add_expert_feed_forward_length(n_ff_exp)
    if arch == "llama":
        w.add_vocab_size(n_vocab)
    # tokenizer
    specials, sp = specials_for(arch)
    tokens, token_types, merges = synthetic_vocab(n_vocab, specials)
    ids = {t: i for i, t in enumerate(tokens[-len(specials):], start=n_vocab - len(specials))}
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(sp["pre"])
    w.add_token_list(tokens)
    w.add_token_types(token_types)
    w.add_token_merges(merges)
    w.add_bos_token_id(ids[sp["bos"]])
    w.add_eos_token_id(ids[sp["eos"]])
    if "eot" in sp:
        w.add_eot_token_id(ids[sp["eot"]])
    if "pad" in sp:
        w.add_pad_token_id(ids[sp["pad"]])
    w.add_add_bos_token(sp["add_bos"])

    # tensors: (name, numpy shape (rows = outputs, cols = inputs), kind)
    plan: list[tuple[str, tuple[int, ...], str]] = [("token_embd.weight", (n_vocab, n_embd), "w")]
    if rope_factor is not None:
        plan.append(("rope_freqs.weight", (head_dim // 2,), "rope"))
    for i in range(n_layer):
        b = f"blk.{i}."
        plan += [
            (b + "attn_norm.weight", (n_embd,), "norm"),
            (b + "attn_q.weight", (n_head * head_dim, n_embd), "w"),
            (b + "attn_k.weight", (n_head_kv * head_dim, n_embd), "w"),
            (b + "attn_v.weight", (n_head_kv * head_dim, n_embd), "w"),
            (b + "attn_output.weight", (n_embd, n_head * head_dim), "w"),
        ]
        if arch in ("qwen3", "qwen3_moe"):
            plan += [(b + "attn_q_norm.weight", (head_dim,), "norm"), (b + "attn_k_norm.weight", (head_dim,), "norm")]
        if moe:
            plan += [
                (b + "ffn_norm.weight", (n_embd,), "norm"),
                (b + "ffn_gate_inp.weight", (n_expert, n_embd), "w32"),
                (b + "ffn_gate_exps.weight", (n_expert, n_ff_exp, n_embd), "w"),
                (b + "ffn_down_exps.weight", (n_expert, n_embd, n_ff_exp), "w"),
                (b + "ffn_up_exps.weight", (n_expert, n_ff_exp, n_embd), "w"),
            ]
        else:
            plan += [
                (b + "ffn_norm.weight", (n_embd,), "norm"),
                (b + "ffn_gate.weight", (n_ff, n_embd), "w"),
                (b + "ffn_up.weight", (n_ff, n_embd), "w"),
                (b + "ffn_down.weight", (n_embd, n_ff), "w"),
            ]
    plan.append(("output_norm.weight", (n_embd,), "norm"))
    if not tied:
        plan.append(("output.weight", (n_vocab, n_embd), "w"))

    wdtype = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32}[args.dtype]
    wraw = gguf.GGMLQuantizationType.BF16 if args.dtype == "bf16" else None
    wsize = 4 if args.dtype == "f32" else 2
    total = 0
    for tname, shape, kind in plan:
        n = int(np.prod(shape))
        if kind == "w":
            w.add_tensor_info(tname, shape, np.dtype(wdtype), n * wsize, raw_dtype=wraw)
            total += n * wsize
        else:
            w.add_tensor_info(tname, shape, np.dtype(np.float32), n * 4)
            total += n * 4

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    t_meta = time.time() - t0

    src = WeightSource("bf16" if args.dtype == "bf16" else "f16", args.seed)
    rng = np.random.Generator(np.random.PCG64(args.seed + 1))
    t_pool = time.time() - t0 - t_meta
    for tname, shape, kind in plan:
        n = int(np.prod(shape))
        if kind == "w":
            arr = src.run(n, as_f32=args.dtype == "f32")
        elif kind == "w32":  # the router: random F32 of the weights' magnitude
            arr = src.run(n, as_f32=True)
        elif kind == "norm":
            arr = (1.0 + 0.02 * rng.standard_normal(n)).astype(np.float32).reshape(shape)
        else:
            arr = llama3_rope_factors(head_dim, rope_theta, rope_factor)
        w.write_tensor_data(arr)
    w.close()

    dt = time.time() - t0
    size = os.path.getsize(out)
    n_params = sum(int(np.prod(s)) for _, s, k in plan if k != "rope")
    print(f"make_random_gguf: {out}: {arch}, {n_layer} layers, {n_params / 1e9:.3f} B parameters, "
          f"{len(plan)} tensors, {args.dtype}, {'tied' if tied else 'untied'} output, vocab {n_vocab}"
          f"{', rope_freqs (llama3 factor %g)' % rope_factor if rope_factor is not None else ''}")
    print(f"make_random_gguf: {size / 2**30:.2f} GiB ({total / 2**30:.2f} GiB tensor data) in {dt:.1f} s "
          f"(metadata {t_meta:.1f} s, pool {t_pool:.1f} s, {size / max(dt, 1e-9) / 1e9:.2f} GB/s)")


if __name__ == "__main__":
    main()
