"""tiersim's PyTorch caching allocator replay of diffusion iterations against torch.cuda.max_memory_allocated and
max_memory_reserved, measured on a lent H100 by experiments/validate/dit_reserved_lease.sh (dit_iteration.py, each
shape after torch.cuda.empty_cache()): FLUX.1-dev bf16 and fp8, Qwen-Image bf16 (cfg 2.5, two forwards), Wan2.1-T2V-14B
bf16 (17 and 33 frames, cfg 6), resident and with DisTorch's 8 GB on the CPU; then (PART=2) FLUX.1-dev from GGUF Q8_0 and
Q4_K_S files (resident and 8 GB) and Wan at 81 frames resident; then (PART=3) FLUX fp8 again with its weights moved to
host memory and back after the conversion (dit_iteration.py --reload-weights), as ComfyUI's load leaves them. tiersim: the same command as
experiments/validate/dit_compare.py, its JSON's pytorch_memory (sim/cli/diffusion_memory.hpp: the weights on the
GPU, then op by op the copies of offloaded weights and the transient values, through memory/caching_allocator).
Nothing calibrated on these rows. Writes results/validation/diffusion/reserved.md.

  /usr/bin/python3 experiments/validate/dit_reserved_compare.py   (after building)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dit_compare  # noqa: E402

ROOT, HERE = dit_compare.ROOT, dit_compare.HERE
MODELS = {"FluxTransformer2DModel": "traces/models/flux.1-dev.json", "WanTransformer3DModel": "traces/models/wan2.1-t2v-14b.json",
          "QwenImageTransformer2DModel": "traces/models/qwen-image.json"}


def map_prefix(row):
    """The device map each offloaded row ran with, as kept beside the results. Wan's did not come back from the call
    (the tool returns 8 files); its offloaded bytes, 8,570,825,728, equal those of wan_device_map_1.json's run
    (wan_iteration.jsonl), DisTorch's allocation on the same machine: that map is used."""
    if row["class_name"] == "WanTransformer3DModel":
        return ""
    if row["weight_dtype"] in ("Q8_0", "Q4_K_S"):
        return f"reserved_gguf_{row['weight_dtype']}_"
    short = {"FluxTransformer2DModel": "flux", "QwenImageTransformer2DModel": "qwen"}[row["class_name"]]
    return f"reserved_{short}{'_fp8' if row['weight_dtype'] == 'fp8' else ''}_"


def main():
    rows = [json.loads(line) for name in ("dit_reserved.jsonl", "dit_reserved2.jsonl", "dit_reserved3.jsonl")
            for line in open(os.path.join(HERE, name))]
    lines = ["# PyTorch's caching allocator over diffusion iterations on an H100: tiersim against torch.cuda's peaks", "",
             "Measured: `dit_reserved.jsonl`, `dit_reserved2.jsonl` and `dit_reserved3.jsonl` "
             "(`experiments/validate/dit_reserved_lease.sh`, three calls: the second with PART=2, the third PART=3). Predicted: "
             "`/usr/bin/python3 experiments/validate/dit_reserved_compare.py` (the JSON's `pytorch_memory`).", "",
             "| model | weights | resolution | frames | offload (DisTorch) | allocated: run / tiersim | error | "
             "reserved: run / tiersim | error | reserved - allocated: run / tiersim |", "|---|---|---|---|---|---|---|---|---|---|"]
    err_a, err_r = {}, {}
    for row in rows:
        model = MODELS[row["class_name"]]
        out = dit_compare.run(dit_compare.command(row, model, map_prefix(row)))
        mem = out["pytorch_memory"]
        pa, pr = mem["iteration_peak_allocated_bytes"], mem["iteration_peak_reserved_bytes"]
        ma, mr = row["peak_bytes"], row["reserved_bytes"]
        ea, er = (pa - ma) / ma, (pr - mr) / mr
        if row.get("reload_weights"):
            key = "fp8, its weights moved to host memory and back after the conversion (as a load from host memory)"
        else:
            key = {"fp8": "fp8 (weights converted in the harness)", "bf16": "bf16"}.get(
                row["weight_dtype"], "GGUF (weights quantized in the harness)")
        err_a.setdefault(key, []).append(ea)
        err_r.setdefault(key, []).append(er)
        weights = row["weight_dtype"] + (" (reloaded)" if row.get("reload_weights") else "")
        lines.append(f"| {row['model']} | {weights} | {row['resolution']} | {row.get('frames') or '-'} | "
                     f"{'`' + row['allocation'] + '`' if row['allocation'] != 'none' else 'none'} | "
                     f"{ma / 1e9:.2f} / {pa / 1e9:.2f} GB | {100 * ea:+.1f}% | {mr / 1e9:.2f} / {pr / 1e9:.2f} GB | "
                     f"{100 * er:+.1f}% | {(mr - ma) / 1e9:.2f} / {(pr - pa) / 1e9:.2f} GB |")
    lines.append("")
    for key in err_a:
        a, r = err_a[key], err_r[key]
        lines.append(f"{key}: {len(a)} rows; allocated mean absolute error {100 * sum(map(abs, a)) / len(a):.1f}% "
                     f"(worst {100 * max(a, key=abs):+.1f}%), reserved {100 * sum(map(abs, r)) / len(r):.1f}% "
                     f"(worst {100 * max(r, key=abs):+.1f}%).")
    lines.append("")
    with open(os.path.join(HERE, "reserved.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines[-4:]))


if __name__ == "__main__":
    main()
