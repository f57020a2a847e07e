"""Real seconds and peak memory of Qwen-Image's text encoder, Qwen2.5-VL-7B, encoding a prompt as ComfyUI runs it, on one
GPU, random weights: the validation rows of tiersim's model/text_encoder/llm_text_encoder_trace_generator.

Nothing is rebuilt: this runs ComfyUI's own files (Comfy-Org/ComfyUI at a125cd84, given with --comfyui: a folder
holding its comfy/ package, extracted by experiments/validate/extract_comfyui.sh; not part of tiersim) as the
package `comfy`: comfy/text_encoders/qwen_image.py (QwenImageTokenizer with its qwen25_tokenizer files,
QwenImageTEModel, te()), llama.py (Qwen25_7BVLI, Llama2_), qwen_vl.py (the vision tower, built and loaded, not run by
a text prompt), sd1_clip.py (SDClipModel.process_tokens / forward, ClipTokenWeightEncoder), ops.py (manual_cast,
scaled_fp8_ops), model_management.py, rmsnorm.py, ldm/modules/attention.py, with transformers' Qwen2Tokenizer.
The model is what comfy/sd.py load_text_encoder_state_dicts builds for CLIPLoader type qwen_image:
qwen_image.te(**llama_detect(state dict)), i.e. dtype_llama = the checkpoint's model.norm.weight dtype (bf16 in both
of Comfy-Org's files) and, for qwen_2.5_vl_7b_fp8_scaled.safetensors, llama_scaled_fp8 = float8_e4m3fn (its
"scaled_fp8" marker), which makes every Linear comfy.ops.scaled_fp8_ops' (fp8 weight and bias, a float32 scale).
Weights are random (normal, std 0.02; RMSNorm scales 1; fp8 weights cast from such bf16 values; scales 1), made on
the GPU in place of ModelPatcher's load.

Measured per configuration (weights bf16 | fp8_scaled, and a prompt of N tokens): the prompt is text of N user
tokens (" cat" words: one token each, the count checked) put in ComfyUI's template by tokenize_with_weights, so the
encoder runs 34 + N + 5 tokens (the counts are recorded from the real tokenizer: template_prefix, template_suffix).
--warmup untimed encodes, then --iterations timed ones, each two parts between torch.cuda.synchronize() calls:
  forward_s   SDClipModel.encode(tokens) on the GPU: process_tokens (embedding lookup made fp32, the mask) and
              Llama2_.forward in fp32 (the GPU part tiersim's generator models)
  encode_s    QwenImageTEModel.encode_token_weights whole (the same forward, the template cut and the output's
              copy to the cpu, intermediate_device), as CLIPTextEncode runs it
peak_bytes: torch.cuda.max_memory_allocated over the runs (weights included); base_bytes: allocated before them.
--kernels adds one profiled encode per weight format at --kernel-tokens: each device kernel by name, count, us.
Also written: meta.json with the model's parameters counted on ComfyUI's module (language model, vision tower,
bytes as loaded) and the template's token counts.

  python3 experiments/validate/qwen25_vl_encode.py --comfyui .ext/comfyui --out OUT_DIR
  /usr/bin/python3 experiments/validate/qwen25_vl_encode.py --comfyui .ext/comfyui --tiny --device cpu --out /tmp/q
      (local smoke run: a tiny language model, torch without float8 or SDPA, a stand-in tokenizer when transformers
       is missing)
Writes OUT/qwen25_vl_encode.jsonl (one line per configuration), OUT/meta.json and, with --kernels,
OUT/qwen25_vl_kernels.jsonl.
"""
import argparse
import json
import os
import statistics
import sys
import time
import types

import torch

from profiler_events import kernels_by_name

COMFYUI_COMMIT = "a125cd84b054a57729b5eecab930ca9408719832"
HERE = os.path.dirname(os.path.abspath(__file__))
TINY = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 152064}


