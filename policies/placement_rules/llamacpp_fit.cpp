// llama.cpp's --fit, dense-model path: common/fit.cpp common_params_fit_impl (steps 1-3), in its order
// and integer arithmetic. See llamacpp_fit.hpp.
#include "policies/placement_rules/llamacpp_fit.hpp"

#include <algorithm>

namespace tiersim::strategy::llamacpp {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

std::string mib(std::int64_t bytes) { return std::to_string(bytes / kMiB); }

// fit.cpp's false-position step between a fitting count (`mem`) and a not-fitting one (`mem_high`), `delta` apart:
// an int64 quotient stored in a uint32_t (a negative one wraps to a large step), clamped to 1 .. delta - 1.
std::uint32_t false_position_step(std::uint32_t delta, std::int64_t target, std::int64_t mem, std::int64_t mem_high) {
  auto step = static_cast<std::uint32_t>(static_cast<std::int64_t>(delta) * (target - mem) / (mem_high - mem));
  step = std::max(step, std::uint32_t{1});
  return std::min(step, delta - 1);
}

// fit.cpp's layer fractions: what of a partial layer stays on its device (the rest overflows).
enum class Fraction { Attn = 1, Up = 2, Gate = 3, Moe = 4 };

// fit.cpp get_overflow_pattern: the tensors of layer il that overflow at fraction f.
std::string overflow_pattern(std::uint32_t il, Fraction f) {
  const std::string b = "blk\\." + std::to_string(il) + "\\.";
  switch (f) {
    case Fraction::Attn: return b + "ffn_(gate|up|gate_up|down).*";
    case Fraction::Up: return b + "ffn_(gate|gate_up|down).*";
    case Fraction::Gate: return b + "ffn_down.*";
    case Fraction::Moe: break;
  }
  return b + "ffn_(up|down|gate_up|gate)_(ch|)exps";
}

// fit.cpp ngl_t: a GPU's slots, the last n_part of them partial (the first of those at `overflow`, the rest with
// every expert tensor in system memory). Unsigned, as fit.cpp's, whose arithmetic can wrap.
struct DeviceLayers {
  std::uint32_t n_layer = 0, n_part = 0;
  Fraction overflow = Fraction::Moe;
  std::uint32_t n_full() const { return n_layer - n_part; }
};

Assignment from_counts(const std::vector<std::uint32_t>& counts) {
  Assignment a;
  for (const auto n : counts) a.ngl += static_cast<int>(n);
  if (counts.size() > 1)
    for (const auto n : counts) a.tensor_split.push_back(static_cast<double>(n));
  return a;
}

// fit.cpp set_ngl_tensor_split_tbo: -ngl, -ts and the overrides of the partial slots (each GPU's full slots come
// first, from the lowest slot the GPUs hold; its first partial slot overflows to `overflow_device`, -1 the CPU).
Assignment from_layers(const std::vector<DeviceLayers>& layers, const std::vector<int>& overflow_device, std::uint32_t hp_ngl) {
  Assignment a;
  for (const auto& l : layers) a.ngl += static_cast<int>(l.n_layer);
  if (layers.size() > 1)
    for (const auto& l : layers) a.tensor_split.push_back(static_cast<double>(l.n_layer));
  std::uint32_t il0 = hp_ngl + 1 - static_cast<std::uint32_t>(a.ngl);
  for (std::size_t id = 0; id < layers.size(); ++id) {
    il0 += layers[id].n_full();
    for (std::uint32_t il = il0; il < il0 + layers[id].n_part; ++il)
      a.overrides.push_back({overflow_pattern(il, il == il0 ? layers[id].overflow : Fraction::Moe), il == il0 ? overflow_device[id] : -1});
    il0 += layers[id].n_part;
  }
  return a;
}

}  // namespace

std::uint32_t padded_context(std::uint32_t n_ctx, std::uint32_t n_ctx_train) {
  const std::uint32_t c = n_ctx == 0 ? n_ctx_train : n_ctx;
  return (c + 255) / 256 * 256;  // llama_context: GGML_PAD(n_ctx, 256)
}

