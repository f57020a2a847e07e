#!/usr/bin/env bash
# Extracts the ComfyUI files the Qwen-Image text encoder and VAE harnesses run (Comfy-Org/ComfyUI at a125cd84, read
# from a git mirror; not part of tiersim, not committed) into .ext/ (git-ignored; name it in the device call's carry):
#   .ext/comfyui/comfy/...   what comfy/text_encoders/qwen_image.py imports, its tokenizer files included
#                             (experiments/validate/qwen25_vl_encode.py), and the AutoencoderKL's model.py and
#                             distributions.py (experiments/validate/ae_encode.py)
#   .ext/comfy_wan_vae.py    comfy/ldm/wan/vae.py (experiments/validate/wan_vae_decode.py)
#   .ext/distorch_2.py       ComfyUI-MultiGPU a38cbda5's distorch_2.py (experiments/validate/dit_iteration.py)
#   bash experiments/validate/extract_comfyui.sh [COMFYUI_MIRROR [MULTIGPU_MIRROR]]
#   (defaults /work/.mirror/Comfy-Org+ComfyUI/repo, /work/.mirror/pollockjj+ComfyUI-MultiGPU/repo)
set -euo pipefail
cd "$(dirname "$0")/../.."
mirror=${1:-/work/.mirror/Comfy-Org+ComfyUI/repo}
multigpu=${2:-/work/.mirror/pollockjj+ComfyUI-MultiGPU/repo}
commit=a125cd84b054a57729b5eecab930ca9408719832
rm -rf .ext/comfyui && mkdir -p .ext/comfyui
git -C "$mirror" archive "$commit" \
  comfy/options.py comfy/cli_args.py comfy/model_management.py comfy/ops.py comfy/float.py comfy/rmsnorm.py \
  comfy/sd1_clip.py comfy/clip_model.py comfy/ldm/common_dit.py comfy/ldm/util.py \
  comfy/ldm/modules/attention.py comfy/ldm/modules/sub_quadratic_attention.py \
  comfy/ldm/modules/diffusionmodules/util.py comfy/ldm/modules/diffusionmodules/model.py \
  comfy/ldm/modules/distributions/distributions.py \
  comfy/text_encoders/llama.py comfy/text_encoders/qwen_vl.py comfy/text_encoders/qwen_image.py \
  comfy/text_encoders/qwen25_tokenizer | tar -x -C .ext/comfyui
git -C "$mirror" show "$commit:comfy/ldm/wan/vae.py" > .ext/comfy_wan_vae.py
git -C "$multigpu" show a38cbda5:distorch_2.py > .ext/distorch_2.py
du -sh .ext
