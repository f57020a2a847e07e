// Training memory (model/training/training_memory.hpp): each term's size from its definition, the moments that
// set the peak, and `sim train`'s verdict and exit codes.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "cli/allocator_replay.hpp"
#include "model/model_config.hpp"
#include "model/training/optimizer_offload.hpp"
#include "model/training/training_allocations.hpp"
#include "model/training/training_memory.hpp"
#include "model/training/training_trace.hpp"
#include "support/run_sim.hpp"

namespace tiersim::model {
namespace {

ModelConfig qwen4b() { return load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-4b.json"); }

// With offload_gradients, when each gradient's copy ends: a backward pass of 1 s, copies at `rate` bytes/s.
std::vector<double> copy_ends(const ModelConfig& m, const TrainingOptions& o, double rate = 20e9) {
  if (o.offload != OptimizerOffload::CpuGradients) return {};
  const auto copy = [rate](double bytes) { return bytes / rate; };
  return optimizer_offload_time(offload_queue(m, o), 1.0, copy, copy, OffloadCpuCosts{}).d2h_end_fraction;
}

TEST(TrainingMemory, PersistentTermsFollowThePrecisionAndTheOptimizer) {
  const ModelConfig m = qwen4b();
  const double P = static_cast<double>(m.total_params());
  TrainingOptions o;
  TrainingMemory bf16 = training_memory(m, o);
  EXPECT_DOUBLE_EQ(bf16.weights, 2 * P);
  EXPECT_DOUBLE_EQ(bf16.optimizer_state, 4 * P);  // AdamW: exp_avg and exp_avg_sq like the parameters
  EXPECT_DOUBLE_EQ(bf16.gradients, 2 * P);
  EXPECT_DOUBLE_EQ(bf16.autocast_cache, 0);
  o.optimizer = TrainOptimizer::Sgd;
  EXPECT_DOUBLE_EQ(training_memory(m, o).optimizer_state, 0);
  EXPECT_DOUBLE_EQ(training_memory(m, o).optimizer_temporary, 0);
  o.optimizer = TrainOptimizer::SgdMomentum;
  EXPECT_DOUBLE_EQ(training_memory(m, o).optimizer_state, 2 * P);
  o.optimizer = TrainOptimizer::AdamW;
  o.precision = TrainPrecision::Fp32AutocastBf16;
  const TrainingMemory mixed = training_memory(m, o);
  EXPECT_DOUBLE_EQ(mixed.weights, 4 * P);
  EXPECT_DOUBLE_EQ(mixed.optimizer_state, 8 * P);
  // The bf16 copies of every matrix: all parameters but the norms (Qwen3-4B ties lm_head to the embedding).
  EXPECT_GT(mixed.autocast_cache, 1.99 * P);
  EXPECT_LT(mixed.autocast_cache, 2 * P);
}

TEST(TrainingMemory, ActivationsGrowWithTokensAndCheckpointingKeepsLayerInputs) {
  const ModelConfig m = qwen4b();
  TrainingOptions o;
  o.seq = 512;
  const double a512 = training_memory(m, o).saved_activations;
  o.seq = 1024;
  const double a1024 = training_memory(m, o).saved_activations;
  EXPECT_NEAR(a1024, 2 * a512, 1e-6 * a1024);
  o.checkpointing = true;
  const TrainingMemory ck = training_memory(m, o);
  EXPECT_LT(ck.saved_activations, a1024 / 10);  // layer inputs (2h per token) against every layer's tensors
  EXPECT_NEAR(ck.recompute, a1024 / static_cast<double>(m.num_hidden_layers), 0.05 * ck.recompute);
  // The peak is one of the moments, named.
  const double peak = ck.peak();
  EXPECT_TRUE(peak == ck.forward_peak || peak == ck.backward_start || peak == ck.backward_end || peak == ck.optimizer_peak);
}

// The training step's ops stay inside their tensors (the trace format's rule), in every set-up.
TEST(TrainingMemory, TheStepsAccessesFitTheirTensors) {
  const ModelConfig m = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-0.6b.json");
  for (const auto precision : {TrainPrecision::Bf16, TrainPrecision::Fp32, TrainPrecision::Fp32AutocastBf16})
    for (const bool checkpointing : {false, true}) {
      TrainingOptions o;
      o.precision = precision;
      o.checkpointing = checkpointing;
      o.seq = 256;
      TrainingTraceGenerator g(m, o, 1);
      trace::Step step;
      ASSERT_TRUE(g.next(step));
      for (const auto& op : step.ops)
        for (const auto* list : {&op.reads, &op.writes})
          for (const auto& a : *list) {
            ASSERT_LT(a.tensor, g.header().tensors.size());
            EXPECT_LE(a.bytes, g.header().tensors[a.tensor].bytes) << g.header().tensors[a.tensor].name;
          }
    }
}

TEST(TrainingMemory, TheLogitsScaleWithTheVocabulary) {
  ModelConfig m = qwen4b();
  TrainingOptions o;
  const double before = training_memory(m, o).logits;
  m.vocab_size *= 2;
  EXPECT_NEAR(training_memory(m, o).logits, 2 * before, 1e-9 * before);
  EXPECT_DOUBLE_EQ(training_memory(m, o).logits, 1024.0 * static_cast<double>(m.vocab_size) * 4);
  EXPECT_DOUBLE_EQ(training_memory(m, o).loss_transient, 1024.0 * static_cast<double>(m.vocab_size) * (2 + 4));
}

TEST(TrainingMemory, EightBitAdamKeepsOneByteStatesWithBlockScalesAndFp32StatesForSmallTensors) {
  TrainingOptions o;
  o.optimizer = TrainOptimizer::AdamW8bit;
  // bitsandbytes: below 4096 elements two fp32 states; else two uint8 states and two fp32 absmax per 2048 elements.
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(4095, o), 8.0 * 4095);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(4096, o), 2.0 * 4096 + 2 * 4 * 2);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes(4097, o), 2.0 * 4097 + 2 * 4 * 3);
  EXPECT_EQ(optimizer_state_tensors(1 << 20, o).size(), 4u);
  const ModelConfig m = qwen4b();
  const TrainingMemory eight = training_memory(m, o);
  o.optimizer = TrainOptimizer::AdamW;
  const TrainingMemory full = training_memory(m, o);
  EXPECT_NEAR(eight.optimizer_state, full.optimizer_state / 2, 0.01 * full.optimizer_state);  // bf16: 4 B -> ~2 B
  EXPECT_DOUBLE_EQ(eight.optimizer_temporary, 0.0);
  EXPECT_LT(eight.peak(), full.peak());
  // Its update: one kernel per parameter tensor, reading parameter, gradient and two byte states.
  o.optimizer = TrainOptimizer::AdamW8bit;
  o.seq = 128;
  TrainingTraceGenerator g(m, o, 1);
  trace::Step step;
  ASSERT_TRUE(g.next(step));
  std::uint32_t launches = 0;
  double read = 0;
  for (std::size_t i = step.ops.size() - (m.num_hidden_layers + 2); i < step.ops.size(); ++i) {
    launches += step.ops[i].launches;
    read += static_cast<double>(step.ops[i].reads.front().bytes);
  }
  EXPECT_EQ(launches, 11u * m.num_hidden_layers + 2);
  EXPECT_NEAR(read, static_cast<double>(m.total_params()) * (2 * 2 + 2), 1.0);
}

