// The `sim` command. Subcommands: run (the default), gen, sweep, policies, profiles.
// Every error a user can cause ends here: a message naming the file, line and key, and exit code 2
// (bad input) or 3 (valid input that cannot fit). Library code never exits.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>
#include <optional>
#include <sstream>
#include <tuple>
#include <unistd.h>

#include "accuracy/error_band.hpp"
#include "analytic/step_bound.hpp"
#include "cli/allocator_replay.hpp"
#include "cli/plan.hpp"
#include "cli/expert_job_run.hpp"
#include "cli/image_job_run.hpp"
#include "cli/inference_memory.hpp"
#include "cli/model_list.hpp"
#include "cli/plan_training.hpp"
#include "cli/train.hpp"
#include "cli/run_inputs.hpp"
#include "cli/simulation.hpp"
#include "cli/progress.hpp"
#include "cli/sweep_grid.hpp"
#include "core/input_file.hpp"
#include "cli/plan_shard.hpp"
#include "report/grid_shard.hpp"
#include "config/embedded_files.hpp"
#include "config/profile_source.hpp"
#include "hardware/catalogue.hpp"
#include "hardware/profile_writer.hpp"
#include "config/strict_reader.hpp"
#include "report/output_file.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/units.hpp"
#include "hardware/link_lanes.hpp"
#include "hardware/profile_loader.hpp"
#include "runtime/runtime_loader.hpp"
#include "model/model_config.hpp"
#include "model/model_family.hpp"
#include "model/trace_generator.hpp"
#include "model/vae/wan_vae_config.hpp"
#include "policies/strategy/parts.hpp"
#include "policies/strategy/presets.hpp"
#include "report/reporters.hpp"
#include "trace/trace_writer.hpp"

namespace {

using namespace tiersim;

struct CommonOptions {
  std::string trace;
  std::string model;
  std::optional<std::string> dtype;  // default bf16; a .gguf model's own types
  std::uint32_t batch = 1;
  std::optional<std::uint32_t> prompt, decode;  // a decoder model's; defaults 512 and 128
  std::optional<std::string> resolution;        // a diffusion model's: WxH, steps, T5 tokens
  std::optional<std::string> reference;         // FLUX Kontext's / Qwen-Image-Edit's reference image, WxH
  std::optional<std::uint32_t> steps, text_tokens, negative_tokens, frames, switch_step;
  std::optional<double> cfg;
  std::string routing = "uniform";
  std::uint64_t routing_seed = 0;
  std::optional<std::string> experts_impl;  // transformers' experts_implementation: grouped_mm (default) or eager
  std::string hw = hw::kDefaultProfile;
  std::string runtime;  // empty: the preset's runtime, else runtime::kDefaultRuntime
  std::string policy;
  std::optional<std::string> placement, memory, offload, platform;
  std::optional<std::string> split;
  std::optional<int> layers;
  std::optional<int> ngl;
  std::optional<double> offload_gb;
  std::optional<std::string> donor;
  std::optional<std::string> offload_exec;
  std::optional<int> prefetch;
  std::optional<std::string> host_memory;
  std::string engine = "event";
  std::optional<std::string> allocator;
  std::optional<std::string> um_scope;
  std::optional<std::string> um_filled;
  std::optional<int> threads;
  std::optional<std::uint32_t> ubatch;
  std::vector<std::string> override_tensor;
  bool no_kv_offload = false;
  bool start_image = false;
  std::optional<std::string> fit;
  bool cpu_moe = false;
  std::optional<int> n_cpu_moe;
  std::optional<std::uint32_t> ctx_size, fit_ctx;
  std::optional<std::string> fit_target;
  std::string lengths = "warm";
  std::string alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF for the caching allocator model
  std::vector<std::string> sets;
};

// Range checks with messages in human terms (CLI11's own print 309-digit bounds), run on the text before
// it is converted, so that an out-of-range or non-finite value never reaches a typed option.
CLI::Validator number_in(double lo, double hi, const std::string& what, bool whole) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool parsed = end != text.c_str() && *end == '\0';
        const bool ok = parsed && std::isfinite(v) && v >= lo && v <= hi && (!whole || v == std::floor(v));
        if (ok) return "";
        char range[128];
        std::snprintf(range, sizeof range, "%s from %.10g to %.10g", whole ? "a whole number" : "a number", lo, hi);
        return "must be " + std::string(range) + " (" + what + "), got '" + text + "'";
      },
      "", "");
}

void add_generation_options(CLI::App& cmd, CommonOptions& o) {
  cmd.add_option("--dtype", o.dtype,
                 "weight format when generating: fp32, bf16 (default), fp16, fp8, fp8_scaled (a diffusion model's scaled fp8 checkpoint), int8, q4, or a GGUF file type "
                 "(Q4_K_M, Q8_0, ...); a --model FILE.gguf has its own");
  cmd.add_option("--batch", o.batch, "sequences decoded together (a diffusion model: images per iteration)")
      ->capture_default_str()
      ->check(number_in(1, 65536, "sequences", true));
  cmd.add_option("--prompt", o.prompt, "prompt tokens (prefill; default 512)")
      ->check(number_in(0, 16777216, "tokens", true));
  cmd.add_option("--decode", o.decode, "tokens to decode (default 128)")
      ->check(number_in(0, 16777216, "tokens", true));
  cmd.add_option("--resolution", o.resolution,
                 "diffusion model: image size WIDTHxHEIGHT in pixels, multiples of 16 (32 for Wan 2.2's TI2V-5B, whose VAE "
                 "is 16x; default 1024x1024, Wan 832x480)");
  cmd.add_option("--reference", o.reference,
                 "FLUX (Kontext) or Qwen-Image (Edit): a reference image WIDTHxHEIGHT in pixels, multiples of 16 (ComfyUI's "
                 "ReferenceLatent: its tokens run beside the image's through every block); default none");
  cmd.add_option("--steps", o.steps, "diffusion model: denoising iterations (default 28)")
      ->check(number_in(1, 100000, "iterations", true));
  cmd.add_option("--text-tokens", o.text_tokens,
                 "diffusion model: the prompt's tokens as the transformer sees them (FLUX default 256: ComfyUI pads "
                 "T5 prompts to 256; Wan 512; Qwen-Image, whose encoder does not pad, 100)")
      ->check(number_in(1, 4096, "tokens", true));
  cmd.add_option("--negative-tokens", o.negative_tokens,
                 "Qwen-Image: the negative prompt's tokens as the transformer sees them (default 5: an empty prompt "
                 "leaves the chat template's 5); unequal to --text-tokens, ComfyUI runs it as a second forward")
      ->check(number_in(1, 4096, "tokens", true));
  cmd.add_option("--frames", o.frames, "video model: frames, 4k + 1 (Wan default 81)")
      ->check(number_in(1, 100001, "frames", true));
  cmd.add_flag("--start-image", o.start_image,
               "Wan 2.2 TI2V-5B: image-to-video, the first frame given (ComfyUI's Wan22ImageToVideoLatent start_image: "
               "a timestep per latent frame); the image's VAE encode is not modelled");
  cmd.add_option("--switch-step", o.switch_step,
                 "Wan 2.2 A14B (two experts): the step at which the low-noise expert takes over, as ComfyUI's two "
                 "KSamplerAdvanced nodes split the steps (default half of --steps, as ComfyUI's template: 10 of 20)")
      ->check(number_in(1, 100000, "step", true));
  cmd.add_option("--cfg", o.cfg,
                 "diffusion model: classifier-free guidance scale; unless 1 the negative prompt runs too, in the same "
                 "batch when its length is the prompt's (FLUX default 1, Wan 6, Qwen-Image 2.5)")
      ->check(number_in(0, 100, "guidance scale", false));
  cmd.add_option("--routing", o.routing,
                 "mixture of experts: which experts tokens are routed to, uniform (default), zipf:S (the layer's "
                 "experts in a seeded order, the r-th with weight 1/r^S, S from 0.1 to 4) or replay:FILE (a routing "
                 "captured from a real run: sim/model/routing_file.hpp)")
      ->capture_default_str();
  cmd.add_option("--routing-seed", o.routing_seed, "mixture of experts: the routing's seed (default 0)")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{2147483647}));
  cmd.add_option("--experts-impl", o.experts_impl,
                 "mixture of experts run by transformers: its experts_implementation, grouped_mm (transformers 5's "
                 "default: torch._grouped_mm, no host syncs) or eager (the loop over the experts hit, five host syncs "
                 "per expert; transformers 4's only way)");
}

// PYTORCH_CUDA_ALLOC_CONF for the caching allocator's replay: `sim run` (PyTorch runtimes) and `sim train` only,
// the commands that replay it (sweep and plan do not, so they do not take it).
void add_alloc_conf_option(CLI::App& cmd, std::string& alloc_conf) {
  cmd.add_option("--alloc-conf", alloc_conf,
                 "PyTorch: PYTORCH_CUDA_ALLOC_CONF for the caching allocator's replay (expandable_segments:True, "
                 "max_split_size_mb:N, roundup_power2_divisions:N, max_non_split_rounding_mb:N; default: unset)");
}

