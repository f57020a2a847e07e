// cpu_matmul_bench: times the ggml CPU backend's matrix-vector and small-batch matrix products, and the host's
// streaming-read and copy bandwidth, to calibrate a host CPU independently of llama-bench.
//
// The product: weights W (type T, ROWS x COLS: ROWS outputs, COLS the reduction length, ggml's ne01 x ne00)
// times activations X (f32, COLS x BATCH), computed by ggml_backend_graph_compute on the CPU backend with N
// threads: the code path llama.cpp takes for a weight on the CPU (llamafile sgemm for batch > 1 where it
// applies; the conversion of X to the weight's vec_dot type included). Weights are random values quantized
// with ggml_quantize_chunk. So that they come from DRAM, as in a decode step, W is copied until the copies
// fill --rotate-bytes (default 512 MiB, more than a host's last-level cache); one graph holds one product per
// copy (all with the same X) and a timed pass computes that graph: seconds = pass / copies, so the thread
// start and the barrier between nodes are amortized as in a llama.cpp graph.
// Layout "plain" keeps ggml's row layout; "repack" puts the weights in the CPU backend's CPU_REPACK buffer
// type (interleaved rows), only where that buffer type takes the tensor (x86 with AVX2: Q4_0, Q4_K, IQ4_NL,
// MXFP4; Q2_K with AVX512). Which one llama.cpp uses for a weight it keeps on the CPU: its CPU buffer list
// is GPU host buffer (CUDA_Host, pinned) -> CPU extra (CPU_REPACK) -> CPU (llama-model.cpp,
// make_cpu_buft_list), so a CUDA build with a GPU puts them in pinned memory, plain; a CPU-only build, or
// --no-host 1, repacks them.
//
// Each product's result is checked once (first thread count, up to 512 rows spread over W) against a
// double-precision product of the dequantized weights; a relative error over 5% (or a NaN) stops the program.
//
// --experts E:U times llama.cpp's product over a stack of experts instead (MUL_MAT_ID, build_moe_ffn's
// ffn_{gate,up,down}_exps): W holds E experts of ROWS x COLS (ggml's ne00 x ne01 x ne02 = COLS x ROWS x E), each
// token's activations go to U of them. Each product of the graph uses the next U experts of its copy, so a pass
// reads every expert of every copy once, from DRAM as in a decode step; the bytes a product moves are its U
// experts' weights, the activations and the output.
// --backend gpu runs the same graphs on the first GPU device instead (ggml's CUDA backend in a CUDA build: MMVQ
// for a quantized matrix-vector product, its input quantized to q8_1 by a kernel of its own; graphs replayed as
// CUDA graphs, as llama.cpp's decode is), the weights in GPU memory: the rotation then streams them from HBM, past
// the L2 cache. One row per configuration, threads 0. (The program keeps its first name; it began with the CPU.)
//
// Output: CSV on stdout, one row per (kind, type, shape, batch, threads); notes on stderr.
//   kind    gemv (plain layout; every batch, not only 1) | gemv_repack | gemv_id (--experts) | read | copy;
//           gpu_gemv | gpu_gemv_id with --backend gpu
//   type    ggml type name in lower case (q4_k, q6_k, q8_0, f16, ...), or "mem" for the bandwidth rows
//   rows, cols, batch   the product's shape (0 for the bandwidth rows); with --experts one expert's shape
//   seconds one product: the median over the timed passes of pass time / copies (read, copy: the
//           median time of one pass over the buffer, the threads started and joined included)
//   bytes   what one product moves: weights + activations + output (read: the buffer; copy: 2 x the
//           buffer, read and written)
//   gbps    bytes / seconds / 1e9
//   gflops  2 x rows x cols x batch / seconds / 1e9 (0 for the bandwidth rows)
//
// Usage: cpu_matmul_bench [options]
//   --types LIST      q4_K,q6_K,q8_0,f16,q5_K,q4_0 (default; any ggml type name that quantizes without an imatrix)
//   --threads LIST    1,2,4,8,16 (default)
//   --batch LIST      1,4,8 (default)
//   --shapes LIST     ROWSxCOLS,... default 4096x4096,14336x4096,4096x14336,9728x2560,2560x9728
//   --layouts LIST    plain,repack (default)
//   --reps N          timed passes (default 10); --warmup N untimed passes first (default 2, at least 1)
//   --max-seconds S   stop a configuration's passes after S seconds of timing (default 1; at least 3 passes)
//   --rotate-bytes B  weight copies to stream through, in bytes (default 536870912; 0: one copy, cache-hot)
//   --bw-bytes B      buffer for the read/copy rows (default 1073741824; 0: no bandwidth rows)
//   --no-matmul       only the bandwidth rows
//   --seed N          (default 1)
//   --backend B       cpu (default) or gpu (no bandwidth rows, no repack layout; --threads ignored)
//   --experts E:U     MUL_MAT_ID over E experts of each shape, U used per token (E a multiple of U; plain layout)
//   --attention LIST  instead of products: llama.cpp's attention without flash attention on the CPU, per layer, for
//                     each HEADS:KV_HEADS:HEAD_DIM (below); --kv LIST the cached positions n_kv (default 256,512,1024),
//                     --batch the new tokens (default 1,512), --layers N (default 32), --threads as above
//
// --attention times what the CPU runs for one layer when llama.cpp keeps the KV cache in host memory
// (--no-kv-offload): flash attention is then off (llama_context::resolve_fused_ops finds the attention on another
// device than the layer), and every node from the KV store to the attention output runs on the CPU
// (llm_graph_context::build_attn_mha pins the output there; ggml_backend_sched's expansion gives the nodes between
// it and the cache writes the CPU). The nodes, as build_attn_mha and llama_kv_cache::cpy_k / cpy_v / get_k / get_v
// make them: SET_ROWS of the new K rows into the f16 cache, SET_ROWS of the new V values into the transposed f16
// cache (one element per row), MUL_MAT of the K view and Q (f32 precision), SOFT_MAX with the causal f32 mask and
// 1/sqrt(HEAD_DIM), MUL_MAT of the V view and the probabilities, and the CONT of the permuted output. Each layer
// has its own caches (kv_size = n_kv cells) and is computed by its own ggml_backend_graph_compute call, as
// ggml_backend_sched computes one split, on a persistent thread pool (poll 50, llama-bench's default), the
// --layers layers (default 32) in turn, as a model's layers follow each other. Output, one row per configuration:
//   kind=cpu_attention,heads,kv_heads,head_dim,n_kv,tokens,threads,seconds (one layer: median pass / layers),
//   kv_bytes (the K and V views the products read), flops (2 x 2 x heads x head_dim x n_kv x tokens: both products
//   over every cached position, as the unmasked products compute them)

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <strings.h>