TEST(TrainingMemory, LoraTrainsFp32AdaptersOverFrozenWeightsAndSavesLess) {
  const ModelConfig m = qwen4b();
  TrainingOptions full;
  TrainingOptions o;
  o.lora.rank = 16;
  o.lora.targets = parse_lora_targets("v_proj,q_proj");  // the model's order, whatever the list's
  ASSERT_EQ(o.lora.targets.size(), 2u);
  EXPECT_EQ(o.lora.targets[0], LoraModule::Q);
  EXPECT_EQ(parse_lora_targets("all-linear").size(), 7u);
  EXPECT_THROW(parse_lora_targets("q_proj,lm_head"), std::invalid_argument);
  // A (r x in) and B (out x r) per targeted projection and layer, fp32.
  const double qd = static_cast<double>(m.num_attention_heads * m.head_dim), kvd = static_cast<double>(m.num_key_value_heads * m.head_dim);
  const double h = static_cast<double>(m.hidden_size);
  const double adapter = m.num_hidden_layers * 16.0 * ((h + qd) + (h + kvd));
  const auto trainable = trainable_tensors(m, o);
  EXPECT_EQ(trainable.size(), 4u * m.num_hidden_layers);
  const TrainingMemory r = training_memory(m, o), f = training_memory(m, full);
  EXPECT_DOUBLE_EQ(r.adapters, 4 * adapter);
  EXPECT_DOUBLE_EQ(r.weights, f.weights + 4 * adapter);
  EXPECT_DOUBLE_EQ(r.gradients, 4 * adapter);
  EXPECT_DOUBLE_EQ(r.optimizer_state, 2 * 4 * adapter);  // AdamW's states follow the fp32 adapters
  EXPECT_LT(r.saved_activations, f.saved_activations);     // frozen projections keep no inputs
  EXPECT_LT(r.peak(), f.peak() / 2);
}

