#pragma once
// The host CPU's kernels from a measurement of them: experiments/llamacpp/cpu_matmul_bench's CSV (ggml's
// CPU backend: streaming reads and matrix-vector products by weight type and thread count) into a
// hardware profile's host.cpu_kernels. Kept apart from the llama-bench runs it is validated against.
#include <string>
#include <utility>
#include <vector>

#include "hardware/profile.hpp"

namespace tiersim::calib {

struct CpuFit {
  hw::CpuKernelSpec kernels;
  std::string report;  // markdown: the fitted curves
};

// Reads the CSV (header kind,type,rows,cols,batch,threads,seconds,bytes,gbps,gflops; `read` rows give the
// read bandwidth by threads, `gemv` rows with batch 1 the rate of each type, summed over shapes as bytes
// over seconds; other rows are ignored). `cores` is the host's physical core count (llama.cpp's default -t).
// Bad input: InputError naming the file, line and column.
CpuFit fit_cpu_kernels(const std::string& csv_text, const std::string& file, int cores);

// ggml's MUL_MAT_ID on the CPU (cpu_matmul_bench --experts: `gemv_id` rows) measured on another run or host, made
// this profile's: `runs` are that run's CSVs (text, file), which must also hold dense `gemv` rows of some shape the
// main CSV has (the same type and thread count). Each batch-1 expert rate is scaled by the main CSV's dense rate over
// those shapes against the other run's: the experts' share of a dense product, measured on one host, carried to the
// profile's host. Adds kernels.gemv_id and a report section. InputError naming the file and key when a type and
// thread count has no dense reference.
void add_cpu_expert_kernels(CpuFit& fit, const std::string& main_csv_text, const std::string& main_file,
                            const std::vector<std::pair<std::string, std::string>>& runs);

// The source line a fit from `csv_path` (and the MUL_MAT_ID runs `expert_paths`) gets unless one is given.
std::string default_cpu_source(const std::string& csv_path, const std::vector<std::string>& expert_paths = {});

// A profile's YAML text with a host.cpu_kernels section (replacing one it has) after the host section's
// op_overhead line, in the schema's units; the rest of the text unchanged. InputError if the text has no
// host section with an op_overhead line.
std::string with_cpu_kernels(const std::string& profile_yaml, const std::string& file, const hw::CpuKernelSpec& kernels,
                             const std::string& source);

}  // namespace tiersim::calib
