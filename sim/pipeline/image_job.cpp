#include "pipeline/image_job.hpp"

namespace tiersim::pipeline {

double ImageCost::seconds() const {
  double s = 0;
  for (const StageCost* c : {&text, &encode, &sampler, &vae}) s += c->compute_seconds + c->transfer_seconds;
  return s;
}

namespace {

struct Job {
  const ImageJobSpec& spec;
  const hw::HostLinkSpec& link;
  ComfyModelManager manager;
  std::size_t text, dit, vae;
  double dit_loaded = 0;  // during the last image's iterations

  Job(const ImageJobSpec& s, const hw::HostLinkSpec& l) : spec(s), link(l), manager(s.free_bytes) {
    text = manager.add(s.text_encoder_name, s.text_encoder_bytes);
    dit = manager.add(s.dit_name, s.dit_bytes);
    vae = manager.add(s.vae_name, s.vae_bytes);
  }

  StageCost load(std::size_t model, double memory_required, double minimum, double compute) {
    return comfy_stage(manager, model, memory_required, minimum, compute, link);
  }

  // `prompt`: the prompt is new (CLIPTextEncode runs); `reference`: the reference image is (VAEEncode runs).
  ImageCost image(bool prompt, bool reference) {
    ImageCost i;
    if (prompt) i.text = load(text, 0, 0, spec.text_seconds);  // CLIPTextEncode: memory_required 0
    else i.text.ran = false;
    // VAE.encode passes memory_used_encode alone: the minimum is the same.
    if (reference && spec.reference) i.encode = load(vae, spec.encode_memory, spec.encode_memory, spec.encode_seconds);
    else i.encode.ran = false;
    i.sampler = load(dit, spec.sampling_memory, spec.sampling_minimum, spec.steps * spec.iteration_seconds);
    dit_loaded = manager.loaded(dit);
    // VAE.decode passes memory_used_decode alone: the minimum is the same.
    i.vae = load(vae, spec.vae_memory, spec.vae_memory, spec.vae_seconds);
    return i;
  }
};

}  // namespace

ImageJob comfy_image_job(const ImageJobSpec& spec, const hw::HostLinkSpec& link) {
  ImageJob out;
  {
    Job j(spec, link);
    out.first = j.image(true, true);
    out.dit_loaded = j.dit_loaded;
    out.same_prompt = j.image(false, false);
  }
  {
    Job j(spec, link);
    (void)j.image(true, true);
    out.new_prompt = j.image(true, false);
  }
  return out;
}

}  // namespace tiersim::pipeline