namespace {

// fit.cpp's steps for a mixture of experts after its context step (common_params_fit_impl, the hp_nex > 0 branches:
// experiments/frameworks/llamacpp_fit_moe.md): the dense-only fill back to front with every expert tensor in system
// memory, then, if every dense tensor fits, layers made whole front to back and part of one more layer.
FitResult fit_moe(const FitRequest& rq, const Projector& project, std::uint32_t ctx, FitResult r) {
  const std::size_t nd = rq.free.size();
  const auto hp_ngl = static_cast<std::uint32_t>(rq.n_layer);
  auto log = [&](const std::string& line) { r.log.push_back(line); };
  std::vector<std::int64_t> targets(nd);
  for (std::size_t id = 0; id < nd; ++id) targets[id] = rq.free[id] - rq.margin[id];
  auto totals = [&](const Assignment& a) {
    std::vector<std::int64_t> m;
    for (const auto& d : project(a, ctx)) m.push_back(d.total());
    return m;
  };
  // Every slot on the GPUs, every expert tensor in system memory: is there memory left over?
  Assignment dense_only;
  dense_only.ngl = rq.n_layer + 1;
  dense_only.overrides.push_back({"blk\\.\\d+\\.ffn_(up|down|gate_up|gate)_(ch|)exps", -1});
  std::int64_t surplus = 0;
  {
    const std::vector<std::int64_t> m = totals(dense_only);
    for (std::size_t id = 0; id < nd; ++id) surplus += rq.free[id] - m[id] - rq.margin[id];
  }
  log(surplus > 0 ? "with only dense weights in device memory there is a total surplus of " + mib(surplus) + " MiB"
                  : "with only dense weights in device memory there is still a total deficit of " + mib(-surplus) + " MiB");
  std::vector<int> overflow_device(nd, -1);
  std::vector<DeviceLayers> cur(nd);
  bool wrapped = false;
  auto memory = [&](const std::vector<DeviceLayers>& layers, const std::vector<int>& overflow) {
    for (const auto& l : layers) wrapped |= l.n_part > l.n_layer || l.n_layer > hp_ngl + 1;
    if (wrapped) return std::vector<std::int64_t>(nd, 0);
    return totals(from_layers(layers, overflow, hp_ngl));
  };
  std::vector<std::int64_t> mem = memory(cur, overflow_device);
  // Step 3: dense-only layers back to front (every slot partial but the last GPU's first).
  log("filling dense-only layers back-to-front:");
  for (int id = static_cast<int>(nd) - 1; id >= 0 && !wrapped; --id) {
    const auto u = static_cast<std::size_t>(id);
    std::uint32_t unassigned = hp_ngl + 1;
    for (std::size_t jd = u + 1; jd < nd; ++jd) unassigned -= cur[jd].n_layer;
    std::vector<DeviceLayers> high = cur;
    high[u].n_layer = unassigned;
    high[u].n_part = u < nd - 1 ? high[u].n_layer : high[u].n_layer - 1;
    if (high[u].n_layer > 0) {
      std::vector<std::int64_t> mem_high = memory(high, overflow_device);
      if (mem_high[u] > targets[u]) {
        std::uint32_t delta = high[u].n_layer - cur[u].n_layer;
        while (delta > 1 && mem_high[u] != mem[u] && !wrapped) {  // (equal: fit.cpp would divide by zero)
          const std::uint32_t step = false_position_step(delta, targets[u], mem[u], mem_high[u]);
          std::vector<DeviceLayers> test = cur;
          test[u].n_layer += step;
          test[u].n_part += u == nd - 1 && test[u].n_part == 0 ? step - 1 : step;  // the last GPU's first slot is whole
          const std::vector<std::int64_t> mem_test = memory(test, overflow_device);
          if (mem_test[u] <= targets[u]) {
            cur = test;
            mem = mem_test;
          } else {
            high = test;
            mem_high = mem_test;
          }
          delta = high[u].n_layer - cur[u].n_layer;
        }
      } else {
        cur = high;
        mem = mem_high;
      }
    }
    log("  - GPU " + std::to_string(id) + ": " + std::to_string(cur[u].n_layer) + " layers, " + mib(mem[u]) + " MiB used, " +
        mib(rq.free[u] - mem[u]) + " MiB free");
  }
  if (!wrapped && surplus > 0) {
    // Step 4: the dense-only layers made whole, front to back, then part of one more layer.
    log("converting dense-only layers to full layers and filling them front-to-back with overflow to next device/system memory:");
    std::size_t dense_start = nd;
    for (int id = static_cast<int>(nd) - 1; id >= 0; --id) {
      if (cur[static_cast<std::size_t>(id)].n_layer == 0) break;
      dense_start = static_cast<std::size_t>(id);
    }
    for (std::size_t id = 0; id <= dense_start && dense_start < nd && !wrapped; ++id) {
      std::vector<DeviceLayers> high = cur;
      for (std::size_t jd = dense_start; jd < nd; ++jd) {
        const std::uint32_t move = jd < nd - 1 ? high[jd].n_layer : high[jd].n_layer - 1;
        high[id].n_layer += move;
        high[jd].n_layer -= move;
        high[jd].n_part = 0;
      }
      std::size_t dense_start_high = nd - 1;
      std::vector<std::int64_t> mem_high = memory(high, overflow_device);
      if (mem_high[id] > targets[id]) {
        std::uint32_t delta = high[id].n_full() - cur[id].n_full();
        while (delta > 1 && mem_high[id] != mem[id] && !wrapped) {
          const std::uint32_t step = false_position_step(delta, targets[id], mem[id], mem_high[id]);
          std::vector<DeviceLayers> test = cur;
          std::size_t dense_start_test = dense_start;
          std::uint32_t converted = 0;
          for (; dense_start_test < nd; ++dense_start_test) {
            const std::uint32_t n = std::min(step - converted, test[dense_start_test].n_part);
            test[dense_start_test].n_layer -= n;
            test[dense_start_test].n_part -= n;
            test[id].n_layer += n;
            converted += n;
            if (test[dense_start_test].n_part > 0) break;
          }
          const std::vector<std::int64_t> mem_test = memory(test, overflow_device);
          if (mem_test[id] <= targets[id]) {
            cur = test;
            mem = mem_test;
            dense_start = dense_start_test;
          } else {
            high = test;
            mem_high = mem_test;
            dense_start_high = dense_start_test;
          }
          delta = high[id].n_full() - cur[id].n_full();
        }
      } else {
        cur = high;
        mem = mem_high;
        dense_start = dense_start_high;
      }
      // Part of one more layer: its attention and up (then gate too), or its attention alone, kept on this GPU.
      if (!wrapped && dense_start < nd && cur[dense_start].n_layer > (id < nd - 1 ? 0u : 1u)) {
        std::vector<DeviceLayers> test = cur;
        std::size_t dense_start_test = dense_start;
        --test[dense_start_test].n_layer;
        --test[dense_start_test].n_part;
        ++test[id].n_layer;
        ++test[id].n_part;
        if (test[dense_start_test].n_part == 0) ++dense_start_test;
        test[id].overflow = Fraction::Up;
        std::vector<int> overflow_test = overflow_device;
        if (id < nd - 1) overflow_test[id] = static_cast<int>(id) + 1;
        auto fits = [&](const std::vector<std::int64_t>& m) {
          return m[id] < targets[id] && (id + 1 == nd || m[id + 1] < targets[id + 1]);
        };
        auto accept = [&](const std::vector<std::int64_t>& m) {
          cur = test;
          overflow_device = overflow_test;
          mem = m;
          dense_start = dense_start_test;
        };
        std::vector<std::int64_t> mem_test = memory(test, overflow_test);
        if (!wrapped && fits(mem_test)) {
          accept(mem_test);
          test[id].overflow = Fraction::Gate;
          mem_test = memory(test, overflow_test);
          if (!wrapped && fits(mem_test)) accept(mem_test);
        } else if (!wrapped) {
          test[id].overflow = Fraction::Attn;
          mem_test = memory(test, overflow_test);
          if (!wrapped && fits(mem_test)) accept(mem_test);
        }
      }
      log("  - GPU " + std::to_string(id) + ": " + std::to_string(cur[id].n_layer) + " layers (" + std::to_string(cur[id].n_part) +
          " overflowing), " + mib(mem[id]) + " MiB used, " + mib(rq.free[id] - mem[id]) + " MiB free");
    }
  }
  if (wrapped) {
    r.moe_steps_not_modelled = true;
    r.projected = project(Assignment{rq.n_layer + 1, {}, {}}, ctx);
    return r;
  }
  const Assignment chosen = from_layers(cur, overflow_device, hp_ngl);
  r.ngl = chosen.ngl;
  r.tensor_split = chosen.tensor_split;
  r.overrides = chosen.overrides;
  r.projected = project(chosen, ctx);
  return r;
}

}  // namespace