// torchao's CPUOffloadOptimizer: tensors of 4,096 elements or more keep their state on the host (with pinned
// copies of the parameter and gradient in power-of-two blocks); offload_gradients also frees their GPU gradients.
TEST(OptimizerOffload, StatesMoveToTheHostAndOffloadedGradientsLeaveTheGpu) {
  const ModelConfig m = qwen4b();
  TrainingOptions o;
  const TrainingMemory gpu = training_memory(m, o);
  o.offload = OptimizerOffload::Cpu;
  const TrainingMemory cpu = training_memory(m, o);
  double small = 0, pinned = 0, big = 0;
  for (const auto& [layer, n] : parameter_tensors(m)) {
    if (n < kOffloadMinimalSize) small += 2.0 * n;
    else big += 2.0 * n, pinned += 2 * std::exp2(std::ceil(std::log2(2.0 * n)));
  }
  EXPECT_DOUBLE_EQ(cpu.optimizer_state, 2 * small);     // AdamW's two bf16 states of the norm weights alone
  EXPECT_DOUBLE_EQ(cpu.host_optimizer_state, 2 * big);  // the rest on the host
  EXPECT_DOUBLE_EQ(cpu.host_pinned, pinned);
  EXPECT_GT(cpu.host_pinned, 2 * big);                  // rounded up
  EXPECT_DOUBLE_EQ(cpu.optimizer_temporary, 0);         // fused AdamW for the small ones: no foreach sqrt
  EXPECT_DOUBLE_EQ(cpu.gradients, gpu.gradients);
  EXPECT_DOUBLE_EQ(gpu.host_pinned + gpu.host_optimizer_state, 0);
  o.offload = OptimizerOffload::CpuGradients;
  const TrainingMemory grads = training_memory(m, o);
  EXPECT_DOUBLE_EQ(grads.gradients, small);
  // The tied embedding's gradient lives to the end of backward (the embedding's share is added into it last).
  EXPECT_DOUBLE_EQ(grads.backward_end - grads.recompute - grads.gradients - grads.weights - grads.optimizer_state,
                   2.0 * static_cast<double>(m.embedding_params()));
  // The caching allocator's replay sees the same: less at the end of backward, nothing for the optimizer step
  // (memory_allocated drops when a gradient is freed, its copy still under way or not).
  auto peak = [&](const TrainingOptions& opts, const std::string& phase) {
    double live = 0, top = 0;
    std::map<std::uint64_t, double> sizes;
    for (const AllocationEvent& e : training_allocations(m, opts, 2, copy_ends(m, opts))) {
      if (e.allocates()) sizes[e.tensor] = static_cast<double>(e.bytes), live += static_cast<double>(e.bytes);
      else if (e.kind != AllocationEvent::Kind::UseEnd) live -= sizes[e.tensor];
      if (e.step == 2 && e.phase == phase) top = std::max(top, live);
    }
    return top;
  };
  TrainingOptions plain;
  o.offload = OptimizerOffload::Cpu;
  EXPECT_LT(peak(o, "optimizer step"), peak(plain, "optimizer step") - 2 * big);
  TrainingOptions og = o;
  og.offload = OptimizerOffload::CpuGradients;
  EXPECT_LT(peak(og, "zero_grad"), peak(o, "zero_grad") - 0.9 * big);
}

// The step's added time: copies behind the gradients through backward, then the CPU steps in the hooks' order,
// each followed by its copy back on the one side stream.
TEST(OptimizerOffload, CopiesFollowTheGradientsAndTheCpuStepsRunInTurn) {
  const std::vector<TrainableTensor> queue{{1, 1000, 2}, {0, 1000, 2}, {-1, 2000, 2}};  // layer 1, layer 0, embedding
  OffloadCpuCosts cpu;
  cpu.per_tensor = 1.0;
  cpu.per_element_bf16 = 0.001;  // the tensors' 2-byte elements
  cpu.per_element_fp32 = 1.0;
  cpu.gpu_step_host = 0.5;
  const auto copy = [](double bytes) { return bytes / 1000.0; };  // 1 s per 1000 bytes
  // Backward of 10 s: the layers' gradients ready at 5 s and 10 s, copied in 2 s each; the embedding's at 10 s.
  const OptimizerOffloadTime t = optimizer_offload_time(queue, 10.0, copy, copy, cpu);
  EXPECT_EQ(t.tensors, 3u);
  EXPECT_DOUBLE_EQ(t.d2h_seconds, 2 + 2 + 4);
  EXPECT_DOUBLE_EQ(t.d2h_exposed, 2 + 4);  // 5-7, 10-12, 12-16
  // CPU: 0.5 + (1 + 1) + (1 + 1) + (1 + 2) = 7.5; copies back 2.5-4.5, 4.5-6.5, 7.5-11.5
  EXPECT_DOUBLE_EQ(t.cpu_seconds, 7.5);
  EXPECT_DOUBLE_EQ(t.h2d_exposed, 4.0);
  EXPECT_DOUBLE_EQ(t.added(), 6 + 7.5 + 4);
  EXPECT_FALSE(t.memory_bound);
  // A host whose memory moves 7 x 2 bytes an element in 0.002 s is slower than the calibrated 0.001 s: it bounds them.
  OffloadCpuCosts slow = cpu;
  slow.host_memory_rate = 7000.0;
  const OptimizerOffloadTime s = optimizer_offload_time(queue, 10.0, copy, copy, slow);
  EXPECT_TRUE(s.memory_bound);
  EXPECT_DOUBLE_EQ(s.cpu_seconds, 0.5 + (1 + 2) + (1 + 2) + (1 + 4));
  // A long backward hides the copies of all but the gradients made at its end (the first layer's, the embedding's).
  EXPECT_DOUBLE_EQ(optimizer_offload_time(queue, 100.0, copy, copy, cpu).d2h_exposed, 2.0 + 4.0);
  // The queue is backward's order: the embedding last, the untied output matrix first.
  const ModelConfig m = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/llama-3.1-8b.json");
  TrainingOptions o;
  o.offload = OptimizerOffload::Cpu;
  const auto q = offload_queue(m, o);
  ASSERT_FALSE(q.empty());
  EXPECT_EQ(q.front().layer, static_cast<std::int32_t>(m.num_hidden_layers));
  EXPECT_EQ(q.back().layer, -1);
  for (const TrainableTensor& x : q) EXPECT_GE(x.n, kOffloadMinimalSize);
}

