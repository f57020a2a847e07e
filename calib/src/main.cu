// tiersim_calib: measures this machine and writes the raw CSV that `tiersim_fit` turns into a
// hardware profile. Runs in a few minutes; allocates managed memory only within free GPU memory.
//   tiersim_calib --out results/calib/raw.csv [--device 0] [--quick] [--only host_link,device,fp32_gemm,...]
//   tiersim_calib --only oversubscribe --oversubscribe-leave GIB --out FILE   managed memory past a ballooned GPU
//   tiersim_calib --only remote_gemv --gemv-shapes FILE --out FILE   GEMVs on host operands at the file's shapes
//   tiersim_calib --only oversubscribe_decoder --oversubscribe-leave GIB --gemv-shapes LAYER --out FILE
//                                                    a decoder's weights (the file's shapes, one layer) past the GPU
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "measure.hpp"

int main(int argc, char** argv) {
  calib::Options o;
  std::string out = "calib_raw.csv";
  std::set<std::string> only;
  bool decoder_advice_given = false;
  std::string twice;  // the first shape --gemv-shapes lists again (a decoder layer may: its k and v)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a == "--device" && i + 1 < argc) o.device = std::atoi(argv[++i]);
    else if (a == "--quick") o.quick = true;
    else if (a == "--oversubscribe-leave" && i + 1 < argc) {
      char* end = nullptr;
      o.oversubscribe_leave = std::strtod(argv[++i], &end);
      if (!end || *end != 0 || !(o.oversubscribe_leave > 0 && o.oversubscribe_leave < 1e6)) {
        std::fprintf(stderr, "calib: --oversubscribe-leave takes GiB, a positive number: '%s'\n", argv[i]);
        return 2;
      }
    }
    else if (a == "--decoder-advice" && i + 1 < argc) {
      o.decoder_advice.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) {
        if (item != "plain" && item != "read_mostly" && item != "prefer_cpu_read_mostly") {
          std::fprintf(stderr, "calib: --decoder-advice: '%s' is not plain, read_mostly or prefer_cpu_read_mostly\n",
                       item.c_str());
          return 2;
        }
        o.decoder_advice.push_back(item);
      }
      if (o.decoder_advice.empty()) {
        std::fprintf(stderr, "calib: --decoder-advice needs at least one advice\n");
        return 2;
      }
      decoder_advice_given = true;
    }
    else if (a == "--gemv-shapes" && i + 1 < argc) {
      // One shape a line, "OUT IN" (output rows, input width), '#' starts a comment; anything else is refused.
      const std::string path = argv[++i];
      std::ifstream in(path);
      if (!in) {
        std::fprintf(stderr, "calib: --gemv-shapes: cannot open '%s'\n", path.c_str());
        return 2;
      }
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        const std::string text = line.substr(0, line.find('#'));
        std::istringstream fields(text);
        long out = 0, width = 0;
        std::string rest;
        if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
        if (!(fields >> out >> width) || (fields >> rest) || out < 1 || width < 1 || out > (1 << 20) || width > (1 << 20) ||
            double(out) * width * 2 > 1.6 * (1 << 30)) {
          std::fprintf(stderr, "%s:%d: gemv shape: expected 'OUT IN', two whole numbers from 1 to 1048576 whose bf16 "
                               "weight is at most 1.6 GiB, got '%s'\n", path.c_str(), n, line.c_str());
          return 2;
        }
        for (const auto& seen : o.gemv_shapes)
          if (seen == std::make_pair(int(out), int(width)) && twice.empty())  // refused below for remote_gemv
            twice = path + ":" + std::to_string(n) + ": gemv shape " + std::to_string(out) + " " + std::to_string(width) +
                    " is listed twice";
        o.gemv_shapes.push_back({int(out), int(width)});
      }
      if (o.gemv_shapes.empty()) {
        std::fprintf(stderr, "calib: --gemv-shapes: '%s' has no shape\n", path.c_str());
        return 2;
      }
    }
    else if (a == "--only" && i + 1 < argc) {
      std::string list = argv[++i];
      size_t start = 0;
      while (start <= list.size()) {
        const size_t comma = list.find(',', start);
        only.insert(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else {
      std::fprintf(stderr, "usage: tiersim_calib --out FILE [--device N] [--quick] [--only host_link,device,fp32_gemm,zero_copy,remote_gemm,remote_gemv,peer,managed,fresh_touch,alloc_calls,advised_cycle,advised_cycle_pressed,oversubscribe,oversubscribe_chunks,oversubscribe_decoder] [--oversubscribe-leave GIB] [--gemv-shapes FILE] [--decoder-advice LIST]\n");
      return 2;
    }
  }
  // A part name that is not one of them would run nothing at all: refused, naming it.
  const std::set<std::string> parts = {"host_link", "device",      "fp32_gemm", "zero_copy",  "remote_gemm",
                                       "remote_gemv", "peer",      "managed",   "fresh_touch", "alloc_calls", "advised_cycle",
                                       "oversubscribe", "oversubscribe_chunks", "oversubscribe_decoder",
                                       "advised_cycle_pressed"};
  for (const auto& name : only)
    if (!parts.count(name)) {
      std::fprintf(stderr, "calib: '--only': unknown part '%s'\n", name.c_str());
      return 2;
    }
  // The balloon's size only means something to the oversubscription part, which needs it: either alone is refused.
  o.oversubscribe_main = only.count("oversubscribe") > 0;
  o.oversubscribe_chunks = only.count("oversubscribe_chunks") > 0;
  o.oversubscribe_decoder = only.count("oversubscribe_decoder") > 0;
  const bool pressed = only.count("advised_cycle_pressed") > 0;
  const bool oversubscribes = o.oversubscribe_main || o.oversubscribe_chunks || o.oversubscribe_decoder;
  if ((o.oversubscribe_leave > 0) != (oversubscribes || pressed)) {
    std::fprintf(stderr, "calib: --oversubscribe-leave GIB and --only oversubscribe (or oversubscribe_chunks, "
                         "oversubscribe_decoder, advised_cycle_pressed) go "
                         "together (the part shrinks the GPU to that much with a balloon)\n");
    return 2;
  }
  // The shapes are remote_gemv's list, or oversubscribe_decoder's layer (which needs them): with one of the two alone.
  const bool shapes_part = only.size() == 1 && (only.count("remote_gemv") || only.count("oversubscribe_decoder"));
  if ((!o.gemv_shapes.empty() && !shapes_part) || (o.oversubscribe_decoder && o.gemv_shapes.empty())) {
    std::fprintf(stderr, "calib: --gemv-shapes FILE goes with --only remote_gemv or --only oversubscribe_decoder, alone "
                         "(the shapes are that part's; oversubscribe_decoder's layer, which it needs)\n");
    return 2;
  }
  if (decoder_advice_given && !o.oversubscribe_decoder) {
    std::fprintf(stderr, "calib: --decoder-advice goes with --only oversubscribe_decoder (the advice is that part's)\n");
    return 2;
  }
  if (!twice.empty() && only.count("remote_gemv")) {  // a shape measured once is one row
    std::fprintf(stderr, "%s\n", twice.c_str());
    return 2;
  }
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "calib: no CUDA device (%s)\n", e == cudaSuccess ? "none found" : cudaGetErrorString(e));
    return 3;
  }
  if (o.device < 0 || o.device >= count) {
    std::fprintf(stderr, "calib: --device %d but %d device(s)\n", o.device, count);
    return 2;
  }
  CUDA_CHECK(cudaSetDevice(o.device));
  calib::Csv csv(out);
  calib::describe_machine(csv, o);
  csv.comment("mode", o.quick ? "quick" : "full");
  auto want = [&](const char* name) { return only.empty() || only.count(name); };
  if (want("host_link")) calib::bench_host_link(csv, o);
  if (want("device")) calib::bench_device(csv, o);
  if (want("fp32_gemm")) calib::bench_fp32_gemm(csv, o);
  if (want("zero_copy")) calib::bench_zero_copy(csv, o);
  if (want("remote_gemm")) calib::bench_remote_gemm(csv, o);
  if (want("remote_gemv")) calib::bench_remote_gemv(csv, o);
  if (want("peer")) calib::bench_peer(csv, o);
  if (want("managed")) calib::bench_managed(csv, o);
  if (want("fresh_touch")) calib::bench_fresh_touch(csv, o);
  if (want("alloc_calls")) calib::bench_alloc_calls(csv, o);
  if (only.count("advised_cycle")) calib::bench_advised_cycle(csv, o);  // only when named (session 31's question)
  // Only when named, with a balloon: the same cycles past VRAM (session 32's question).
  if (pressed) calib::bench_advised_cycle_pressed(csv, o);
  // Only when named: it shrinks the GPU with a balloon and oversubscribes what is left.
  if (oversubscribes) calib::bench_oversubscribe(csv, o);
  CUDA_CHECK(cudaDeviceSynchronize());
  csv.write();
  std::printf("calib: wrote %s\n", out.c_str());
  return 0;
}
