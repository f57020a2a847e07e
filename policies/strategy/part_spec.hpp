#pragma once
// One part of a strategy as the user gave it: a registered name and its options, all as text, e.g.
// `--memory managed:prefer-cpu,scope=offloaded` or {"kind": "managed", "prefer-cpu": "true"} in a
// config. Options are read by the part itself through the strict reader, which rejects any it does not
// read; a bare word is the option `word=true` unless the part declares it an alias (`pageable` is
// `host=pageable`).
#include <map>
#include <string>

#include <yaml-cpp/yaml.h>

namespace tiersim::strategy {

struct PartSpec {
  PartSpec() = default;
  explicit PartSpec(std::string part) : name(std::move(part)) {}

  std::string name;
  std::map<std::string, std::string> options;  // ordered: reports and configs list them the same way
  std::map<std::string, std::string> given_by;  // option -> the command-line flag that set it (--prefetch)
  std::string origin = "";  // where it was given: "--memory", or a config file
  bool given = false;       // given by the user, not taken from a preset or default

  // "NAME" or "NAME:OPT,OPT,..." with OPT "key=value" or a bare word. Throws InputError naming `flag`.
  static PartSpec parse(const std::string& text, const std::string& flag);
  // NAME:key=value,... in a stable order (the inverse of parse for canonical options).
  std::string text() const;
  // The options as a YAML mapping for the strict reader.
  YAML::Node node() const;
  // Sets an option from a legacy flag; the same option given twice is an InputError naming both.
  void set(const std::string& key, const std::string& value, const std::string& flag);
};

}  // namespace tiersim::strategy