FitResult fit(const FitRequest& rq, const Projector& project) {
  FitResult r;
  r.n_ctx = rq.n_ctx;  // the user's -c stands unless step 2 changes it (a return before step 2 keeps it)
  const std::size_t nd = rq.free.size();
  const auto hp_ngl = static_cast<std::uint32_t>(rq.n_layer);
  std::uint32_t n_ctx = rq.n_ctx;  // cparams->n_ctx as the fit changes it (0: the training context)
  auto ctx = [&] { return padded_context(n_ctx, rq.n_ctx_train); };
  auto log = [&](const std::string& line) { r.log.push_back(line); };

  // Step 1: the projection with the parameters as given.
  Assignment given;
  given.ngl = rq.ngl ? *rq.ngl : rq.n_layer + 1;  // -ngl -1 (the default): every slot
  const std::vector<DeviceProjection> full = project(given, ctx());
  std::int64_t sum_free = 0, sum_used = 0, sum_projected_free = 0, sum_model = 0, sum_margin = 0;
  bool changes_needed = false;
  for (std::size_t id = 0; id < nd; ++id) {
    const std::int64_t used = full[id].total(), free = rq.free[id] - used;
    sum_free += rq.free[id];
    sum_used += used;
    sum_projected_free += free;
    sum_model += full[id].model;
    sum_margin += rq.margin[id];
    changes_needed |= free < rq.margin[id];
  }
  log("projected to use " + mib(sum_used) + " MiB of device memory vs. " + mib(sum_free) + " MiB of free device memory");
  r.projected = full;
  if (!changes_needed) {
    log(nd == 1 ? "will leave " + mib(sum_projected_free) + " >= " + mib(rq.margin[0]) +
                      " MiB of free device memory, no changes needed"
                : "targets for free memory can be met on all devices, no changes needed");
    return r;
  }

  // Step 2: a smaller context, if the user did not set one.
  const std::int64_t global_surplus = sum_projected_free - sum_margin;
  if (global_surplus < 0) {
    log(nd == 1 ? "cannot meet free memory target of " + mib(rq.margin[0]) + " MiB, need to reduce device memory by " +
                      mib(-global_surplus) + " MiB"
                : "cannot meet free memory targets on all devices, need to use " + mib(-global_surplus) +
                      " MiB less in total");
    if (rq.n_ctx == 0) {
      if (rq.n_ctx_train > rq.n_ctx_min) {
        std::int64_t sum_used_target = sum_free - sum_margin;
        if (nd > 1) {
          // Whole layers per device waste about half a layer each (a third of one for a mixture of experts, whose
          // last layer can be partial): be conservative.
          const std::uint32_t ngl_param = rq.ngl ? static_cast<std::uint32_t>(*rq.ngl) : UINT32_MAX;
          const std::uint32_t layers = std::min(ngl_param, hp_ngl);
          // fit.cpp divides by this even when it is 0 (-ngl 0 on several GPUs); here the term is skipped.
          if (layers > 0) sum_used_target -= static_cast<std::int64_t>(nd + 1) * (sum_model / layers) / (rq.moe ? 6 : 2);
        }
        n_ctx = rq.n_ctx_min;
        std::int64_t used_min = 0;
        for (const auto& d : project(given, ctx())) used_min += d.total();
        if (sum_used_target > used_min) {
          n_ctx += static_cast<std::uint32_t>(static_cast<std::int64_t>(rq.n_ctx_train - rq.n_ctx_min) *
                                              (sum_used_target - used_min) / (sum_used - used_min));
          n_ctx = std::max(n_ctx - n_ctx % 256, rq.n_ctx_min);  // round down for the CUDA backend
          const std::int64_t per_ctx = (sum_used - used_min) / (rq.n_ctx_train - rq.n_ctx_min);
          log("context size reduced from " + std::to_string(rq.n_ctx_train) + " to " + std::to_string(n_ctx) +
              " -> need " + mib(static_cast<std::int64_t>(rq.n_ctx_train - n_ctx) * per_ctx) + " MiB less memory in total");
          if (nd <= 1) {
            log("entire model can be fit by reducing context");
            r.n_ctx = n_ctx;
            r.projected = project(given, ctx());
            return r;
          }
          log("entire model should be fit across devices by reducing context");
        } else {
          log("context size reduced from " + std::to_string(rq.n_ctx_train) + " to " + std::to_string(n_ctx) +
              " -> need " + mib(sum_used - used_min) + " MiB less memory in total");
        }
      } else {
        log("default model context size is " + std::to_string(rq.n_ctx_train) + " which is <= the min. context size of " +
            std::to_string(rq.n_ctx_min) + " -> no change");
      }
    } else {
      log("context size set by user to " + std::to_string(rq.n_ctx) + " -> no change");
    }
  }
  r.n_ctx = n_ctx;
  auto fail = [&](const std::string& why) {
    r.success = false;
    log("failed to fit params to free device memory: " + why);
    r.projected = project(given, ctx());
    return r;
  };
  if (rq.ngl) return fail("n_gpu_layers already set by user to " + std::to_string(*rq.ngl) + ", abort");
  if (nd > 1 && rq.tensor_split_given) return fail("model_params::tensor_split already set by user, abort");
  if (rq.overrides_given) return fail("model_params::tensor_buft_overrides already set by user, abort");
  if (rq.moe) return fit_moe(rq, project, ctx(), r);

  // Step 3: fill layers back to front, the last GPU first, by false position on its projected use.
  std::vector<std::int64_t> targets(nd);
  for (std::size_t id = 0; id < nd; ++id) targets[id] = rq.free[id] - rq.margin[id];
  std::vector<std::uint32_t> low(nd, 0);
  auto memory = [&](const std::vector<std::uint32_t>& counts) {
    std::vector<std::int64_t> m;
    for (const auto& d : project(from_counts(counts), ctx())) m.push_back(d.total());
    return m;
  };
  std::vector<std::int64_t> mem = memory(low);
  log("filling dense layers back-to-front:");
  for (int id = static_cast<int>(nd) - 1; id >= 0; --id) {
    std::uint32_t unassigned = hp_ngl + 1;
    for (std::size_t jd = static_cast<std::size_t>(id) + 1; jd < nd; ++jd) unassigned -= low[jd];
    std::vector<std::uint32_t> high = low;
    high[id] = unassigned;
    if (high[id] > 0) {
      std::vector<std::int64_t> mem_high = memory(high);
      if (mem_high[id] > targets[id]) {
        std::uint32_t delta = high[id] - low[id];
        while (delta > 1 && mem_high[id] != mem[id]) {  // (equal: fit.cpp would divide by zero; keep `low`)
          const std::uint32_t step = false_position_step(delta, targets[id], mem[id], mem_high[id]);
          std::vector<std::uint32_t> test = low;
          test[id] += step;
          const std::vector<std::int64_t> mem_test = memory(test);
          if (mem_test[id] <= targets[id]) {
            low = test;
            mem = mem_test;
          } else {
            high = test;
            mem_high = mem_test;
          }
          delta = high[id] - low[id];
        }
      } else {
        low = high;
        mem = mem_high;
      }
    }
    log("  - GPU " + std::to_string(id) + ": " + std::to_string(low[id]) + " layers, " + mib(mem[id]) + " MiB used, " +
        mib(rq.free[id] - mem[id]) + " MiB free");
  }
  const Assignment chosen = from_counts(low);
  r.ngl = chosen.ngl;
  r.tensor_split = chosen.tensor_split;
  r.projected = project(chosen, ctx());
  return r;
}

}  // namespace tiersim::strategy::llamacpp
