#include "policies/placement_rules/tensor_pattern.hpp"

#include <re2/re2.h>

#include <stdexcept>

namespace tiersim::strategy {
namespace {

// The first construct of the pattern that RE2 and ECMAScript do not share, described; "" when none. Character
// classes are skipped ([(?=] is three literal characters in both).
std::string unsupported(const std::string& p) {
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) return "";  // a trailing backslash: RE2's own error says so
      const char e = p[++i];
      if (in_class) continue;
      if (e >= '1' && e <= '9') return std::string("a backreference (\\") + e + ")";
      if (e == 'c' || e == 'u') return std::string("the escape \\") + e + " (write the byte itself, or \\xHH)";
      if (e == 'p' || e == 'P' || e == 'Q' || e == 'E' || e == 'A' || e == 'z' || e == 'C')
        return std::string("RE2's escape \\") + e + ", which llama.cpp's std::regex does not take";
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      continue;
    }
    if (c == '[') {
      in_class = true;
      if (i + 1 < p.size() && p[i + 1] == '^') ++i;
      // A ']' right after '[' or '[^' differs: ECMAScript reads "[]" as an empty class (it matches nothing) and
      // "[^]" as any character, RE2 as a literal ']' in the class.
      if (i + 1 < p.size() && p[i + 1] == ']') return "a class that starts with ']' ([] or [^]: an empty class to std::regex)";
      continue;
    }
    if (c == '(' && i + 1 < p.size() && p[i + 1] == '?') {
      const char k = i + 2 < p.size() ? p[i + 2] : '\0';
      if (k == ':') continue;
      if (k == '=' || k == '!') return std::string("a lookahead ((?") + k + ")";
      if (k == '<') return "a lookbehind or named group ((?<)";
      return "a group flag or named group ((?" + std::string(k ? 1 : 0, k) + "), which llama.cpp's std::regex does not take";
    }
  }
  return "";
}

}  // namespace

TensorPattern::TensorPattern(const std::string& pattern) : text_(pattern) {
  const std::string what = unsupported(pattern);
  if (!what.empty())
    throw std::invalid_argument("uses " + what + ": tiersim matches tensor names with RE2 (linear time), which has no "
                                "backreferences or lookaround; rewrite the pattern without it");
  RE2::Options options;
  options.set_encoding(RE2::Options::EncodingLatin1);  // bytes as bytes, as std::regex on char
  options.set_log_errors(false);
  options.set_max_mem(16 << 20);
  auto re = std::make_shared<const RE2>(pattern, options);
  if (!re->ok()) throw std::invalid_argument("does not parse: " + re->error());
  re_ = std::move(re);
}

bool TensorPattern::search(std::string_view name) const {
  return RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), *re_);
}

}  // namespace tiersim::strategy
