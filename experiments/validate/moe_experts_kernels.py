"""What transformers' Qwen3-MoE layer launches per decode step, by experts implementation: the check of the launch
and sync counts tiersim's generator reads off the source (sim/model/trace_generator.cpp, moe_mlp), not a fit.

For each of eager, grouped_mm and batched_mm (transformers 5: model.set_experts_implementation, the
@use_experts_implementation machinery of transformers/integrations/moe.py) and for a dense control (the same
attention, a dense gated MLP), a Qwen3-30B-A3B-shaped model (hidden 2048, 32/4 heads of 128, 128 experts, top-8,
moe_intermediate 768) is built with random bf16 weights at L1 and L2 layers (a small vocabulary: the head is not
what is counted); after a 16-token prompt and 3 warm-up decode steps, one decode step is profiled (torch.profiler,
CPU + CUDA). Per model: CUDA kernels, device-to-host memcpys (each one a host sync: nonzero, .item(), indexing by a
CUDA scalar), host-to-device memcpys, memsets. Per layer = (L2 - L1) / (L2 - L1 layers); the MoE block's own =
per-layer minus the dense control's per-layer plus the dense MLP's 5 launches (gate, up, silu, mul, down). The
router's top-8 over random weights hits 8 distinct experts per token in decode. Kernel names of one layer's MoE
block are kept (the L2 model's names not in the L1 model's multiset, with counts).

  python3 experiments/validate/moe_experts_kernels.py --out OUT.json          (a GPU: ~1 minute)
  python3 experiments/validate/moe_experts_kernels.py --device cpu --out /tmp/k.json --tiny   (smoke test)
"""
import argparse
import collections
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profiler_events import chrome_events  # noqa: E402


def build(layers, moe, tiny, device):
    from transformers import Qwen3Config, Qwen3MoeConfig, Qwen3ForCausalLM, Qwen3MoeForCausalLM
    common = dict(hidden_size=64 if tiny else 2048, num_attention_heads=4 if tiny else 32, num_key_value_heads=2 if tiny else 4,
                  head_dim=16 if tiny else 128, num_hidden_layers=layers, vocab_size=512, max_position_embeddings=4096,
                  rms_norm_eps=1e-6, tie_word_embeddings=False)
    if moe:
        cfg = Qwen3MoeConfig(num_experts=16 if tiny else 128, num_experts_per_tok=8, moe_intermediate_size=32 if tiny else 768,
                             intermediate_size=64 if tiny else 6144, norm_topk_prob=True, decoder_sparse_step=1,
                             mlp_only_layers=[], **common)
        model = Qwen3MoeForCausalLM(cfg)
    else:
        cfg = Qwen3Config(intermediate_size=32 if tiny else 768, **common)
        model = Qwen3ForCausalLM(cfg)
    return model.to(device=device, dtype=torch.bfloat16).eval()


def decode_profile(model, device, cuda):
    ids = torch.randint(0, 512, (1, 16), device=device)
    with torch.no_grad():
        out = model(ids, use_cache=True)
        past = out.past_key_values
        tok = out.logits[:, -1:].argmax(-1)
        for _ in range(3):
            out = model(tok, past_key_values=past, use_cache=True)
            past = out.past_key_values
            tok = out.logits[:, -1:].argmax(-1)
        if not cuda:
            model(tok, past_key_values=past, use_cache=True)
            return dict(kernels=0, dtoh=0, htod=0, memset=0, names={})
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            model(tok, past_key_values=past, use_cache=True)
            torch.cuda.synchronize()
    events = chrome_events(prof)
    r = dict(kernels=0, dtoh=0, htod=0, memset=0, names=collections.Counter())
    for e in events:
        cat = str(e.get("cat", "")).lower()
        name = str(e.get("name", ""))
        if e.get("ph", "X") != "X":
            continue
        if cat == "kernel":
            r["kernels"] += 1
            r["names"][name[:120]] += 1
        elif cat == "gpu_memcpy":
            if "DtoH" in name:
                r["dtoh"] += 1
            elif "HtoD" in name:
                r["htod"] += 1
        elif cat == "gpu_memset":
            r["memset"] += 1
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--layers", default="2,4")
    a = ap.parse_args()
    cuda = torch.device(a.device).type == "cuda"
    l1, l2 = (int(x) for x in a.layers.split(","))
    import transformers
    out = dict(gpu=torch.cuda.get_device_name(0) if cuda else "cpu", torch=torch.__version__,
               transformers=transformers.__version__, layers=[l1, l2], models={}, per_layer={}, moe_block={})
    torch.manual_seed(0)
    for impl in ["dense", "eager", "grouped_mm", "batched_mm"]:
        res = {}
        for layers in (l1, l2):
            m = build(layers, impl != "dense", a.tiny, a.device)
            if impl != "dense":
                m.set_experts_implementation(impl)
            res[layers] = decode_profile(m, a.device, cuda)
            del m
            if cuda:
                torch.cuda.empty_cache()
        names = res[l2]["names"] - res[l1]["names"] if cuda else {}
        per = {k: (res[l2][k] - res[l1][k]) / (l2 - l1) for k in ("kernels", "dtoh", "htod", "memset")}
        out["models"][impl] = {str(k): {kk: (dict(v) if kk == "names" else v) for kk, v in r.items()} for k, r in res.items()}
        out["per_layer"][impl] = per
        out["per_layer"][impl]["names_added_by_the_extra_layers"] = dict(names)
        print(impl, {k: res[k]["kernels"] for k in res}, "per layer", per, flush=True)
    dense = out["per_layer"]["dense"]
    for impl in ["eager", "grouped_mm", "batched_mm"]:
        p = out["per_layer"][impl]
        out["moe_block"][impl] = dict(kernels=p["kernels"] - dense["kernels"] + 5, dtoh=p["dtoh"] - dense["dtoh"],
                                      htod=p["htod"] - dense["htod"], memset=p["memset"] - dense["memset"])
        print("MoE block", impl, out["moe_block"][impl], flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    sys.exit(main())
