#include "hardware/link_lanes.hpp"

#include <algorithm>
#include <stdexcept>

namespace tiersim::hw {

double pcie_lane_rate(int generation) {
  static const double rates[] = {0.25e9, 0.5e9, 0.985e9, 1.969e9, 3.938e9, 7.563e9, 15.125e9};
  return generation >= 1 && generation <= 7 ? rates[generation - 1] : 0.0;
}

namespace {

void scale_pinned(TransferCurve& c, double f) {
  c.bandwidth *= f;
  for (auto& p : c.points) p.second *= f;
}

// A pageable curve under a link whose pinned curve is now `pinned`: capped where the link is slower.
void cap_pageable(TransferCurve& c, const TransferCurve& pinned) {
  c.bandwidth = std::min(c.bandwidth, pinned.bandwidth);
  for (auto& p : c.points) p.second = std::min(p.second, p.first / pinned.seconds(p.first));
}

}  // namespace

void rescale_host_link(HostLinkSpec& link, int from_generation, int from_width) {
  const double from = pcie_lane_rate(from_generation) * from_width;
  const double to = pcie_lane_rate(link.generation) * link.width;
  if (!(from > 0) || !(to > 0)) throw std::invalid_argument("host link: PCIe generation must be 1 to 7");
  if (from == to) return;
  const double f = to / from;
  scale_pinned(link.h2d_pinned, f);
  scale_pinned(link.d2h_pinned, f);
  cap_pageable(link.h2d_pageable, link.h2d_pinned);
  cap_pageable(link.d2h_pageable, link.d2h_pinned);
  if (link.d2h_fresh_pageable) cap_pageable(*link.d2h_fresh_pageable, link.d2h_pinned);
  link.bidirectional *= f;
}

}  // namespace tiersim::hw
