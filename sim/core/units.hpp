#pragma once
// Quantities written with their units in configuration ("24 GiB", "55 GB/s", "3.6 us", "165 TFLOP/s")
// are converted here, once, to plain SI doubles: bytes, bytes per second, seconds, FLOP per second.
#include <cstdint>
#include <string>
#include <utility>
#include <string_view>

namespace tiersim::units {

// Each parser throws std::invalid_argument with a message saying what was expected; callers
// that know the file and key wrap it into an InputError.
double parse_bytes(std::string_view text);       // "24 GiB", "80 GB", "512 MiB", "1.5e9 B"
double parse_bandwidth(std::string_view text);   // "55 GB/s", "900 MB/s", "1.2 TB/s", "20 GiB/s"
double parse_duration(std::string_view text);    // "3.6 us", "1 ms", "250 ns", "2 s"
double parse_flop_rate(std::string_view text);   // "165 TFLOP/s", "1.2 PFLOP/s", "800 GFLOP/s"

// DisTorch-style byte amounts: "2.5gb", "512m", "4g", "1024" (binary units, b optional).
double parse_distorch_bytes(std::string_view text);

std::string format_bytes(double bytes);          // "13.76 GiB"
// Two sizes a message sets side by side ("needs A, but has B"), each as format_bytes writes it unless the two would
// read alike although they differ: then with as many more decimals as tell them apart, or in bytes.
std::pair<std::string, std::string> format_bytes_apart(double a, double b);
std::string format_duration(double seconds);     // "42.1 ms"

}  // namespace tiersim::units
