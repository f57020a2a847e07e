// llama.cpp's --fit, dense-model path: common/fit.cpp common_params_fit_impl (steps 1-3), in its order
// and integer arithmetic. See llamacpp_fit.hpp.
#include "policies/placement_rules/llamacpp_fit.hpp"

#include <algorithm>

namespace tiersim::strategy::llamacpp {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

std::string mib(std::int64_t bytes) { return std::to_string(bytes / kMiB); }

Assignment from_counts(const std::vector<std::uint32_t>& counts) {
  Assignment a;
  for (const auto n : counts) a.ngl += static_cast<int>(n);
  if (counts.size() > 1)
    for (const auto n : counts) a.tensor_split.push_back(static_cast<double>(n));
  return a;
}

}  // namespace

std::uint32_t padded_context(std::uint32_t n_ctx, std::uint32_t n_ctx_train) {
  const std::uint32_t c = n_ctx == 0 ? n_ctx_train : n_ctx;
  return (c + 255) / 256 * 256;  // llama_context: GGML_PAD(n_ctx, 256)
}

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
  if (rq.moe) {
    r.moe_steps_not_modelled = true;
    r.projected = project(given, ctx());
    return r;
  }

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
          // As fit.cpp: an int64 quotient stored in a uint32_t (a negative one wraps to a large step).
          auto step = static_cast<std::uint32_t>(static_cast<std::int64_t>(delta) * (targets[id] - mem[id]) /
                                                 (mem_high[id] - mem[id]));
          step = std::max(step, std::uint32_t{1});
          step = std::min(step, delta - 1);
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
