#include "trace/trace_reader.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "trace/transient_lifetimes.hpp"

namespace tiersim::trace {
namespace {

std::string_view next_token(std::string_view& s) {
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  std::size_t j = i;
  while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
  std::string_view tok = s.substr(i, j - i);
  s.remove_prefix(j);
  return tok;
}

std::string_view rest_trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

template <typename T>
bool parse_int(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool parse_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(out);
}

// Physical bounds on what one trace line may say. They are far above any real model or capture,
// and low enough that no sum or product the simulator forms from them can overflow.
constexpr std::uint64_t kMaxTensorBytes = std::uint64_t{1} << 50;   // 1 PiB
constexpr std::uint64_t kMaxTotalBytes = std::uint64_t{1} << 56;    // 64 PiB over all tensors
constexpr std::uint64_t kMaxOpFlops = 1'000'000'000'000'000'000u;  // 10^18: 1000 s at 1 PFLOP/s
constexpr std::uint32_t kMaxLaunches = 1'000'000;
constexpr std::uint32_t kMaxSyncs = 1'000;
constexpr std::uint32_t kMaxBlocks = 2'147'483'647;
constexpr double kMaxOpMicros = 1e9;  // 1000 s for one op
// A tensor's name: GGUF caps them at 63 bytes (GGML_MAX_NAME); PyTorch module paths run to a few hundred. Bounded so
// that matching names against patterns (-ot) and echoing them stays cheap.
constexpr std::size_t kMaxTensorNameBytes = 4096;

}  // namespace

TraceReader::TraceReader(const std::string& path) : name_(path) {
  auto file = io::open_file(path, "", "trace file");
  in_ = std::move(file);
  read_header();
}

TraceReader::TraceReader(std::unique_ptr<std::istream> in, std::string name)
    : in_(std::move(in)), name_(std::move(name)) {
  read_header();
}

void TraceReader::fail(const std::string& key, const std::string& message) const {
  throw InputError(name_, line_no_, key, message);
}

bool TraceReader::read_line() {
  while (std::getline(*in_, line_)) {
    ++line_no_;
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    std::size_t i = line_.find_first_not_of(" \t");
    if (i == std::string::npos || line_[i] == '#') continue;
    return true;
  }
  return false;
}

void TraceReader::read_header() {
  if (!read_line()) fail("", "empty file: expected the first line 'tiersim-trace 1'");
  {
    std::string_view s = line_;
    if (next_token(s) != "tiersim-trace") fail("", "not a tiersim trace: the first line must be 'tiersim-trace 1'");
    int version = 0;
    if (!parse_int(rest_trimmed(s), version)) fail("version", "expected an integer format version");
    if (version < 1 || version > kFormatVersion)
      fail("version", "unsupported trace format version " + std::to_string(version) + " (this build reads 1 to " +
                          std::to_string(kFormatVersion) + ")");
    header_.version = version;
  }
  while (read_line()) {
    std::string_view s = line_;
    std::string_view word = next_token(s);
    if (word == "meta") {
      std::string key(next_token(s));
      std::string value(rest_trimmed(s));
      if (key.empty() || value.empty()) fail("meta", "expected 'meta KEY VALUE'");
      if (header_.meta.count(key)) fail(key, "duplicate meta key");
      if (key == "batch") {
        std::uint32_t b = 0;
        if (!parse_int(std::string_view(value), b) || b == 0) fail(key, "batch must be a positive integer");
      }
      if (key == "transient_peak") {
        std::uint64_t b = 0;
        if (!parse_int(std::string_view(value), b) || b > kMaxTotalBytes) fail(key, "must be a byte count, got '" + value + "'");
      }
      if (key == "weight_copy" && value != "sync")
        fail(key, "must be 'sync' (the model's layers copy with a blocking .to()), not '" + value + "'");
      header_.meta.emplace(std::move(key), std::move(value));
    } else if (word == "tensor") {
      Tensor t;
      std::string_view id = next_token(s), kind = next_token(s), bytes = next_token(s), layer = next_token(s);
      if (!parse_int(id, t.id)) fail("tensor", "expected 'tensor ID KIND BYTES LAYER NAME', bad ID");
      if (t.id != header_.tensors.size())
        fail("tensor", "tensor ids must be 0,1,2,... in order; expected " + std::to_string(header_.tensors.size()) +
                           ", got " + std::string(id));
      if (!parse_tensor_kind(kind, t.kind)) fail("tensor", "unknown tensor kind '" + std::string(kind) + "' (weight, kv, act, tmp)");
      if (!parse_int(bytes, t.bytes)) fail("tensor", "bad byte count '" + std::string(bytes) + "'");
      if (t.bytes > kMaxTensorBytes)
        fail("tensor", "byte count " + std::string(bytes) + " is out of range (0 to 1 PiB, 1125899906842624 bytes)");
      total_bytes_ += t.bytes;
      if (total_bytes_ > kMaxTotalBytes)
        fail("tensor", "the tensors declared so far exceed 64 PiB (72057594037927936 bytes) in all");
      if (!parse_int(layer, t.layer)) fail("tensor", "bad layer '" + std::string(layer) + "'");
      t.name = std::string(rest_trimmed(s));
      if (t.name.empty()) fail("tensor", "tensor " + std::to_string(t.id) + " has no name");
      if (t.name.size() > kMaxTensorNameBytes)
        fail("tensor", "tensor " + std::to_string(t.id) + "'s name is " + std::to_string(t.name.size()) +
                           " bytes, more than the 4096 a tensor name may be (GGUF's are at most 63)");
      has_transients_ |= t.kind == TensorKind::Transient;
      header_.tensors.push_back(std::move(t));
    } else if (word == "component") {
      // component PATH IDS: the tensors (ids and A-B ranges, comma-separated) of a model component
      const std::string path(next_token(s));
      const std::string_view list = rest_trimmed(s);
      if (!trace::valid_component(path))
        fail("component", "expected 'component PATH IDS' with a dotted path of letters, digits, _ and - (dit.blocks.3), "
                          "got '" + path + "'");
      if (list.empty()) fail("component", "component " + path + " lists no tensors");
      if (list.back() == ',') fail("component", "a trailing comma in component " + path + "'s tensors");
      std::string_view rest = list;
      while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        const std::size_t dash = item.find('-');
        std::uint32_t first = 0, last = 0;
        if (!parse_int(item.substr(0, dash), first) ||
            !parse_int(dash == std::string_view::npos ? item : item.substr(dash + 1), last) || last < first)
          fail("component", "bad tensor id or range '" + std::string(item) + "' (ID or FIRST-LAST)");
        if (last >= header_.tensors.size())
          fail("component", "tensor " + std::to_string(last) + " is not declared before the component line");
        for (std::uint32_t id = first; id <= last; ++id) {
          std::string& c = header_.tensors[id].component;
          if (!c.empty()) fail("component", "tensor " + std::to_string(id) + " is already in component " + c);
          c = path;
        }
      }
    } else if (word == "step") {
      pending_step_ = true;
      return;
    } else if (word == "end") {
      ended_ = true;
      return;
    } else {
      fail(std::string(word), "unexpected line in the header (expected meta, tensor, component, step or end)");
    }
  }
  fail("", "unexpected end of file in the header (missing 'end')");
}

