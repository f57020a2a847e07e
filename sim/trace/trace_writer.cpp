#include "trace/trace_writer.hpp"

#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace tiersim::trace {
namespace {

void write_accesses(std::ostream& out, const char* key, const std::vector<TensorAccess>& list,
                    const Header& header) {
  if (list.empty()) return;
  out << ' ' << key << '=';
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (i) out << ',';
    out << list[i].tensor;
    // A byte range from an offset needs format version 2: a version 1 header would not read back.
    if (list[i].offset) {
      if (header.version < 2)
        throw std::logic_error("trace writer: a byte range (" + std::to_string(list[i].tensor) + "@" +
                               std::to_string(list[i].offset) + ") in a version 1 trace");
      out << '@' << list[i].offset << ':' << list[i].bytes;
      continue;
    }
    // The byte count is written only when the access is partial; the reader defaults to the whole tensor.
    if (list[i].bytes != header.tensors[list[i].tensor].bytes) out << ':' << list[i].bytes;
  }
}

void write_micros(std::ostream& out, const char* key, double seconds) {
  if (seconds < 0) return;
  char buf[48];
  std::snprintf(buf, sizeof buf, " %s=%.3f", key, seconds * 1e6);
  out << buf;
}

}  // namespace

void write_header(std::ostream& out, const Header& header) {
  out << "tiersim-trace " << header.version << '\n';
  for (const auto& [k, v] : header.meta) out << "meta " << k << ' ' << v << '\n';
  for (const auto& t : header.tensors)
    out << "tensor " << t.id << ' ' << to_string(t.kind) << ' ' << t.bytes << ' ' << t.layer << ' ' << t.name << '\n';
  // Each component once, in the order of its first tensor, its tensors as ids and runs FIRST-LAST.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::uint32_t>> ids;
  for (const auto& t : header.tensors) {
    if (t.component.empty()) continue;
    auto [it, fresh] = ids.try_emplace(t.component);
    if (fresh) order.push_back(t.component);
    it->second.push_back(t.id);
  }
  for (const std::string& c : order) {
    out << "component " << c << ' ';
    const auto& v = ids[c];
    for (std::size_t i = 0; i < v.size();) {
      std::size_t j = i;
      while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
      out << (i ? "," : "") << v[i];
      if (j > i) out << '-' << v[j];
      i = j + 1;
    }
    out << '\n';
  }
}

void write_step(std::ostream& out, const Header& header, const Step& step) {
  out << "step " << to_string(step.kind) << " tokens=" << step.tokens << '\n';
  for (const auto& op : step.ops) {
    out << "op " << to_string(op.kind) << " layer=" << op.layer;
    if (op.flops) out << " flops=" << op.flops;
    write_accesses(out, "read", op.reads, header);
    write_accesses(out, "write", op.writes, header);
    if (op.launches != 1) out << " launches=" << op.launches;
    write_micros(out, "gpu_us", op.gpu_seconds);
    write_micros(out, "host_us", op.host_seconds);
    if (!op.dtype.empty()) out << " dtype=" << op.dtype;
    if (op.syncs) out << " syncs=" << op.syncs;
    if (op.blocks) out << " blocks=" << op.blocks;
    if (op.unmasked) out << " mask=none";
    if (op.rows) out << " rows=" << op.rows;
    if (op.tokens) out << " tokens=" << op.tokens;
    if (op.reread_bytes) out << " reread=" << op.reread_bytes;
    for (std::size_t i = 0; i < op.keeps.size(); ++i) out << (i ? "," : " keep=") << op.keeps[i];
    if (!op.conv.empty()) out << " conv=" << op.conv.kernel_name() << ':' << op.conv.in << ':' << op.conv.out;
    out << '\n';
  }
}

void write_end(std::ostream& out) { out << "end\n"; }

std::size_t write_trace(std::ostream& out, StepSource& source) {
  write_header(out, source.header());
  Step step;
  std::size_t n = 0;
  while (source.next(step)) {
    write_step(out, source.header(), step);
    ++n;
  }
  write_end(out);
  return n;
}

}  // namespace tiersim::trace
