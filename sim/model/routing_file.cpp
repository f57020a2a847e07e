#include "model/routing_file.hpp"

#include <set>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/config_json.hpp"

namespace tiersim::model {

namespace {
constexpr Bound kExperts{"num_experts", 4096, "4,096"};
constexpr Bound kTopK{"experts_per_token", 4096, "4,096"};
constexpr Bound kLayers{"layers", 10000, "10,000"};
constexpr Bound kVersion{"tiersim_routing", 1, "1"};
}  // namespace

RoutingTable load_routing_file(const std::string& path) {
  return parse_routing_file(io::read_file(path, "", "routing file"), path);
}

RoutingTable parse_routing_file(const std::string& text, const std::string& path) {
  const ConfigJson doc = parse_config_json(text, path);
  if (!doc.json.is_object()) throw InputError(path, 1, "", "expected a JSON object (a tiersim routing file)");
  const ConfigReader r(doc);
  r.refuse_unknown({"tiersim_routing", "num_experts", "experts_per_token", "layers", "sequences", "source"}, {},
                   "routing file");
  r.count(kVersion);
  RoutingTable t;
  t.num_experts = static_cast<std::uint32_t>(r.count(kExperts));
  t.experts_per_token = static_cast<std::uint32_t>(r.count(kTopK));
  t.layers = static_cast<std::uint32_t>(r.count(kLayers));
  if (t.experts_per_token > t.num_experts) r.fail("experts_per_token", "is more than num_experts");
  if (!r.has("sequences") || !doc.json["sequences"].is_array() || doc.json["sequences"].empty())
    r.fail("sequences", "must be a non-empty list of sequences, each a list of tokens");
  std::uint64_t entries = 0;
  const auto& sequences = doc.json["sequences"];
  for (std::size_t s = 0; s < sequences.size(); ++s) {
    const auto& seq = sequences[s];
    const std::string where = "sequence " + std::to_string(s);
    if (!seq.is_array() || seq.empty()) r.fail("sequences", where + " must be a non-empty list of tokens");
    entries += seq.size();  // tokens so far, all sequences
    if (entries > 50'000'000 / (static_cast<std::uint64_t>(t.layers) * t.experts_per_token))
      r.fail("sequences", "more than 50 million routed experts in one file");
    std::vector<std::uint16_t> flat;
    flat.reserve(seq.size() * t.layers * t.experts_per_token);
    for (std::size_t tok = 0; tok < seq.size(); ++tok) {
      const auto& layers = seq[tok];
      const std::string at = where + ", token " + std::to_string(tok);
      if (!layers.is_array() || layers.size() != t.layers)
        r.fail("sequences", at + ": expected one list of experts per layer (" + std::to_string(t.layers) + ")");
      for (std::size_t l = 0; l < layers.size(); ++l) {
        const auto& ex = layers[l];
        if (!ex.is_array() || ex.size() != t.experts_per_token)
          r.fail("sequences", at + ", layer " + std::to_string(l) + ": expected " + std::to_string(t.experts_per_token) +
                                  " experts, got " + ex.dump());
        std::set<std::uint64_t> seen;
        for (const auto& e : ex) {
          if (!e.is_number_unsigned() || e.get<std::uint64_t>() >= t.num_experts || !seen.insert(e.get<std::uint64_t>()).second)
            r.fail("sequences", at + ", layer " + std::to_string(l) + ": experts must be distinct integers below " +
                                    std::to_string(t.num_experts) + ", got " + ex.dump());
          flat.push_back(static_cast<std::uint16_t>(e.get<std::uint64_t>()));
        }
      }
    }
    t.tokens.push_back(static_cast<std::uint32_t>(seq.size()));
    t.experts.push_back(std::move(flat));
  }
  return t;
}

}  // namespace tiersim::model
