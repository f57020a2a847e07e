#pragma once
// The in-memory form of a trace (format: traces/FORMAT.md). A trace is a header (tensors and
// metadata, small) followed by steps (prefill, decode tokens, diffusion iterations), each an ordered
// list of ops. Steps are pulled one at a time through StepSource so a multi-GB trace is never held whole.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tiersim::trace {

// The newest format this build reads and writes. Version 2 adds byte ranges (`ID@OFFSET:BYTES`); a trace that
// uses none is written as version 1, which every earlier build reads.
inline constexpr int kFormatVersion = 2;

// Transient: an activation allocated when an op of a step first writes it and released after the last op that uses it
// (format `tmp`; trace/transient_lifetimes.hpp derives when); Activation (`act`): a workspace alive the whole run.
enum class TensorKind { Weight, KvCache, Activation, Transient };
inline bool is_activation(TensorKind k) { return k == TensorKind::Activation || k == TensorKind::Transient; }
// Router: a mixture of experts' routing decision (the router's probabilities and their top-k), whose output says which
// experts the layer's next ops read.
enum class OpKind { Gemm, Gemv, Attention, Norm, Elementwise, Embedding, Rope, Sample, Other, Router };
enum class StepKind { Prefill, Decode, Iteration };

struct Tensor {
  std::uint32_t id = 0;
  TensorKind kind = TensorKind::Weight;
  std::uint64_t bytes = 0;
  // Execution-order group the tensor belongs to: -1 before the first transformer layer (embeddings),
  // 0..n-1 the layers, n after them (final norm, LM head). Offload and prefetch work on these groups.
  std::int32_t layer = 0;
  std::string name;
  // The model component the tensor belongs to, as a dotted path (format: `component PATH IDS` lines): the job's part
  // ("text_encoder", "dit", "vae") then, for a block's weights, the block ("dit.double_blocks.3",
  // "vae.decoder.upsamples.3"). Empty: none given.
  std::string component;
};

struct TensorAccess {
  std::uint32_t tensor = 0;
  std::uint64_t bytes = 0;  // bytes the op actually touches (an embedding lookup reads a few rows)
  // Where those bytes start in the tensor (format version 2): one expert's slice of a tensor that holds every
  // expert of a layer (transformers 5's gate_up_proj, [experts, 2 x intermediate, hidden]). 0: its start.
  std::uint64_t offset = 0;
};

// A convolution as cuDNN runs it for PyTorch's conv2d/conv3d (format `conv=KERNEL:IN:OUT`, KERNEL `3x3x3` or `3x3`):
// the hardware profile's measured rate for that kernel and channel pair (gpu.convolution_efficiency) prices the op.
struct ConvShape {
  std::uint32_t kernel[3] = {0, 0, 0};  // frames x height x width; frames 0 for a 2D convolution
  std::uint32_t in = 0, out = 0;        // channels; 0: not a convolution
  bool empty() const { return in == 0; }
  bool two_d() const { return kernel[0] == 0; }
  std::uint64_t volume() const { return std::uint64_t{two_d() ? 1 : kernel[0]} * kernel[1] * kernel[2]; }
  // "3x3x3" or "3x3"
  std::string kernel_name() const;
  // The output positions (frames x pixels, batch included) an op of `flops` computes: flops / (2 x volume x in x out).
  double positions(std::uint64_t flops) const;
};
bool parse_conv_kernel(std::string_view s, ConvShape& out);

