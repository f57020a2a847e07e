#include <gtest/gtest.h>

#include <sstream>

#include "core/error.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "trace/trace_reader.hpp"
#include "trace/trace_writer.hpp"

namespace tiersim::trace {
namespace {

std::unique_ptr<TraceReader> reader(const std::string& text) {
  return std::make_unique<TraceReader>(std::make_unique<std::istringstream>(text), "t.trace");
}

const char* kGood =
    "tiersim-trace 1\n"
    "# a comment\n"
    "meta model toy\n"
    "meta batch 2\n"
    "tensor 0 weight 1000 0 w0\n"
    "tensor 1 kv 500 0 kv0\n"
    "step prefill tokens=8\n"
    "op gemm layer=0 flops=16000 read=0 write=1:100 launches=2 rows=50 tokens=4 conv=3x3x3:96:48\n"
    "step decode tokens=2\n"
    "op attention layer=0 read=1:250 gpu_us=12.5 host_us=3 dtype=fp16 mask=none\n"
    "op elementwise layer=0 read=0 write=1:20 launches=20 dtype=q4_k syncs=1\n"
    "op norm layer=0 read=1:64 blocks=32 launches=0\n"
    "end\n";

TEST(TraceReader, ReadsHeaderAndStepsOneAtATime) {
  auto r = reader(kGood);
  EXPECT_EQ(r->header().tensors.size(), 2u);
  EXPECT_EQ(r->header().batch(), 2u);
  Step s;
  ASSERT_TRUE(r->next(s));
  EXPECT_EQ(s.kind, StepKind::Prefill);
  EXPECT_EQ(s.tokens, 8u);
  ASSERT_EQ(s.ops.size(), 1u);
  EXPECT_EQ(s.ops[0].reads[0].bytes, 1000u);  // whole tensor when no size is given
  EXPECT_EQ(s.ops[0].writes[0].bytes, 100u);
  EXPECT_EQ(s.ops[0].launches, 2u);
  EXPECT_EQ(s.ops[0].rows, 50u);  // the weight's output rows (llama.cpp's MMQ is priced by them)
  EXPECT_EQ(s.ops[0].tokens, 4u);  // fewer rows than its step's 8
  EXPECT_EQ(s.ops[0].conv.kernel_name(), "3x3x3");  // a cuDNN convolution, priced by its kernel and channels
  EXPECT_EQ(s.ops[0].conv.in, 96u);
  EXPECT_EQ(s.ops[0].conv.out, 48u);
  EXPECT_DOUBLE_EQ(s.ops[0].conv.positions(16000), 16000.0 / (2 * 27 * 96 * 48));
  ASSERT_TRUE(r->next(s));
  EXPECT_EQ(s.kind, StepKind::Decode);
  ASSERT_EQ(s.ops.size(), 3u);
  EXPECT_DOUBLE_EQ(s.ops[0].gpu_seconds, 12.5e-6);
  EXPECT_DOUBLE_EQ(s.ops[0].host_seconds, 3e-6);
  EXPECT_EQ(s.ops[0].dtype, "fp16");
  EXPECT_EQ(s.ops[0].syncs, 0u);
  EXPECT_TRUE(s.ops[0].unmasked);   // attention over every key
  EXPECT_FALSE(s.ops[1].unmasked);
  EXPECT_EQ(s.ops[1].syncs, 1u);  // ComfyUI-GGUF's dequantize waits for the GPU once
  EXPECT_EQ(s.ops[1].dtype, "q4_k");
  EXPECT_EQ(s.ops[1].blocks, 0u);
  EXPECT_EQ(s.ops[2].blocks, 32u);  // PyTorch's GroupNorm statistics: one block per sample and group
  EXPECT_EQ(s.ops[2].launches, 0u);  // in the kernel of the op before it
  EXPECT_TRUE(s.ops[2].conv.empty());
  EXPECT_FALSE(r->next(s));
  EXPECT_FALSE(r->next(s));
}

// Components: `component PATH IDS` lines after the tensors give each its model part; the writer writes them back as
// runs, in the order of each component's first tensor.
TEST(TraceReader, ComponentsNameEachTensorsPart) {
  const std::string text =
      "tiersim-trace 1\n"
      "tensor 0 weight 10 0 a\ntensor 1 weight 10 0 b\ntensor 2 weight 10 0 c\ntensor 3 weight 10 0 d\n"
      "component dit.blocks.0 0-1,3\ncomponent vae 2\n"
      "step decode tokens=1\nop gemv layer=0 read=0\nend\n";
  auto r = reader(text);
  EXPECT_EQ(r->header().tensors[0].component, "dit.blocks.0");
  EXPECT_EQ(r->header().tensors[1].component, "dit.blocks.0");
  EXPECT_EQ(r->header().tensors[2].component, "vae");
  EXPECT_EQ(r->header().tensors[3].component, "dit.blocks.0");
  std::ostringstream out;
  write_trace(out, *r);
  EXPECT_NE(out.str().find("component dit.blocks.0 0-1,3\ncomponent vae 2\n"), std::string::npos) << out.str();
  Header h;
  for (const char* n : {"double_blocks.3.img_attn.qkv", "img_in", "decoder.up.10.x"}) append_tensor(h, TensorKind::Weight, 1, 0, n);
  append_tensor(h, TensorKind::Transient, 1, 0, "blocks.1.value");
  assign_components(h, "dit");
  EXPECT_EQ(h.tensors[0].component, "dit.double_blocks.3");
  EXPECT_EQ(h.tensors[1].component, "dit");
  EXPECT_EQ(h.tensors[2].component, "dit.decoder.up.10");
  EXPECT_EQ(h.tensors[3].component, "dit");  // not a weight: the part alone
}

// Asserts that reading `text` fails at `line` naming `key`.
void expect_error(const std::string& text, std::size_t line, const std::string& key) {
  try {
    auto r = reader(text);
    Step s;
    while (r->next(s)) {
    }
    FAIL() << "no error for:\n" << text;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "t.trace");
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_EQ(e.key(), key) << e.what();
  }
}

TEST(TraceReader, RejectsMalformedInputWithFileLineAndKey) {
  const std::string head = "tiersim-trace 1\ntensor 0 weight 1000 0 w0\n";
  expect_error("", 0, "");
  expect_error("not-a-trace 1\n", 1, "");
  expect_error("tiersim-trace 3\n", 1, "version");
  expect_error("tiersim-trace 0\n", 1, "version");
  expect_error("tiersim-trace 1\ntensor 1 weight 10 0 w\nend\n", 2, "tensor");
  expect_error("tiersim-trace 1\ntensor 0 blob 10 0 w\nend\n", 2, "tensor");
  expect_error("tiersim-trace 1\nmeta batch zero\nend\n", 2, "batch");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 read=7\nend\n", 4, "read");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 read=0:2000\nend\n", 4, "read");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 colour=red\nend\n", 4, "colour");
  expect_error(head + "step decode tokens=1\nop gemv read=0\nend\n", 4, "layer");
  expect_error(head + "step decode tokens=1\nop warp layer=0\nend\n", 4, "op");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 gpu_us=-1\nend\n", 4, "gpu_us");
  expect_error(head + "step sideways tokens=1\nop gemv layer=0\nend\n", 3, "step");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 syncs=1001\nend\n", 4, "syncs");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 syncs=-1\nend\n", 4, "syncs");
  expect_error(head + "step decode tokens=1\nop norm layer=0 blocks=0\nend\n", 4, "blocks");
  expect_error(head + "step decode tokens=1\nop attention layer=0 mask=causal\nend\n", 4, "mask");
  expect_error(head + "step decode tokens=1\nop gemm layer=0 mask=none\nend\n", 4, "mask");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 launches=-1\nend\n", 4, "launches");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 launches=1000001\nend\n", 4, "launches");
  expect_error(head + "step decode tokens=1\nop norm layer=0 blocks=2147483648\nend\n", 4, "blocks");
  expect_error(head + "step prefill tokens=8\nop gemm layer=0 rows=0\nend\n", 4, "rows");
  expect_error(head + "step prefill tokens=8\nop gemm layer=0 rows=x\nend\n", 4, "rows");
  expect_error(head + "step prefill tokens=8\nop gemm layer=0 tokens=0\nend\n", 4, "tokens");
  for (const char* bad : {"component dit", "component dit 5", "component dit x", "component dit 0-", "component a..b 0",
                          "component dit 0,0", "component has/slash 0", "component dit 0,"})
    expect_error(head + bad + "\nend\n", 3, "component");
  for (const char* bad : {"3x3x3:96", "3x3x3:0:96", "3x3x3:96:x", "3x3x3x3:1:1", "16x3:1:1", "3:1:1", "3x3x3:1:2097152",
                          "axb:1:1", ":1:1", "3x3x3::1"})
    expect_error(head + "step prefill tokens=8\nop gemm layer=0 conv=" + bad + "\nend\n", 4, "conv");
  expect_error(head + "step prefill tokens=8\nop elementwise layer=0 conv=3x3:4:4\nend\n", 4, "conv");  // gemm only
  expect_error(head + "step decode tokens=1\nop gemv layer=0\n", 4, "end");  // truncated
  // Byte ranges: only in a version 2 trace, inside the tensor, with a byte count.
  const std::string head2 = "tiersim-trace 2\ntensor 0 weight 1000 0 w0\n";
  expect_error(head + "step decode tokens=1\nop gemv layer=0 read=0@100:10\nend\n", 4, "read");
  expect_error(head2 + "step decode tokens=1\nop gemv layer=0 read=0@100\nend\n", 4, "read");
  expect_error(head2 + "step decode tokens=1\nop gemv layer=0 read=0@x:10\nend\n", 4, "read");
  expect_error(head2 + "step decode tokens=1\nop gemv layer=0 read=0@1001:0\nend\n", 4, "read");
  expect_error(head2 + "step decode tokens=1\nop gemv layer=0 read=0@900:101\nend\n", 4, "read");
  expect_error(head2 + "step decode tokens=1\nop gemv layer=0 write=0:10@5\nend\n", 4, "write");
  expect_error(head2 + "step decode tokens=1\nop gemv layer=0 read=0@18446744073709551615:2\nend\n", 4, "read");
}