namespace {

[[noreturn]] void die(const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cpu_matmul_bench: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

void note(const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "# ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

std::vector<std::string> split(const std::string & s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        size_t end = s.find(sep, start);
        if (end == std::string::npos) end = s.size();
        if (end > start) out.push_back(s.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

long long parse_int(const std::string & s, const char * what) {
    char * end = nullptr;
    errno = 0;
    long long v = strtoll(s.c_str(), &end, 10);
    if (errno != 0 || end == s.c_str() || *end != '\0') die("%s: not an integer: '%s'", what, s.c_str());
    return v;
}

double parse_double(const std::string & s, const char * what) {
    char * end = nullptr;
    errno = 0;
    double v = strtod(s.c_str(), &end);
    if (errno != 0 || end == s.c_str() || *end != '\0') die("%s: not a number: '%s'", what, s.c_str());
    return v;
}

std::vector<int> parse_int_list(const std::string & s, const char * what) {
    std::vector<int> out;
    for (const auto & p : split(s, ',')) {
        long long v = parse_int(p, what);
        if (v <= 0 || v > 1 << 20) die("%s: out of range: %lld", what, v);
        out.push_back((int) v);
    }
    if (out.empty()) die("%s: empty list", what);
    return out;
}

ggml_type type_by_name(const std::string & name) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const char * n = ggml_type_name((ggml_type) t);
        if (n != nullptr && strcasecmp(n, name.c_str()) == 0 && ggml_blck_size((ggml_type) t) > 0) {
            return (ggml_type) t;
        }
    }
    die("unknown ggml type '%s'", name.c_str());
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Options {
    std::vector<std::string> types   = {"q4_K", "q6_K", "q8_0", "f16", "q5_K", "q4_0"};
    std::vector<int>         threads = {1, 2, 4, 8, 16};
    std::vector<int>         batch   = {1, 4, 8};
    std::vector<std::pair<int64_t, int64_t>> shapes = {
        {4096, 4096}, {14336, 4096}, {4096, 14336}, {9728, 2560}, {2560, 9728}};
    std::vector<std::string> layouts = {"plain", "repack"};
    int     reps         = 10;
    int     warmup       = 2;
    double  max_seconds  = 1.0;
    int64_t rotate_bytes = 1LL << 29;
    int64_t bw_bytes     = 1LL << 30;
    bool    matmul       = true;
    uint32_t seed        = 1;
    bool    gpu          = false;
    int     experts      = 0;  // 0: a plain MUL_MAT
    int     used         = 0;
    std::vector<std::array<int, 3>> attention;  // HEADS:KV_HEADS:HEAD_DIM; non-empty: the attention mode
    std::vector<int>         kv      = {256, 512, 1024};
    int                      layers  = 32;
    bool batch_given = false;
};

Options parse_args(int argc, char ** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) die("%s needs a value", a.c_str());
            return argv[++i];
        };
        if (a == "--types") {
            o.types = split(value(), ',');
            if (o.types.empty()) die("--types: empty list");
        } else if (a == "--threads") {
            o.threads = parse_int_list(value(), "--threads");
        } else if (a == "--batch") {
            o.batch = parse_int_list(value(), "--batch");
            o.batch_given = true;
        } else if (a == "--layers") {
            o.layers = (int) parse_int(value(), "--layers");
            if (o.layers < 1 || o.layers > 1024) die("--layers: 1 to 1024");
        } else if (a == "--kv") {
            o.kv = parse_int_list(value(), "--kv");
        } else if (a == "--attention") {
            for (const auto & item : split(value(), ',')) {
                auto f = split(item, ':');
                if (f.size() != 3) die("--attention: expected HEADS:KV_HEADS:HEAD_DIM, got '%s'", item.c_str());
                std::array<int, 3> h{};
                for (int k = 0; k < 3; ++k) {
                    const long long v = parse_int(f[k], "--attention");
                    if (v < 1 || v > 4096) die("--attention: '%s' out of range (1 to 4096)", item.c_str());
                    h[k] = (int) v;
                }
                if (h[0] % h[1] != 0) die("--attention: HEADS must be a multiple of KV_HEADS, got '%s'", item.c_str());
                o.attention.push_back(h);
            }
            if (o.attention.empty()) die("--attention: empty list");
        } else if (a == "--shapes") {
            o.shapes.clear();
            for (const auto & s : split(value(), ',')) {
                auto rc = split(s, 'x');
                if (rc.size() != 2) die("--shapes: expected ROWSxCOLS, got '%s'", s.c_str());
                long long r = parse_int(rc[0], "--shapes"), c = parse_int(rc[1], "--shapes");
                if (r <= 0 || c <= 0) die("--shapes: '%s' must be positive", s.c_str());
                o.shapes.push_back({r, c});
            }
            if (o.shapes.empty()) die("--shapes: empty list");
        } else if (a == "--layouts") {
            o.layouts = split(value(), ',');
            for (const auto & l : o.layouts) {
                if (l != "plain" && l != "repack") die("--layouts: plain or repack, got '%s'", l.c_str());
            }
            if (o.layouts.empty()) die("--layouts: empty list");
        } else if (a == "--reps") {
            o.reps = (int) parse_int(value(), "--reps");
            if (o.reps < 1) die("--reps must be >= 1");
        } else if (a == "--warmup") {
            o.warmup = (int) parse_int(value(), "--warmup");
            if (o.warmup < 0) die("--warmup must be >= 0");
        } else if (a == "--max-seconds") {
            o.max_seconds = parse_double(value(), "--max-seconds");
        } else if (a == "--rotate-bytes") {
            o.rotate_bytes = parse_int(value(), "--rotate-bytes");
            if (o.rotate_bytes < 0) die("--rotate-bytes must be >= 0");
        } else if (a == "--bw-bytes") {
            o.bw_bytes = parse_int(value(), "--bw-bytes");
            if (o.bw_bytes < 0) die("--bw-bytes must be >= 0");
        } else if (a == "--no-matmul") {
            o.matmul = false;
        } else if (a == "--seed") {
            o.seed = (uint32_t) parse_int(value(), "--seed");
        } else if (a == "--backend") {
            const std::string b = value();
            if (b != "cpu" && b != "gpu") die("--backend: cpu or gpu, got '%s'", b.c_str());
            o.gpu = b == "gpu";
        } else if (a == "--experts") {
            const std::string v = value();
            auto eu = split(v, ':');
            if (eu.size() != 2) die("--experts: expected E:U (experts:used), got '%s'", v.c_str());
            const long long e = parse_int(eu[0], "--experts"), u = parse_int(eu[1], "--experts");
            if (e < 1 || e > 4096 || u < 1 || u > e || e % u != 0)
                die("--experts: E from 1 to 4096, U from 1 to E and dividing it, got '%s'", v.c_str());
            o.experts = (int) e;
            o.used = (int) u;
        } else if (a == "-h" || a == "--help") {
            fprintf(stderr, "usage: see the comment at the top of experiments/llamacpp/cpu_matmul_bench.cpp\n");
            exit(0);
        } else {
            die("unknown argument '%s' (--help)", a.c_str());
        }
    }
    if (o.gpu) {
        o.bw_bytes = 0;
        o.layouts = {"plain"};
        o.threads = {0};
    }
    if (o.experts > 0) o.layouts = {"plain"};
    if (!o.attention.empty()) {
        if (o.gpu) die("--attention runs on the CPU only");
        if (!o.batch_given) o.batch = {1, 512};
        o.bw_bytes = 0;
        o.matmul = false;
    }
    return o;
}

// ---------------------------------------------------------------------------------------------------------
// Streaming bandwidth: T threads, each over its own contiguous slice.

struct AlignedBuf {
    void * p = nullptr;
    size_t n = 0;
    explicit AlignedBuf(size_t bytes) : n(bytes) {
        if (posix_memalign(&p, 4096, bytes) != 0 || p == nullptr) die("cannot allocate %zu bytes", bytes);
    }
    ~AlignedBuf() { free(p); }
    AlignedBuf(const AlignedBuf &) = delete;
    AlignedBuf & operator=(const AlignedBuf &) = delete;
};

template <typename F>
void run_threads(int n, F && f) {
    std::vector<std::thread> ts;
    ts.reserve(n);
    for (int i = 0; i < n; ++i) ts.emplace_back(f, i);
    for (auto & t : ts) t.join();
}

uint64_t sum_slice(const uint64_t * p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += p[i]; s1 += p[i + 1]; s2 += p[i + 2]; s3 += p[i + 3];
    }
    for (; i < n; ++i) s0 += p[i];
    return s0 + s1 + s2 + s3;
}

