#pragma once
// A grid sweep split over processes or machines (sim sweep --shard K/N) and joined again (sim merge). Shard K of N
// predicts the grid's points [floor((K-1) P / N), floor(K P / N)) of its P points, in order, and writes them as a
// shard file: JSON lines, a first line naming the grid (its axes, its point count, which shard) and one line per
// point with every figure the grid's writers read, doubles as they round-trip. `sim merge` reads the shards of one
// grid, checks that they are all there once, and writes the rows with the grid's writer (report::write_grid): the
// same bytes one process writes for the whole grid, in any of its formats.
#include <cstddef>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "report/reporters.hpp"

namespace tiersim::report {

struct GridShard {
  std::vector<std::string> axes;  // the grid's axes, as given ("--ngl")
  std::size_t points = 0;         // every point of the grid
  std::size_t k = 0, n = 0;       // shard k of n (1-based)
  std::size_t first = 0;          // the index of its first row in the grid
  std::vector<GridRow> rows;
};

// Which of a grid's `points` shard `k` of `n` predicts: [first, last).
std::pair<std::size_t, std::size_t> shard_range(std::size_t points, std::size_t k, std::size_t n);

// "K/N" with 1 <= K <= N <= 100000, or an InputError naming --shard.
std::pair<std::size_t, std::size_t> parse_shard(const std::string& text);

void write_grid_shard(std::ostream& out, const GridShard& shard);

// One shard file's text; an InputError names the file, the line and the key at fault.
GridShard read_grid_shard(const std::string& text, const std::string& file);

// The grid's rows from its shards (in any order): every shard of one grid (the same axes, point count and shard
// count), each once, their ranges the partition's. An InputError names the file that breaks that.
std::vector<GridRow> merge_grid_shards(const std::vector<std::pair<std::string, GridShard>>& shards,
                                       std::vector<std::string>& axes);

}  // namespace tiersim::report
