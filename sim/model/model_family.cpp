#include "model/model_family.hpp"

#include "core/error.hpp"
#include "model/config_json.hpp"
#include "model/flux/flux_trace_generator.hpp"
#include "model/model_config.hpp"
#include "model/qwen_image/qwen_image_trace_generator.hpp"
#include "model/vae/wan_vae_config.hpp"
#include "model/vae/wan_vae_decoder_trace_generator.hpp"
#include "model/wan/wan_trace_generator.hpp"

namespace tiersim::model {

const char* to_string(ModelFamily f) {
  switch (f) {
    case ModelFamily::Flux: return "flux";
    case ModelFamily::Wan: return "wan";
    case ModelFamily::QwenImage: return "qwen-image";
    case ModelFamily::WanVae: return "wan-vae";
    case ModelFamily::Decoder: break;
  }
  return "decoder";
}

GenerationOptions::Image default_image(ModelFamily f) {
  GenerationOptions::Image im;
  if (f == ModelFamily::Wan || f == ModelFamily::WanVae) {
    im.width = 832;
    im.height = 480;
    im.frames = 81;
    im.steps = 30;
    im.cfg = 6.0;
    im.text_tokens = 512;  // ComfyUI's umT5 tokenizer pads to 512 (text_encoders/wan.py)
  } else if (f == ModelFamily::QwenImage) {
    // ComfyUI's Qwen-Image example workflow: 1328x1328, 20 steps, cfg 2.5. Its encoder does not pad: the transformer
    // sees the prompt's tokens plus the chat template's last 5 (<|im_end|>, \n, <|im_start|>, assistant, \n;
    // text_encoders/qwen_image.py encode_token_weights cuts the template before the user turn); 100 stands for a
    // detailed prompt of about 75 words. The example's negative prompt is empty: the template's 5 tokens.
    im.width = 1328;
    im.height = 1328;
    im.steps = 20;
    im.cfg = 2.5;
    im.text_tokens = 100;
    im.negative_tokens = 5;
  }
  return im;
}

ModelFamily model_family(const std::string& path) {
  const ConfigJson doc = load_config_json(path);
  if (!doc.json.is_object() || !doc.json.contains("_class_name")) return ModelFamily::Decoder;
  const ConfigReader r(doc);
  const auto cls = r.optional_string("_class_name");
  if (*cls == kFluxClass) return ModelFamily::Flux;
  if (*cls == kWanClass) return ModelFamily::Wan;
  if (*cls == kQwenImageClass) return ModelFamily::QwenImage;
  if (*cls == "AutoencoderKLWan" || *cls == "AutoencoderKLQwenImage") return ModelFamily::WanVae;
  r.fail("_class_name", "unsupported diffusers class '" + *cls + "': " + kFluxClass + " (FLUX.1), " + kWanClass +
                            " (Wan 2.1 text-to-video, Wan 2.2 TI2V-5B), " + kQwenImageClass +
                            " (Qwen-Image) and AutoencoderKLWan / AutoencoderKLQwenImage (their VAE's decode) are "
                            "modelled; decoder LLMs are read from their config.json (model_type)");
}

std::unique_ptr<trace::StepSource> generate_trace(const std::string& path, const GenerationOptions& options) {
  const ModelFamily family = model_family(path);
  if (options.image.start_image && family != ModelFamily::Wan)
    throw InputError("", 0, "--start-image", "is Wan 2.2 TI2V-5B's image-to-video; '" + path + "' is no Wan model");
  if (options.image.switch_step && family != ModelFamily::Wan)
    throw InputError("", 0, "--switch-step", "is for a model with two experts (Wan 2.2 A14B); '" + path + "' is no Wan model");
  switch (family) {
    case ModelFamily::Flux: return std::make_unique<FluxTraceGenerator>(load_flux_config(path), options);
    case ModelFamily::Wan: return std::make_unique<WanTraceGenerator>(load_wan_config(path), options);
    case ModelFamily::QwenImage:
      return std::make_unique<QwenImageTraceGenerator>(load_qwen_image_config(path), options);
    case ModelFamily::WanVae: {
      // The decode of one latent: --resolution and --frames; ComfyUI's vae_dtype (bf16 on GPUs that have it).
      if (options.batch != 1) throw InputError("", 0, "--batch", "the Wan VAE's decode is of one video (batch 1)");
      return std::make_unique<WanVaeDecoderTraceGenerator>(load_wan_vae_config(path), options.image.width,
                                                           options.image.height, options.image.frames, WeightDtype::Bf16);
    }
    case ModelFamily::Decoder: break;
  }
  return std::make_unique<LlmTraceGenerator>(load_model_config(path), options);
}

}  // namespace tiersim::model
