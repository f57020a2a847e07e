"""tiersim against diffusion-transformer iterations measured on a lent H100 (experiments/validate/dit_iteration.py):
FLUX.1-dev (images; bf16, fp8 and GGUF Q8_0 / Q4_K_S weights), Wan2.1-T2V-14B (videos, cond and uncond in one batch at cfg 6,
or apart where part of the GPU was held and ComfyUI's rule runs them so: the run decided from its own free memory,
tiersim from the GPU's memory less what was held) and Qwen-Image (images; at cfg 2.5 the empty negative prompt, 5
tokens against the prompt's 100, runs as a second forward, as ComfyUI runs it).

Each measured row ran ComfyUI's model structure (random bf16 weights) resident, or with the leaf modules
ComfyUI-MultiGPU's own DisTorch allocation put on the cpu (its device map is beside the results) cast to
the GPU on the compute stream when their forward runs, from pageable or pinned host memory (older
ComfyUI's casts). tiersim predicts exactly that: `--model <config> --resolution WxH [--frames F --cfg X
--negative-tokens N]`
with `--placement device_map:file=...` and `--offload copy:host=pageable|pinned`, on the shipped
h100-measured hardware and pytorch-hf-h100 runtime profiles (nothing calibrated on these rows). The last
column also places each row with tiersim's own DisTorch rule (`--placement distorch.bytes:offload=X GiB`
with the run's device totals): the bytes it moves to the cpu should equal DisTorch's (for Wan, less the
blocks' modulation parameters, which ComfyUI's load list leaves on the cpu and tiersim keeps on the GPU).
Writes results/validation/diffusion/table.md.

  /usr/bin/python3 experiments/validate/dit_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "diffusion")
# (results file, model description, prefix of its device maps: the 81-frame run was a separate call whose
# maps were saved as wan81_*.json, while its rows name them as that call wrote them)
SOURCES = [("FLUX.1-dev, 1024x1024 and 512x512, batch 1", "dit_iteration.jsonl", "traces/models/flux.1-dev.json", ""),
           ("Wan2.1-T2V-14B, 832x480, cfg 6 (batch 2)", "wan_iteration.jsonl", "traces/models/wan2.1-t2v-14b.json", ""),
           ("Wan2.1-T2V-14B, 832x480, 81 frames, cfg 6 (batch 2)", "wan81_iteration.jsonl",
            "traces/models/wan2.1-t2v-14b.json", "wan81_"),
           ("Qwen-Image, 1328x1328 and 1024x1024, cfg 2.5 (the negative prompt as a second forward)",
            "qwen_iteration.jsonl", "traces/models/qwen-image.json", ""),
           ("Qwen-Image, 1328x1328, cfg 1 (one forward)", "qwen1_iteration.jsonl", "traces/models/qwen-image.json",
            "qwen1_"),
           ("Qwen-Image, fp8 weights (cast to bf16 per forward), cfg 2.5", "qwen_fp8_iteration.jsonl",
            "traces/models/qwen-image.json", "qwenfp8_"),
           ("FLUX.1-dev, fp8 weights (cast to bf16 per forward), 1024x1024", "flux_fp8_iteration.jsonl",
            "traces/models/flux.1-dev.json", "fluxfp8_"),
           ("FLUX.1-dev, GGUF Q8_0 (ComfyUI-GGUF: dequantized per forward, offloaded weights copied by the layers)",
            "flux_q8_0_iteration.jsonl", "traces/models/flux.1-dev.json", "fluxq80_"),
           ("FLUX.1-dev, GGUF Q4_K_S (ComfyUI-GGUF: dequantized per forward, offloaded weights copied by the layers)",
            "flux_q4_k_s_iteration.jsonl", "traces/models/flux.1-dev.json", "fluxq4ks_"),
           ("FLUX.1-dev, GGUF Q4_K_S, the same configurations measured in an earlier call (repeatability)",
            "flux_q4_k_s_run1_iteration.jsonl", "traces/models/flux.1-dev.json", "fluxq4ks_"),
           ("FLUX.1 Kontext's shape: FLUX.1-dev at 1024x1024 with a 1024x1024 reference image (ComfyUI's "
            "ReferenceLatent: 4096 + 4096 image tokens)", "kontext_iteration.jsonl", "traces/models/flux.1-dev.json",
            "kontext_"),
           ("Wan2.1-T2V-14B, fp8 weights (cast to bf16 per forward), 832x480, cfg 6", "wan_fp8_iteration.jsonl",
            "traces/models/wan2.1-t2v-14b.json", "wanfp8_"),
           ("Wan2.1-T2V-14B, scaled fp8 weights (cast, then the weight or the input times its scale), 832x480, cfg 6",
            "wan_fp8_scaled_iteration.jsonl", "traces/models/wan2.1-t2v-14b.json", "wanfp8s_"),
           ("FLUX.1-dev, scaled fp8 weights, 1024x1024", "flux_fp8_scaled_iteration.jsonl",
            "traces/models/flux.1-dev.json", "fluxfp8s_"),
           ("Wan2.2-TI2V-5B (48-channel latent, the VAE's 16x), 1280x704, 49 and 121 frames, cfg 5 (batch 2)",
            "wan22_5b_iteration.jsonl", "traces/models/wan2.2-ti2v-5b.json", "wan22_"),
           ("Wan2.2-TI2V-5B image-to-video (a start image: a timestep per latent frame), 1280x704, 49 and 121 "
            "frames, cfg 5 (batch 2)", "wan22_5b_i2v_iteration.jsonl", "traces/models/wan2.2-ti2v-5b.json", "wan22i2v_"),
           ("Wan2.1-T2V-14B, 832x480, cfg 6, about 6 GB left free (part of the H100 held): the two prompts in one batch or "
            "apart as ComfyUI's _calc_cond_batch decides, in the run and in tiersim", "wan_cond_batch_iteration.jsonl",
            "traces/models/wan2.1-t2v-14b.json", "wancb_")]


def workload(row, model):
    args = ["--model", model, "--resolution", row["resolution"], "--text-tokens", str(row["text_tokens"]), "--steps", "3"]
    if row.get("reference"):
        args += ["--reference", row["reference"]]
    if row.get("weight_dtype", "bf16") != "bf16":
        args += ["--dtype", row["weight_dtype"]]
    if row.get("frames"):
        args += ["--frames", str(row["frames"]), "--cfg", f"{row['cfg']:g}"]
    if row.get("start_image"):
        args += ["--start-image"]
    if row.get("class_name") == "QwenImageTransformer2DModel":
        args += ["--cfg", f"{row['cfg']:g}"]
        if row.get("negative_tokens") is not None:
            args += ["--negative-tokens", str(row["negative_tokens"])]
    return args


def command(row, model, prefix):
    args = workload(row, model) + ["--hw", "h100-measured", "--runtime", "pytorch-hf-h100"]
    if row.get("occupied_bytes"):  # the run held part of the GPU: tiersim gets the rest (and decides the batch from it)
        args += ["--set", f"gpu.memory={row['totals']['cuda:0'] - row['occupied_bytes']} B"]
    if row["device_map_file"] is None:
        return args + ["--policy", "resident"]
    map_file = os.path.relpath(os.path.join(HERE, prefix + row["device_map_file"]), ROOT)
    return args + ["--placement", "device_map:file=" + map_file, "--memory", "device",
                   "--offload", "copy:host=" + row["host_memory"]]


def run(args):
    return json.loads(subprocess.run([SIM, "--json"] + args, capture_output=True, text=True, check=True, cwd=ROOT).stdout)


def own_distorch_bytes(row, model):
    """cpu weight bytes of tiersim's distorch.bytes rule for the row's virtual VRAM (#cuda:0;X;cpu)."""
    if row["allocation"] == "none":
        return 0
    vram = row["allocation"].split(";")[1]
    out = run(workload(row, model) + ["--hw", "h100-measured", "--set", f"gpu.memory={row['totals']['cuda:0']} B",
                                      "--set", f"host.memory={row['totals']['cpu']} B", "--placement",
                                      f"distorch.bytes:offload={vram}GiB", "--memory", "device", "--offload", "copy"])
    return out["memory_per_tier"].get("cpu", {}).get("weights_bytes", 0)


def summary(errors, mem_errors):
    return (f"{len(errors)} rows, mean absolute error {100 * sum(map(abs, errors)) / len(errors):.1f}%, worst "
            f"{100 * max(errors, key=abs):+.1f}%; cuda:0 peak allocated (torch.cuda.max_memory_allocated against "
            f"tiersim's peak less the profile's reserve): mean absolute error "
            f"{100 * sum(map(abs, mem_errors)) / len(mem_errors):.1f}%, worst {100 * max(mem_errors, key=abs):+.1f}%.")


def main():
    lines, all_errors, all_mem = [], [], []
    for title, results, model, prefix in SOURCES:
        rows = [json.loads(line) for line in open(os.path.join(HERE, results))]
        lines += [f"## {title}", "", f"Measured: `{results}`.", "",
                  "| resolution | frames | offload (DisTorch) | host memory | forwards: run / tiersim | measured | predicted | "
                  "error | cuda:0 peak allocated: run / tiersim | offloaded bytes: run / tiersim (map) / tiersim's distorch.bytes |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        errors, mem_errors = [], []
        for r in rows:
            out = run(command(r, model, prefix))
            predicted = out["step_kinds"]["iteration"]["median_seconds"]
            cpu_bytes = out["memory_per_tier"].get("cpu", {}).get("weights_bytes", 0)
            # tiersim's cuda:0 peak less the driver's reserve = what PyTorch allocates (max_memory_allocated).
            reserve = float(out["inputs"]["hardware"]["gpu"]["reserved"].split()[0])
            allocated = out["memory_per_tier"]["cuda:0"]["peak_bytes"] - reserve
            err = (predicted - r["median_s"]) / r["median_s"]
            errors.append(err)
            peak = r["peak_bytes"] - r.get("occupied_bytes", 0)  # the held memory is in the run's count
            mem_errors.append((allocated - peak) / peak)
            forwards = f"{r.get('forwards', 1)} / {out['trace'].get('cfg_forwards', 1)}"
            alloc = "none" if r["allocation"] == "none" else f"`{r['allocation']}`"
            lines.append(f"| {r['resolution']} | {r.get('frames') or '-'} | {alloc} | {r['host_memory']} | {forwards} | "
                         f"{r['median_s']:.3f} s | {predicted:.3f} s | {100 * err:+.1f}% | "
                         f"{peak / 1e9:.2f} / {allocated / 1e9:.2f} GB | "
                         f"{r['offloaded_bytes']} / {cpu_bytes} / {own_distorch_bytes(r, model)} |")
        lines += ["", summary(errors, mem_errors), "",
                  "Each row: `sim " + " ".join(command(rows[-1], model, prefix)) + "` (that row's settings and map).", ""]
        all_errors += errors
        all_mem += mem_errors
    lines = ["# Diffusion transformers on an H100: tiersim against measured iterations", "",
             "All rows: " + summary(all_errors, all_mem), ""] + lines
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