def stand_ins(tiny):
    """What a local smoke run lacks: einops (repo shim), SDPA (torch 1.13), transformers' tokenizers (a word-level
    stand-in with Qwen2.5's special token ids). None of these is used on the GPU machine, which has them all."""
    try:
        import einops  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "einops_shim"))
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
            s = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
            if attn_mask is not None:
                s = s + attn_mask
            return torch.matmul(torch.softmax(s, dim=-1), v)
        torch.nn.functional.scaled_dot_product_attention = sdpa
    try:
        import transformers  # noqa: F401
    except ImportError:
        if not tiny:
            raise
        special = {"<|im_start|>": 151644, "<|im_end|>": 151645, "<|vision_start|>": 151652,
                   "<|vision_end|>": 151653, "<|image_pad|>": 151655}

        class Tok:
            """Words and newlines as tokens (user 872, newline 198 as in Qwen2.5's vocabulary)."""
            @classmethod
            def from_pretrained(cls, *a, **k):
                return cls()

            def __call__(self, text):
                ids, word = [], ""
                i = 0
                while i < len(text):
                    hit = next((s for s in special if text.startswith(s, i)), None)
                    if hit or text[i] in " \n":
                        if word:
                            ids.append(872 if word == "user" else 1000 + hash(word) % 1000)
                            word = ""
                        if hit:
                            ids.append(special[hit])
                            i += len(hit)
                            continue
                        if text[i] == "\n":
                            ids.append(198)
                    else:
                        word += text[i]
                    i += 1
                if word:
                    ids.append(1000 + hash(word) % 1000)
                return {"input_ids": ids}

            def get_vocab(self):
                return dict(special)

        tf = types.ModuleType("transformers")
        tf.Qwen2Tokenizer = Tok
        tf.CLIPTokenizer = Tok
        sys.modules["transformers"] = tf


def import_comfy_modules(path, cpu):
    """ComfyUI's package from `path` with its default flags (comfy/cli_args.py parses none unless
    options.args_parsing), or with --cpu for a run on the cpu (its model management needs CUDA otherwise)."""
    sys.path.insert(0, os.path.abspath(path))
    if cpu:
        import comfy.options
        comfy.options.args_parsing = True
        sys.argv = sys.argv[:1] + ["--cpu"]
    import comfy.model_management  # noqa: F401  (ComfyUI's device and dtype decisions, as at startup)


def import_comfy(path, cpu):
    import_comfy_modules(path, cpu)
    import comfy.text_encoders.qwen_image as qi
    return qi


def build(qi, weights, device, tiny):
    """comfy/sd.py load_text_encoder_state_dicts for a qwen_image CLIPLoader: te(**llama_detect(sd)), then CLIP's
    model made on `device` (ModelPatcher's load, here: random weights made there)."""
    scaled = weights == "fp8_scaled"
    kw = {"dtype_llama": torch.bfloat16}
    if scaled:
        kw["llama_scaled_fp8"] = torch.float8_e4m3fn
    options = {"qwen25_7b_model_config": dict(TINY)} if tiny else {}
    model = qi.te(**kw)(device=device, dtype=torch.bfloat16, model_options=options)
    g = torch.Generator(device="cpu").manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.numel() == 0:
                continue
            if name.endswith("scale_weight") or name.endswith("scale_input"):
                p.fill_(1.0)
            elif "norm" in name.split(".")[-2] or name.endswith("ln_q.weight"):
                p.fill_(1.0)
            else:
                v = torch.randn(p.shape, generator=g, dtype=torch.float32) * 0.02 if p.numel() < (1 << 22) else None
                if v is None:  # large tensors: drawn on the device
                    v = torch.empty(p.shape, device=device, dtype=torch.float32).normal_(0, 0.02)
                p.copy_(v.to(device=device).to(p.dtype))
    model.eval()
    return model


def count(module):
    return sum(p.numel() for p in module.parameters())


def nbytes(module):
    return sum(p.numel() * p.element_size() for p in module.parameters())