// offload_gradients: each offloaded gradient is freed with its copy to the host under way (record_stream), and
// the copy's end is marked among backward's allocations where optimizer_offload's pipeline puts it.
TEST(OptimizerOffload, FreedGradientsWaitForTheirCopies) {
  const ModelConfig m = qwen4b();
  TrainingOptions o;
  o.offload = OptimizerOffload::CpuGradients;
  const auto queue = offload_queue(m, o);
  EXPECT_THROW(training_allocations(m, o, 1), std::invalid_argument);  // the copies' ends are needed
  TrainingOptions plain;
  EXPECT_THROW(training_allocations(m, plain, 1, {0.5}), std::invalid_argument);
  for (const double rate : {1e15, 20e9, 1e9}) {  // copies ending at once, behind the gradients, after backward
    SCOPED_TRACE(rate);
    const std::vector<double> ends = copy_ends(m, o, rate);
    ASSERT_EQ(ends.size(), queue.size());
    std::map<std::uint64_t, std::size_t> freed;  // tensor -> its FreeAfterUse's place
    std::vector<std::uint64_t> order;
    std::size_t ended = 0, after_backward = 0, last_backward_alloc = 0;
    const auto events = training_allocations(m, o, 1, ends);
    for (std::size_t i = 0; i < events.size(); ++i)
      if (events[i].allocates() && std::string(events[i].phase) == "backward") last_backward_alloc = i;
    for (std::size_t i = 0; i < events.size(); ++i) {
      const AllocationEvent& e = events[i];
      if (e.kind == AllocationEvent::Kind::FreeAfterUse) {
        EXPECT_STREQ(e.phase, "backward");
        freed[e.tensor] = i;
        order.push_back(e.tensor);
      }
      if (e.kind == AllocationEvent::Kind::UseEnd) {
        ASSERT_LT(ended, order.size());
        EXPECT_EQ(e.tensor, order[ended]) << "the copies end in the queue's order";
        EXPECT_LT(freed.at(e.tensor), i);
        EXPECT_STREQ(e.phase, "backward");
        ++ended;
        if (i > last_backward_alloc) ++after_backward;
      }
    }
    EXPECT_EQ(order.size(), queue.size());
    EXPECT_EQ(ended, queue.size());
    // Fast copies end before backward's next allocation, but for the two gradients ready as the pass ends (the
    // first layer's last and the embedding's); slow ones mostly after the pass.
    if (rate == 1e15) {
      EXPECT_EQ(after_backward, 2u);
    }
    if (rate == 1e9) {
      EXPECT_GT(after_backward, queue.size() / 2);
    }
    // The replay: a held gradient's block is not reused before its copy ends, so slower copies reserve more
    // (allocated is the same: memory_allocated drops at the free).
    const auto fast = app::replay_allocations(training_allocations(m, o, 2, copy_ends(m, o, 1e15)), 1e18, 80e9);
    const auto slow = app::replay_allocations(training_allocations(m, o, 2, ends), 1e18, 80e9);
    EXPECT_DOUBLE_EQ(slow.peak("backward", 2).allocated, fast.peak("backward", 2).allocated);
    EXPECT_GE(slow.peak("backward", 2).reserved, fast.peak("backward", 2).reserved);
  }
  // Copies as slow as 1 GB/s hold most gradients to the end of backward: more reserved than with none held.
  const auto slow = app::replay_allocations(training_allocations(m, o, 2, copy_ends(m, o, 1e9)), 1e18, 80e9);
  const auto fast = app::replay_allocations(training_allocations(m, o, 2, copy_ends(m, o, 1e15)), 1e18, 80e9);
  EXPECT_GT(slow.peak("backward", 2).reserved, fast.peak("backward", 2).reserved + 1e9);
  // Every offloaded gradient is held until its copy ends, Llama-3.1-8B's final norm's (4,096 elements) too.
  const ModelConfig llama = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/llama-3.1-8b.json");
  std::size_t held = 0, ends_marked = 0;
  for (const AllocationEvent& e : training_allocations(llama, o, 1, copy_ends(llama, o))) {
    held += e.kind == AllocationEvent::Kind::FreeAfterUse ? 1 : 0;
    ends_marked += e.kind == AllocationEvent::Kind::UseEnd ? 1 : 0;
  }
  EXPECT_EQ(held, offload_queue(llama, o).size());
  EXPECT_EQ(ends_marked, held);
  // A GPU too small to hold them all: the allocator synchronizes with the copies instead of running out.
  const double room = fast.peak("", 2).reserved + 0.5e9;
  const auto tight = app::replay_allocations(training_allocations(m, o, 2, copy_ends(m, o, 1e9)), room, 80e9);
  EXPECT_FALSE(tight.oom.has_value());
}

