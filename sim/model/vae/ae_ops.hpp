#pragma once
// The blocks of ComfyUI's AutoencoderKL (comfy/ldm/modules/diffusionmodules/model.py at a125cd84) as PyTorch runs them
// on one GPU, appended to a step: what the VAE's decoder (vae_decoder_trace_generator) and encoder
// (vae_encoder_trace_generator) are made of. AeWeights declares a VAE's weights in the order its forward reads them;
// AeOps takes the next of them (convolutions and GroupNorms apart) at each block; activations are accesses to one
// workspace tensor.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.hpp"
#include "model/vae/vae_config.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

// What an encode and a decode of `images` images of width x height pixels in `dtype` share: the checks (sides that are
// multiples of the VAE's downscale up to 16384, InputError naming `size_key`; 1 to 4096 images, --batch; bf16, fp16 or
// fp32, --vae-dtype; `verb` "encode" or "decode" in the messages) and the header's meta of the model and the job.
void begin_ae_header(trace::Header& header, const VaeConfig& model, std::uint64_t width, std::uint64_t height,
                     std::uint64_t images, WeightDtype dtype, const std::string& size_key, const std::string& verb);

// The weights of the AutoencoderKL's blocks appended to a header in the order the forward reads them, named as
// ComfyUI's state dict names them, with the lists of convolutions and GroupNorms AeOps takes them from.
class AeWeights {
 public:
  AeWeights(trace::Header& header, std::uint64_t dtype_bytes) : header_(header), a_(dtype_bytes) {}

  // A k x k convolution's weight and bias.
  void conv(std::int32_t g, const std::string& name, std::uint64_t in, std::uint64_t out, std::uint64_t k);
  // A GroupNorm's weight and bias over c channels.
  void norm(std::int32_t g, const std::string& name, std::uint64_t c);
  // ResnetBlock under `prefix`: norm1, conv1, norm2, conv2 (3x3) and a 1x1 nin_shortcut where the channels change.
  void resnet(std::int32_t g, const std::string& prefix, std::uint64_t in, std::uint64_t out);
  // AttnBlock under `prefix`: its norm, then q, k, v and proj_out (1x1).
  void attention(std::int32_t g, const std::string& prefix, std::uint64_t c);

  std::vector<std::uint32_t> convs;  // in the order the forward runs them
  std::vector<std::uint32_t> norms;  // GroupNorms, in order

 private:
  trace::Header& header_;
  std::uint64_t a_;
};

class AeOps {
 public:
  // `act`: the workspace tensor; `dtype_bytes`: the VAE's dtype; `images`: the batch; `groups`: GroupNorm's groups.
  AeOps(trace::Step& out, const trace::Header& header, std::uint32_t act, std::uint64_t dtype_bytes,
        std::uint64_t images, std::uint64_t groups, const std::vector<std::uint32_t>& convs,
        const std::vector<std::uint32_t>& norms);

  // A convolution as PyTorch runs it on cuDNN (aten/src/ATen/native/Convolution.cpp _convolution, ConvBackend::Cudnn):
  // cudnn_convolution, an implicit GEMM of 2 k^2 in out FLOPs per output pixel, then the bias added by a separate
  // output.add_(bias) over the whole output. cuDNN runs a 3x3 convolution of these NCHW bf16 tensors with NHWC
  // kernels: it transposes the input and the filter to NHWC first and the output back after (nchwToNhwcKernel twice,
  // nhwcToNchwKernel once per 3x3 convolution in the profile of results/validation/comfy_stages, cuDNN 9.19 on an
  // H100; assumed on other GPUs); the 1x1 convolutions ran as plain GEMMs. `pixels`: its output's; `in_pixels` its
  // input's where they differ (a strided convolution reads more than it writes).
  void conv(std::int32_t g, std::uint64_t in, std::uint64_t o, std::uint64_t k, std::uint64_t pixels,
            std::uint64_t in_pixels = 0);
  // GroupNorm as PyTorch's CUDA kernels run it (aten/src/ATen/native/cuda/group_norm_kernel.cu,
  // GroupNormKernelImplInternal): RowwiseMomentsCUDAKernel reads x with one thread block per (image, group), so
  // B x groups blocks (32 for one image) stream the whole tensor; then ComputeFusedParamsCUDAKernel (B x C scales)
  // and the elementwise kernel that applies them.
  void group_norm(std::int32_t g, std::uint64_t c, std::uint64_t pixels);
  // GroupNorm and ResnetBlock's SiLU in place.
  void norm_silu(std::int32_t g, std::uint64_t c, std::uint64_t pixels);
  // ResnetBlock: norm1, SiLU, conv1, norm2, SiLU, conv2 (3x3), a 1x1 nin_shortcut where the channels change, x + h.
  void resnet(std::int32_t g, std::uint64_t in, std::uint64_t o, std::uint64_t pixels);
  // AttnBlock: GroupNorm, q, k, v (1x1), each made (B, 1, HW, C) contiguous, SDPA with one head of C over the
  // `pixels` of each image, the output transposed back, proj_out (1x1), the residual sum.
  void attention(std::int32_t g, std::uint64_t c, std::uint64_t pixels);
  // nonlinearity(): SiLU out of place.
  void silu(std::int32_t g, std::uint64_t c, std::uint64_t pixels);
  // An elementwise pass that reads `read` and writes `written` elements with `launches` kernels.
  void elementwise(std::int32_t g, std::uint64_t flops, std::uint64_t read, std::uint64_t written, std::uint32_t launches);

 private:
  trace::TensorAccess act(std::uint64_t elems) const { return {act_, elems * a_}; }
  void add(trace::OpKind kind, std::int32_t g, std::uint64_t flops, std::vector<trace::TensorAccess> reads,
           std::vector<trace::TensorAccess> writes, std::uint32_t launches);

  trace::Step& out_;
  const trace::Header& header_;
  std::uint32_t act_;
  std::uint64_t a_, images_, groups_;
  const std::vector<std::uint32_t>& convs_;
  const std::vector<std::uint32_t>& norms_;
  std::size_t ci_ = 0, ni_ = 0;
};

}  // namespace tiersim::model