// Transient tensors (kind tmp): each use needs a value an earlier op (or the op itself, writing it) started in the
// same step; `keep=` names transients only, and is written back as read.
TEST(TraceReader, TransientUsesNeedAValueAndKeepsNameTransients) {
  const std::string head = "tiersim-trace 1\ntensor 0 weight 1000 0 w\ntensor 1 tmp 400 0 y\ntensor 2 tmp 100 0 z\n";
  expect_error(head + "step decode tokens=1\nop gemv layer=0 read=0 write=1\nop gemv layer=0 read=2 write=1\nend\n", 7, "read");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 read=0 write=1 keep=2\nend\n", 6, "read");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 read=0 write=1 keep=0\nend\n", 6, "keep");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 read=0 write=1 keep=7\nend\n", 6, "keep");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 read=0 write=1 keep=\nend\n", 6, "keep");
  // A value does not outlive its step: the second step's read has none.
  expect_error(head + "step decode tokens=1\nop gemv layer=0 read=0 write=1\nstep decode tokens=1\nop gemv layer=0 read=1 write=2\nend\n",
               8, "read");
  expect_error(head + "step decode tokens=1\nop gemv layer=0 read=0 write=1 reread=x\nend\n", 6, "reread");
  // The generator's transient peak, read by capacity checks: a byte count.
  expect_error("tiersim-trace 1\nmeta transient_peak -5\ntensor 0 weight 1000 0 w\nstep decode tokens=1\nop gemv layer=0 read=0\nend\n",
               2, "transient_peak");
  const std::string good =
      head + "step decode tokens=1\nop gemv layer=0 read=0 write=1\nop gemv layer=0 read=1 write=2 reread=64 keep=1\nend\n";
  auto r = reader(good);
  EXPECT_EQ(r->header().tensors[1].kind, TensorKind::Transient);
  Step s;
  ASSERT_TRUE(r->next(s));
  EXPECT_EQ(s.ops[1].keeps, std::vector<std::uint32_t>{1});
  EXPECT_EQ(s.ops[1].reread_bytes, 64u);
  EXPECT_EQ(op_bytes(s.ops[1]), 400u + 100u + 64u);
  TraceReader in(std::make_unique<std::istringstream>(good), "tmp");
  std::ostringstream out;
  write_trace(out, in);
  EXPECT_EQ(out.str(), good);
}

