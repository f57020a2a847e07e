// A grid's shard files (report/grid_shard.hpp): the partition, the file's round trip to the grid writer's bytes, and
// every way a set of shards can fail to be one grid.
#include <gtest/gtest.h>

#include <limits>
#include <sstream>

#include "core/error.hpp"
#include "report/grid_shard.hpp"

namespace tiersim::report {
namespace {

GridRow row(int i, bool ok = true) {
  GridRow r;
  r.values = {"rtx" + std::to_string(4000 + i), std::to_string(i)};
  r.ok = ok;
  r.error = ok ? "" : "needs 30.00 GiB, has 24.00 GiB";
  r.error_band = ok ? "±10%" : "";
  r.command = "sim run --hw 'a, b' --ngl " + std::to_string(i);
  r.vram_peak = 1e9 / 3 * (i + 1);
  r.offloaded = 0.1 * i;
  r.summary.decode_steps = ok ? 4 : 0;
  r.summary.prefill_steps = 1;
  r.summary.iteration_steps = i == 2 ? 3 : 0;  // one diffusion point: the writer adds a column for it
  r.summary.tps = 1.0 / 3.0 + i;
  r.summary.decode_step_median = 0.1 / 7;
  r.summary.iteration_median = i == 2 ? 2.5 / 3 : 0;
  r.summary.prefill_seconds = 1e-3 / 9;
  r.summary.h2d_bytes_per_step = 12345.678;
  if (i == 5) r.summary.tps = std::numeric_limits<double>::infinity();  // JSON has no inf: the shard spells it
  if (i == 6) r.summary.peer_bytes_per_step = std::numeric_limits<double>::quiet_NaN();
  return r;
}

TEST(GridShard, ThePartitionCoversEveryPointOnceInOrder) {
  for (std::size_t points : {1u, 7u, 12u, 100u})
    for (std::size_t n : {1u, 2u, 5u, 13u}) {
      std::size_t next = 0;
      for (std::size_t k = 1; k <= n; ++k) {
        const auto [first, last] = shard_range(points, k, n);
        EXPECT_EQ(first, next);
        EXPECT_LE(last - first, points / n + 1);
        next = last;
      }
      EXPECT_EQ(next, points);
    }
  EXPECT_EQ(parse_shard("3/8"), std::make_pair(std::size_t{3}, std::size_t{8}));
  for (const char* bad : {"", "3", "/8", "3/", "0/8", "9/8", "3/0", "a/8", "3/8x", "1/100001", "-1/2"})
    EXPECT_THROW(parse_shard(bad), InputError) << bad;
}

TEST(GridShard, MergedShardsWriteTheBytesOfTheWholeGrid) {
  const std::vector<std::string> axes = {"--hw", "--ngl"};
  std::vector<GridRow> rows;
  for (int i = 0; i < 7; ++i) rows.push_back(row(i, i != 4));
  for (GridFormat format : {GridFormat::Csv, GridFormat::Jsonl, GridFormat::Markdown}) {
    std::ostringstream whole;
    write_grid(whole, format, axes, rows);
    for (std::size_t n : {1u, 3u, 7u}) {
      std::vector<std::pair<std::string, GridShard>> shards;
      for (std::size_t k = n; k >= 1; --k) {  // any order
        const auto [first, last] = shard_range(rows.size(), k, n);
        std::ostringstream file;
        write_grid_shard(file, GridShard{axes, rows.size(), k, n, first,
                                         std::vector<GridRow>(rows.begin() + first, rows.begin() + last)});
        shards.emplace_back("s" + std::to_string(k), read_grid_shard(file.str(), "s" + std::to_string(k)));
      }
      std::vector<std::string> merged_axes;
      std::ostringstream merged;
      write_grid(merged, format, axes, merge_grid_shards(shards, merged_axes));
      EXPECT_EQ(merged_axes, axes);
      EXPECT_EQ(merged.str(), whole.str()) << n << " shards";
    }
  }
}

TEST(GridShard, ShardsThatAreNotOneWholeGridAreRefusedNamingTheFile) {
  const std::vector<std::string> axes = {"--hw", "--ngl"};
  auto file = [&](std::size_t k, std::size_t n, std::size_t points) {
    const auto [first, last] = shard_range(points, k, n);
    std::vector<GridRow> rows;
    for (std::size_t i = first; i < last; ++i) rows.push_back(row(int(i)));
    std::ostringstream out;
    write_grid_shard(out, GridShard{axes, points, k, n, first, rows});
    return out.str();
  };
  auto merge = [&](const std::vector<std::pair<std::string, std::string>>& files) {
    std::vector<std::pair<std::string, GridShard>> shards;
    for (const auto& [name, text] : files) shards.emplace_back(name, read_grid_shard(text, name));
    std::vector<std::string> a;
    return merge_grid_shards(shards, a).size();
  };
  EXPECT_EQ(merge({{"a", file(1, 2, 5)}, {"b", file(2, 2, 5)}}), 5u);
  EXPECT_THROW(merge({{"a", file(1, 2, 5)}}), InputError);                         // shard 2 missing
  EXPECT_THROW(merge({{"a", file(1, 2, 5)}, {"b", file(1, 2, 5)}}), InputError);   // shard 1 twice
  EXPECT_THROW(merge({{"a", file(1, 2, 5)}, {"b", file(2, 2, 6)}}), InputError);   // another grid
  EXPECT_THROW(merge({{"a", file(1, 2, 5)}, {"b", file(2, 3, 5)}}), InputError);   // another shard count
  EXPECT_THROW(merge({}), InputError);
  // The file and key a refused shard is named by ("read" when it was read).
  auto refused = [](const std::string& text, const std::string& name) -> std::pair<std::string, std::string> {
    try {
      read_grid_shard(text, name);
    } catch (const InputError& e) {
      return {e.file(), e.key()};
    }
    return {"read", "read"};
  };
  const std::string whole = file(2, 2, 5);
  const std::string cut = whole.substr(0, whole.rfind('{'));  // its last row lost
  EXPECT_EQ(refused(cut, "cut.jsonl"), std::make_pair(std::string("cut.jsonl"), std::string("rows")));
  std::string bad_shard = whole;
  bad_shard.replace(bad_shard.find("\"2/2\""), 5, "\"3/2\"");
  EXPECT_EQ(refused(bad_shard, "bad_shard.jsonl"), std::make_pair(std::string("bad_shard.jsonl"), std::string("shard")));
  for (const std::string& bad : {std::string(""), std::string("a,b\n1,2\n"), std::string("{\"format\":\"other\"}\n"),
                                 whole.substr(0, whole.find('\n') + 1) + "{\"values\":[\"x\"]}\n",
                                 whole.substr(0, whole.find('\n') + 1) + "not json\n"})
    EXPECT_THROW(read_grid_shard(bad, "bad.jsonl"), InputError) << bad;
}

}  // namespace
}  // namespace tiersim::report