void add_common_options(CLI::App& cmd, CommonOptions& o) {
  cmd.add_option("--trace", o.trace, "trace file (traces/FORMAT.md)");
  cmd.add_option("--model", o.model, "model description: a shipped model's name (sim models) or an HF config.json file, to generate the trace from");
  add_generation_options(cmd, o);
  cmd.add_option("--hw", o.hw, "hardware profile: a YAML file or a preset name (sim profiles)")->capture_default_str();
  cmd.add_option("--runtime", o.runtime,
                 "the framework's host costs: a runtime YAML file or a preset name (sim runtimes); default "
                 "pytorch-eager, or the preset's own (llamacpp: llamacpp)")
      ->capture_default_str();
  cmd.add_option("--set", o.sets,
                 "override a profile key, validated like the file: gpu.memory=\"48 GiB\", host_link.width=8, "
                 "runtime.per_launch=\"8 us\"; or take a whole section (gpu, host, host_link, peer_link, "
                 "managed_memory, disk) from another profile: host=h200 (repeatable)");
  cmd.add_option("--policy", o.policy, "a preset strategy (sim policies); parts given below replace its parts");
  cmd.add_option("--placement", o.placement,
                 "placement rule, NAME[:OPTION,...]: all-gpu, distorch.bytes|ratio|fraction, comfy.lowvram, layers, "
                 "llamacpp.ngl, accelerate.auto|balanced|balanced_low_0|sequential, device_map:file=PATH (sim parts)");
  cmd.add_option("--memory", o.memory,
                 "memory kind, NAME[:OPTION,...]: device, or managed[:prefer-cpu,accessed-by,read-mostly,"
                 "scope=all|weights|offloaded,allocator=caching|per-tensor,prefetch=N,advise=weights|all,filled=copy|gpu|cpu]");
  cmd.add_option("--offload", o.offload,
                 "offload path, NAME[:OPTION,...]: copy[:pinned|pageable,prefetch=N,stream,sync,peer=copy|execute] "
                 "or execute (layers run where their weights are: CPU or another GPU)");
  cmd.add_option("--platform", o.platform,
                 "the OS's driver model, NAME[:OPTION,...]: linux (default), windows or wsl2 "
                 "[:sysmem-fallback=prefer|off]: managed memory without demand paging, VRAM overflow in system memory");
  cmd.add_option("--split", o.split, "DisTorch allocation string for bytes/ratio/fraction, e.g. \"cuda:0,80%;cpu,20%\"");
  cmd.add_option("--layers", o.layers, "layers policy: transformer layers kept on the compute GPU");
  cmd.add_option("--ngl", o.ngl, "llamacpp policy: llama.cpp's -ngl, the slots (layers + output) on the GPU(s)")
      ->check(CLI::Range(0, 100000));
  cmd.add_option("--offload-gb", o.offload_gb,
                 "bytes/ratio/fraction: DisTorch's virtual VRAM, this many GB (1e9 bytes) off the compute GPU to the "
                 "donor (the node's default: 4 GiB)")
      ->check(number_in(0, 1e6, "GB of 1e9 bytes", false));
  cmd.add_option("--donor", o.donor, "where offloaded weights go without --split: cpu (default) or cuda:N");
  cmd.add_option("--offload-exec", o.offload_exec,
                 "offloaded weights: copy to the GPU when used (default), or run on the cpu (= --offload execute)")
      ->check(CLI::IsMember({"copy", "cpu"}));
  cmd.add_option("--prefetch", o.prefetch, "layers ahead that weight copies are issued (0 = on demand; = copy:prefetch=N)")
      ->check(number_in(0, 1000, "layers ahead", true));
  cmd.add_option("--host-memory", o.host_memory, "host memory of offloaded weights: pinned (default) or pageable")
      ->check(CLI::IsMember({"pinned", "pageable"}));
  cmd.add_option("--allocator", o.allocator, "um*: caching (default) or per-tensor (cudaMallocManaged/cudaFree per tensor)")
      ->check(CLI::IsMember({"caching", "per-tensor"}));
  cmd.add_option("--um-scope", o.um_scope, "um*: all (default: weights, KV cache, activations managed) or weights")
      ->check(CLI::IsMember({"all", "weights"}));
  cmd.add_option("--um-filled", o.um_filled,
                 "um*: how PreferredLocation=CPU weights got their contents: copy (default: cudaMemcpy, as loading a "
                 "checkpoint does), gpu (written by GPU kernels, then prefetched to host memory), or cpu (written by "
                 "the CPU itself: the GPU's first touch of each block maps it)")
      ->check(CLI::IsMember({"copy", "gpu", "cpu"}));
  cmd.add_option("--threads", o.threads, "execute path: CPU threads running host-resident layers (llama.cpp's -t; "
                 "default: the host's physical cores, host.cpu_kernels.cores)")
      ->check(CLI::Range(1, 4096));
  cmd.add_option("--override-tensor", o.override_tensor,
                 "llamacpp: llama.cpp's -ot REGEX=BUFFER[,...] (CPU, CUDA0, ...): weights whose llama.cpp name the "
                 "pattern finds go there, the first matching pattern wins (= llamacpp.ngl:ot=...)");
  cmd.add_flag("--no-kv-offload", o.no_kv_offload,
               "llamacpp: every layer's KV cache in host memory, copied in for each GPU layer's attention (= llamacpp.ngl:kv-offload=off)");
  cmd.add_flag("--cpu-moe", o.cpu_moe,
               "llamacpp: llama.cpp's --cpu-moe, every expert matrix in host memory (-ot \"\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU\")");
  cmd.add_option("--n-cpu-moe", o.n_cpu_moe,
                 "llamacpp: llama.cpp's --n-cpu-moe N, the expert matrices of the first N layers in host memory (an -ot "
                 "pattern per layer, after any --override-tensor, as llama-bench orders them)")
      ->check(CLI::Range(0, 1000));
  cmd.add_option("--fit", o.fit,
                 "llamacpp: llama.cpp's --fit (on by default, as llama-cli and llama-server; llama-bench never fits): "
                 "reduce the context, then, without --ngl, choose -ngl so every GPU keeps --fit-target MiB free "
                 "(= llamacpp.ngl:fit=on|off)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd.add_option("--ctx-size", o.ctx_size, "llamacpp: llama.cpp's -c, the context it allocates KV cache for (0, the "
                 "default: the model's training context; --fit may reduce it) (= llamacpp.ngl:ctx=N)")
      ->check(CLI::Range(0u, 1u << 24));
  cmd.add_option("--fit-target", o.fit_target, "llamacpp: --fit's margin, MiB left free per GPU (1024; a list per GPU: "
                 "2048,1024) (= llamacpp.ngl:fit-target=...)");
  cmd.add_option("--fit-ctx", o.fit_ctx, "llamacpp: the smallest context --fit sets (4096) (= llamacpp.ngl:fit-ctx=N)")
      ->check(CLI::Range(1u, 1u << 24));
  cmd.add_option("--ubatch", o.ubatch, "prompt processed in micro-batches of this many tokens of each sequence, one "
                 "prefill step each (llama.cpp's -ub counts all sequences' tokens: with --batch B give -ub / B; 512 "
                 "under the llamacpp preset; 0: the whole prompt in one step)")
      ->check(CLI::Range(0u, 1u << 24));
  cmd.add_option("--lengths", o.lengths,
                 "warm: the process has run these sequence lengths before; fresh: every step is a new length, as "
                 "in a first generate (charges the runtime's new_length_attention once per step)")
      ->check(CLI::IsMember({"warm", "fresh"}))
      ->capture_default_str();
  cmd.add_option("--engine", o.engine, "event (discrete-event) or analytic (closed form)")
      ->check(CLI::IsMember({"event", "analytic"}))
      ->capture_default_str();
}

app::TraceSpec trace_spec(const CommonOptions& o) {
  if (!o.trace.empty() && !o.model.empty()) throw InputError("", 0, "--trace", "give --trace or --model, not both");
  if (!o.trace.empty() && o.ubatch)
    throw InputError("", 0, "--ubatch", "splits a generated prompt (--model); a trace file's steps are as written");
  if (!o.trace.empty() && o.dtype)
    throw InputError("", 0, "--dtype", "sets the weight format of a generated model (--model); a trace file's tensors "
                                       "carry their own sizes and types: drop --dtype, or generate with --model");
  app::TraceSpec spec;
  spec.trace_path = o.trace;
  spec.model_path = o.model;
  if (app::is_gguf_path(o.model)) {
    if (o.dtype) throw InputError("", 0, "--dtype", "a .gguf model has its own tensor types; drop --dtype");
    app::use_gguf_file(spec);
  } else {
    try {
      model::set_dtype(spec.generation, o.dtype.value_or("bf16"));
    } catch (const std::invalid_argument& e) {
      throw InputError("", 0, "--dtype", e.what());
    }
  }
  spec.generation.batch = o.batch;
  spec.generation.routing_seed = o.routing_seed;
  if (o.experts_impl && !model::parse_experts(*o.experts_impl, spec.generation.experts))
    throw InputError("", 0, "--experts-impl", "grouped_mm or eager, not '" + *o.experts_impl + "'");
  if (o.routing.rfind("replay:", 0) == 0) {
    spec.generation.routing_path = o.routing.substr(7);
    if (spec.generation.routing_path.empty()) throw InputError("", 0, "--routing", "replay:FILE needs a file");
    spec.generation.routing_replay =
        std::make_shared<model::RoutingTable>(model::load_routing_file(spec.generation.routing_path));
  } else if (o.routing != "uniform") {
    double zipf = 0;
    char extra = 0;
    if (std::sscanf(o.routing.c_str(), "zipf:%lf%c", &zipf, &extra) != 1 || !(zipf >= 0.1 && zipf <= 4))
      throw InputError("", 0, "--routing", "uniform or zipf:S with S from 0.1 to 4 (zipf:1.2), got '" + o.routing + "'");
    spec.generation.routing_zipf = zipf;
  }
  const model::ModelFamily family = !o.model.empty() && !app::is_gguf_path(o.model) ? model::model_family(o.model)
                                                                                    : model::ModelFamily::Decoder;
  if (model::is_diffusion(family)) {
    spec.generation.image = model::default_image(family);
    // The options of the other kind of model are refused, not ignored.
    for (const auto& [given, name] : {std::pair{o.prompt.has_value(), "--prompt"}, {o.decode.has_value(), "--decode"},
                                      {o.ubatch.has_value(), "--ubatch"}, {o.routing != "uniform", "--routing"},
                                      {o.experts_impl.has_value(), "--experts-impl"}})
      if (given) throw InputError("", 0, name, "is for a language model; '" + o.model + "' is a diffusion transformer "
                                               "(--resolution, --steps, --text-tokens, --negative-tokens, --frames, --cfg, --batch)");
    if (family == model::ModelFamily::WanVae) {  // a VAE's decode: only the video's size, in ComfyUI's vae_dtype
      if (model::load_wan_vae_config(o.model).image_only) {  // Qwen-Image's VAE: its example's one 1328x1328 image
        spec.generation.image.width = spec.generation.image.height = 1328;
        spec.generation.image.frames = 1;
      }
      if (o.dtype)
        throw InputError("", 0, "--dtype", "'" + o.model + "' is a VAE: ComfyUI decodes in its vae_dtype, bf16 on GPUs "
                                           "that have it; drop --dtype");
    }
    if (family == model::ModelFamily::WanVae)
      for (const auto& [given, name] : {std::pair{o.steps.has_value(), "--steps"}, {o.cfg.has_value(), "--cfg"},
                                        {o.text_tokens.has_value(), "--text-tokens"},
                                        {o.negative_tokens.has_value(), "--negative-tokens"},
                                        {o.reference.has_value(), "--reference"}, {o.start_image, "--start-image"},
                                        {o.switch_step.has_value(), "--switch-step"}})
        if (given) throw InputError("", 0, name, "is for a diffusion transformer; '" + o.model +
                                                 "' is a VAE, whose decode takes --resolution and --frames");
    if (o.resolution) {
      unsigned w = 0, h = 0;
      char extra = 0;
      if (std::sscanf(o.resolution->c_str(), "%ux%u%c", &w, &h, &extra) != 2 || w > 16384 || h > 16384)
        throw InputError("", 0, "--resolution", "expected WIDTHxHEIGHT in pixels (1024x1024), got '" + *o.resolution + "'");
      spec.generation.image.width = w;
      spec.generation.image.height = h;
    }
    if (o.reference) {
      unsigned w = 0, h = 0;
      char extra = 0;
      if (std::sscanf(o.reference->c_str(), "%ux%u%c", &w, &h, &extra) != 2 || w == 0 || h == 0 || w > 16384 || h > 16384)
        throw InputError("", 0, "--reference", "expected WIDTHxHEIGHT in pixels (1024x1024), got '" + *o.reference + "'");
      spec.generation.image.reference_width = w;
      spec.generation.image.reference_height = h;
    }
    if (o.steps) spec.generation.image.steps = *o.steps;
    if (o.text_tokens) spec.generation.image.text_tokens = *o.text_tokens;
    if (o.negative_tokens) {
      if (spec.generation.image.negative_tokens == 0)
        throw InputError("", 0, "--negative-tokens",
                         "is for Qwen-Image, whose text encoder does not pad; '" + o.model +
                             "' pads both prompts to one length, so they always share a batch");
      spec.generation.image.negative_tokens = *o.negative_tokens;
    }
    if (o.frames) spec.generation.image.frames = *o.frames;
    spec.generation.image.start_image = o.start_image;
    if (o.switch_step) spec.generation.image.switch_step = *o.switch_step;
    if (o.cfg) spec.generation.image.cfg = *o.cfg;
    spec.generation.prompt_tokens = spec.generation.decode_tokens = 0;
    return spec;
  }
  for (const auto& [given, name] : {std::pair{o.resolution.has_value(), "--resolution"}, {o.reference.has_value(), "--reference"},
                                    {o.steps.has_value(), "--steps"},
                                    {o.text_tokens.has_value(), "--text-tokens"},
                                    {o.negative_tokens.has_value(), "--negative-tokens"}, {o.frames.has_value(), "--frames"},
                                    {o.cfg.has_value(), "--cfg"}, {o.start_image, "--start-image"},
                                    {o.switch_step.has_value(), "--switch-step"}})
    if (given) throw InputError("", 0, name, "is for a diffusion model (a FLUX or Wan config); this is a language model");
  spec.generation.prompt_tokens = o.prompt.value_or(512);
  spec.generation.decode_tokens = o.decode.value_or(128);
  if (o.ubatch) spec.generation.ubatch = *o.ubatch;
  else
    for (const auto& p : strategy::presets())
      if (p.name == o.policy) spec.generation.ubatch = p.ubatch;
  return spec;
}

// The strategy a command names: a preset (--policy), parts given directly replacing its parts, and the
// preset flags added to the part that reads each.
strategy::StrategySpec strategy_spec(const CommonOptions& o) {
  strategy::StrategySpec spec;
  if (!o.policy.empty()) spec = strategy::preset_spec(o.policy);
  else if (!o.placement && !o.memory && !o.offload)
    throw InputError("", 0, "--policy",
                     "give a preset (--policy NAME; sim policies) or parts (--placement, --memory, --offload; sim parts)");
  if (o.placement) spec.placement = strategy::PartSpec::parse(*o.placement, "--placement");
  if (o.memory) spec.memory = strategy::PartSpec::parse(*o.memory, "--memory");
  if (o.offload) spec.offload = strategy::PartSpec::parse(*o.offload, "--offload");
  spec.custom = o.placement || o.memory || o.offload;
  if (o.platform) spec.platform = strategy::PartSpec::parse(*o.platform, "--platform");
  strategy::LegacyFlags f;
  f.split = o.split;
  f.layers = o.layers;
  f.ngl = o.ngl;
  if (o.offload_gb) f.offload_bytes = *o.offload_gb * 1e9;
  f.donor = o.donor;
  f.offload_exec = o.offload_exec;
  f.prefetch = o.prefetch;
  f.host_memory = o.host_memory;
  f.allocator = o.allocator;
  f.um_scope = o.um_scope;
  f.um_filled = o.um_filled;
  f.threads = o.threads;
  f.override_tensor = o.override_tensor;
  // common/arg.cpp --cpu-moe and --n-cpu-moe: overrides appended after -ot's, as llama-bench orders them
  // (llama-cli keeps the command line's order); common.h LLM_FFN_EXPS_REGEX, llm_ffn_exps_block_regex.
  if (o.cpu_moe) f.override_tensor.push_back("\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU");
  if (o.n_cpu_moe)
    for (int i = 0; i < *o.n_cpu_moe; ++i)
      f.override_tensor.push_back("blk\\." + std::to_string(i) + "\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU");
  f.no_kv_offload = o.no_kv_offload;
  f.fit = o.fit;
  f.ctx_size = o.ctx_size;
  f.fit_target = o.fit_target;
  f.fit_ctx = o.fit_ctx;
  strategy::apply_flags(spec, f);
  return spec;
}

