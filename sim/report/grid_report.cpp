// Grid sweeps as CSV (RFC 4180), JSON lines or a markdown table (reporters.hpp write_grid).
#include <cmath>
#include <cstdio>

#include "core/json_text.hpp"
#include "report/reporters.hpp"

namespace tiersim::report {
// RFC 4180 section 2: fields holding a comma, a double quote or a line break are enclosed in double
// quotes, and a double quote inside is written twice.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
std::string whole(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

// A markdown cell: pipes escaped, line breaks as spaces.
std::string md_cell(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out;
}

}  // namespace

void write_table(std::ostream& out, GridFormat format, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  if (format == GridFormat::Csv) {
    auto line = [&](const std::vector<std::string>& c) {
      for (std::size_t i = 0; i < c.size(); ++i) out << (i ? "," : "") << csv_field(c[i]);
      out << "\r\n";
    };
    line(header);
    for (const auto& r : rows) line(r);
    return;
  }
  auto line = [&](const std::vector<std::string>& c) {
    out << '|';
    for (const auto& x : c) out << ' ' << md_cell(x) << " |";
    out << '\n';
  };
  line(header);
  out << '|';
  for (std::size_t i = 0; i < header.size(); ++i) out << "---|";
  out << '\n';
  for (const auto& r : rows) line(r);
}

void write_grid(std::ostream& out, GridFormat format, const std::vector<std::string>& axes,
                const std::vector<GridRow>& rows) {
  // A grid with diffusion iterations gets their median as a column of its own (LLM grids keep theirs).
  bool iterations = false;
  for (const auto& r : rows) iterations |= r.ok && r.summary.iteration_steps > 0;
  std::vector<std::string> header;
  for (const auto& a : axes) header.push_back(a.substr(a.find_first_not_of('-')));
  for (const char* c : {"tps", "decode_step_seconds", "iteration_seconds", "prefill_seconds", "vram_peak_bytes",
                        "offloaded_bytes", "h2d_bytes_per_step", "peer_bytes_per_step", "status", "error_band", "error", "command"})
    if (iterations || std::string(c) != "iteration_seconds") header.push_back(c);
  auto cells = [&](const GridRow& r) {
    std::vector<std::string> c = r.values;
    if (r.ok) {
      // A figure the point has no step for is left empty (a diffusion point has no tokens/s), never written as 0.
      const bool decode = r.summary.decode_steps > 0, prefill = r.summary.prefill_steps > 0;
      c.push_back(decode ? num(r.summary.tps) : "");
      c.push_back(decode ? num(r.summary.decode_step_median) : "");
      if (iterations) c.push_back(r.summary.iteration_steps > 0 ? num(r.summary.iteration_median) : "");
      for (const std::string& v : {prefill ? num(r.summary.prefill_seconds) : "", whole(r.vram_peak), whole(r.offloaded),
                                   whole(r.summary.h2d_bytes_per_step), whole(r.summary.peer_bytes_per_step)})
        c.push_back(v);
    } else {
      c.insert(c.end(), iterations ? 8 : 7, "");
    }
    c.push_back(r.ok ? "ok" : "error");
    c.push_back(r.ok ? r.error_band : "");
    c.push_back(r.error);
    c.push_back(r.command);
    return c;
  };
  if (format != GridFormat::Jsonl) {
    std::vector<std::vector<std::string>> table;
    for (const auto& r : rows) table.push_back(cells(r));
    write_table(out, format, header, table);
  } else {
    for (const auto& r : rows) {
      nlohmann::ordered_json j;
      for (std::size_t i = 0; i < axes.size(); ++i) j[header[i]] = r.values[i];
      if (r.ok) {
        // null where the point has no such step (a diffusion point's tokens/s), as the CSV leaves the cell empty.
        const auto figure = [](bool has, double v) { return has ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); };
        j["tps"] = figure(r.summary.decode_steps > 0, r.summary.tps);
        j["decode_step_seconds"] = figure(r.summary.decode_steps > 0, r.summary.decode_step_median);
        if (iterations) j["iteration_seconds"] = figure(r.summary.iteration_steps > 0, r.summary.iteration_median);
        j["prefill_seconds"] = figure(r.summary.prefill_steps > 0, r.summary.prefill_seconds);
        j["vram_peak_bytes"] = std::llround(r.vram_peak);  // whole bytes, as in CSV and markdown
        j["offloaded_bytes"] = std::llround(r.offloaded);
        j["h2d_bytes_per_step"] = std::llround(r.summary.h2d_bytes_per_step);
        j["peer_bytes_per_step"] = std::llround(r.summary.peer_bytes_per_step);
      }
      j["status"] = r.ok ? "ok" : "error";
      if (r.ok) j["error_band"] = r.error_band;
      if (!r.ok) j["error"] = r.error;
      j["command"] = r.command;
      out << dump_json(j) << '\n';
    }
  }
}

}  // namespace tiersim::report
