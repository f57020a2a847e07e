#pragma once
// The one strict reader of configuration trees (hardware profiles, runtime profiles, strategy parts,
// re-run configs): a YAML mapping whose every key must be read. Values carry their units ("24 GiB",
// "55 GB/s", "3.6 us"); a missing, misspelt, duplicated, unknown or out-of-range key is an InputError
// naming the file, line and dotted key. JSON is YAML, so a result's JSON is read the same way.
#include <yaml-cpp/yaml.h>

#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "trace/trace.hpp"

namespace tiersim::config {

// Whether a name is one of ggml's tensor types, lower case (ggml.c type_traits: f32, f16, bf16, q8_0,
// q4_k, q6_k, iq4_xs, mxfp4, ...).
bool is_ggml_type_name(const std::string& name);

// Parses a YAML (or JSON) document; a syntax error is an InputError with its line.
YAML::Node parse_document(const std::string& text, const std::string& file);

// One mapping of the tree. Every key read is remembered; finish() rejects the others.
class Section {
 public:
  Section(YAML::Node node, std::string path, std::string file);

  bool has(const std::string& key) const { return static_cast<bool>(node_[key]); }
  Section child(const std::string& key);
  // Keys in document order (every key of the mapping, read or not).
  std::vector<std::string> keys() const;

  std::string text(const std::string& key);
  double bytes(const std::string& key, bool allow_zero = false);
  double bandwidth(const std::string& key);
  double flop_rate(const std::string& key);   // "177 TFLOP/s"
  double duration(const std::string& key);
  double number(const std::string& key, double lo, double hi);
  int integer(const std::string& key, int lo, int hi);
  bool flag(const std::string& key);
  // A mapping of dtype names to FLOP rates.
  std::map<std::string, double> rates(const std::string& key);
  // A mapping of trace op kinds to durations.
  std::map<trace::OpKind, double> op_durations(const std::string& key);
  // A list of ["4 KiB", "3.1 GB/s"] pairs with ascending sizes.
  std::vector<std::pair<double, double>> size_rate_points(const std::string& key);
  // A list of ["16 KiB", "31.8 us"] pairs with ascending positive sizes and durations from 0 (a cost by size).
  std::vector<std::pair<double, double>> size_duration_points(const std::string& key);
  // A list of [threads, "20 GB/s"] pairs with ascending whole thread counts (a rate by CPU threads).
  std::vector<std::pair<double, double>> thread_rate_points(const std::string& key);
  // A list of [rows, times] pairs with ascending whole row counts (1 to 16M) and times from 1 to 1e6: how many times
  // a matrix product of that many rows reads its weight.
  std::vector<std::pair<double, double>> row_count_points(const std::string& key);
  // A list of ["8 KiB", "32 MiB", "2.42 ms", "2.8 ms"] rows: two sizes and two durations, all positive and finite,
  // ascending by the first size then the second (a kernel's time by the sizes of its operands).
  std::vector<std::array<double, 4>> size_size_duration_rows(const std::string& key);
  // A list of [FLOPs, efficiency] pairs with ascending FLOPs (1 to 1e18) and efficiencies from 0.01 to 1: what share of
  // the dtype's rate a kind of kernel reaches at an op's size.
  std::vector<std::pair<double, double>> flop_efficiency_points(const std::string& key);
  // The same with another size than FLOPs (`size`, as the messages name it: "a convolution's output positions").
  std::vector<std::pair<double, double>> efficiency_points(const std::string& key, const std::string& size);

  // A mapping of ggml weight types (lower case: q4_k, q8_0, f16; ggml.c type_traits' names) to
  // bandwidths or FLOP rates; an unknown type is an error naming it.
  std::map<std::string, double> weight_type_rates(const std::string& key, bool bandwidth);

  // Rejects every key that was not read.
  void finish() const;

  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  [[noreturn]] void fail_at(const YAML::Node& n, const std::string& key, const std::string& message) const;
  std::string full(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& file() const { return file_; }
  const YAML::Node& node() const { return node_; }

 private:
  YAML::Node require(const std::string& key);
  std::string scalar(const YAML::Node& n, const std::string& key, const char* expected) const;
  template <typename Parse>
  double quantity(const std::string& key, Parse parse, bool allow_zero);

  YAML::Node node_;
  std::string path_;
  std::string file_;
  std::set<std::string> read_;
};

}  // namespace tiersim::config