struct SweepRange {
  double from = 0, to = 0, step = 1;
};

SweepRange parse_range(const std::string& text) {
  SweepRange r;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%lf:%lf:%lf%c", &r.from, &r.to, &r.step, &extra) != 3 || !std::isfinite(r.from) ||
      !std::isfinite(r.to) || !std::isfinite(r.step))
    throw InputError("", 0, "--gb", "expected FROM:TO:STEP in GB, e.g. 0:20:2, got '" + text + "'");
  if (r.from < 0 || r.step <= 0 || r.to < r.from)
    throw InputError("", 0, "--gb", "need 0 <= FROM <= TO and STEP > 0");
  if ((r.to - r.from) / r.step > 10000) throw InputError("", 0, "--gb", "more than 10,000 points");
  return r;
}

// `--set key=value` on the hardware profile's tree (gpu.memory=48GiB), or on the runtime's with a
// `runtime.` prefix, before the strict loader reads it: an override is validated like the file.
std::pair<YAML::Node, std::string> profile_tree(const std::string& spec, bool runtime_file);

// The hardware sections a profile is composed of: `--set SECTION=PROFILE` takes that whole section from
// another profile (a preset name or a file), e.g. --hw rtx4090 --set host=h200 --set peer_link=rtx3090x2-nvlink.
const char* const kHardwareParts[] = {"gpu", "host", "host_link", "peer_link", "managed_memory", "disk"};

void apply_sets(YAML::Node hw_root, YAML::Node rt_root, const std::vector<std::string>& sets) {
  for (const std::string& set : sets) {
    const std::size_t eq = set.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == set.size())
      throw InputError("", 0, "--set", "expected KEY=VALUE (e.g. gpu.memory=\"48 GiB\"), got '" + set + "'");
    std::string key = set.substr(0, eq);
    if (std::find(std::begin(kHardwareParts), std::end(kHardwareParts), key) != std::end(kHardwareParts)) {
      const std::string from = set.substr(eq + 1);
      YAML::Node other;
      try {
        other = profile_tree(from, false).first;
      } catch (const InputError& e) {
        if (e.key() != "--hw") throw;  // a file that is not a profile says so itself
        throw InputError("", 0, "--set", "'" + key + "': '" + from + "' is neither a file nor a hardware preset");
      }
      if (!other[key]) throw InputError("", 0, "--set", "'" + key + "': profile '" + from + "' has no " + key + " section");
      hw_root[key] = YAML::Clone(other[key]);
      continue;
    }
    YAML::Node node;  // reset() rebinds; assigning a node would overwrite the tree it refers to
    node.reset(hw_root);
    if (key.rfind("runtime.", 0) == 0) {
      node.reset(rt_root);
      key = key.substr(8);
    }
    std::vector<std::string> path;
    for (std::size_t start = 0;;) {
      const std::size_t dot = key.find('.', start);
      path.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    for (std::size_t i = 0; i + 1 < path.size(); ++i) {
      if (path[i].empty() || !node[path[i]] || !node[path[i]].IsMap())
        throw InputError("", 0, "--set", "'" + set.substr(0, eq) + "': no section '" + path[i] + "' to set a key in");
      node.reset(node[path[i]]);
    }
    node[path.back()] = set.substr(eq + 1);
  }
}

// A profile's tree as the loaders would read it, and where it came from; InputError as theirs.
std::pair<YAML::Node, std::string> profile_tree(const std::string& spec, bool runtime_file) {
  if (!runtime_file) return hw::profile_tree(spec);  // a file, a preset or a catalogue composition
  const config::ProfileSource src =
      config::find_profile(spec, config::embedded_runtimes(), "--runtime", "runtime profile", "runtime");
  YAML::Node root = config::parse_document(src.text, src.origin);
  if (!root.IsMap())
    throw InputError(src.origin, 0, "", "expected a YAML mapping (a runtime profile)");
  return {root, src.origin};
}

// The runtime a command names: --runtime, else its preset's, else the default.
std::string runtime_name(const CommonOptions& o) {
  if (!o.runtime.empty()) return o.runtime;
  for (const auto& p : strategy::presets())
    if (p.name == o.policy && !p.runtime.empty()) return p.runtime;
  return runtime::kDefaultRuntime;
}

// The hardware and runtime a command names, with --set overrides applied.
void resolve_machine(const CommonOptions& o, app::RunInputs& in) {
  const std::string runtime = runtime_name(o);
  if (o.sets.empty()) {
    in.hw = hw::resolve_profile(o.hw);
    in.runtime = runtime::resolve_runtime(runtime);
  } else {
    auto [hw_root, hw_origin] = profile_tree(o.hw, false);
    auto [rt_root, rt_origin] = profile_tree(runtime, true);
    // A changed PCIe generation or lane count scales the link's copy curves from the link they were measured on
    // (every other --set applied first: a host_link section taken from another profile brings its own).
    std::vector<std::string> relink, others;
    for (const std::string& s : o.sets)
      (s.rfind("host_link.width=", 0) == 0 || s.rfind("host_link.generation=", 0) == 0 ? relink : others).push_back(s);
    apply_sets(hw_root, rt_root, others);
    int generation = 0, width = 0;
    if (!relink.empty()) {
      const hw::HardwareProfile measured = hw::parse_profile_node(YAML::Clone(hw_root), hw_origin + " with --set");
      generation = measured.host_link.generation;
      width = measured.host_link.width;
      apply_sets(hw_root, rt_root, relink);
    }
    in.hw = hw::parse_profile_node(hw_root, hw_origin + " with --set");
    in.hw.origin = hw_origin + " with --set";
    if (generation > 0 && (generation != in.hw.host_link.generation || width != in.hw.host_link.width)) {
      hw::rescale_host_link(in.hw.host_link, generation, width);
      in.hw.origin += "; host link copies scaled from PCIe " + std::to_string(generation) + ".0 x" + std::to_string(width) +
                      " to " + std::to_string(in.hw.host_link.generation) + ".0 x" + std::to_string(in.hw.host_link.width);
    }
    in.runtime = runtime::parse_runtime_node(rt_root, rt_origin + " with --set");
    in.runtime.origin = rt_origin + " with --set";
  }
  in.fresh_lengths = o.lengths == "fresh";
  app::check_alloc_conf(o.alloc_conf);  // read whether or not the run replays allocations
  in.alloc_conf = o.alloc_conf;
}

app::RunInputs run_inputs(const CommonOptions& o) {
  app::RunInputs in;
  resolve_machine(o, in);
  in.trace = trace_spec(o);
  in.strategy = strategy_spec(o);
  in.engine = app::parse_engine(o.engine);
  return in;
}

// The files a run reads (an output naming one of them is refused): the trace or model, a routing file, the
// hardware and runtime profiles when they are files, and `more` (a --config).
std::vector<std::string> input_paths(const app::RunInputs& in, const std::string& more = "") {
  std::vector<std::string> out{in.trace.trace_path, in.trace.model_path, in.trace.generation.routing_path, more};
  for (const std::string* origin : {&in.hw.origin, &in.runtime.origin})
    if (origin->rfind("preset:", 0) != 0) out.push_back(origin->substr(0, origin->find(" with --set")));
  return out;
}

// The profile files a plan's machines read (each --hw that is a file, and --runtime when it is one), for the check
// that its -o names none of them: a plan resolves its machines per point, after the output is opened.
std::vector<std::string> profile_files(const std::vector<std::string>& hardware, const std::string& runtime) {
  app::RunInputs m;
  m.runtime.origin = runtime.empty() ? "preset:" : runtime::resolve_runtime(runtime).origin;
  std::vector<std::string> out;
  for (const auto& h : hardware) {
    m.hw = hw::resolve_profile(h);
    for (std::string& f : input_paths(m)) out.push_back(std::move(f));
  }
  return out;
}

int run_command(const app::RunInputs& in, bool json, const std::string& timeline_path, std::size_t timeline_steps,
                const std::string& config_path = "") {
  // Outputs are opened before the run (a path that cannot be written fails at once) and committed
  // after it: a refused or failed run leaves no file behind.
  std::optional<report::OutputFile> timeline_file;
  std::optional<report::Timeline> timeline;
  if (!timeline_path.empty()) {
    timeline_file.emplace(timeline_path, "--timeline", input_paths(in, config_path));
    timeline.emplace(timeline_steps, timeline_file->stream());
    timeline->process_name(in.trace.name() + " under " + in.strategy.label() + " on " + in.hw.name);
  }
  const auto sim = app::simulate(in.setup(), in.strategy, in.engine, in.trace, timeline ? &*timeline : nullptr);
  if (timeline) {
    timeline->finish();
    timeline_file->commit();
  }
  const nlohmann::ordered_json inputs = app::inputs_to_json(in);
  report::Context c;
  c.policy = in.strategy.label();
  c.strategy = in.strategy.placement.text() + " + " + in.strategy.memory.text() + " + " + in.strategy.offload.text();
  if (in.strategy.platform.name != "linux" || !in.strategy.platform.options.empty())
    c.strategy += " on " + in.strategy.platform.text();
  c.trace_name = in.trace.name();
  c.header = &sim.header;
  c.hw = &in.hw;
  c.runtime = &in.runtime;
  c.fresh_lengths = in.fresh_lengths;
  c.placement = &sim.placement;
  c.result = &sim.result;
  c.inputs = &inputs;
  const std::optional<report::AllocatorMemory> allocator = app::inference_memory(in, sim);
  if (allocator) c.allocator = &*allocator;
  std::optional<app::ImageJobResult> job;
  if (in.image_job) {
    job = app::run_image_job(in, sim);
    c.image_job = &job->job;
    c.image_job_spec = &job->spec;
    c.image_job_text = job->text_seconds;
  }
  std::optional<app::ExpertJobResult> experts;
  if (in.sampler_job || in.video_job) {
    experts = app::run_expert_job(in, sim);
    c.expert_job = &experts->job;
    c.expert_job_spec = &experts->spec;
  }
  if (json) report::write_json(std::cout, c);
  else report::write_console(std::cout, c);
  report::check_stdout("standard output");
  // Out of memory in the caching allocator's replay is the run's outcome: the prediction is printed, with it.
  return allocator && allocator->oom ? 3 : 0;
}

// Simulates one point of a sweep into its row (an offload-sweep or grid row): the summary, the peak on
// cuda:0 and the bytes offloaded, or the reason it does not fit.
template <typename Row>
void simulate_point(Row& row, const app::RunInputs& machine, const strategy::StrategySpec& strategy,
                    app::EngineKind engine, const app::TraceSpec& spec) {
  try {
    const auto sim = app::simulate(machine.setup(), strategy, engine, spec);
    if (const auto oom = app::allocator_out_of_memory(machine, spec, sim)) {  // what sim run would exit 3 with
      row.error = *oom;
      return;
    }
    row.ok = true;
    row.summary = result::summarize(sim.result);
    row.vram_peak = sim.result.peak_bytes.at("cuda:0");
    row.offloaded = placement::offloaded_weight_bytes(sim.header, sim.placement);
    row.error_band = accuracy::band_for(accuracy::classify(sim.header, machine.hw, sim.placement, row.summary)).short_text();
  } catch (const CapacityError& e) {
    row.error = e.what();
  }
}

