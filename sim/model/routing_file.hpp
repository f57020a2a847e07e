#pragma once
// A mixture-of-experts routing replayed from a file: the experts each token of each sequence was routed to,
// layer by layer, as captured from a real run (transformers' router logits, llama.cpp's ffn_moe_topk), so a
// prediction uses the routing the model really made instead of a synthetic one. Format (JSON):
//   {"tiersim_routing": 1, "num_experts": 128, "experts_per_token": 8, "layers": 48,
//    "source": "...",                                   (optional, free text)
//    "sequences": [ [ [ [e, ...] x layers ] x tokens ] x sequences ]}
// Token t of a sequence is its t-th position: the prompt's tokens, then each generated one.
#include <cstdint>
#include <string>
#include <vector>

namespace tiersim::model {

struct RoutingTable {
  std::uint32_t num_experts = 0, experts_per_token = 0, layers = 0;
  std::vector<std::uint32_t> tokens;  // tokens routed, by sequence
  // experts[sequence][(token * layers + layer) * experts_per_token + j]
  std::vector<std::vector<std::uint16_t>> experts;
  const std::uint16_t* at(std::size_t sequence, std::uint64_t token, std::uint32_t layer) const {
    return experts[sequence].data() + (token * layers + layer) * experts_per_token;
  }
};

// Reads and checks a routing file (errors: InputError naming the file, the line of the top-level key, and
// the key; a list's position in the message): every entry has experts_per_token distinct experts below
// num_experts.
RoutingTable load_routing_file(const std::string& path);
// The same from the file's text (`path` names it in messages): what load_routing_file does after the read.
RoutingTable parse_routing_file(const std::string& text, const std::string& path);

}  // namespace tiersim::model