// Which tensors torchao offloads, against torchao's own code: every measured row recorded how many parameters its
// CPUOffloadOptimizer put in param_d2h_map and their elements (experiments/validate/train_memory.py on the H100).
TEST(OptimizerOffload, TheQueueHoldsTheTensorsTorchaoOffloaded) {
  const std::map<std::string, std::string> configs{{"Qwen3-0.6B", "qwen3-0.6b"}, {"Qwen3-1.7B", "qwen3-1.7b"},
                                                   {"Qwen3-4B", "qwen3-4b"}, {"Llama-3.1-8B", "llama-3.1-8b"}};
  std::size_t checked = 0;
  for (const char* file : {"train_offload.jsonl", "train_offload_8b.jsonl"}) {
    std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/results/validation/optimizer-offload/" + file);
    ASSERT_TRUE(in) << file;
    for (std::string line; std::getline(in, line);) {
      const auto row = nlohmann::json::parse(line);
      const ModelConfig m = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" +
                                              configs.at(row["model"].get<std::string>()) + ".json");
      TrainingOptions o;
      o.offload = OptimizerOffload::Cpu;
      std::uint64_t elements = 0;
      const auto queue = offload_queue(m, o);
      for (const TrainableTensor& t : queue) elements += t.n;
      EXPECT_EQ(queue.size(), row["offloaded_params"].get<std::size_t>()) << row["model"];
      EXPECT_EQ(elements, row["offloaded_elements"].get<std::uint64_t>()) << row["model"];
      EXPECT_EQ(m.total_params(), row["params"].get<std::uint64_t>()) << row["model"];
      ++checked;
    }
  }
  EXPECT_EQ(checked, 22u);
}