void bandwidth(const Options & o) {
    const size_t words = (size_t) o.bw_bytes / sizeof(uint64_t);
    if (words == 0) return;
    const size_t bytes = words * sizeof(uint64_t);
    AlignedBuf src(bytes), dst(bytes);
    const int max_t = *std::max_element(o.threads.begin(), o.threads.end());
    // first touch spread over the threads, as the timed passes use them
    run_threads(max_t, [&](int t) {
        size_t a = words * t / max_t, b = words * (t + 1) / max_t;
        uint64_t * s = (uint64_t *) src.p;
        for (size_t i = a; i < b; ++i) s[i] = i * 0x9E3779B97F4A7C15ull;
        memset((char *) dst.p + a * 8, 0, (b - a) * 8);
    });
    std::atomic<uint64_t> sink{0};
    for (const char * kind : {"read", "copy"}) {
        const bool copy = kind[0] == 'c';
        for (int nt : o.threads) {
            auto pass = [&]() {
                double t0 = now_s();
                run_threads(nt, [&](int t) {
                    size_t a = words * t / nt, b = words * (t + 1) / nt;
                    if (copy) {
                        memcpy((char *) dst.p + a * 8, (const char *) src.p + a * 8, (b - a) * 8);
                    } else {
                        sink.fetch_add(sum_slice((const uint64_t *) src.p + a, b - a), std::memory_order_relaxed);
                    }
                });
                return now_s() - t0;
            };
            for (int w = 0; w < std::max(1, o.warmup); ++w) pass();
            std::vector<double> times;
            double spent = 0;
            for (int r = 0; r < o.reps; ++r) {
                double t = pass();
                times.push_back(t);
                spent += t;
                if (r >= 2 && spent > o.max_seconds) break;
            }
            double s = median(times);
            double moved = copy ? 2.0 * bytes : (double) bytes;
            printf("%s,mem,0,0,0,%d,%.9f,%.0f,%.3f,0\n", kind, nt, s, moved, moved / s / 1e9);
            fflush(stdout);
        }
    }
    if (sink.load() == 42) note("(sink %" PRIu64 ")", sink.load());  // keeps the sums alive
}

