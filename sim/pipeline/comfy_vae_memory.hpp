#pragma once
// What ComfyUI's VAEDecode and VAEEncode ask their model load to leave free (comfy/sd.py at a125cd84, VAE.__init__'s
// memory_used_decode and memory_used_encode for each VAE, in the VAE's dtype): VAE.decode and VAE.encode pass it to
// load_models_gpu as memory_required and no minimum. `width`, `height`: the image in pixels (the latent is an eighth of
// each).
#include <cstdint>

namespace tiersim::pipeline::comfy {

// The AutoencoderKL branch (FLUX's ae): 2178 x latent h x w x 64 x dtype size.
inline double ae_decode_memory(double width, double height, std::uint64_t dtype_bytes) {
  return 2178.0 * 64 * (width / 8) * (height / 8) * static_cast<double>(dtype_bytes);
}

// Its memory_used_encode, which VAE.encode passes likewise: 1767 x the image's h x w x dtype size.
inline double ae_encode_memory(double width, double height, std::uint64_t dtype_bytes) {
  return 1767.0 * width * height * static_cast<double>(dtype_bytes);
}

// The "Wan 2.1 VAE" branch (Wan 2.1 and 2.2 14B, Qwen-Image): 7000 x latent h x w x 64 x dtype size, whatever the
// frames.
inline double wan21_vae_decode_memory(double width, double height, std::uint64_t dtype_bytes) {
  return 7000.0 * 64 * (width / 8) * (height / 8) * static_cast<double>(dtype_bytes);
}

}  // namespace tiersim::pipeline::comfy