int sweep_command(const CommonOptions& o, const std::string& range_text, const std::string& output) {
  app::RunInputs m;
  resolve_machine(o, m);
  app::TraceSpec spec = trace_spec(o);
  const SweepRange range = parse_range(range_text);
  spec.loaded = app::load_trace(spec);  // read (or generated) once, replayed at every point
  // Checked before any point is simulated.
  std::vector<std::string> inputs = input_paths(m);  // the profiles when they are files
  inputs.insert(inputs.end(), {o.trace, o.model, spec.generation.routing_path});
  report::OutputFile out(output.empty() ? "-" : output, "-o", inputs);
  if (o.split || o.offload_gb)
    throw InputError("", 0, o.split ? "--split" : "--offload-gb", "a sweep sets the amount offloaded itself; drop it");
  const app::EngineKind engine = app::parse_engine(o.engine);
  std::vector<report::SweepRow> rows;
  const auto n = static_cast<int>(std::floor((range.to - range.from) / range.step + 1e-9));
  app::Progress progress("sweep", "points", static_cast<std::size_t>(n) + 1);
  for (int i = 0; i <= n; ++i) {
    report::SweepRow row;
    row.offload_gb = range.from + i * range.step;
    row.donor = o.donor.value_or("cpu");
    CommonOptions point = o;
    point.offload_gb = row.offload_gb;
    simulate_point(row, m, strategy_spec(point), engine, spec);
    rows.push_back(row);
    progress.tick();
  }
  progress.finish();
  report::write_sweep_csv(out.stream(), rows);
  out.commit();
  return 0;
}

// The sweep's own options, which a point's `sim run` command does not take.
bool sweep_only(const std::string& a) {
  return a == "--gb" || a == "-o" || a == "--output" || a == "--format" || a == "--json" || a == "--shard";
}
std::vector<std::string> without_sweep_options(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string name = args[i].substr(0, args[i].find('='));
    if (args[i].size() > 2 && args[i].rfind("-o", 0) == 0 && args[i][2] != '-') continue;  // -oFILE
    if (sweep_only(name)) {
      if (name == args[i] && name != "--json") ++i;  // and its value (--json is a flag)
      continue;
    }
    out.push_back(args[i]);
  }
  return out;
}

// One grid point's options, parsed as `sim run` would (every check a run makes).
CommonOptions parse_point(const std::vector<std::string>& args) {
  CLI::App app{"point"};
  CommonOptions o;
  add_common_options(app, o);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw InputError("", 0, "sweep", std::string("a grid point does not parse: ") + e.what() + " (" +
                                         app::point_command(args) + ")");
  }
  return o;
}

report::GridFormat grid_format(const std::string& format_text) {
  if (format_text == "jsonl") return report::GridFormat::Jsonl;
  if (format_text == "md") return report::GridFormat::Markdown;
  if (!format_text.empty() && format_text != "csv")
    throw InputError("", 0, "--format", "csv, jsonl or md, not '" + format_text + "'");
  return report::GridFormat::Csv;
}

// `shard_text` "K/N": only shard K of N of the grid's points (report/grid_shard.hpp), written as a shard file.
int grid_command(const app::Grid& grid, const std::string& format_text, const std::string& output,
                 const std::string& shard_text) {
  const report::GridFormat format = grid_format(format_text);
  std::size_t shard_k = 0, shard_n = 0;
  if (!shard_text.empty()) {
    std::tie(shard_k, shard_n) = report::parse_shard(shard_text);
    if (!format_text.empty())
      throw InputError("", 0, "--format", "a shard is written as tiersim's shard file: give --format to sim merge, "
                                          "which joins the shards into the grid's output");
  }
  // Every point's options, hardware, runtime, workload and strategy are read before any point is simulated:
  // a bad value fails the sweep at once (a placement that cannot be made for the model is found when its
  // point runs).
  struct Point {
    CommonOptions o;
    app::RunInputs machine;
    app::TraceSpec spec;
    strategy::StrategySpec strategy;
    std::string key;  // the workload: points with the same key share one loaded trace
  };
  std::vector<Point> points;
  for (const auto& p : grid.points) {
    Point q;
    q.o = parse_point(without_sweep_options(p.args));
    resolve_machine(q.o, q.machine);
    q.spec = trace_spec(q.o);
    q.strategy = strategy_spec(q.o);
    app::parse_engine(q.o.engine);
    q.key = q.o.trace + '\n' + q.o.model + '\n' + q.o.dtype.value_or("") + '\n' + std::to_string(q.o.batch) + '\n' +
            std::to_string(q.spec.generation.prompt_tokens) + '\n' + std::to_string(q.spec.generation.decode_tokens) +
            '\n' + std::to_string(q.spec.generation.ubatch) + '\n' + q.o.routing + '\n' +
            model::to_string(q.spec.generation.experts) + '\n' +
            std::to_string(q.o.routing_seed) + '\n' + std::to_string(q.spec.generation.image.width) + 'x' +
            std::to_string(q.spec.generation.image.height) + '\n' + std::to_string(q.spec.generation.image.steps) + '\n' +
            std::to_string(q.spec.generation.image.text_tokens) + '\n' +
            std::to_string(q.spec.generation.image.negative_tokens) + '\n' +
            std::to_string(q.spec.generation.image.frames) + '\n' +
            std::to_string(q.spec.generation.image.guided_batch(1));  // cfg shapes the trace only through this
    points.push_back(std::move(q));
  }
  std::vector<std::string> inputs;
  for (const Point& q : points) {
    inputs.insert(inputs.end(), {q.o.trace, q.o.model, q.spec.generation.routing_path});
    for (const std::string& f : input_paths(q.machine)) inputs.push_back(f);  // its profiles when they are files
  }
  report::OutputFile out(output.empty() ? "-" : output, "-o", inputs);
  // Traces loaded once per workload and freed after the last point that uses them.
  std::map<std::string, std::size_t> last_use;
  for (std::size_t i = 0; i < points.size(); ++i) last_use[points[i].key] = i;
  std::map<std::string, std::shared_ptr<const app::LoadedTrace>> traces;
  const auto [first, last] = shard_n ? report::shard_range(points.size(), shard_k, shard_n)
                                     : std::pair<std::size_t, std::size_t>{0, points.size()};
  app::Progress progress("sweep", "points", last - first);
  std::vector<report::GridRow> rows;
  for (std::size_t i = first; i < last; ++i) {
    Point& q = points[i];
    report::GridRow row;
    row.values = grid.points[i].values;
    row.command = app::point_command(without_sweep_options(grid.points[i].args));
    auto& loaded = traces[q.key];
    if (!loaded) loaded = app::load_trace(q.spec);
    q.spec.loaded = loaded;
    simulate_point(row, q.machine, q.strategy, app::parse_engine(q.o.engine), q.spec);
    q.spec.loaded.reset();
    if (last_use[q.key] == i) traces.erase(q.key);
    rows.push_back(std::move(row));
    progress.tick();
  }
  progress.finish();
  std::vector<std::string> axes;
  for (const auto& a : grid.axes) axes.push_back(a.option);
  if (shard_n) {
    report::write_grid_shard(out.stream(), report::GridShard{axes, points.size(), shard_k, shard_n, first, rows});
  } else {
    report::write_grid(out.stream(), format, axes, rows);
  }
  out.commit();
  return 0;
}

// sim merge: a grid's shard files (sim sweep --shard K/N) joined into the grid's output, the bytes one process writes.
int merge_command(const std::vector<std::string>& files, const std::string& format_text, const std::string& output) {
  std::vector<std::string> texts;
  for (const std::string& file : files)  // a grid's 100,000 rows take ~65 MB
    texts.push_back(io::read_file(file, "merge", "shard file", 256ull << 20, "256 MiB"));
  if (!texts.empty() && app::is_plan_shard(texts.front())) {
    // A plan's shards (sim plan --shard K/N): every candidate's row, then the plan's tail and writer over them all.
    const std::string format = format_text.empty() ? "md" : format_text;
    app::check_plan_format(format);
    std::vector<std::pair<std::string, app::PlanShard>> shards;
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (!app::is_plan_shard(texts[i]))
        throw InputError(files[i], 1, "tiersim_plan_shard", "not a plan shard, where " + files.front() + " is one");
      shards.emplace_back(files[i], app::read_plan_shard(texts[i], files[i]));
    }
    app::PlanShard whole;
    std::vector<app::PlanRow> rows = app::merge_plan_shards(shards, whole);
    const app::PlanPricer price = [&](const std::string& h) { return whole.prices.at(h); };
    rows = app::finish_plan(std::move(rows), whole.hardware, whole.goal, price);
    report::OutputFile out(output.empty() ? "-" : output, "-o", files);
    app::write_plan(out.stream(), format, rows, whole.goal);
    out.commit();
    std::cerr << "sim merge: " << shards.size() << " plan shards, " << whole.candidates << " candidates: "
              << whole.work.screened << " points screened, " << whole.work.predicted << " predicted, "
              << whole.work.pruned << " pruned by their bound\n";
    return 0;
  }
  const report::GridFormat format = grid_format(format_text);
  std::vector<std::pair<std::string, report::GridShard>> shards;
  for (std::size_t i = 0; i < files.size(); ++i) shards.emplace_back(files[i], report::read_grid_shard(texts[i], files[i]));
  std::vector<std::string> axes;
  const std::vector<report::GridRow> rows = report::merge_grid_shards(shards, axes);
  report::OutputFile out(output.empty() ? "-" : output, "-o", files);
  report::write_grid(out.stream(), format, axes, rows);
  out.commit();
  return 0;
}

// What limits a predicted step, from where its time went: managed-memory faults, the CPU running offloaded
// layers, a link carrying the copies (more than half its rate in use), the GPU (busy 85%+ of the step), or
// else the host issuing the framework's ops.
std::string bottleneck(const app::Simulation& sim, const hw::HardwareProfile& hw) {
  const result::Summary s = result::summarize(sim.result);
  const double step = s.decode_steps > 0 ? s.decode_step_median : s.iteration_median;
  if (step <= 0) return "";
  // Weights the CPU runs (beyond a token-embedding lookup), and whether other GPUs run layers (a pipeline).
  double cpu_bytes = 0;
  bool other_gpus = false;
  for (std::size_t t = 0; t < sim.placement.path.size(); ++t) {
    if (sim.placement.path[t] != placement::Path::Execute) continue;
    if (sim.placement.device[t] == placement::kCpu) {
      // The tensors before the first transformer layer (trace.hpp: the embeddings) are looked up a row a token.
      if (sim.header.tensors[t].layer >= 0) cpu_bytes += static_cast<double>(sim.header.tensors[t].bytes);
    } else if (sim.placement.device[t] != placement::kComputeGpu) {
      other_gpus = true;
    }
  }
  const bool cpu = cpu_bytes > 0.05 * placement::weight_bytes(sim.header);
  char buf[96];
  if (sim.result.managed.enabled && s.faulted_blocks_per_step > 0) return "managed-memory faults";
  if (cpu && s.gpu_busy_share < 0.5) return "CPU (the layers it runs)";
  const double h2d = s.h2d_bytes_per_step / step, peer = s.peer_bytes_per_step / step;
  const double host_rate = std::max(hw.host_link.h2d_pinned.bandwidth, hw.host_link.h2d_pageable.bandwidth);
  if (h2d > 0 && h2d > 0.5 * host_rate) {
    std::snprintf(buf, sizeof buf, "host link (%.1f GB/s of copies)", h2d / 1e9);
    return buf;
  }
  if (peer > 0 && hw.peer_link && peer > 0.5 * hw.peer_link->transfer.bandwidth) {
    std::snprintf(buf, sizeof buf, "peer link (%.1f GB/s of copies)", peer / 1e9);
    return buf;
  }
  if (s.gpu_busy_share >= 0.85) return "GPU";
  if (other_gpus) return "GPUs in turn (each runs its layers)";
  std::snprintf(buf, sizeof buf, "host (GPU busy %.0f%%)", 100 * s.gpu_busy_share);
  return buf;
}

// The plan's own options, which a point's `sim run` command does not take.
bool plan_only(const std::string& a) {
  return a == "--hw" || a == "--strategies" || a == "--min-tps" || a == "--max-s-per-iteration" || a == "--jobs" ||
         a == "--format" || a == "-o" || a == "--output" || a == "--price" || a == "--cheapest" ||
         a == "--exhaustive" || a == "--max-price" || a == "--vram-margin" || a == "--host-ram" || a == "--count" ||
         a == "--json" || a == "--shard";
}