TEST(TraceReader, ReadsByteRangesInVersionTwo) {
  auto r = reader("tiersim-trace 2\ntensor 0 weight 1000 0 experts\nstep decode tokens=1\n"
                  "op gemv layer=0 read=0@600:400,0:10,0 write=0@0:5\nend\n");
  EXPECT_EQ(r->header().version, 2);
  Step s;
  ASSERT_TRUE(r->next(s));
  ASSERT_EQ(s.ops[0].reads.size(), 3u);
  EXPECT_EQ(s.ops[0].reads[0].offset, 600u);  // the last 400 bytes: exactly to the tensor's end
  EXPECT_EQ(s.ops[0].reads[0].bytes, 400u);
  EXPECT_EQ(s.ops[0].reads[1].offset, 0u);
  EXPECT_EQ(s.ops[0].reads[1].bytes, 10u);
  EXPECT_EQ(s.ops[0].reads[2].bytes, 1000u);
  EXPECT_EQ(s.ops[0].writes[0].bytes, 5u);
}

TEST(TraceWriter, GeneratedTraceRoundTripsByteForByte) {
  model::ModelConfig m = model::parse_model_config(
      R"({"model_type":"llama","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
          "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":100})",
      "tiny.json");
  model::GenerationOptions g;
  g.prompt_tokens = 4;
  g.decode_tokens = 3;
  model::LlmTraceGenerator gen(m, g);
  std::ostringstream first;
  EXPECT_EQ(write_trace(first, gen), 4u);
  TraceReader back(std::make_unique<std::istringstream>(first.str()), "first");
  std::ostringstream second;
  write_trace(second, back);
  EXPECT_EQ(first.str(), second.str());
  // An op's syncs and blocks are written back as read.
  TraceReader good(std::make_unique<std::istringstream>(kGood), "good");
  std::ostringstream again;
  write_trace(again, good);
  EXPECT_NE(again.str().find("dtype=q4_k syncs=1\n"), std::string::npos) << again.str();
}

TEST(TraceWriter, ByteRangesRoundTripAndNeedVersionTwo) {
  const std::string text = "tiersim-trace 2\ntensor 0 weight 1000 0 experts\nstep decode tokens=1\n"
                           "op gemv layer=0 read=0@600:400,0:10\nend\n";
  TraceReader in(std::make_unique<std::istringstream>(text), "ranges");
  std::ostringstream out;
  write_trace(out, in);
  EXPECT_EQ(out.str(), text);
  // A version 1 header cannot carry a range: the writer refuses rather than write a trace that does not read back.
  Header h;
  append_tensor(h, TensorKind::Weight, 1000, 0, "experts");
  Step step;
  append_op(step, OpKind::Gemv, 0, 0, {TensorAccess{0, 10, 20}}, {});
  std::ostringstream v1;
  EXPECT_THROW(write_step(v1, h, step), std::logic_error);
  h.version = 2;
  std::ostringstream v2;
  write_step(v2, h, step);
  EXPECT_NE(v2.str().find("read=0@20:10"), std::string::npos) << v2.str();
}

}  // namespace
}  // namespace tiersim::trace