// ---------------------------------------------------------------------------------------------------------
// MUL_MAT on the CPU backend.

// The backend the products run on: the CPU's, or with --backend gpu the first GPU device's (`cpu` is then null and
// `host_buft` is the GPU's own memory, where the activations and outputs live too).
struct Backend {
    ggml_backend_t             cpu        = nullptr;
    ggml_backend_t             compute    = nullptr;
    ggml_backend_dev_t         dev        = nullptr;
    ggml_backend_buffer_type_t host_buft  = nullptr;
    ggml_backend_buffer_type_t repack_buft = nullptr;
};

Backend init_backend(bool gpu) {
    Backend b;
    if (gpu) {
        b.compute = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_GPU, nullptr);
        if (b.compute == nullptr) die("--backend gpu: no GPU device (a build without CUDA, or no GPU visible)");
        b.dev = ggml_backend_get_device(b.compute);
        if (b.dev == nullptr) die("ggml_backend_get_device(GPU) returned NULL");
        b.host_buft = ggml_backend_get_default_buffer_type(b.compute);
        if (b.host_buft == nullptr) die("ggml_backend_get_default_buffer_type(GPU) returned NULL");
        note("GPU backend %s: %s", ggml_backend_name(b.compute), ggml_backend_dev_description(b.dev));
        return b;
    }
    b.cpu = ggml_backend_cpu_init();
    if (b.cpu == nullptr) die("ggml_backend_cpu_init failed");
    b.compute = b.cpu;
    b.dev = ggml_backend_get_device(b.cpu);
    if (b.dev == nullptr) die("ggml_backend_get_device(CPU) returned NULL");
    b.host_buft = ggml_backend_cpu_buffer_type();
    if (b.host_buft == nullptr) die("ggml_backend_cpu_buffer_type returned NULL");
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(b.dev);
    if (reg == nullptr) die("ggml_backend_dev_backend_reg(CPU) returned NULL");
    auto get_extra = (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    if (get_extra != nullptr) {
        for (ggml_backend_buffer_type_t * p = get_extra(b.dev); p != nullptr && *p != nullptr; ++p) {
            const char * name = ggml_backend_buft_name(*p);
            note("CPU extra buffer type: %s", name ? name : "(null)");
            if (name != nullptr && strcmp(name, "CPU_REPACK") == 0) b.repack_buft = *p;
        }
    }
    if (b.repack_buft == nullptr) note("no CPU_REPACK buffer type: layout 'repack' gives no rows");
    return b;
}

// Random weights quantized to `type`, rows x cols, row by row in parallel.
std::vector<uint8_t> make_weights(ggml_type type, int64_t rows, int64_t cols, uint32_t seed) {
    if (cols % ggml_blck_size(type) != 0) die("type %s needs cols divisible by %" PRId64 ", got %" PRId64, ggml_type_name(type), (int64_t) ggml_blck_size(type), cols);
    if (ggml_quantize_requires_imatrix(type)) die("type %s needs an importance matrix; not supported here", ggml_type_name(type));
    const size_t row_size = ggml_row_size(type, cols);
    std::vector<uint8_t> q(row_size * rows);
    int nt = (int) std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<size_t> written(nt, 0);
    run_threads(nt, [&](int t) {
        int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
        std::mt19937 rng(seed * 7919u + (uint32_t) t);
        std::normal_distribution<float> nd(0.0f, 0.02f);
        const int64_t chunk = 64;
        std::vector<float> f(chunk * cols);
        for (int64_t r = r0; r < r1; r += chunk) {
            int64_t nr = std::min(chunk, r1 - r);
            for (int64_t i = 0; i < nr * cols; ++i) f[i] = nd(rng);
            // ggml_quantize_chunk indexes src from `start`: pass the chunk's own rows at offset 0, and the
            // destination already advanced to row r.
            written[t] += ggml_quantize_chunk(type, f.data(), q.data() + r * row_size, 0, nr, cols, nullptr);
        }
    });
    size_t total = 0;
    for (size_t w : written) total += w;
    if (total != q.size()) die("ggml_quantize_chunk wrote %zu bytes for %s %" PRId64 "x%" PRId64 ", expected %zu", total, ggml_type_name(type), rows, cols, q.size());
    return q;
}

// `copies` weight tensors, all holding the same quantized data, in one buffer of `buft`; with experts, each a
// stack of that many experts, every one holding the data.
struct WeightSet {
    ggml_context *             ctx    = nullptr;
    ggml_backend_buffer_t      buf    = nullptr;
    std::vector<ggml_tensor *> w;
    size_t                     bytes  = 0;  // one copy (every expert of it)
    ~WeightSet() {
        if (buf) ggml_backend_buffer_free(buf);
        if (ctx) ggml_free(ctx);
    }
};

// Activations X (cols x batch), one output per weight copy, and one graph holding every product
// out_i = W_i x X in turn: a pass streams every copy once, as a decode step streams its layers. With experts
// (E, U): X is cols x 1 x batch, and copy c holds E / U products, the g-th over experts gU .. gU + U - 1 (its
// ids tensor, the same for every token), so a pass still reads every weight byte once.
struct ProductSet {
    ggml_context *        ctx   = nullptr;
    ggml_backend_buffer_t buf   = nullptr;
    ggml_cgraph *         graph = nullptr;
    ggml_tensor *         out0  = nullptr;  // W_0 x X (experts 0 .. U-1), checked against a reference
    int                   nodes = 0;        // products in the graph
    std::vector<std::pair<ggml_tensor *, std::vector<int32_t>>> ids;  // expert lists and their values
    ~ProductSet() {
        if (buf) ggml_backend_buffer_free(buf);
        if (ctx) ggml_free(ctx);
    }
};

