#include "pipeline/comfy_budget.hpp"

#include <algorithm>

namespace tiersim::pipeline::comfy {

double minimum_inference(double reserve) { return 0.8 * 1073741824.0 + reserve; }

double minimum_required(double reserve, double memory_required) {
  return std::max(minimum_inference(reserve), memory_required + reserve);
}

double lowvram_budget(double free, double min_required, double min_inference, bool mid_2025) {
  const double ratio = 0.0;  // MIN_WEIGHT_MEMORY_RATIO on NVIDIA (0.4 on other vendors)
  const double floor = mid_2025 ? kMid2025Floor : 0.0;
  double budget = std::max({floor, free - min_required, std::min(free * ratio, free - min_inference)});
  if (mid_2025) budget = std::max(0.1, budget);
  else if (budget == 0) budget = 0.1;
  return budget;
}

}  // namespace tiersim::pipeline::comfy
