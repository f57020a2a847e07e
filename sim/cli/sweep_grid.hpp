#pragma once
// `sim sweep` grids, llama-bench style: an option given a comma list (--ngl 10,20,30, --hw rtx4090,rtx5090)
// or a numeric range (--ngl 0:40:10, FROM:TO:STEP) is an axis; the grid is every combination, in the
// order the axes were given, the last varying fastest. Only the options below take lists: the others'
// values may hold commas themselves (--split "cuda:0,80%;cpu,20%", --override-tensor, --set).
#include <string>
#include <vector>

namespace tiersim::app {

struct GridAxis {
  std::string option;               // "--ngl"
  std::vector<std::string> values;  // as the point's command line gets them
};

struct GridPoint {
  std::vector<std::string> args;    // the sweep's arguments with one value per axis
  std::vector<std::string> values;  // by axis
};

struct Grid {
  std::vector<GridAxis> axes;
  std::vector<GridPoint> points;    // one point (the arguments as given) when there is no axis
};

// Options that take a list: numeric ones take a range too (whole numbers for all but --offload-gb).
bool takes_list(const std::string& option);

// Expands `args` (a sweep's arguments, without the subcommand); throws InputError naming the option for
// an empty item, a bad range, an option given twice as an axis, or more than 100,000 points.
Grid expand_grid(const std::vector<std::string>& args);

// The command that reproduces one point: "sim run" and its arguments, quoted for a POSIX shell.
std::string point_command(const std::vector<std::string>& args, const std::string& subcommand = "run");

}  // namespace tiersim::app