void TraceReader::parse_accesses(std::string_view key, std::string_view list, std::vector<TensorAccess>& out) const {
  out.clear();
  while (!list.empty()) {
    std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    // ID, ID:BYTES (the first BYTES), or (version 2) ID@OFFSET:BYTES (BYTES from OFFSET on).
    const std::size_t at = item.find('@'), colon = item.find(':');
    const std::size_t id_end = std::min(at, colon);
    TensorAccess a;
    if (!parse_int(item.substr(0, id_end), a.tensor))
      fail(std::string(key), "bad tensor id in '" + std::string(item) + "'");
    if (a.tensor >= header_.tensors.size())
      fail(std::string(key), "tensor " + std::to_string(a.tensor) + " is not declared in the header");
    const std::uint64_t full = header_.tensors[a.tensor].bytes;
    if (at != std::string_view::npos) {
      if (header_.version < 2)
        fail(std::string(key), "'" + std::string(item) + "': a byte range (ID@OFFSET:BYTES) needs 'tiersim-trace 2'");
      if (colon == std::string_view::npos || colon < at)
        fail(std::string(key), "expected ID@OFFSET:BYTES in '" + std::string(item) + "'");
      if (!parse_int(item.substr(at + 1, colon - at - 1), a.offset))
        fail(std::string(key), "bad byte offset in '" + std::string(item) + "'");
      if (a.offset > full)
        fail(std::string(key), "offset " + std::to_string(a.offset) + " is past the end of tensor " +
                                   std::to_string(a.tensor) + " (" + std::to_string(full) + " bytes)");
    }
    if (colon == std::string_view::npos) {
      a.bytes = full;
    } else if (!parse_int(item.substr(colon + 1), a.bytes)) {
      fail(std::string(key), "bad byte count in '" + std::string(item) + "'");
    } else if (a.bytes > full - a.offset) {
      fail(std::string(key), "access of " + std::to_string(a.bytes) + " bytes" +
                                 (a.offset ? " from byte " + std::to_string(a.offset) : std::string()) +
                                 " exceeds tensor " + std::to_string(a.tensor) + " (" + std::to_string(full) + " bytes)");
    }
    out.push_back(a);
  }
}

