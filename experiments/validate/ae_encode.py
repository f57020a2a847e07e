"""Real seconds and peak memory of FLUX's VAE (ae.safetensors, an AutoencoderKL) encoding a reference image and decoding
a latent as ComfyUI runs them, on one GPU, random weights: the validation rows of tiersim's
model/vae/vae_encoder_trace_generator (FLUX.1 Kontext's VAEEncode) and vae_decoder_trace_generator.

Nothing is rebuilt: this runs ComfyUI a125cd84's own comfy/ldm/modules/diffusionmodules/model.py (Encoder, Decoder,
ResnetBlock, Downsample, Upsample, AttnBlock with pytorch_attention) and comfy/ldm/modules/distributions/distributions.py
(DiagonalGaussianDistribution), from a folder holding its comfy/ package (--comfyui; experiments/validate/
extract_comfyui.sh), with comfy.ops and comfy.model_management as they are. The model is what comfy/sd.py VAE.__init__
builds for FLUX's ae (the "decoder.conv_in.weight" branch: ddconfig ch 128, ch_mult [1, 2, 4, 4], num_res_blocks 2,
z_channels 16, double_z, no attention but the mid block's; AutoencodingEngine with DiagonalGaussianRegularizer) in
vae_dtype, bf16 on an sm_80+ card; random weights made on the GPU. VAE.encode: pixels (B, H, W, 3) in [0, 1] on the cpu,
movedim, process_input (2x - 1), .to(bf16).to(cuda) - the host part, timed apart - then the GPU part,
AutoencodingEngine.encode (the Encoder, then DiagonalGaussianRegularizer: DiagonalGaussianDistribution(z).mode()),
then the latent .to(cpu).float() (host part). VAE.decode likewise: the latent to the GPU, Decoder, the image back.

Measured per size: --warmup untimed runs, --iterations timed ones, the GPU part between two torch.cuda.synchronize();
peak_bytes torch.cuda.max_memory_allocated over them (weights included), base_bytes allocated before. --kernels adds
one profiled encode at the first size: every device kernel by name, count and device microseconds.

  python3 experiments/validate/ae_encode.py --comfyui .ext/comfyui --out OUT_DIR
  /usr/bin/python3 experiments/validate/ae_encode.py --comfyui .ext/comfyui --tiny --device cpu --out /tmp/ae
Writes OUT/ae_encode.jsonl (one line per stage and size) and, with --kernels, OUT/ae_encode_kernels.jsonl.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from qwen25_vl_encode import COMFYUI_COMMIT, import_comfy_modules, stand_ins  # noqa: E402
from profiler_events import kernels_by_name  # noqa: E402

# comfy/sd.py VAE.__init__, the "decoder.conv_in.weight" branch for a 16-channel latent (FLUX's ae)
FLUX_DDCONFIG = {"double_z": True, "z_channels": 16, "resolution": 256, "in_channels": 3, "out_ch": 3, "ch": 128,
                 "ch_mult": [1, 2, 4, 4], "num_res_blocks": 2, "attn_resolutions": [], "dropout": 0.0}
TINY_DDCONFIG = dict(FLUX_DDCONFIG, ch=32, ch_mult=[1, 2, 2], num_res_blocks=1)


def randomize(module, device, dtype):
    g = torch.Generator(device="cpu").manual_seed(0)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("norm.weight") or ".norm" in name and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.copy_((torch.randn(p.shape, generator=g) * 0.02).to(device=device, dtype=dtype))
    return module.to(device=device, dtype=dtype).eval()


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--comfyui", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--encode", nargs="+", default=["1024x1024", "1248x832", "1568x672"],
                    help="reference images encoded, WIDTHxHEIGHT (FluxKontextImageScale's sizes)")
    ap.add_argument("--decode", nargs="+", default=["1024x1024", "1328x1328"], help="images decoded, WIDTHxHEIGHT")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    stand_ins(a.tiny)
    import_comfy_modules(a.comfyui, a.device == "cpu")
    from comfy.ldm.modules.diffusionmodules.model import Decoder, Encoder
    from comfy.ldm.modules.distributions.distributions import DiagonalGaussianDistribution
    dtype = torch.bfloat16
    cfg = TINY_DDCONFIG if a.tiny else FLUX_DDCONFIG
    encoder = randomize(Encoder(**cfg), a.device, dtype)
    decoder = randomize(Decoder(**cfg), a.device, dtype)
    cuda = a.device.startswith("cuda")
    gpu = torch.cuda.get_device_name(0) if cuda else "cpu"
    rows, kernel_rows = [], []

    def measure(stage, size, host_in, gpu_part, host_out):
        w, h = (int(v) for v in size.split("x"))
        x = host_in(w, h)
        with torch.no_grad():
            if cuda:
                torch.cuda.empty_cache()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            for _ in range(a.warmup):
                host_out(gpu_part(x()))
            times, host = [], []
            for _ in range(a.iterations):
                y = x()
                sync(a.device)
                t0 = time.perf_counter()
                out = gpu_part(y)
                sync(a.device)
                t1 = time.perf_counter()
                host_out(out)
                host.append(time.perf_counter() - t1)
                times.append(t1 - t0)
            row = {"stage": stage, "width": w, "height": h, "times": times, "median_s": statistics.median(times),
                   "host_out_median_s": statistics.median(host), "iterations": a.iterations, "warmup": a.warmup,
                   "tiny": a.tiny, "comfyui": COMFYUI_COMMIT, "torch": torch.__version__, "gpu": gpu}
            if cuda:
                row.update(base_bytes=base, peak_bytes=torch.cuda.max_memory_allocated())
            rows.append(row)
            print(f"{stage} {size}: {1000 * row['median_s']:.2f} ms, peak {row.get('peak_bytes', 0) / 1e9:.2f} GB",
                  flush=True)
            if a.kernels and cuda and stage == "ae_encode" and not kernel_rows:
                from torch.profiler import ProfilerActivity, profile
                y = x()
                sync(a.device)
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    gpu_part(y)
                    sync(a.device)
                kernel_rows.append({"stage": stage, "width": w, "height": h, **kernels_by_name(prof)})

    # VAE.encode: pixels on the cpu, process_input, to the VAE's dtype and device (host part), then the GPU part.
    def pixels(w, h):
        img = torch.rand(1, h, w, 3)
        return lambda: (img.movedim(-1, 1) * 2.0 - 1.0).to(dtype).to(a.device)

    def encode(x):
        return DiagonalGaussianDistribution(encoder(x)).mode()  # AutoencodingEngine.encode, sample=False

    for size in a.encode:
        measure("ae_encode", size, pixels, encode, lambda z: z.to("cpu").float())

    def latent(w, h):
        z = torch.randn(1, cfg["z_channels"], h // 8 if not a.tiny else h // 4, w // 8 if not a.tiny else w // 4)
        return lambda: z.to(dtype).to(a.device)

    for size in a.decode:
        measure("ae_decode", size, latent, decoder, lambda img: img.to("cpu").float())
    with open(os.path.join(a.out, "ae_encode.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    if kernel_rows:
        with open(os.path.join(a.out, "ae_encode_kernels.jsonl"), "w") as f:
            for r in kernel_rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