TEST(TrainingTrace, HostCostsPriceEachPhaseAsTheRuntimeSays) {
  const ModelConfig m = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-0.6b.json");
  runtime::TrainingHostCosts c;
  c.forward_scale = 2.0;
  c.autocast_forward_scale = 3.0;
  c.backward_per_op = 10e-6;
  c.forward_per_step = 1e-3;
  c.backward_per_step = 2e-3;
  c.checkpoint_forward_per_layer = 100e-6;
  c.checkpoint_backward_per_layer = 200e-6;
  c.optimizer_per_step = 300e-6;
  c.optimizer_per_call = 30e-6;
  c.optimizer_per_tensor = 3e-6;
  c.optimizer_per_tensor_call = 1e-6;
  const auto one_us = [](const trace::Op&) { return 1e-6; };  // every op's inference price
  for (const bool checkpointing : {false, true})
    for (const auto precision : {TrainPrecision::Bf16, TrainPrecision::Fp32AutocastBf16}) {
      TrainingOptions o;
      o.checkpointing = checkpointing;
      o.precision = precision;
      o.optimizer = TrainOptimizer::AdamW;
      o.seq = 128;
      TrainingTraceGenerator g(m, o, 1, &c, one_us);
      trace::Step step;
      ASSERT_TRUE(g.next(step));
      const TrainingHostModel& h = g.host_model();
      const double scale = precision == TrainPrecision::Bf16 ? 2.0 : 3.0;
      const double L = static_cast<double>(m.num_hidden_layers);
      EXPECT_EQ(h.checkpointed_layers, checkpointing ? m.num_hidden_layers : 0u);
      EXPECT_EQ(h.parameter_tensors, 11u * m.num_hidden_layers + 2);  // tied embedding once, final norm
      EXPECT_NEAR(h.forward_seconds, 1e-3 + scale * 1e-6 * h.forward_ops + (checkpointing ? L * 100e-6 : 0), 1e-12);
      EXPECT_NEAR(h.backward_seconds,
                  2e-3 + 10e-6 * h.backward_ops + scale * 1e-6 * h.recompute_ops + (checkpointing ? L * 200e-6 : 0), 1e-12);
      EXPECT_NEAR(h.optimizer_seconds, 300e-6 + 8 * 30e-6 + h.parameter_tensors * (3e-6 + 8 * 1e-6), 1e-12);
      double sum = 0;
      for (const auto& op : step.ops) {
        ASSERT_GE(op.host_seconds, 0.0);
        sum += op.host_seconds;
      }
      EXPECT_NEAR(sum, h.forward_seconds + h.backward_seconds + h.optimizer_seconds, 1e-12);
      EXPECT_EQ(h.recompute_ops > 0, checkpointing);
    }
  // LoRA: each adapter branch priced once at its first op, apart from the plain ops' counts.
  c.lora_forward_per_module = 300e-6;
  c.lora_backward_per_module = 400e-6;
  for (const bool checkpointing : {false, true}) {
    TrainingOptions o;
    o.seq = 128;
    o.checkpointing = checkpointing;
    o.lora.rank = 8;
    o.lora.targets = parse_lora_targets("q_proj,v_proj");
    TrainingTraceGenerator g(m, o, 1, &c, one_us);
    trace::Step step;
    ASSERT_TRUE(g.next(step));
    const TrainingHostModel& h = g.host_model();
    const double modules = 2.0 * m.num_hidden_layers;
    EXPECT_EQ(h.lora_modules, checkpointing ? 2 * modules : modules);  // recomputed branches are forward branches too
    EXPECT_EQ(h.lora_ops, static_cast<std::uint64_t>(6 * (h.lora_modules + modules)));
    const double L = static_cast<double>(m.num_hidden_layers);
    EXPECT_NEAR(h.forward_seconds, 1e-3 + 2.0 * 1e-6 * h.forward_ops + modules * 300e-6 + (checkpointing ? L * 100e-6 : 0),
                1e-12);
    EXPECT_NEAR(h.backward_seconds, 2e-3 + 10e-6 * h.backward_ops + 2.0 * 1e-6 * h.recompute_ops + modules * 400e-6 +
                                        (checkpointing ? modules * 300e-6 + L * 200e-6 : 0),
                1e-12);
  }
  // Without the runtime's training costs the ops keep the engine's inference pricing.
  TrainingOptions o;
  o.seq = 128;
  TrainingTraceGenerator plain(m, o, 1, nullptr, one_us);
  trace::Step step;
  ASSERT_TRUE(plain.next(step));
  for (const auto& op : step.ops) EXPECT_LT(op.host_seconds, 0.0);
  EXPECT_DOUBLE_EQ(plain.host_model().forward_seconds, 0.0);
  EXPECT_GT(plain.host_model().forward_inference_seconds, 0.0);
}

}  // namespace
}  // namespace tiersim::model