void TraceReader::parse_keeps(std::string_view list, std::vector<std::uint32_t>& out) const {
  out.clear();
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    std::uint32_t id = 0;
    if (!parse_int(item, id)) fail("keep", "bad tensor id in '" + std::string(item) + "'");
    if (id >= header_.tensors.size()) fail("keep", "tensor " + std::to_string(id) + " is not declared in the header");
    if (header_.tensors[id].kind != TensorKind::Transient)
      fail("keep", "tensor " + std::to_string(id) + " is " + to_string(header_.tensors[id].kind) +
                       ": only a transient (tmp) tensor is kept alive");
    out.push_back(id);
  }
  if (out.empty()) fail("keep", "expected a list of tensor ids");
}

// `conv=3x3x3:96:96`: a gemm's convolution kernel and its in and out channels (1 to 2^20 each).
void TraceReader::parse_conv(std::string_view value, Op& op) const {
  const std::string what = "expected KERNEL:IN:OUT (3x3x3:96:96, 3x3:384:192; sides 1 to 15, channels 1 to 1048576), got '" +
                           std::string(value) + "'";
  const std::size_t a = value.find(':');
  const std::size_t b = a == std::string_view::npos ? a : value.find(':', a + 1);
  if (b == std::string_view::npos || !trace::parse_conv_kernel(value.substr(0, a), op.conv)) fail("conv", what);
  if (!parse_int(value.substr(a + 1, b - a - 1), op.conv.in) || !parse_int(value.substr(b + 1), op.conv.out) ||
      op.conv.in == 0 || op.conv.out == 0 || op.conv.in > (1u << 20) || op.conv.out > (1u << 20))
    fail("conv", what);
  if (op.kind != trace::OpKind::Gemm) fail("conv", "is for a gemm op (a convolution's implicit GEMM)");
}