// --price GPU=USD (comma lists and repeats): a catalogue GPU's price in place of its launch price.
std::map<std::string, double> price_overrides(const std::vector<std::string>& items) {
  std::map<std::string, double> out;
  for (const auto& list : items)
    for (std::size_t start = 0; start <= list.size();) {
      const std::size_t comma = list.find(',', start);
      const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? list.size() + 1 : comma + 1;
      if (item.empty()) continue;
      const std::size_t eq = item.find('=');
      const std::string id = item.substr(0, eq);
      const auto& gpus = hw::catalogue_gpus();
      if (eq == std::string::npos || std::none_of(gpus.begin(), gpus.end(), [&](const auto& g) { return g.id == id; }))
        throw InputError("", 0, "--price", "'" + item + "': give GPU=USD with a catalogue GPU ('sim catalogue' lists them)");
      // A plain decimal number of dollars (no hex, no spaces, no sign), more than 0, at most 1e7; once per GPU.
      const std::string text = item.substr(eq + 1);
      double usd = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), usd, std::chars_format::fixed);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !(usd > 0) || usd > 1e7)
        throw InputError("", 0, "--price", "'" + item + "': the price must be a plain number of US dollars, more than 0 and at most 1e7");
      if (!out.emplace(id, usd).second) throw InputError("", 0, "--price", "'" + id + "' is priced twice");
    }
  return out;
}

// --hw words that stand for catalogue groups: every catalogue GPU (one card, its default host), or a segment's;
// with --count, each bare catalogue GPU id (a word's, or given alone) once per count ("2xrtx3090").
std::vector<std::string> expand_hardware(const std::vector<std::string>& items, const std::vector<int>& counts) {
  std::vector<std::string> ids;
  for (const auto& item : items) {
    if (item == "catalogue" || item == "consumer" || item == "workstation" || item == "datacenter") {
      // One card each: an id that also names a preset of several GPUs (h100-sxm is eight) is written "1xID".
      for (const auto& g : hw::catalogue_gpus()) {
        if (item != "catalogue" && g.segment != item) continue;
        bool several = false;
        for (const auto& [preset, composition] : hw::catalogue_presets())
          several |= preset == g.id && !composition.empty() && std::isdigit(static_cast<unsigned char>(composition[0])) &&
                     composition.rfind("1x", 0) != 0;
        ids.push_back(several ? "1x" + g.id : g.id);
      }
    } else {
      ids.push_back(item);
    }
  }
  if (counts.empty()) return ids;
  std::vector<std::string> out;
  const auto& gpus = hw::catalogue_gpus();
  for (const auto& id : ids) {
    const bool bare = std::any_of(gpus.begin(), gpus.end(), [&](const auto& g) { return g.id == id; });
    if (!bare) {
      out.push_back(id);
      continue;
    }
    for (int c : counts) out.push_back(c == 1 ? "1x" + id : std::to_string(c) + "x" + id);
  }
  return out;
}

int plan_command(const std::vector<std::string>& raw, const CommonOptions& o, const std::string& hw_list,
                 const std::string& strategy_list, const app::PlanGoal& goal, int jobs, const std::string& format,
                 const std::string& output, const std::vector<std::string>& price_items, bool exhaustive,
                 const std::vector<int>& counts, std::optional<double> vram_margin_gib, std::optional<double> host_ram_gib,
                 bool train, std::optional<std::uint32_t> train_seq, const std::string& shard_text) {
  if (!shard_text.empty() && train)
    throw InputError("", 0, "--shard", "splits an inference plan's candidates; a training plan (--train) is not sharded");
  if (o.policy.size() || o.placement || o.memory || o.offload)
    throw InputError("", 0, o.policy.size() ? "--policy" : "--placement", "sim plan chooses the strategies itself (--strategies)");
  app::check_plan_format(format);
  auto split = [](const std::string& text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t comma = text.find(',', start);
      const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!item.empty()) out.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  };
  std::vector<std::string> hardware = expand_hardware(split(hw_list), counts);
  if (hardware.empty())
    for (const auto& f : config::embedded_profiles()) hardware.push_back(f.name);
  const std::map<std::string, double> prices = price_overrides(price_items);
  // Each machine's constraints as its own --set (so that every row's command reproduces them): a VRAM margin adds
  // to the GPU's reserve, a host RAM size replaces the host's memory.
  std::map<std::string, std::vector<std::string>> hw_args;
  for (const auto& h : hardware) {
    const hw::HardwareProfile p = hw::resolve_profile(h);  // a --hw that names nothing is an error before any run
    char text[96];
    if (vram_margin_gib) {
      std::snprintf(text, sizeof text, "gpu.reserved=%.6g GiB", p.gpu.reserved / 1073741824.0 + *vram_margin_gib);
      hw_args[h].insert(hw_args[h].end(), {"--set", text});
    }
    if (host_ram_gib) {
      std::snprintf(text, sizeof text, "host.memory=%.6g GiB", *host_ram_gib);
      hw_args[h].insert(hw_args[h].end(), {"--set", text});
    }
  }
  if (train_seq && !train) throw InputError("", 0, "--seq", "is the training workload's (with --train)");
  if (train) {
    // A training workload: the model, batch x seq; every machine x training set-up through sim train.
    if (o.prompt || o.decode || o.resolution || o.dtype || o.trace.size())
      throw InputError("", 0, o.prompt ? "--prompt" : o.decode ? "--decode" : o.resolution ? "--resolution" : o.dtype ? "--dtype" : "--trace",
                       "is an inference workload's; sim plan --train takes --model, --batch and --seq");
    if (goal.max_seconds_per_iteration)
      throw InputError("", 0, "--max-s-per-iteration", "is a diffusion goal; a training plan's goal is --min-tps (tokens/s)");
    if (o.engine != "event" || exhaustive)
      throw InputError("", 0, o.engine != "event" ? "--engine" : "--exhaustive",
                       "sim plan --train predicts every candidate with sim train (the event engine), nothing to choose");
    if (o.model.empty()) throw InputError("", 0, "--model", "sim plan --train needs the model (a dense decoder's config.json)");
    std::vector<std::string> setups = split(strategy_list);
    if (setups.empty())
      for (const auto& s : app::train_setups()) setups.push_back(s.name);
    const app::TrainPlanWorkload w{o.model, o.batch, train_seq.value_or(1024)};
    const app::TrainMachineResolver resolve = [&](const std::string& h, const std::vector<std::string>& own) {
      CommonOptions machine;
      machine.hw = h;
      machine.sets = o.sets;
      for (std::size_t i = 0; i + 1 < own.size(); i += 2) machine.sets.push_back(own[i + 1]);  // own: --set X pairs
      machine.runtime = o.runtime.empty() ? app::kDefaultTrainingRuntime : o.runtime;
      auto m = std::make_shared<app::RunInputs>();
      resolve_machine(machine, *m);
      return std::shared_ptr<const app::RunInputs>(m);
    };
    const app::PlanPricer price = [&](const std::string& h) { return hw::price_of(h, prices); };
    std::vector<std::string> inputs = profile_files(hardware, o.runtime);
    inputs.push_back(o.model);
    report::OutputFile out(output.empty() ? "-" : output, "-o", inputs);
    std::vector<std::string> dropped;
    const auto rows = app::plan_training(w, hardware, setups, goal, price, jobs, resolve, hw_args, &dropped);
    std::cerr << "sim plan --train: " << rows.size() << " machine x set-up candidates predicted by sim train\n";
    for (const auto& d : dropped) std::cerr << "  left out, does not apply: " << d << "\n";
    app::write_plan(out.stream(), format, rows, goal);
    out.commit();
    return 0;
  }
  // The workload's arguments as given (sim plan ...), less the plan's own.
  std::vector<std::string> base;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string name = raw[i].substr(0, raw[i].find('='));
    if (plan_only(name) || (raw[i].size() > 2 && raw[i].rfind("-o", 0) == 0 && raw[i][2] != '-')) {
      if (name == raw[i] && raw[i] != "--cheapest" && raw[i] != "--exhaustive" && raw[i] != "--json" &&
          raw[i].rfind("-o", 0) != 0)
        ++i;
      else if (raw[i] == "-o") ++i;
      continue;
    }
    base.push_back(raw[i]);
  }
  // The workloads: one per --dtype choice (a comma list), each with its size: its transformer layers and weight
  // bytes (the knobs' ranges), and its arguments with that --dtype.
  std::vector<std::string> dtypes = o.dtype ? split(*o.dtype) : std::vector<std::string>{};
  if (o.dtype && dtypes.empty()) throw InputError("", 0, "--dtype", "names no weight format");
  std::vector<app::PlanWorkload> workloads;
  trace::Header header;
  std::string routing_path;  // a routing file the workloads replay (an input, like the trace)
  for (std::size_t k = 0; k < std::max<std::size_t>(1, dtypes.size()); ++k) {
    CommonOptions ov = o;
    if (!dtypes.empty()) ov.dtype = dtypes[k];
    const app::TraceSpec spec = trace_spec(ov);
    routing_path = spec.generation.routing_path;
    header = app::open_trace(spec)->header();
    app::PlanWorkload w;
    for (const auto& t : header.tensors) w.layers = std::max(w.layers, t.layer);
    w.model_gb = placement::weight_bytes(header) / 1e9;
    w.experts = header.meta.count("num_experts") > 0;
    if (dtypes.size() > 1) w.label = dtypes[k];
    for (std::size_t i = 0; i < base.size(); ++i) {
      if (dtypes.size() > 1 && base[i] == "--dtype" && i + 1 < base.size()) {
        w.base.insert(w.base.end(), {"--dtype", dtypes[k]});
        ++i;
      } else if (dtypes.size() > 1 && base[i].rfind("--dtype=", 0) == 0) {
        w.base.push_back("--dtype=" + dtypes[k]);
      } else {
        w.base.push_back(base[i]);
      }
    }
    workloads.push_back(std::move(w));
  }
  std::vector<std::string> strategies = split(strategy_list);
  if (strategies.empty()) {
    const bool diffusion = header.meta.count("resolution") > 0;
    strategies = diffusion ? std::vector<std::string>{"resident", "distorch-cpu", "distorch-gpu1", "comfyui"}
                           : std::vector<std::string>{"resident", "llamacpp", "layers-cpu", "layers-stream",
                                                      "distorch-cpu", "distorch-gpu1", "pipeline"};
    if (!diffusion && header.meta.count("num_experts")) strategies.insert(strategies.begin() + 2, "llamacpp-cpu-moe");
  }
  if (app::is_gguf_path(o.model)) {
    // A GGUF model runs only under llama.cpp's runtime: the strategies whose runtime is PyTorch's are left out, and
    // the plan says which and why (each would be refused as sim run refuses it).
    std::vector<std::string> kept, skipped;
    std::string reason;
    for (const auto& name : strategies) {
      const auto& known = app::plan_strategies();
      const auto s = std::find_if(known.begin(), known.end(), [&](const app::PlanStrategy& k) { return k.name == name; });
      if (s == known.end()) {  // an unknown name: the plan's own error
        kept.push_back(name);
        continue;
      }
      CommonOptions q = o;
      for (std::size_t i = 0; i + 1 < s->args.size(); ++i)
        if (s->args[i] == "--policy") q.policy = s->args[i + 1];
      app::RunInputs m;
      m.runtime.name = runtime_name(q);
      m.trace.model_path = o.model;
      const std::string why = app::gguf_runtime_refusal(m.trace, m.runtime);
      if (why.empty()) kept.push_back(name);
      else skipped.push_back(name), reason = why;
    }
    if (!skipped.empty()) {
      std::string names;
      for (const auto& n : skipped) names += (names.empty() ? "" : ", ") + n;
      if (kept.empty())
        throw InputError(o.model, 0, "--strategies", "no strategy given takes this model: it " + reason +
                                                         " (sim plan's strategies llamacpp and llamacpp-cpu-moe)");
      std::cerr << "sim plan: left out for the GGUF model '" << o.model << "': " << names
                << " (their runtime is PyTorch's, which reads a config.json; a GGUF model runs under llama.cpp's)\n";
      strategies = kept;
    }
  }
  std::vector<std::string> inputs = profile_files(hardware, o.runtime);
  inputs.insert(inputs.end(), {o.trace, o.model, routing_path});
  report::OutputFile out(output.empty() ? "-" : output, "-o", inputs);
  // A point's machine and trace, each resolved once (points differ in the strategy and its knob only).
  std::mutex cache;
  std::map<std::string, std::shared_ptr<const app::LoadedTrace>> traces;
  std::map<std::string, std::shared_ptr<const app::RunInputs>> machines;
  struct Point {
    CommonOptions q;
    std::shared_ptr<const app::RunInputs> machine;
    app::TraceSpec spec;
    strategy::StrategySpec strategy;
  };
  auto point = [&](const std::vector<std::string>& args) {
    Point p;
    p.q = parse_point(args);
    p.spec = trace_spec(p.q);
    p.strategy = strategy_spec(p.q);
    std::string machine_key = p.q.hw + '\n' + runtime_name(p.q) + '\n' + p.q.lengths;
    for (const auto& set : p.q.sets) machine_key += '\n' + set;
    const std::string trace_key = p.q.trace + '\n' + p.q.model + '\n' + p.q.dtype.value_or("") + '\n' +
                                  std::to_string(p.spec.generation.ubatch);
    std::lock_guard<std::mutex> lock(cache);
    auto& machine = machines[machine_key];
    if (!machine) {
      auto m = std::make_shared<app::RunInputs>();
      resolve_machine(p.q, *m);
      machine = m;
    }
    p.machine = machine;
    auto& loaded = traces[trace_key];
    if (!loaded) loaded = app::load_trace(p.spec);
    p.spec.loaded = loaded;
    return p;
  };
  const app::PlanEvaluate evaluate = [&](const std::vector<std::string>& args) {
    app::PlanPoint p;
    const Point at = point(args);
    try {
      const auto sim = app::simulate(at.machine->setup(), at.strategy, app::parse_engine(at.q.engine), at.spec);
      if (const auto oom = app::allocator_out_of_memory(*at.machine, at.spec, sim)) {  // sim run would exit 3
        p.error = *oom;
        return p;
      }
      p.ok = true;
      p.summary = result::summarize(sim.result);
      p.diffusion = p.summary.decode_steps == 0 && p.summary.iteration_steps > 0;
      p.vram_peak = sim.result.peak_bytes.at("cuda:0");
      if (const auto host = sim.result.peak_bytes.find("cpu"); host != sim.result.peak_bytes.end()) p.host_peak = host->second;
      p.offloaded = placement::offloaded_weight_bytes(sim.header, sim.placement);
      p.bottleneck = bottleneck(sim, at.machine->hw);
      const accuracy::Band band = accuracy::band_for(accuracy::classify(sim.header, at.machine->hw, sim.placement, p.summary));
      p.accuracy_class = band.run.machine_class + "/" + band.run.workload + "/" + band.run.strategy;
      if (band.in_sample) p.error_in = band.in_sample->mean_abs;
      if (band.out_of_sample) p.error_out = band.out_of_sample->mean_abs;
      p.validated = band.basis == accuracy::Band::Basis::Exact || band.basis == accuracy::Band::Basis::AnyStrategy;
      p.error_band = band.short_text();
      p.accuracy_basis = accuracy::basis_name(band.basis);
    } catch (const CapacityError& e) {
      p.error = e.what();
    } catch (const InputError& e) {
      p.applies = false;  // a strategy that does not apply to this model or machine (cuda:1 on one GPU)
      p.error = e.message();
    }
    return p;
  };
  // The screen: the point's placement (does it fit?) and its speed bound, without running it.
  const app::PlanScreener screen = [&](const std::vector<std::string>& args) {
    app::PlanScreen r;
    const Point at = point(args);
    try {
      const auto& header = at.spec.loaded->header;
      const placement::Placement placement = strategy::compose(header, at.machine->hw, at.strategy);
      const auto bound = analytic::bound_run(at.machine->setup(), header, placement, at.spec.loaded->steps);
      r.fits = true;
      r.speed_at_most = bound.iteration_seconds > 0 ? 1.0 / bound.iteration_seconds : bound.decode_tps;
    } catch (const CapacityError&) {
      r.fits = false;
    } catch (const InputError&) {
      r.applies = false;
    }
    return r;
  };
  const app::PlanPricer price = [&](const std::string& h) { return hw::price_of(h, prices); };
  app::PlanWork work;
  // The bound holds for the event engine: with --engine analytic every value is predicted (it can land on either
  // side of the event engine, so a bound of the one says nothing of the other).
  const bool analytic = o.engine == "analytic";
  if (!shard_text.empty()) {
    // Shard K of N: its candidates' best points, unranked, as a shard file (cli/plan_shard.hpp); sim merge ranks all.
    app::PlanShard shard;
    std::tie(shard.k, shard.n) = report::parse_shard(shard_text);
    shard.candidates = app::plan_candidates(workloads, hardware, strategies);
    const auto [first, last] = report::shard_range(shard.candidates, shard.k, shard.n);
    shard.first = first;
    shard.hardware = hardware;
    shard.goal = goal;
    for (const auto& h : hardware) shard.prices.emplace(h, price(h));
    shard.rows = app::plan_search(workloads, hardware, strategies, evaluate, jobs, screen, exhaustive || analytic,
                                  &shard.work, hw_args, first, last);
    app::write_plan_shard(out.stream(), shard);
    out.commit();
    std::cerr << "sim plan: shard " << shard.k << "/" << shard.n << ", candidates [" << first << ", " << last << ") of "
              << shard.candidates << ": " << shard.work.screened << " points screened, " << shard.work.predicted
              << " predicted, " << shard.work.pruned << " pruned by their bound\n";
    return 0;
  }
  const auto rows = app::plan(workloads, hardware, strategies, goal, evaluate, price, jobs, screen, exhaustive || analytic,
                              &work, hw_args);
  std::cerr << "sim plan: " << work.screened << " points screened, " << work.predicted << " predicted by the "
            << (analytic ? "analytic" : "event") << " engine, " << work.pruned << " pruned by their bound\n";
  app::write_plan(out.stream(), format, rows, goal);
  out.commit();
  return 0;
}