namespace tiersim::testing {
namespace {

TEST(TrainCommand, SaysWhereItRunsOutOfMemoryAndByHowMuch) {
  const auto big = run_sim("train --model traces/models/qwen3-8b.json --hw rtx4090 --json", false);
  EXPECT_EQ(big.code, 3) << big.out;
  const auto j = nlohmann::json::parse(big.out);
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_EQ(j["peak_phase"], "optimizer step");
  const auto console = run_sim("train --model traces/models/qwen3-4b.json --hw rtx4090");
  EXPECT_EQ(console.code, 3);
  // The caching allocator replaying the loop: the first step's optimizer.step() creates AdamW's state and fails.
  EXPECT_NE(console.out.find("out of memory in step 1's optimizer step, allocating optimizer state"), std::string::npos)
      << console.out;
  EXPECT_NE(console.out.find("short by"), std::string::npos) << console.out;
  EXPECT_EQ(j["out_of_memory"]["step"], 1);  // Qwen3-8B's activations and logits do not fit beside its weights
  EXPECT_GT(j["out_of_memory"]["short_by_bytes"].get<double>(), 0);
  const auto small = run_sim("train --model traces/models/qwen3-4b.json --hw h100-sxm --checkpointing");
  EXPECT_EQ(small.code, 0) << small.out;
  EXPECT_NE(small.out.find("caching allocator      peak allocated"), std::string::npos) << small.out;
  const auto sj = nlohmann::json::parse(run_sim("train --model traces/models/qwen3-4b.json --hw h100-sxm --json", false).out);
  const double allocated = sj["allocator_peak_allocated_bytes"], reserved = sj["allocator_peak_reserved_bytes"];
  EXPECT_GE(reserved, allocated);
  // The replay's allocated peak is the analytic one plus rounding and short-lived tensors the sum leaves out.
  EXPECT_NEAR(allocated, sj["peak_bytes"]["step"].get<double>(), 0.02 * allocated);
  // A peak below the card's memory can still fail: the cached segments cannot hold a request (fragmentation).
  const auto lora_fp32 = run_sim("train --model traces/models/qwen3-4b.json --hw rtx4090 --lora 8 --precision fp32");
  EXPECT_EQ(lora_fp32.code, 2);
  EXPECT_NE(lora_fp32.out.find("--precision"), std::string::npos) << lora_fp32.out;
  const auto lora_bad = run_sim("train --model traces/models/qwen3-4b.json --hw rtx4090 --lora 8 --lora-targets qkv");
  EXPECT_EQ(lora_bad.code, 2);
  EXPECT_NE(lora_bad.out.find("--lora-targets"), std::string::npos) << lora_bad.out;
  const auto frag = run_sim("train --model traces/models/qwen3-4b.json --hw rtx4090 --optimizer adamw8bit --checkpointing");
  EXPECT_EQ(frag.code, 3) << frag.out;
  EXPECT_NE(frag.out.find("(fragmentation)"), std::string::npos) << frag.out;
  EXPECT_EQ(frag.out.find("short by"), std::string::npos) << frag.out;
}

// The step's time from the event engine: recomputation, the optimizer's passes and fp32 matmuls cost what their
// ops say; the same inputs give the same bytes.
TEST(TrainCommand, StepTimeComesFromTheEngineAndMovesWithTheSetUp) {
  // The GPU's side of the step: pytorch-eager's small host costs (the default, pytorch-hf-h100, makes this
  // model's step host-bound; checked at the end).
  auto seconds = [](const std::string& extra) {
    const auto r = run_sim("train --model traces/models/qwen3-0.6b.json --hw h100-sxm --runtime pytorch-eager --json " + extra, false);
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out)["step_seconds"].get<double>();
  };
  const double base = seconds("");
  EXPECT_GT(base, 0);
  EXPECT_GT(seconds("--checkpointing"), base);             // each layer's forward again
  EXPECT_LT(seconds("--optimizer sgd"), base);             // 3 passes over the parameters against 20
  EXPECT_GT(seconds("--precision fp32"), 2 * base);        // matmuls at the fp32 rate, not the tensor cores'
  // Tokens add work linearly on top of the optimizer's fixed passes.
  const double b4 = seconds("--batch 4"), b8 = seconds("--batch 8");
  EXPECT_GT(b4, 1.5 * base);
  EXPECT_NEAR(b8 - b4, (b4 - base) * 4.0 / 3.0, 0.25 * (b8 - b4));
  const auto a = run_sim("train --model traces/models/qwen3-0.6b.json --hw h100-sxm --json", false);
  const auto b = run_sim("train --model traces/models/qwen3-0.6b.json --hw h100-sxm --json", false);
  EXPECT_EQ(a.out, b.out);
  // The default runtime has calibrated training costs; they make the step longer than the GPU's work alone.
  const auto j = nlohmann::json::parse(a.out);
  EXPECT_EQ(j["host"]["runtime"], "pytorch-hf-h100");
  EXPECT_TRUE(j["host"]["training_costs"].get<bool>());
  EXPECT_GT(j["step_seconds"].get<double>(), base);
  EXPECT_GE(j["step_seconds"].get<double>(), j["host"]["forward_seconds"].get<double>() +
                                                 j["host"]["backward_seconds"].get<double>());
}

// A list of machines: a table, the ones the step fits first (cheapest first), the others with where they fail.
TEST(TrainCommand, AListOfMachinesIsRankedByWhetherItFitsThenByPrice) {
  const auto r = run_sim("train --model traces/models/qwen3-1.7b.json --hw rtx4070,rtx5090,rtx3090 --checkpointing --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<nlohmann::json> rows;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["hw"], "rtx3090");  // fits, $1,499
  EXPECT_EQ(rows[1]["hw"], "rtx5090");  // fits, $1,999
  EXPECT_EQ(rows[2]["hw"], "rtx4070");  // 12 GB: out of memory
  EXPECT_FALSE(rows[2]["fits"].get<bool>());
  EXPECT_TRUE(rows[2].contains("out_of_memory"));
  const auto table = run_sim("train --model traces/models/qwen3-1.7b.json --hw rtx4070,rtx5090,rtx3090 --checkpointing");
  EXPECT_NE(table.out.find("| rtx3090 | yes |"), std::string::npos) << table.out;
}

// --optimizer-offload: the GPU keeps less, the host holds the state, the step pays the CPU's update.
TEST(TrainCommand, OffloadingTheOptimizerTradesGpuMemoryForHostMemoryAndTime) {
  auto json = [](const std::string& extra) {
    const auto r = run_sim("train --model traces/models/qwen3-1.7b.json --hw h100-measured --json " + extra, false);
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out);
  };
  const auto gpu = json(""), cpu = json("--optimizer-offload cpu"), grads = json("--optimizer-offload cpu-gradients");
  EXPECT_LT(cpu["allocator_peak_allocated_bytes"].get<double>(), gpu["allocator_peak_allocated_bytes"].get<double>());
  EXPECT_LE(grads["memory_bytes"]["gradients"].get<double>(), 0.01 * cpu["memory_bytes"]["gradients"].get<double>());
  EXPECT_GT(cpu["host_memory_bytes"]["optimizer_state"].get<double>(), 0);
  EXPECT_GT(cpu["step_seconds"].get<double>(), gpu["step_seconds"].get<double>());
  EXPECT_EQ(cpu["optimizer_offload"], "cpu");
  EXPECT_GT(cpu["optimizer_offload_time"]["cpu_seconds"].get<double>(), 0);
  EXPECT_EQ(cpu["optimizer_offload_time"]["cpu_bound"], "calibrated");
  // A desktop's two DDR4 channels cannot stream the fused AdamW's traffic at the calibration host's rate.
  const auto desktop = nlohmann::json::parse(
      run_sim("train --model traces/models/qwen3-1.7b.json --hw rtx4090 --optimizer-offload cpu --checkpointing --json", false).out);
  EXPECT_EQ(desktop["optimizer_offload_time"]["cpu_bound"], "host memory");
  EXPECT_GT(desktop["optimizer_offload_time"]["cpu_seconds"].get<double>(), 2 * cpu["optimizer_offload_time"]["cpu_seconds"].get<double>());
  const auto console = run_sim("train --model traces/models/qwen3-1.7b.json --hw h100-measured --optimizer-offload cpu");
  EXPECT_NE(console.out.find("optimizer offload      +"), std::string::npos) << console.out;
  EXPECT_NE(console.out.find("pinned copies"), std::string::npos) << console.out;
  // What it does not model, and a runtime without the CPU's costs, are refused naming the option or the key.
  for (const auto& [args, what] : std::vector<std::pair<std::string, std::string>>{
           {"--optimizer-offload cpu --optimizer sgd", "--optimizer-offload"},
           {"--optimizer-offload cpu --precision fp16", "--optimizer-offload"},
           {"--optimizer-offload disk", "--optimizer-offload"},
           {"--optimizer-offload cpu --runtime pytorch-eager", "cpu_offload"}}) {
    const auto r = run_sim("train --model traces/models/qwen3-1.7b.json " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(what), std::string::npos) << r.out;
  }
  // A host too small for the offloaded state: does not fit (exit 3), and says so.
  const auto small = run_sim("train --model traces/models/qwen3-4b.json --hw h100-measured --optimizer-offload cpu "
                             "--precision fp32-autocast --set 'host.memory=32 GiB'");
  EXPECT_EQ(small.code, 3) << small.out;
  EXPECT_NE(small.out.find("does not fit the host"), std::string::npos) << small.out;
}

TEST(TrainCommand, RefusesWhatItDoesNotModel) {
  for (const std::string& args :
       {std::string("train --model traces/models/qwen3-30b-a3b.json"), std::string("train --model traces/models/flux.1-dev.json"),
        std::string("train --model traces/models/qwen3-4b.json --precision int4"),
        std::string("train --model traces/models/qwen3-4b.json --optimizer lion"),
        std::string("train --model traces/models/qwen3-4b.json --seq 0"), std::string("train --model /nonexistent.json")}) {
    const auto r = run_sim(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << r.out;
  }
}

// `sim train --json` is versioned as `sim run --json` is, and its bytes are whole numbers (issue 42).
TEST(TrainingMemory, TheJsonHasASchemaVersionAndWholeBytes) {
  const auto r = run_sim("train --model traces/models/qwen3-0.6b.json --hw h200 --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 1);
  for (const char* group : {"memory_bytes", "peak_bytes"})
    for (const auto& [key, value] : j[group].items()) EXPECT_TRUE(value.is_number_integer()) << group << "." << key;
  EXPECT_TRUE(j["gpu_available_bytes"].is_number_integer()) << j["gpu_available_bytes"];
}

}  // namespace
}  // namespace tiersim::testing
