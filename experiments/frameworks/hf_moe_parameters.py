"""transformers' own parameters of the mixture-of-experts models tiersim generates, for tests/fixtures.

Each published config (traces/models/*.json, fields as published) is handed to transformers' config class for its
model_type and the model is built on the meta device (no memory, no weights): its named_parameters are what
accelerate's hooks, device maps and any parameter copier see. One JSON line per model with the installed versions:

  python3 experiments/frameworks/hf_moe_parameters.py --out hf_moe_parameters.jsonl traces/models/qwen3-30b-a3b.json ...

The quantization_config (gpt-oss's MXFP4, DeepSeek-V3's fp8) is dropped: the meta model then has every weight in
bf16, and the fixture gives names and shapes (element counts), not storage bytes.
"""
import argparse
import json
import sys

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    with open(a.out, "w") as out:
        for path in a.configs:
            with open(path) as f:
                d = json.load(f)
            fields = {k: v for k, v in d.items() if k not in ("name", "source", "quantization_config", "model_type")}
            try:
                cfg = AutoConfig.for_model(d["model_type"], **fields)
                torch.set_default_dtype(torch.bfloat16)
                with torch.device("meta"):
                    model = AutoModelForCausalLM.from_config(cfg)
            except Exception as e:  # recorded, not hidden: the fixture says which model transformers refused
                out.write(json.dumps({"config": path, "error": f"{type(e).__name__}: {e}"}) + "\n")
                print(f"{path}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            params = [[n, list(p.shape)] for n, p in model.named_parameters()]
            no_split = getattr(model, "_no_split_modules", None)
            no_split = sorted(no_split) if no_split is not None else None
            out.write(json.dumps({"config": path, "model": d.get("name", path), "model_type": d["model_type"],
                                  "class": type(model).__name__, "no_split_modules": no_split,
                                  "tie_word_embeddings": bool(getattr(cfg, "tie_word_embeddings", False)),
                                  "transformers": transformers.__version__, "torch": torch.__version__,
                                  "parameters": params}) + "\n")
            print(f"{path}: {type(model).__name__}, {len(params)} parameters, "
                  f"{sum(p.numel() for p in model.parameters()) / 1e9:.2f} B", flush=True)
            del model


if __name__ == "__main__":
    main()
