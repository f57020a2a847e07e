#pragma once
// Writes a trace in the text format read by TraceReader. Output is byte-for-byte deterministic.
#include <ostream>

#include "trace/trace.hpp"

namespace tiersim::trace {

void write_header(std::ostream& out, const Header& header);
void write_step(std::ostream& out, const Header& header, const Step& step);
void write_end(std::ostream& out);
// Drains `source` into `out`: header, every step, end. Returns the number of steps written.
std::size_t write_trace(std::ostream& out, StepSource& source);

}  // namespace tiersim::trace