int gen_command(const CommonOptions& o, const std::string& output) {
  if (o.model.empty()) throw InputError("", 0, "--model", "sim gen needs --model FILE (a model description)");
  app::TraceSpec spec = trace_spec(o);
  auto source = app::open_trace(spec);
  report::OutputFile out(output, "-o", {o.model, spec.generation.routing_path});
  const std::size_t steps = trace::write_trace(out.stream(), *source);
  out.commit();
  std::cerr << "wrote " << output << ": " << source->header().tensors.size() << " tensors, " << steps << " steps, "
            << source->header().meta.at("parameters") << " parameters\n";
  return 0;
}

int list_policies() {
  for (const auto& p : strategy::presets()) {
    const strategy::StrategySpec s = strategy::preset_spec(p.name);
    std::printf("  %-14s %s\n  %-14s = --placement %s --memory %s --offload %s\n", p.name.c_str(), p.description.c_str(),
                "", s.placement.text().c_str(), s.memory.text().c_str(), s.offload.text().c_str());
  }
  report::check_stdout("standard output");
  return 0;
}

template <typename Family>
void list_family(const char* title, const Family& family) {
  std::printf("%s\n", title);
  for (const auto& p : family) {
    std::printf("  %-26s %s\n", p.name.c_str(), p.description.c_str());
    if (!p.options.empty()) std::printf("  %-26s options: %s\n", "", p.options.c_str());
  }
}

int list_parts() {
  list_family("placement rules (--placement NAME[:OPTION,...]):", strategy::placement_rules());
  list_family("memory kinds (--memory NAME[:OPTION,...]):", strategy::memory_kinds());
  list_family("offload paths (--offload NAME[:OPTION,...]):", strategy::offload_paths());
  list_family("platforms (--platform NAME[:OPTION,...]):", strategy::platforms());
  std::printf("runtimes (--runtime NAME|FILE): sim runtimes\n");
  report::check_stdout("standard output");
  return 0;
}

int list_runtimes() {
  for (const auto& r : runtime::list_runtimes())
    std::printf("  %-22s %s%s\n", r.name.c_str(), r.description.c_str(),
                r.name == runtime::kDefaultRuntime ? " (default)" : "");
  report::check_stdout("standard output");
  return 0;
}

int list_profiles() {
  for (const auto& p : hw::list_presets())
    std::printf("  %-22s %s%s\n", p.name.c_str(), p.description.c_str(),
                p.name == hw::kDefaultProfile ? " (default)" : "");
  report::check_stdout("standard output");
  return 0;
}

// `sim catalogue`: the parts --hw composes, with their prices.
int list_catalogue() {
  std::printf("GPUs (--hw [Nx]GPU[+HOST][+pcieG-xW][+nvlink|+PEER][+ramGIB]; calib/catalogue/README.md)\n");
  std::printf("  %-16s %-49s %-11s %10s %10s %8s %-8s %-18s %s\n", "id", "name", "segment", "memory", "bandwidth",
              "bf16", "pcie", "provenance", "launch price (USD)");
  for (const auto& g : hw::catalogue_gpus()) {
    char bw[32], bf16[32], pcie[16], price[32];
    std::snprintf(bw, sizeof bw, "%.0f GB/s", g.memory_bandwidth / 1e9);
    std::snprintf(bf16, sizeof bf16, "%.0f TF", g.bf16 / 1e12);
    std::snprintf(pcie, sizeof pcie, "%d.0 x%d", g.pcie_generation, g.pcie_width);
    std::snprintf(price, sizeof price, "%.0f", g.price ? g.price->usd : 0.0);
    std::printf("  %-16s %-49s %-11s %10s %10s %8s %-8s %-18s %s%s\n", g.id.c_str(), g.name.c_str(),
                g.segment.c_str(), units::format_bytes(g.memory).c_str(), bw, bf16, pcie, g.provenance.c_str(),
                g.price ? price : "-",
                g.nvlink.empty() ? "" : ("  nvlink: " + g.nvlink).c_str());
  }
  std::printf("hosts\n");
  for (const auto& [id, what] : hw::catalogue_hosts()) std::printf("  %-20s %s\n", id.c_str(), what.c_str());
  std::printf("host links (the slot; the link runs at the narrowest of card, CPU and slot)\n");
  for (const auto& [id, what] : hw::catalogue_host_links()) std::printf("  %-20s %s\n", id.c_str(), what.c_str());
  std::printf("peer links (two or more GPUs; '+nvlink' fits the card's own)\n");
  for (const auto& [id, what] : hw::catalogue_peer_links()) std::printf("  %-24s %s\n", id.c_str(), what.c_str());
  std::printf("presets as compositions\n");
  for (const auto& [name, composition] : hw::catalogue_presets())
    std::printf("  %-20s %s\n", name.c_str(), composition.c_str());
  report::check_stdout("standard output");
  return 0;
}

// Whether the command line's words ask for errors as JSON (docs/errors.md): --json after run, sweep, plan or train, or
// run's --config. For the errors found before the options are parsed (a grid's lists, the parser's own); once they
// are, the options say.
bool json_errors_asked(const std::vector<std::string>& args) {
  if (args.size() < 2) return false;
  const std::string& command = args[1];
  if (command != "run" && command != "sweep" && command != "plan" && command != "train") return false;
  for (std::size_t i = 2; i < args.size() && args[i] != "--"; ++i)
    if (args[i] == "--json" || (command == "run" && (args[i] == "--config" || args[i].rfind("--config=", 0) == 0)))
      return true;
  return false;
}

// The option a command-line parser's message starts with ("--batch: must be ...", "--model is required"), or "".
std::string parse_error_key(const std::string& message) {
  if (message.rfind("-", 0) != 0) return "";
  return message.substr(0, message.find_first_of(": "));
}

}  // namespace

