#pragma once
// Factories of the platforms (the OS's driver model), one per file; registry.cpp lists them.
#include "policies/strategy/parts.hpp"

namespace tiersim::strategy {

std::unique_ptr<Platform> make_linux_platform(config::Section& options);
std::unique_ptr<Platform> make_windows_platform(config::Section& options);
std::unique_ptr<Platform> make_wsl2_platform(config::Section& options);

}  // namespace tiersim::strategy
