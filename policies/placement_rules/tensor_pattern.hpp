#pragma once
// llama.cpp's tensor buffer overrides (-ot, --override-tensor, --cpu-moe, --n-cpu-moe, the fit's own):
// llama_model_loader::create_tensor tests each tensor's name with std::regex_search (ECMAScript) against
// each pattern in turn. std::regex backtracks on the call stack: a pattern of ~20,000 nested groups, or
// `.*` against a name of 50,000 characters, overflows the stack, and some patterns never end. tiersim
// matches with RE2 instead (linear in the name's length, bounded memory, no recursion), with
// ECMAScript's search semantics: a match anywhere in the name, leftmost-first alternation, ^ and $ at the
// name's ends, bytes matched as bytes (Latin-1, as std::regex does on char).
// What RE2 does not have is refused with a message naming it, never matched differently: backreferences
// (\1 ... \9), lookahead ((?= and (?!), \cX and \uXXXX escapes, counted repetition above {1000} (nested
// ones multiplied), a program past RE2's memory bound (16 MiB); so is RE2's own syntax that std::regex refuses ((?i), (?P<name>...), \p{...},
// \Q...\E, \A, \z, \C), which llama.cpp would not accept. One difference stays: ECMAScript's '.' does not
// match '\r' and RE2's does (tensor names hold neither '\r' nor '\n').
#include <memory>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace tiersim::strategy {

class TensorPattern {
 public:
  // Throws std::invalid_argument saying what in the pattern is not supported or does not parse.
  explicit TensorPattern(const std::string& pattern);
  // Whether the pattern matches anywhere in `name` (std::regex_search).
  bool search(std::string_view name) const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace tiersim::strategy