def prompt_text(tokenizer, n):
    """Text of n user tokens: a word repeated (the first of these words that the tokenizer makes one token a word),
    the count checked against the tokenizer (template excluded)."""
    if n == 0:
        return ""
    for word in ("cat", "dog", "red", "sky"):
        text = word + (" " + word) * (n - 1)
        if len(tokenizer.tokenizer(text)["input_ids"]) == n:
            return text
    raise RuntimeError(f"no prompt of {n} tokens from repeated words")


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--comfyui", required=True, help="a folder holding ComfyUI a125cd84's comfy/ package")
    ap.add_argument("--out", required=True)
    ap.add_argument("--weights", nargs="+", default=["bf16", "fp8_scaled"])
    ap.add_argument("--tokens", nargs="+", type=int, default=[0, 95, 295, 995],
                    help="user prompt tokens (the encoder runs 34 + N + 5)")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--kernel-tokens", type=int, default=95)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    stand_ins(a.tiny)
    qi = import_comfy(a.comfyui, a.device == "cpu")
    import comfy.model_management as mm
    tokenizer = qi.QwenImageTokenizer()
    inner_tok = tokenizer.qwen25_7b  # the SDTokenizer
    # The template's token counts, from ComfyUI's tokenizer: the whole sequence of an empty prompt, and where
    # encode_token_weights cuts it (the second <|im_start|> + 3).
    empty = [t[0] for t in tokenizer.tokenize_with_weights("")["qwen25_7b"][0]]
    starts = [i for i, t in enumerate(empty) if t == 151644]
    prefix = starts[1] + 3 if len(starts) > 1 and empty[starts[1] + 1] == 872 and empty[starts[1] + 2] == 198 else None
    meta = {"comfyui": COMFYUI_COMMIT, "torch": torch.__version__, "tiny": a.tiny,
            "template_tokens_empty_prompt": len(empty), "template_prefix": prefix,
            "template_suffix": len(empty) - prefix if prefix is not None else None,
            "gpu": torch.cuda.get_device_name(0) if a.device.startswith("cuda") else "cpu",
            "vram_state": str(mm.vram_state), "models": {}}
    rows, kernel_rows = [], []
    for weights in a.weights:
        if weights == "fp8_scaled" and not hasattr(torch, "float8_e4m3fn"):
            print("skipping fp8_scaled: this torch has no float8", flush=True)
            continue
        if a.device.startswith("cuda"):
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        model = build(qi, weights, a.device, a.tiny)
        te = model.qwen25_7b  # Qwen25_7BVLIModel (SDClipModel)
        lm, visual = te.transformer.model, te.transformer.visual
        meta["models"][weights] = {"language_params": count(lm), "vision_params": count(visual),
                                   "params": count(model), "param_bytes": nbytes(model),
                                   "language_bytes": nbytes(lm), "vision_bytes": nbytes(visual),
                                   "dtypes": sorted({str(p.dtype) for p in model.parameters()})}
        print(weights, meta["models"][weights], flush=True)
        for n in a.tokens:
            text = prompt_text(inner_tok, n)
            tokens = tokenizer.tokenize_with_weights(text)
            seq = len(tokens["qwen25_7b"][0])
            to_encode = [[t[0] for t in tokens["qwen25_7b"][0]]]
            with torch.no_grad():
                def timed(fn):
                    """fn's seconds between two synchronizes, and its result."""
                    sync(a.device)
                    t0 = time.perf_counter()
                    out = fn()
                    sync(a.device)
                    return time.perf_counter() - t0, out

                def forward():
                    return timed(lambda: te.encode(to_encode))

                def encode():
                    return timed(lambda: model.encode_token_weights(tokens))

                if a.device.startswith("cuda"):
                    base = torch.cuda.memory_allocated()
                    torch.cuda.reset_peak_memory_stats()
                for _ in range(a.warmup):
                    forward()
                    encode()
                fw, en = [], []
                out_tokens = None
                for _ in range(a.iterations):
                    fw.append(forward()[0])
                    s, out = encode()
                    en.append(s)
                    out_tokens = out[0].shape[1]
                row = {"stage": "qwen25_vl_encode", "weights": weights, "prompt_tokens": n, "tokens": seq,
                       "output_tokens": out_tokens, "forward_times": fw, "forward_median_s": statistics.median(fw),
                       "encode_times": en, "encode_median_s": statistics.median(en),
                       "iterations": a.iterations, "warmup": a.warmup, "tiny": a.tiny, "comfyui": COMFYUI_COMMIT,
                       "torch": torch.__version__, "gpu": meta["gpu"]}
                if a.device.startswith("cuda"):
                    row.update(base_bytes=base, peak_bytes=torch.cuda.max_memory_allocated(),
                               reserved_bytes=torch.cuda.max_memory_reserved())
                rows.append(row)
                print(f"{weights} {seq} tokens: forward {1000 * row['forward_median_s']:.2f} ms, encode "
                      f"{1000 * row['encode_median_s']:.2f} ms, peak {row.get('peak_bytes', 0) / 1e9:.3f} GB", flush=True)
                if a.kernels and n == a.kernel_tokens and a.device.startswith("cuda"):
                    from torch.profiler import ProfilerActivity, profile
                    sync(a.device)
                    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                        te.encode(to_encode)
                        sync(a.device)
                    kernel_rows.append({"weights": weights, "tokens": seq, **kernels_by_name(prof)})
        del model, te, lm, visual
        if a.device.startswith("cuda"):
            torch.cuda.empty_cache()
    with open(os.path.join(a.out, "qwen25_vl_encode.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    if kernel_rows:
        with open(os.path.join(a.out, "qwen25_vl_kernels.jsonl"), "w") as f:
            for r in kernel_rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