int main(int argc, char** argv) {
  // `sim --trace T --policy P` means `sim run --trace T --policy P`.
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() > 1 && args[1].size() > 1 && args[1][0] == '-' && args[1] != "-h" && args[1] != "--help" &&
      args[1] != "--version")
    args.insert(args.begin() + 1, "run");
  // Errors: one line on standard error, and under --json (always under run --config) one object on standard output,
  // the same for every command (docs/errors.md). Until the options are parsed, the words say whether JSON is asked.
  bool json_errors = json_errors_asked(args);
  auto fail = [&](const char* kind, const std::string& what, int code, const InputError* input,
                  const CapacityError* capacity) {
    const std::string message = input ? what : bounded(what);  // an InputError's message is bounded already
    std::cerr << "error: " << message << "\n";
    if (json_errors) {
      nlohmann::ordered_json e = {{"kind", kind}, {"message", message}};
      if (input) e.update({{"file", input->file()}, {"line", input->line()}, {"key", input->key()}});
      if (capacity && !capacity->device().empty())
        e.update({{"device", capacity->device()},
                  {"needed_bytes", std::llround(capacity->needed())},
                  {"available_bytes", std::llround(capacity->available())}});
      // Written with dump_json: a message echoing a byte that is not UTF-8 must not throw here, in the handler.
      std::cout << dump_json(nlohmann::ordered_json{{"schema_version", report::kJsonSchemaVersion}, {"exit_code", code}, {"error", e}}, 2)
                << "\n";
    }
    return code;
  };
  // A sweep with lists (--ngl 10,20,30) is a grid: parsed here with each list's first value, every point
  // parsed again when it runs.
  app::Grid grid;
  if (args.size() > 1 && args[1] == "sweep") {
    try {
      grid = app::expand_grid(std::vector<std::string>(args.begin() + 2, args.end()));
    } catch (const InputError& e) {
      return fail("input", e.what(), 2, &e, nullptr);
    }
    std::copy(grid.points.front().args.begin(), grid.points.front().args.end(), args.begin() + 2);
  }

  CLI::App app{"tiersim: predicts the speed and memory of ML inference spread over GPU memory tiers\n"
               "exit codes: 0 done, 2 bad input (a file, line and key named), 3 the model does not fit (the device and\n"
               "bytes named), 1 internal error; with --json a failure prints {\"error\": {...}} on standard output"};
  bool show_version = false;
  app.add_flag("--version", show_version, "print the version and the commit it was built from");
  app.require_subcommand(0, 1);
  CommonOptions run_o, sweep_o, gen_o;
  bool json = false;
  std::string range, sweep_out, sweep_format, gen_out, timeline_path;
  // `-o md` would write a file named md in the default format: what a user means by it is --format md.
  const CLI::Validator not_a_format_name(
      [](std::string& value) -> std::string {
        for (const char* f : {"csv", "jsonl", "json", "md"})
          if (value == f)
            return "'" + value + "' is a format's name, not a file: write --format " + value +
                   " (and -o FILE for a file), or -o ./" + value + " for a file of that name";
        return "";
      },
      "FILE");
  std::size_t timeline_steps = 3;

  auto* run = app.add_subcommand("run", "predict one configuration (the default subcommand)");
  add_common_options(*run, run_o);
  add_alloc_conf_option(*run, run_o.alloc_conf);
  run->add_flag("--json", json, "print one JSON object instead of the summary (its \"inputs\" re-run it: --config)");
  bool image_job = false;
  std::string text_encoder_dtype;
  bool sampler_job = false;
  run->add_flag("--sampler-job", sampler_job,
                "Wan 2.2 A14B (two experts): its sampling as ComfyUI runs it, two KSamplerAdvanced nodes split at "
                "--switch-step and ComfyUI's loads and unloads between them: seconds per video, first and next "
                "(the text encoder and the VAE not included)");
  bool video_job = false;
  run->add_flag("--video-job", video_job,
                "Wan (2.1 14B / 1.3B text-to-video, 2.2 A14B): the video as ComfyUI runs it, its sampler node(s) and "
                "the VAE decode, with the umT5 text encoder before them (umt5-xxl.json and wan2.1-vae.json read beside "
                "the model's config) and ComfyUI's loads and unloads between them: seconds per video, first and next");
  run->add_flag("--image-job", image_job,
                "FLUX, Qwen-Image: the whole ComfyUI text-to-image job too (its text encoders and VAE read beside the "
                "model's config, ComfyUI's loads and unloads between them; with --reference, FLUX.1 Kontext's VAE "
                "encode of the reference image): seconds per image, first and next");
  run->add_option("--text-encoder-dtype", text_encoder_dtype,
                  "with --image-job: FLUX's T5-XXL weights, fp16 (t5xxl_fp16, the default) or fp8 (t5xxl_fp8_e4m3fn); "
                  "Qwen-Image's Qwen2.5-VL fp8_scaled (qwen_2.5_vl_7b_fp8_scaled, the default) or bf16 "
                  "(qwen_2.5_vl_7b); with --video-job umT5-XXL's (umt5_xxl_fp16, umt5_xxl_fp8_e4m3fn)");
  std::string config_path;
  run->add_option("--config", config_path,
                  "re-run a result: a JSON written by --json, whose \"inputs\" hold everything it was computed from "
                  "(prints JSON; no other inputs may be given)");
  run->add_option("--timeline", timeline_path, "write a Chrome trace (chrome://tracing, ui.perfetto.dev) of the first steps");
  run->add_option("--timeline-steps", timeline_steps, "steps the timeline covers")->capture_default_str()->check(number_in(1, 1000, "steps", true));

  auto* sweep = app.add_subcommand(
      "sweep", "a grid of predictions: options given lists (--ngl 10,20,30 --hw rtx4090,rtx5090) or ranges "
               "(--ngl 0:40:10) are its axes (--ngl --layers --prefetch --threads --ubatch --batch --prompt --decode "
               "--ctx-size --n-cpu-moe --offload-gb --hw --policy --runtime --dtype --host-memory --engine --offload-exec --donor "
               "--fit --model --trace); or, with --gb, the CSV of predictions against GB moved off the compute GPU");
  add_common_options(*sweep, sweep_o);
  sweep->add_option("--gb", range, "FROM:TO:STEP in GB (1e9 bytes) moved off the compute GPU (the offload sweep)");
  sweep->add_option("--format", sweep_format, "a grid's output: csv (RFC 4180, the default), jsonl or md");
  sweep->add_option("-o,--output", sweep_out, "output file (default: standard output)")->check(not_a_format_name);
  std::string sweep_shard;
  sweep->add_option("--shard", sweep_shard,
                    "K/N: predict only shard K of N of the grid (a contiguous part of its points, in order) and write "
                    "it as a shard file; sim merge joins the N files into the grid's output, the same bytes");
  bool sweep_json = false;
  sweep->add_flag("--json", sweep_json,
                  "an error as one JSON object on standard output, as for run --json (the output is --format's)");

  std::vector<std::string> merge_files;
  std::string merge_format, merge_out;
  auto* mergec = app.add_subcommand(
      "merge", "a grid's shard files (sim sweep --shard K/N, one per shard) joined into the grid's output, or a plan's "
               "(sim plan --shard K/N) ranked into the plan's: the bytes one sim sweep or sim plan writes");
  mergec->add_option("shards", merge_files, "the shard files, every shard of one grid or plan once, in any order")->required();
  mergec->add_option("--format", merge_format, "a grid's: csv (RFC 4180, the default), jsonl or md; a plan's: md (the default), csv or jsonl");
  mergec->add_option("-o,--output", merge_out, "output file (default: standard output)")->check(not_a_format_name);

  CommonOptions plan_o;
  std::string plan_hw, plan_strategies_text, plan_format = "md", plan_out;
  app::PlanGoal plan_goal;
  int plan_jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto* planc = app.add_subcommand(
      "plan", "which hardware and strategy meet a speed goal: every --hw machine (presets, catalogue compositions, or "
              "the words catalogue, consumer, workstation, datacenter) x strategy, each strategy's knob searched (the "
              "fastest number of layers on the GPU or amount offloaded that fits; llama.cpp's own --fit), ranked, with "
              "the price, the Pareto front of speed against GPU memory and price, and the sim run command of each");
  add_common_options(*planc, plan_o);
  planc->add_option("--strategies", plan_strategies_text,
                    "comma list of: resident, llamacpp, layers-cpu, layers-stream, distorch-cpu, distorch-gpu1, comfyui, "
                    "accelerate, pipeline, um (default: those that apply to the model's family)");
  planc->add_option("--min-tps", plan_goal.min_tps, "the goal: at least this many decode tokens/s")
      ->check(number_in(0, 1e9, "tokens/s", false));
  planc->add_option("--max-s-per-iteration", plan_goal.max_seconds_per_iteration,
                    "the goal for a diffusion model: at most this many seconds per iteration")
      ->check(number_in(0, 1e9, "seconds", false));
  std::vector<std::string> plan_prices;
  planc->add_flag("--cheapest", plan_goal.cheapest,
                  "rank the points that meet the goal by price, cheapest first (the catalogue's launch prices, or --price)");
  planc->add_option("--price", plan_prices,
                    "GPU=USD[,GPU=USD...]: a catalogue GPU's price in place of its launch price (what you would pay)");
  bool plan_exhaustive = false;
  std::vector<int> plan_counts;
  std::optional<double> plan_vram_margin, plan_host_ram;
  planc->add_option("--max-price", plan_goal.max_price, "the budget: at most this many US dollars for the GPUs")
      ->check(number_in(0, 1e9, "US dollars", false));
  planc->add_option("--vram-margin", plan_vram_margin,
                    "GiB of GPU memory left free beyond the profile's reserve (added to it: --set gpu.reserved)")
      ->check(number_in(0, 1e6, "GiB", false));
  planc->add_option("--host-ram", plan_host_ram, "GiB of host memory every machine has (--set host.memory)")
      ->check(number_in(1, 1e6, "GiB", false));
  planc->add_option("--count", plan_counts, "GPUs per machine for each bare catalogue GPU in --hw (comma list: 1,2)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  planc->add_flag("--exhaustive", plan_exhaustive,
                  "predict every value of a searched knob that fits with the event engine, without screening by the bound "
                  "(the same answer, slower: a check)");
  planc->add_option("--jobs", plan_jobs, "candidates predicted at once (threads; default: the machine's cores)")
      ->check(number_in(1, 1024, "threads", true));
  bool plan_train = false;
  std::optional<std::uint32_t> plan_train_seq;
  planc->add_flag("--train", plan_train,
                  "plan a fine-tune instead of inference: every machine x training set-up (--strategies names set-ups: "
                  "bf16-adamw, mixed-adamw, bf16-adamw8bit, bf16-adamw-cpu, lora-qv, lora-all), each through sim train, "
                  "--min-tps in training tokens/s");
  planc->add_option("--seq", plan_train_seq, "with --train: tokens per sequence (default 1024; --batch sequences a step)")
      ->check(number_in(1, 16777216, "tokens", true));
  planc->add_option("--format", plan_format, "md (default), csv (RFC 4180) or jsonl");
  std::string plan_shard;
  planc->add_option("--shard", plan_shard,
                    "K/N: search only shard K of N of the plan's candidates (workload x hardware x strategy, a contiguous "
                    "part in order) and write their best points as a shard file; sim merge ranks the N files into the "
                    "plan's output, the same bytes");
  planc->add_option("-o,--output", plan_out, "output file (default: standard output)")->check(not_a_format_name);
  bool plan_json = false;
  planc->add_flag("--json", plan_json,
                  "an error as one JSON object on standard output, as for run --json (the plan is --format's)");

  std::string train_model, train_hw = hw::kDefaultProfile, train_precision = "bf16", train_optimizer = "adamw";
  bool train_checkpointing = false, train_json_out = false;
  std::uint32_t train_batch = 1, train_seq = 1024;
  std::vector<std::string> train_sets;
  auto* trainc = app.add_subcommand(
      "train", "will one training step of a dense decoder fit the GPU, and what takes its memory (weights, optimizer "
               "state, gradients, activations, logits) at each moment of the step");
  trainc->add_option("--model", train_model, "model description (a dense decoder's HF config.json)")->required();
  trainc->add_option("--hw", train_hw,
                     "hardware: a preset, a profile file or a catalogue machine; a comma list (or catalogue, consumer, "
                     "workstation, datacenter) prints a table, the machines that fit first, cheapest first")
      ->capture_default_str();
  trainc->add_option("--set", train_sets, "override a hardware profile key, as for run");
  std::string train_runtime;
  trainc->add_option("--runtime", train_runtime,
                     std::string("the framework's host costs (default ") + app::kDefaultTrainingRuntime +
                         ": the runtime whose training costs are calibrated)");
  trainc->add_option("--precision", train_precision,
                     "bf16 (default), fp16, fp32, or fp32-autocast (fp32 weights, bf16 autocast)")->capture_default_str();
  trainc->add_option("--optimizer", train_optimizer,
                     "adamw (default), sgd, sgd-momentum, adamw8bit (bitsandbytes AdamW8bit: not validated on a GPU)")
      ->capture_default_str();
  trainc->add_flag("--checkpointing", train_checkpointing, "gradient checkpointing per decoder layer");
  trainc->add_option("--batch", train_batch, "sequences per step")->capture_default_str()->check(number_in(1, 65536, "sequences", true));
  trainc->add_option("--seq", train_seq, "tokens per sequence")->capture_default_str()->check(number_in(1, 16777216, "tokens", true));
  trainc->add_flag("--json", train_json_out,
                   "print one JSON object instead of the summary (a JSON line per machine for a list), and an error "
                   "as one JSON object, as for run --json");
  std::uint32_t train_lora = 0;
  std::string train_lora_targets = "q_proj,v_proj";
  trainc->add_option("--lora", train_lora,
                     "LoRA rank (peft: frozen weights, fp32 adapters A and B on the targeted projections; 0: full "
                     "fine-tuning)")
      ->check(number_in(0, 65536, "rank", true));
  trainc->add_option("--lora-targets", train_lora_targets,
                     "with --lora: the projections adapted, q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj or "
                     "all-linear (default q_proj,v_proj, peft's for Llama and Qwen2)")
      ->capture_default_str();
  std::string train_alloc_conf;
  add_alloc_conf_option(*trainc, train_alloc_conf);
  std::string train_offload = "none";
  trainc->add_option("--optimizer-offload", train_offload,
                     "the optimizer on the CPU as torchao's CPUOffloadOptimizer runs it: none, cpu (AdamW states and "
                     "update on the host), cpu-gradients (also offload_gradients=True: GPU gradients freed once copied)")
      ->capture_default_str();

  auto* gen = app.add_subcommand("gen", "write the trace of a model description");
  gen->add_option("--model", gen_o.model, "model description (HF config.json fields)")->required();
  add_generation_options(*gen, gen_o);
  gen->add_option("-o,--output", gen_out, "trace file to write")->required();

  auto* pol = app.add_subcommand("policies", "list the preset strategies and the parts each is made of");
  auto* parts = app.add_subcommand("parts", "list the strategy parts: placement rules, memory kinds, offload paths, platforms");
  auto* prof = app.add_subcommand("profiles", "list the embedded hardware presets; 'profiles show NAME' prints one as YAML");
  std::vector<std::string> prof_args;
  std::vector<std::string> prof_sets;
  prof->add_option("action", prof_args, "show NAME|FILE: print the profile as the loader read it (YAML)");
  prof->add_option("--set", prof_sets, "override a key before printing, as for run");
  auto* rts = app.add_subcommand("runtimes", "list the embedded runtime profiles (framework host costs)");
  auto* models = app.add_subcommand("models", "list the model configs that ship (--model NAME): each one's model_type or "
                                              "diffusers class and its parameters; 'models DIR' checks a Hugging "
                                              "Face snapshot's safetensors headers against its config.json");
  std::string models_dir;
  models->add_option("folder", models_dir, "a snapshot folder: config.json and its *.safetensors headers");
  auto* cat = app.add_subcommand("catalogue", "list the hardware catalogue's parts (GPUs with launch prices, hosts, links) "
                                              "that --hw composes: --hw 2xrtx3090+nvlink");

  std::vector<const char*> cargs;
  for (const auto& a : args) cargs.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string message = std::strlen(e.what()) ? bounded(e.what()) : "bad command line";
    const InputError input("", 0, parse_error_key(message), message);  // the option, for the JSON error's key
    fail("input", message, 2, &input, nullptr);
    std::cerr << "run 'sim --help' or 'sim run --help' for usage\n";
    return 2;
  }
  if (show_version) {
    std::cout << "tiersim " << report::version() << " (" << report::git_sha() << ")\n";
    return 0;
  }
  if (app.get_subcommands().empty()) {
    std::cerr << "error: give a subcommand (run, sweep, merge, plan, train, gen, policies, parts, profiles, runtimes, catalogue, models)\n"
              << "run 'sim --help' for usage\n";
    return 2;
  }
  json_errors = (*run && (json || !config_path.empty())) || (*sweep && sweep_json) || (*planc && plan_json) ||
                (*trainc && train_json_out);
  try {
    if (*run && !config_path.empty()) {
      // Only the result's inputs: a flag would silently disagree with them.
      for (const CLI::Option* opt : run->get_options())
        if (opt->count() > 0 && opt->get_name() != "--config" && opt->get_name() != "--json" &&
            opt->get_name() != "--timeline" && opt->get_name() != "--timeline-steps" && opt->get_name() != "--help")
          throw InputError("", 0, opt->get_name(), "cannot be combined with --config (the config holds every input)");
      return run_command(app::inputs_from_config(config_path), true, timeline_path, timeline_steps, config_path);
    }
    if (*run) {
      app::RunInputs in = run_inputs(run_o);
      if (image_job || video_job) {
        // The family's published text encoder checkpoints, the first the default.
        const std::vector<std::string> allowed = app::job_text_encoder_dtypes(in.trace.model_path);
        if (!text_encoder_dtype.empty() &&
            std::find(allowed.begin(), allowed.end(), text_encoder_dtype) == allowed.end())
          throw InputError("", 0, "--text-encoder-dtype",
                           "must be " + allowed[0] + " or " + allowed[1] + ", not '" + text_encoder_dtype + "'");
        (image_job ? in.image_job : in.video_job) =
            app::ImageJobOptions{text_encoder_dtype.empty() ? allowed[0] : text_encoder_dtype};
      } else if (!text_encoder_dtype.empty()) {
        throw InputError("", 0, "--text-encoder-dtype", "goes with --image-job or --video-job");
      }
      if (sampler_job && video_job)
        throw InputError("", 0, "--video-job", "includes the sampler nodes of --sampler-job: give one of the two");
      if (image_job && video_job)
        throw InputError("", 0, "--video-job", "is a Wan video's job, --image-job a FLUX or Qwen-Image image's: give one of the two");
      in.sampler_job = sampler_job;
      return run_command(in, json, timeline_path, timeline_steps);
    }
    if (*sweep && (!grid.axes.empty() || !sweep_format.empty() || !sweep_shard.empty())) {
      if (!range.empty())
        throw InputError("", 0, "--gb", "is the offload sweep; in a grid give --offload-gb FROM:TO:STEP as an axis");
      return grid_command(grid, sweep_format, sweep_out, sweep_shard);
    }
    if (*mergec) return merge_command(merge_files, merge_format, merge_out);
    if (*sweep && range.empty())
      throw InputError("", 0, "--gb", "give --gb FROM:TO:STEP (the offload sweep), or lists to make a grid (--ngl 10,20,30)");
    if (*sweep) return sweep_command(sweep_o, range, sweep_out);
    if (*planc) {
      std::vector<std::string> raw;
      bool after = false;
      for (std::size_t i = 1; i < args.size(); ++i) {
        if (after) raw.push_back(args[i]);
        if (!after && args[i] == "plan") after = true;
      }
      if (planc->get_option("--hw")->count() > 0) plan_hw = plan_o.hw;
      if (!plan_shard.empty() && planc->get_option("--format")->count() > 0)
        throw InputError("", 0, "--format", "a shard is written as tiersim's shard file: give --format to sim merge, "
                                            "which ranks the shards into the plan's output");
      return plan_command(raw, plan_o, plan_hw, plan_strategies_text, plan_goal, plan_jobs, plan_format, plan_out,
                          plan_prices, plan_exhaustive, plan_counts, plan_vram_margin, plan_host_ram, plan_train,
                          plan_train_seq, plan_shard);
    }
    if (*trainc) {
      model::TrainingOptions t;
      try {
        t.precision = model::parse_train_precision(train_precision);
      } catch (const std::invalid_argument& e) {
        throw InputError("", 0, "--precision", e.what());
      }
      try {
        t.optimizer = model::parse_train_optimizer(train_optimizer);
      } catch (const std::invalid_argument& e) {
        throw InputError("", 0, "--optimizer", e.what());
      }
      t.checkpointing = train_checkpointing;
      try {
        t.offload = model::parse_optimizer_offload(train_offload);
      } catch (const std::invalid_argument& e) {
        throw InputError("", 0, "--optimizer-offload", e.what());
      }
      if (train_lora > 0) {
        try {
          t.lora.targets = model::parse_lora_targets(train_lora_targets);
        } catch (const std::invalid_argument& e) {
          throw InputError("", 0, "--lora-targets", e.what());
        }
        t.lora.rank = train_lora;
        if (t.precision != model::TrainPrecision::Bf16 && t.precision != model::TrainPrecision::Fp16)
          throw InputError("", 0, "--precision", "LoRA is modelled over bf16 or fp16 weights (peft's fp32 adapters on a "
                                                 "half-precision model)");
      }
      t.batch = train_batch;
      t.seq = train_seq;
      app::check_alloc_conf(train_alloc_conf);
      // One machine: the full report. A list (commas, or the catalogue's words): a table ranked by price among
      // the machines the step fits (one GPU each: data parallelism across GPUs is not modelled).
      std::vector<std::string> machines;
      for (std::size_t start = 0; start <= train_hw.size();) {
        const std::size_t comma = train_hw.find(',', start);
        const std::string item = train_hw.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty()) machines.push_back(item);
        start = comma == std::string::npos ? train_hw.size() + 1 : comma + 1;
      }
      machines = expand_hardware(machines, {});
      std::vector<app::TrainReport> reports;
      for (const auto& name : machines) {
        CommonOptions machine;
        machine.hw = name;
        machine.sets = train_sets;
        machine.runtime = train_runtime.empty() ? app::kDefaultTrainingRuntime : train_runtime;
        app::RunInputs m;
        resolve_machine(machine, m);
        reports.push_back(app::train_report(train_model, m.setup(), t, train_alloc_conf));
        reports.back().hw_name = name;
      }
      if (reports.empty()) throw InputError("", 0, "--hw", "names no machine");
      if (reports.size() == 1) {
        if (train_json_out) std::cout << dump_json(app::train_json(reports.front()), 2) << "\n";
        else app::write_train_console(std::cout, reports.front());
        report::check_stdout("standard output");
        return reports.front().fits() ? 0 : 3;
      }
      std::vector<std::pair<std::optional<hw::Price>, const app::TrainReport*>> ranked;
      for (const auto& r : reports) ranked.emplace_back(hw::price_of(r.hw_name), &r);
      std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
        if (a.second->fits() != b.second->fits()) return a.second->fits();
        const double pa = a.first ? a.first->usd : HUGE_VAL, pb = b.first ? b.first->usd : HUGE_VAL;
        if (pa != pb) return pa < pb;
        return a.second->step_seconds < b.second->step_seconds;
      });
      if (train_json_out) {
        for (const auto& [price, r] : ranked) {
          auto j = app::train_json(*r);
          if (price) j["price_usd"] = price->usd;
          std::cout << dump_json(j) << "\n";
        }
      } else {
        std::cout << "| hw | fits | peak reserved (GiB) | step time (ms) | tokens/s | price (USD) | out of memory at |\n"
                  << "|---|---|---|---|---|---|---|\n";
        for (const auto& [price, r] : ranked) {
          char reserved[32] = "", step[32] = "", tps[32] = "", usd[32] = "";
          if (r->fits()) {
            std::snprintf(reserved, sizeof reserved, "%.2f", r->allocator_peak_reserved / 1073741824.0);
            std::snprintf(step, sizeof step, "%.1f", r->step_seconds * 1e3);
            std::snprintf(tps, sizeof tps, "%.0f", t.batch * double(t.seq) / r->step_seconds);
          }
          if (price) std::snprintf(usd, sizeof usd, "%.0f", price->usd);
          const std::string oom = r->fits() ? ""
                                  : r->oom ? r->oom->phase + " (step " + std::to_string(r->oom->step) + "): " + r->oom->tensor
                                           : "host memory (offloaded optimizer)";
          std::cout << "| " << r->hw_name << " | " << (r->fits() ? "yes" : "no") << " | " << reserved << " | " << step
                    << " | " << tps << " | " << usd << " | " << oom << " |\n";
        }
      }
      report::check_stdout("standard output");
      return 0;
    }
    if (*gen) return gen_command(gen_o, gen_out);
    if (*pol) return list_policies();
    if (*cat) return list_catalogue();
    if (*models) return models_dir.empty() ? app::list_models() : app::check_snapshot(models_dir);
    if (*parts) return list_parts();
    if (*prof && prof_args.empty()) {
      if (!prof_sets.empty()) throw InputError("", 0, "--set", "is for 'profiles show NAME'");
      return list_profiles();
    }
    if (*prof) {
      if (prof_args.size() != 2 || prof_args[0] != "show")
        throw InputError("", 0, "profiles", "expected 'sim profiles' or 'sim profiles show NAME|FILE'");
      CommonOptions o;
      o.hw = prof_args[1];
      o.sets = prof_sets;
      app::RunInputs in;
      resolve_machine(o, in);
      std::cout << "# " << in.hw.origin << ", as tiersim reads it (quantities in base units)\n"
                << config::json_to_yaml(config::profile_to_json(in.hw));
      report::check_stdout("standard output");
      return 0;
    }
    if (*rts) return list_runtimes();
  } catch (const InputError& e) {
    return fail("input", e.what(), 2, &e, nullptr);
  } catch (const CapacityError& e) {
    return fail("capacity", e.what(), 3, nullptr, &e);
  } catch (const std::invalid_argument& e) {
    return fail("input", e.what(), 2, nullptr, nullptr);
  } catch (const std::exception& e) {
    return fail("internal", std::string("internal error (please report it): ") + e.what(), 1, nullptr, nullptr);
  }
  return 2;
}