// Returns false where `buft` (the repack one) does not take this weight: nothing is measured then.
bool build_weights(WeightSet & ws, const Backend & be, ggml_backend_buffer_type_t buft, ggml_type type,
                   int64_t rows, int64_t cols, int copies, int experts, const std::vector<uint8_t> & q) {
    const int64_t stack = std::max(1, experts);
    ggml_init_params ip = {
        /*.mem_size   =*/ ggml_tensor_overhead() * ((size_t) copies + 4),
        /*.mem_buffer =*/ nullptr,
        /*.no_alloc   =*/ true,
    };
    ws.ctx = ggml_init(ip);
    if (ws.ctx == nullptr) die("ggml_init failed (weights)");
    for (int i = 0; i < copies; ++i) {
        ggml_tensor * t = ggml_new_tensor_3d(ws.ctx, type, cols, rows, stack);
        if (t == nullptr) die("ggml_new_tensor_3d(weights) failed");
        ggml_format_name(t, "w%d", i);
        ws.w.push_back(t);
    }
    ws.bytes = ggml_nbytes(ws.w[0]);
    if (ws.bytes != q.size() * stack) die("weight tensor is %zu bytes, quantized data %zu x %" PRId64, ws.bytes, q.size(), stack);
    ws.buf = ggml_backend_alloc_ctx_tensors_from_buft(ws.ctx, buft);
    if (ws.buf == nullptr) die("cannot allocate %d x %zu bytes of weights in %s", copies, ws.bytes, ggml_backend_buft_name(buft));
    ggml_backend_buffer_set_usage(ws.buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);

    // the repack buffer type only takes weights it has a kernel for: ask the device, as llama.cpp does
    // (a probe product in a scratch context; its activations need no memory for the question)
    {
        ggml_init_params pp = { ggml_tensor_overhead() * 4, nullptr, true };
        ggml_context * pc = ggml_init(pp);
        if (pc == nullptr) die("ggml_init failed (probe)");
        ggml_tensor * y = nullptr;
        if (experts > 0) {
            ggml_tensor * x   = ggml_new_tensor_3d(pc, GGML_TYPE_F32, cols, 1, 1);
            ggml_tensor * ids = ggml_new_tensor_2d(pc, GGML_TYPE_I32, 1, 1);
            y = x && ids ? ggml_mul_mat_id(pc, ws.w[0], x, ids) : nullptr;
        } else {
            ggml_tensor * x = ggml_new_tensor_2d(pc, GGML_TYPE_F32, cols, 1);
            y = x ? ggml_mul_mat(pc, ws.w[0], x) : nullptr;
        }
        if (y == nullptr) die("ggml_mul_mat(_id) failed (probe)");
        const bool ok = ggml_backend_dev_supports_op(be.dev, y);
        ggml_free(pc);
        if (!ok) return false;
    }
    for (auto * t : ws.w)
        for (int64_t e = 0; e < stack; ++e) ggml_backend_tensor_set(t, q.data(), e * q.size(), q.size());
    return true;
}

void build_products(ProductSet & ps, const Backend & be, const WeightSet & ws, int64_t cols, int batch,
                    const std::vector<float> & x, int experts, int used) {
    const int groups = experts > 0 ? experts / used : 1;
    const size_t n = ws.w.size() * (size_t) groups;
    const size_t graph_size = 2 * n + 8;
    ggml_init_params ip = {
        /*.mem_size   =*/ ggml_tensor_overhead() * (n + groups + 4) + ggml_graph_overhead_custom(graph_size, false),
        /*.mem_buffer =*/ nullptr,
        /*.no_alloc   =*/ true,
    };
    ps.ctx = ggml_init(ip);
    if (ps.ctx == nullptr) die("ggml_init failed (products)");
    ggml_tensor * X = experts > 0 ? ggml_new_tensor_3d(ps.ctx, GGML_TYPE_F32, cols, 1, batch)
                                  : ggml_new_tensor_2d(ps.ctx, GGML_TYPE_F32, cols, batch);
    if (X == nullptr) die("ggml_new_tensor(activations) failed");
    ggml_set_name(X, "x");
    if (experts > 0) {
        for (int g = 0; g < groups; ++g) {
            ggml_tensor * t = ggml_new_tensor_2d(ps.ctx, GGML_TYPE_I32, used, batch);
            if (t == nullptr) die("ggml_new_tensor_2d(ids) failed");
            std::vector<int32_t> v((size_t) used * batch);
            for (size_t i = 0; i < v.size(); ++i) v[i] = g * used + (int32_t) (i % used);
            ps.ids.emplace_back(t, std::move(v));
        }
    }
    ps.graph = ggml_new_graph_custom(ps.ctx, graph_size, false);
    if (ps.graph == nullptr) die("ggml_new_graph_custom failed");
    for (size_t i = 0; i < n; ++i) {
        ggml_tensor * w = ws.w[i / groups];
        ggml_tensor * y = experts > 0 ? ggml_mul_mat_id(ps.ctx, w, X, ps.ids[i % groups].first) : ggml_mul_mat(ps.ctx, w, X);
        if (y == nullptr) die("ggml_mul_mat(_id) failed");
        ggml_build_forward_expand(ps.graph, y);
        if (i == 0) ps.out0 = y;
    }
    ps.nodes = ggml_graph_n_nodes(ps.graph);
    if (ps.nodes != (int) n) die("graph has %d nodes, expected %zu", ps.nodes, n);
    ps.buf = ggml_backend_alloc_ctx_tensors_from_buft(ps.ctx, be.host_buft);
    if (ps.buf == nullptr) die("cannot allocate activations and outputs");
    ggml_backend_tensor_set(X, x.data(), 0, x.size() * sizeof(float));
    for (const auto & [t, v] : ps.ids) ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(int32_t));
}

