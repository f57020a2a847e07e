#include <cstdio>

#include "report/reporters.hpp"

namespace tiersim::report {

void write_sweep_csv(std::ostream& out, const std::vector<SweepRow>& rows) {
  out << "offload_gb,donor,tps,step_seconds,prefill_seconds,vram_peak_bytes,offloaded_bytes,h2d_bytes_per_step,"
         "peer_bytes_per_step,status,error_band\n";
  char buf[512];
  for (const auto& r : rows) {
    if (r.ok) {
      std::snprintf(buf, sizeof buf, "%.3f,%s,%.6g,%.6g,%.6g,%.0f,%.0f,%.0f,%.0f,ok,", r.offload_gb, r.donor.c_str(),
                    r.summary.tps,
                    // a diffusion trace has no decode: its step is the median iteration
                    r.summary.decode_steps > 0 ? r.summary.decode_step_median : r.summary.iteration_median,
                    r.summary.prefill_seconds, r.vram_peak, r.offloaded,
                    r.summary.h2d_bytes_per_step, r.summary.peer_bytes_per_step);
      out << buf << r.error_band << "\n";  // no comma, quote or line break in a band
    } else {
      // The refusal as it was written, commas and all: quoted as RFC 4180 says, as the grid's CSV does.
      std::snprintf(buf, sizeof buf, "%.3f,%s,,,,,,,,", r.offload_gb, r.donor.c_str());
      out << buf << csv_field(r.error) << ",\n";
    }
  }
}

}  // namespace tiersim::report
