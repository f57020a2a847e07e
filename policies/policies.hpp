#pragma once
// Factories of every policy, one per file; registry.cpp lists them by name.
#include <memory>

#include "policies/policy.hpp"

namespace tiersim::policies {

std::unique_ptr<Policy> make_resident();
std::unique_ptr<Policy> make_bytes_split();
std::unique_ptr<Policy> make_ratio_split();
std::unique_ptr<Policy> make_fraction_split();
std::unique_ptr<Policy> make_layers();
std::unique_ptr<Policy> make_um();
std::unique_ptr<Policy> make_um_cpu();
std::unique_ptr<Policy> make_um_accessedby();
std::unique_ptr<Policy> make_um_readmostly();
std::unique_ptr<Policy> make_um_prefetch();

}  // namespace tiersim::policies
