#pragma once
// When a step's transient tensors (kind `tmp`) hold memory, derived from the step's ops alone (traces/FORMAT.md):
// an op that writes a transient without reading or keeping it starts a new value, allocated before the op runs; an
// op that reads (or keeps) and writes it works in place. A value is released after the last op that reads, writes or
// keeps it before the tensor's next start (or the step's end). PyTorch's caching allocator counts in that order, the
// host's: a tensor is allocated when the op producing it is issued and freed when the last reference goes (the last
// use, or a `keep` for a reference held longer).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "trace/trace.hpp"

namespace tiersim::trace {

struct TransientLifetimes {
  struct Event {
    std::size_t op;        // the op before which the value is allocated, or after which it is released
    std::uint32_t tensor;
  };
  std::vector<Event> starts;  // in op order
  std::vector<Event> ends;    // in op order (a value's end is its last use)
  double peak = 0;            // the most bytes alive at once in the step, wherever the ops run
};

// Derives `out` for one step. Returns the index of the first op that reads or keeps a transient without a value (no
// earlier op of the step started one), leaving `out` incomplete; std::nullopt when every use has a value.
std::optional<std::size_t> derive_transient_lifetimes(const Header& header, const Step& step, TransientLifetimes& out);

}  // namespace tiersim::trace