// The relative error ||y - ref|| / ||ref|| of y = W x X against a double-precision product of the
// dequantized weights: catches a broken kernel or layout (X's own quantization gives about 1e-2 or less).
double check_product(ggml_type type, int64_t rows, int64_t cols, int batch, int slots, const std::vector<uint8_t> & q,
                     const std::vector<float> & x, const ggml_tensor * out0) {
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    const bool f32 = type == GGML_TYPE_F32;  // stored as is: ggml has no to_float for it
    if (!f32 && (tt == nullptr || tt->to_float == nullptr)) die("no to_float for %s", ggml_type_name(type));
    // y is rows x slots x batch: with experts, slot j is expert j's product (all hold the same weights)
    std::vector<float> y((size_t) rows * slots * batch);
    ggml_backend_tensor_get(out0, y.data(), 0, y.size() * sizeof(float));
    const size_t row_size = ggml_row_size(type, cols);
    std::vector<float> wrow(cols);
    double num = 0, den = 0;
    const int64_t step = std::max<int64_t>(1, rows / 512);
    for (int64_t r = 0; r < rows; r += step) {
        if (f32) memcpy(wrow.data(), q.data() + r * row_size, cols * sizeof(float));
        else tt->to_float(q.data() + r * row_size, wrow.data(), cols);
        for (int b = 0; b < batch; ++b) {
            double acc = 0;
            const float * xb = x.data() + (size_t) b * cols;
            for (int64_t c = 0; c < cols; ++c) acc += (double) wrow[c] * xb[c];
            for (int j = 0; j < slots; ++j) {
                const double d = (double) y[((size_t) b * slots + j) * rows + r] - acc;
                num += d * d;
                den += acc * acc;
            }
        }
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

void matmuls(const Options & o, const Backend & be) {
    std::mt19937 rng(o.seed);
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    for (const auto & tname : o.types) {
        const ggml_type type = type_by_name(tname);
        std::string tlower = ggml_type_name(type);
        for (auto & c : tlower) c = (char) tolower((unsigned char) c);
        for (const auto & [rows, cols] : o.shapes) {
            double tq = now_s();
            std::vector<uint8_t> q = make_weights(type, rows, cols, o.seed);
            note("%s %" PRId64 "x%" PRId64 ": %.1f MiB of weights, quantized in %.2f s", ggml_type_name(type), rows, cols,
                 q.size() / 1048576.0, now_s() - tq);
            const int64_t copy_bytes = (int64_t) q.size() * std::max(1, o.experts);
            const int copies = o.rotate_bytes > 0
                ? (int) std::max<int64_t>(1, (o.rotate_bytes + copy_bytes - 1) / copy_bytes) : 1;
            for (const auto & layout : o.layouts) {
                ggml_backend_buffer_type_t buft = layout == "repack" ? be.repack_buft : be.host_buft;
                if (buft == nullptr) continue;
                const char * kind = layout == "repack" ? "gemv_repack"
                                  : o.experts > 0 ? (o.gpu ? "gpu_gemv_id" : "gemv_id")
                                  : o.gpu ? "gpu_gemv" : "gemv";
                WeightSet ws;
                double tb = now_s();
                if (!build_weights(ws, be, buft, type, rows, cols, copies, o.experts, q)) {
                    note("%s: %s %" PRId64 "x%" PRId64 " not taken by %s; skipped", kind, ggml_type_name(type), rows, cols,
                         ggml_backend_buft_name(buft));
                    continue;
                }
                note("%s %s %" PRId64 "x%" PRId64 ": %d weight copies (%.0f MiB), set in %.2f s", kind, ggml_type_name(type),
                     rows, cols, copies, copies * (double) ws.bytes / 1048576.0, now_s() - tb);
                for (int batch : o.batch) {
                    std::vector<float> x((size_t) cols * batch);
                    for (auto & v : x) v = ud(rng);
                    ProductSet ps;
                    build_products(ps, be, ws, cols, batch, x, o.experts, o.used);
                    // what one product moves: its weights (with experts, the U it uses), X and its output
                    const int slots = o.experts > 0 ? o.used : 1;
                    const double moved = (double) q.size() * slots + (double) cols * batch * 4 + (double) rows * slots * batch * 4;
                    const double flops = 2.0 * rows * cols * batch * slots;
                    for (int nt : o.threads) {
                        if (be.cpu != nullptr) ggml_backend_cpu_set_n_threads(be.cpu, nt);
                        // one pass = every product once; the time of one product = the pass / products
                        auto pass = [&]() {
                            double t0 = now_s();
                            ggml_status st = ggml_backend_graph_compute(be.compute, ps.graph);
                            double t = now_s() - t0;
                            if (st != GGML_STATUS_SUCCESS) die("ggml_backend_graph_compute failed: %s", ggml_status_to_string(st));
                            return t;
                        };
                        for (int i = 0; i < std::max(1, o.warmup); ++i) pass();
                        if (nt == o.threads.front()) {
                            const double err = check_product(type, rows, cols, batch, slots, q, x, ps.out0);
                            if (!std::isfinite(err) || err > 0.05) {
                                die("%s %s %" PRId64 "x%" PRId64 " batch %d: result differs from the reference (relative error %.3g)",
                                    kind, ggml_type_name(type), rows, cols, batch, err);
                            }
                            note("%s %s %" PRId64 "x%" PRId64 " batch %d: relative error vs reference %.2e", kind,
                                 ggml_type_name(type), rows, cols, batch, err);
                        }
                        std::vector<double> times;
                        double spent = 0;
                        for (int r = 0; r < o.reps; ++r) {
                            double t = pass();
                            times.push_back(t / ps.nodes);
                            spent += t;
                            if (r >= 2 && spent > o.max_seconds) break;
                        }
                        const double sec = median(times);
                        printf("%s,%s,%" PRId64 ",%" PRId64 ",%d,%d,%.9f,%.0f,%.3f,%.3f\n", kind, tlower.c_str(), rows,
                               cols, batch, nt, sec, moved, moved / sec / 1e9, flops / sec / 1e9);
                        fflush(stdout);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// llama.cpp's attention without flash attention, on the CPU (--attention; see the comment at the top).

struct AttentionLayer {
    ggml_tensor * k_cache = nullptr, * v_cache = nullptr;
    ggml_tensor * k_cur = nullptr, * v_cur = nullptr, * q = nullptr, * out = nullptr;
    ggml_cgraph * graph = nullptr;
};

void attention(const Options & o) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    if (cpu == nullptr) die("ggml_backend_cpu_init failed");
    printf("kind,heads,kv_heads,head_dim,n_kv,tokens,threads,seconds,kv_bytes,flops\n");
    fflush(stdout);
    std::mt19937 rng(o.seed);
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    for (const auto & [H, HKV, D] : o.attention) {
        for (int n_kv : o.kv) {
            for (int T : o.batch) {
                if (T > n_kv) { note("attention: %d tokens > %d cached positions; skipped", T, n_kv); continue; }
                const int64_t kv_size = n_kv, gqa = (int64_t) HKV * D;
                const double cache_bytes = 2.0 * gqa * kv_size * 2;  // K and V, f16
                const int layers = o.layers;
                const size_t per_layer_nodes = 16;
                const size_t graph_size = per_layer_nodes * 2;
                ggml_init_params ip = {
                    /*.mem_size   =*/ (ggml_tensor_overhead() * 24 + ggml_graph_overhead_custom(graph_size, false)) * layers
                                      + ggml_tensor_overhead() * 8,
                    /*.mem_buffer =*/ nullptr,
                    /*.no_alloc   =*/ true,
                };
                ggml_context * ctx = ggml_init(ip);
                if (ctx == nullptr) die("ggml_init failed (attention)");
                // shared inputs: the cells written, the V element indices, the causal mask
                ggml_tensor * k_idxs = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, T);
                ggml_tensor * v_idxs = ggml_new_tensor_2d(ctx, GGML_TYPE_I64, gqa * T, 1);
                ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_kv, T);
                if (!k_idxs || !v_idxs || !mask) die("ggml_new_tensor failed (attention inputs)");
                std::vector<AttentionLayer> L(layers);
                for (auto & l : L) {
                    l.k_cache = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, gqa, kv_size);
                    l.v_cache = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, gqa, kv_size);  // read transposed
                    l.k_cur = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, HKV, T);
                    l.v_cur = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, HKV, T);
                    l.q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, H, T);
                    if (!l.k_cache || !l.v_cache || !l.k_cur || !l.v_cur || !l.q) die("ggml_new_tensor failed (attention layer)");
                    // cpy_k: the new rows into the cache; cpy_v (transposed cache): one element per row
                    ggml_tensor * ks = ggml_set_rows(ctx, l.k_cache, ggml_reshape_2d(ctx, l.k_cur, gqa, T), k_idxs);
                    ggml_tensor * v_view = ggml_reshape_2d(ctx, l.v_cache, 1, ggml_nelements(l.v_cache));
                    ggml_tensor * vs = ggml_set_rows(ctx, v_view, ggml_reshape_2d(ctx, l.v_cur, 1, gqa * T), v_idxs);
                    // get_k / get_v views over the cells (the stores above ordered before them by the graph)
                    ggml_tensor * k = ggml_view_4d(ctx, l.k_cache, D, HKV, n_kv, 1, ggml_row_size(GGML_TYPE_F16, D),
                                                   ggml_row_size(GGML_TYPE_F16, gqa), ggml_row_size(GGML_TYPE_F16, gqa * kv_size), 0);
                    ggml_tensor * v = ggml_view_4d(ctx, l.v_cache, n_kv, HKV, D, 1, ggml_row_size(GGML_TYPE_F16, kv_size * D),
                                                   ggml_row_size(GGML_TYPE_F16, kv_size), ggml_row_size(GGML_TYPE_F16, kv_size * gqa), 0);
                    ggml_tensor * qp = ggml_permute(ctx, l.q, 0, 2, 1, 3);
                    ggml_tensor * kp = ggml_permute(ctx, k, 0, 2, 1, 3);
                    ggml_tensor * vp = ggml_permute(ctx, v, 0, 2, 1, 3);
                    ggml_tensor * kq = ggml_mul_mat(ctx, kp, qp);
                    ggml_mul_mat_set_prec(kq, GGML_PREC_F32);
                    kq = ggml_soft_max_ext(ctx, kq, mask, 1.0f / std::sqrt((float) D), 0.0f);
                    ggml_tensor * kqv = ggml_mul_mat(ctx, vp, kq);
                    l.out = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), (int64_t) D * H, T);
                    if (!ks || !vs || !l.out) die("building the attention graph failed");
                    l.graph = ggml_new_graph_custom(ctx, graph_size, false);
                    if (l.graph == nullptr) die("ggml_new_graph_custom failed (attention)");
                    ggml_build_forward_expand(l.graph, ks);
                    ggml_build_forward_expand(l.graph, vs);
                    ggml_build_forward_expand(l.graph, l.out);
                }
                ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_buffer_type());
                if (buf == nullptr) die("cannot allocate %d attention layers (%.0f MiB of caches)", layers, layers * cache_bytes / 1048576.0);
                // the new tokens are the last T of the n_kv positions; token t sees cells 0 .. n_kv - T + t
                std::vector<int64_t> ki(T), vi((size_t) gqa * T);
                for (int t = 0; t < T; ++t) ki[t] = n_kv - T + t;
                for (int t = 0; t < T; ++t)
                    for (int64_t j = 0; j < gqa; ++j) vi[(size_t) t * gqa + j] = j * kv_size + ki[t];
                std::vector<float> m((size_t) n_kv * T);
                for (int t = 0; t < T; ++t)
                    for (int c = 0; c < n_kv; ++c) m[(size_t) t * n_kv + c] = c <= n_kv - T + t ? 0.0f : -INFINITY;
                ggml_backend_tensor_set(k_idxs, ki.data(), 0, ki.size() * sizeof(int64_t));
                ggml_backend_tensor_set(v_idxs, vi.data(), 0, vi.size() * sizeof(int64_t));
                ggml_backend_tensor_set(mask, m.data(), 0, m.size() * sizeof(float));
                {
                    std::vector<ggml_fp16_t> c((size_t) gqa * kv_size);
                    for (auto & x : c) x = ggml_fp32_to_fp16(ud(rng));
                    std::vector<float> a((size_t) D * H * T);
                    for (auto & x : a) x = ud(rng);
                    for (auto & l : L) {
                        ggml_backend_tensor_set(l.k_cache, c.data(), 0, c.size() * sizeof(ggml_fp16_t));
                        ggml_backend_tensor_set(l.v_cache, c.data(), 0, c.size() * sizeof(ggml_fp16_t));
                        ggml_backend_tensor_set(l.q, a.data(), 0, ggml_nbytes(l.q));
                        ggml_backend_tensor_set(l.k_cur, a.data(), 0, ggml_nbytes(l.k_cur));
                        ggml_backend_tensor_set(l.v_cur, a.data(), 0, ggml_nbytes(l.v_cur));
                    }
                }
                const double kv_bytes = 2.0 * 2 * gqa * n_kv;
                const double flops = 4.0 * H * D * (double) n_kv * T;
                for (int nt : o.threads) {
                    ggml_threadpool_params tpp = ggml_threadpool_params_default(nt);
                    tpp.poll = 50;
                    ggml_threadpool_t tp = ggml_threadpool_new(&tpp);
                    if (tp == nullptr) die("ggml_threadpool_new(%d) failed", nt);
                    ggml_backend_cpu_set_n_threads(cpu, nt);
                    ggml_backend_cpu_set_threadpool(cpu, tp);
                    auto pass = [&]() {
                        double t0 = now_s();
                        for (auto & l : L) {
                            ggml_status st = ggml_backend_graph_compute(cpu, l.graph);
                            if (st != GGML_STATUS_SUCCESS) die("ggml_backend_graph_compute failed: %s", ggml_status_to_string(st));
                        }
                        return (now_s() - t0) / layers;
                    };
                    for (int i = 0; i < std::max(1, o.warmup); ++i) pass();
                    if (nt == o.threads.front()) {
                        // the output must be finite (a softmax over random scores, a weighted sum of V)
                        std::vector<float> y((size_t) D * H * T);
                        ggml_backend_tensor_get(L[0].out, y.data(), 0, y.size() * sizeof(float));
                        for (float x : y) if (!std::isfinite(x) || std::fabs(x) > 1.0f) die("attention output not in [-1, 1]: %g", x);
                    }
                    std::vector<double> times;
                    double spent = 0;
                    for (int r = 0; r < o.reps; ++r) {
                        double t = pass();
                        times.push_back(t);
                        spent += t * layers;
                        if (r >= 2 && spent > o.max_seconds) break;
                    }
                    printf("cpu_attention,%d,%d,%d,%d,%d,%d,%.9f,%.0f,%.0f\n", H, HKV, D, n_kv, T, nt, median(times), kv_bytes, flops);
                    fflush(stdout);
                    ggml_backend_cpu_set_threadpool(cpu, nullptr);
                    ggml_threadpool_free(tp);
                }
                ggml_backend_buffer_free(buf);
                ggml_free(ctx);
            }
        }
    }
    ggml_backend_free(cpu);
}