struct Op {
  OpKind kind = OpKind::Other;
  std::int32_t layer = 0;
  std::uint64_t flops = 0;
  std::vector<TensorAccess> reads;
  std::vector<TensorAccess> writes;
  std::uint32_t launches = 1;   // kernel launches the framework issues for this op
  double gpu_seconds = -1.0;    // measured GPU time (captured traces); < 0 when absent
  double host_seconds = -1.0;   // measured host time before issue (captured traces); < 0 when absent
  std::string dtype;            // compute dtype; empty = the trace's default
  // Times the host waits for the GPU's queued work inside the op, after issuing its kernels: a blocking copy of a
  // few bytes (ComfyUI-GGUF's dequantize builds its shift table with torch.tensor(..., device=)). 0: none.
  std::uint32_t syncs = 0;
  // Thread blocks of the framework's kernel when that grid, not the GPU, bounds how fast its bytes stream: PyTorch's
  // GroupNorm statistics (RowwiseMomentsCUDAKernel) run one block per (sample, group). The runtime's measured
  // rate of one such block (gpu_block_reduction) times this caps the op's memory rate. 0: the kernel fills the GPU.
  std::uint32_t blocks = 0;
  // The output features of a matrix product (its weight's rows), where a runtime prices the framework's prompt-sized
  // kernel by its shape (llama.cpp's MMQ: gpu_gemm_rows). 0: not given.
  std::uint32_t rows = 0;
  // The token rows the op runs on where fewer than its step's (llama.cpp's last layer after attention: only the rows
  // whose logits are output, inp_out_ids). 0: the step's. Frameworks decide per op by it (ggml's op offload).
  std::uint32_t tokens = 0;
  // An attention op over every key, no mask (a diffusion transformer's SDPA): priced at the profile's measured rate for
  // such kernels (gpu.attention_efficiency) where it has one. Format: `mask=none`.
  bool unmasked = false;
  // Transient tensors the op does not access that stay allocated through it: a value the framework still holds a
  // reference to (a Python local until its function returns). Format: `keep=ID,ID`.
  std::vector<std::uint32_t> keeps;
  // Bytes the op's kernels read beyond the accesses it lists: what its own earlier kernels wrote (an op of several
  // kernels: a modulated norm's addcmul reads its LayerNorm's output), and operands broadcast across its rows, read
  // again for every row or head (a DiT's modulation gate per token, the rotary table per head). Memory traffic, not
  // part of any tensor's size or lifetime. Format: `reread=BYTES`.
  std::uint64_t reread_bytes = 0;
  // A convolution's kernel and channels (format `conv=3x3x3:96:96`); empty for every other op.
  ConvShape conv;
};

struct Step {
  StepKind kind = StepKind::Decode;
  std::uint32_t tokens = 0;  // tokens processed in this step (batch x new tokens)
  std::vector<Op> ops;
};

struct Header {
  int version = 1;  // 2 when some access names a byte range (the writer refuses one in a version 1 trace)
  std::map<std::string, std::string> meta;  // ordered, so writing is deterministic
  std::vector<Tensor> tensors;              // tensors[i].id == i
  std::string default_dtype() const;
  std::uint32_t batch() const;
};

// A source of steps: the streaming file reader or the generator.
class StepSource {
 public:
  virtual ~StepSource() = default;
  virtual const Header& header() const = 0;
  // Fills `out` with the next step and returns true, or returns false at the end of the trace.
  virtual bool next(Step& out) = 0;
  // The next step without a copy where the source holds it (a trace kept in memory), else filled into `scratch`;
  // nullptr at the end. Valid until the next call.
  virtual const Step* next_view(Step& scratch) { return next(scratch) ? &scratch : nullptr; }
  // The allocations a framework makes for a tensor when it loads the model: a module's parameters apart (a Linear's
  // matrix and its bias), where the source knows them (a generator); else the tensor whole (a trace file).
  virtual std::vector<std::uint64_t> parameter_bytes(std::uint32_t tensor) const { return {header().tensors[tensor].bytes}; }
};

const char* to_string(TensorKind k);
const char* to_string(OpKind k);
const char* to_string(StepKind k);
bool parse_tensor_kind(std::string_view s, TensorKind& out);
bool parse_op_kind(std::string_view s, OpKind& out);
bool parse_step_kind(std::string_view s, StepKind& out);

// Sets every tensor's component under `part` ("dit", "vae", "text_encoder"): a weight's is the part and its name up to
// the first numeric segment (a block: "double_blocks.3.img_attn.qkv" -> "dit.double_blocks.3"), or the part alone where
// the name has none; any other tensor's the part.
void assign_components(Header& header, const std::string& part);
// Whether `path` is a component path the format takes: dotted segments of letters, digits, '_' and '-', 1-256 chars.
bool valid_component(std::string_view path);

// Appends a tensor to a header (ids in order: tensors[i].id == i) and returns its id.
std::uint32_t append_tensor(Header& header, TensorKind kind, std::uint64_t bytes, std::int32_t layer, std::string name);

// Appends an op to a step: what every generator writes (the optional fields keep their defaults).
Op& append_op(Step& step, OpKind kind, std::int32_t layer, std::uint64_t flops, std::vector<TensorAccess> reads,
                     std::vector<TensorAccess> writes, std::uint32_t launches = 1);

// Bytes an op moves through the memory of the device that runs it (reads + writes).
std::uint64_t op_bytes(const Op& op);

}  // namespace tiersim::trace