void TraceReader::parse_op(std::string_view s, Op& op) const {
  std::string_view kind = next_token(s);
  if (!parse_op_kind(kind, op.kind)) fail("op", "unknown op kind '" + std::string(kind) + "'");
  op.layer = 0;
  op.flops = 0;
  op.reads.clear();
  op.writes.clear();
  op.launches = 1;
  op.gpu_seconds = -1.0;
  op.host_seconds = -1.0;
  op.dtype.clear();
  op.syncs = 0;
  op.blocks = 0;
  op.unmasked = false;
  op.rows = 0;
  op.tokens = 0;
  op.keeps.clear();
  op.reread_bytes = 0;
  op.conv = trace::ConvShape{};
  bool have_layer = false;
  for (std::string_view tok = next_token(s); !tok.empty(); tok = next_token(s)) {
    std::size_t eq = tok.find('=');
    if (eq == std::string_view::npos) fail(std::string(tok), "expected key=value");
    std::string_view key = tok.substr(0, eq), value = tok.substr(eq + 1);
    if (key == "layer") {
      if (!parse_int(value, op.layer)) fail("layer", "bad integer '" + std::string(value) + "'");
      have_layer = true;
    } else if (key == "flops") {
      if (!parse_int(value, op.flops)) fail("flops", "bad non-negative integer '" + std::string(value) + "'");
      if (op.flops > kMaxOpFlops) fail("flops", "'" + std::string(value) + "' is out of range (0 to 10^18 per op)");
    } else if (key == "read") {
      parse_accesses(key, value, op.reads);
    } else if (key == "write") {
      parse_accesses(key, value, op.writes);
    } else if (key == "launches") {
      // 0: the op runs in the kernel of the op before it (llama.cpp's MUL_MAT_ID, torch._grouped_mm over experts).
      if (!parse_int(value, op.launches) || op.launches > kMaxLaunches)
        fail("launches", "must be an integer from 0 to 1,000,000");
    } else if (key == "gpu_us" || key == "host_us") {
      double us = 0;
      if (!parse_double(value, us) || us < 0 || us > kMaxOpMicros)
        fail(std::string(key), "must be a number of microseconds from 0 to 1e9 (1000 s), got '" + std::string(value) + "'");
      (key == "gpu_us" ? op.gpu_seconds : op.host_seconds) = us * 1e-6;
    } else if (key == "dtype") {
      op.dtype = std::string(value);
    } else if (key == "syncs") {
      if (!parse_int(value, op.syncs) || op.syncs > kMaxSyncs) fail("syncs", "must be an integer from 0 to 1,000");
    } else if (key == "mask") {
      if (value != "none") fail("mask", "only 'none' (an attention op over every key) is a mask, got '" + std::string(value) + "'");
      if (op.kind != trace::OpKind::Attention) fail("mask", "is for an attention op");
      op.unmasked = true;
    } else if (key == "blocks") {
      if (!parse_int(value, op.blocks) || op.blocks == 0 || op.blocks > kMaxBlocks)
        fail("blocks", "must be an integer from 1 to 2^31-1, got '" + std::string(value) + "'");
    } else if (key == "tokens") {
      if (!parse_int(value, op.tokens) || op.tokens == 0 || op.tokens > kMaxBlocks)
        fail("tokens", "must be an integer from 1 to 2^31-1, got '" + std::string(value) + "'");
    } else if (key == "rows") {
      if (!parse_int(value, op.rows) || op.rows == 0 || op.rows > kMaxBlocks)
        fail("rows", "must be an integer from 1 to 2^31-1, got '" + std::string(value) + "'");
    } else if (key == "reread") {
      if (!parse_int(value, op.reread_bytes) || op.reread_bytes > kMaxTensorBytes)
        fail("reread", "must be a byte count from 0 to 1 PiB (1125899906842624), got '" + std::string(value) + "'");
    } else if (key == "keep") {
      parse_keeps(value, op.keeps);
    } else if (key == "conv") {
      parse_conv(value, op);
    } else {
      fail(std::string(key), "unknown op key (layer, flops, read, write, launches, gpu_us, host_us, dtype, syncs, blocks, rows, tokens, mask, reread, keep, conv)");
    }
  }
  if (!have_layer) fail("layer", "every op needs layer=N");
}

bool TraceReader::next(Step& out) {
  if (ended_) return false;
  if (!pending_step_) {
    if (!read_line()) fail("end", "unexpected end of file: the trace is truncated (missing 'end')");
    std::string_view s = line_;
    std::string_view word = next_token(s);
    if (word == "end") {
      ended_ = true;
      return false;
    }
    if (word != "step") fail(std::string(word), "expected 'step' or 'end'");
  }
  pending_step_ = false;
  {
    std::string_view s = line_;
    next_token(s);  // "step"
    std::string_view kind = next_token(s);
    if (!parse_step_kind(kind, out.kind)) fail("step", "unknown step kind '" + std::string(kind) + "' (prefill, decode, iteration)");
    std::string_view tok = next_token(s);
    if (tok.substr(0, 7) != "tokens=" || !parse_int(tok.substr(7), out.tokens))
      fail("tokens", "expected 'step KIND tokens=N'");
  }

  std::size_t used = 0;
  op_lines_.clear();
  while (true) {
    if (!read_line()) fail("end", "unexpected end of file: the trace is truncated (missing 'end')");
    std::string_view s = line_;
    std::string_view word = next_token(s);
    if (word == "op") {
      if (used == out.ops.size()) out.ops.emplace_back();
      parse_op(s, out.ops[used++]);
      op_lines_.push_back(line_no_);
    } else if (word == "step") {
      pending_step_ = true;
      break;
    } else if (word == "end") {
      ended_ = true;
      break;
    } else {
      fail(std::string(word), "expected 'op', 'step' or 'end'");
    }
  }
  out.ops.resize(used);
  if (used == 0) fail("step", "a step needs at least one op");
  if (has_transients_) {
    TransientLifetimes lifetimes;
    if (const auto bad = derive_transient_lifetimes(header_, out, lifetimes)) {
      line_no_ = op_lines_[*bad];
      fail("read", "the op reads or keeps a transient (tmp) tensor that no earlier op of its step wrote");
    }
  }
  return true;
}

}  // namespace tiersim::trace
