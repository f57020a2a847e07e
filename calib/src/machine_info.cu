// What was measured: GPU, driver, CUDA, PCIe link, host, and the nvidia_uvm module parameters.
#include <ctime>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <thread>

#include "measure.hpp"

namespace calib {
namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string first_line_with(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) return line.substr(line.find(':') + 1);
  return "";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.erase(s.begin());
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
  return s;
}

}  // namespace

void describe_machine(Csv& csv, const Options& o) {
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, o.device));
  int driver = 0, runtime = 0, count = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CUDA_CHECK(cudaGetDeviceCount(&count));
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  char when[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  csv.comment("measured_at", when);
  csv.comment("gpu_name", p.name);
  csv.comment("gpu_count", std::to_string(count));
  csv.comment("compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor));
  csv.comment("multiprocessors", std::to_string(p.multiProcessorCount));
  csv.comment("gpu_memory_total_bytes", std::to_string(total_b));
  csv.comment("gpu_memory_free_bytes", std::to_string(free_b));
  csv.comment("l2_bytes", std::to_string(p.l2CacheSize));
  csv.comment("cuda_driver_api", std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10));
  csv.comment("cuda_runtime", std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10));
  csv.comment("nvidia_driver", run("nvidia-smi --query-gpu=driver_version --format=csv,noheader -i " + std::to_string(o.device)));
  csv.comment("pcie_link", run("nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv,noheader -i " + std::to_string(o.device)));
  csv.comment("clocks_max_sm_mem_mhz", run("nvidia-smi --query-gpu=clocks.max.sm,clocks.max.mem --format=csv,noheader,nounits -i " + std::to_string(o.device)));
  csv.comment("host_cpu", trim(first_line_with("/proc/cpuinfo", "model name")));
  csv.comment("host_threads", std::to_string(std::thread::hardware_concurrency()));
  csv.comment("host_memory", trim(first_line_with("/proc/meminfo", "MemTotal")));
  csv.comment("kernel", run("uname -r"));
  // The managed-memory driver's tunables, as the loaded module has them.
  const std::string dir = "/sys/module/nvidia_uvm/parameters";
  if (DIR* d = opendir(dir.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      std::ifstream in(dir + "/" + n);
      std::string v;
      std::getline(in, v);
      csv.comment("uvm." + n, trim(v));
    }
  } else {
    csv.comment("uvm", "parameters not readable (" + dir + " absent)");
  }
  std::printf("calib: %s (cc %d.%d, %d SMs, %.1f GiB), driver API %d, runtime %d, %d GPU(s)\n", p.name, p.major,
              p.minor, p.multiProcessorCount, total_b / 1073741824.0, driver, runtime, count);
}

}  // namespace calib