// ggml's own log: debug lines (one per repacked tensor) dropped, the rest to stderr as notes.
void ggml_log(ggml_log_level level, const char * text, void * /*user_data*/) {
    static ggml_log_level last = GGML_LOG_LEVEL_INFO;
    if (level != GGML_LOG_LEVEL_CONT) last = level;
    if (last == GGML_LOG_LEVEL_DEBUG) return;
    fprintf(stderr, "%s%s", level == GGML_LOG_LEVEL_CONT ? "" : "# ggml: ", text);
}

}  // namespace

int main(int argc, char ** argv) {
    Options o = parse_args(argc, argv);
    ggml_log_set(ggml_log, nullptr);
    ggml_cpu_init();
    note("ggml %s (commit %s); hardware threads %u", ggml_version(), ggml_commit(), std::thread::hardware_concurrency());
    note("cpu features: avx2 %d avx512 %d avx512_vnni %d avx512_bf16 %d amx_int8 %d f16c %d fma %d llamafile %d",
         ggml_cpu_has_avx2(), ggml_cpu_has_avx512(), ggml_cpu_has_avx512_vnni(), ggml_cpu_has_avx512_bf16(),
         ggml_cpu_has_amx_int8(), ggml_cpu_has_f16c(), ggml_cpu_has_fma(), ggml_cpu_has_llamafile());
    if (!o.attention.empty()) {
        attention(o);
        return 0;
    }
    printf("kind,type,rows,cols,batch,threads,seconds,bytes,gbps,gflops\n");
    fflush(stdout);
    if (o.bw_bytes > 0) bandwidth(o);
    if (o.matmul) {
        Backend be = init_backend(o.gpu);
        matmuls(o, be);
        ggml_backend_free(be.compute);
    }
    return 0;
}
