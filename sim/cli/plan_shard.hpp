#pragma once
// sim plan split over processes or machines (sim plan --shard K/N) and joined again (sim merge), as a sweep's grid is
// (report/grid_shard.hpp): shard K of N searches the plan's candidates [floor((K-1) C / N), floor(K C / N)) of its C
// (workload x hardware x strategy, in that order) and writes their best points, unranked, as JSON lines: a first
// line naming the plan (its candidate count, which shard, the machines, the goal and each machine's price) and one
// line per candidate with every figure the plan's tail (finish_plan: drops, ranking, the Pareto front) and writer
// read, doubles as they round-trip. `sim merge` checks that every shard of one plan is there once and finishes the
// plan over all rows: the bytes one process writes, in any of its formats.
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cli/plan.hpp"
#include "hardware/catalogue.hpp"

namespace tiersim::app {

struct PlanShard {
  std::size_t candidates = 0;       // every candidate of the plan
  std::size_t k = 0, n = 0;         // shard k of n (1-based)
  std::size_t first = 0;            // the candidate index of its first row
  std::vector<std::string> hardware;  // the plan's machines, as ranked (rank_plan prices each)
  PlanGoal goal;
  std::map<std::string, std::optional<hw::Price>> prices;  // by machine: what the plan process priced it at
  PlanWork work;                    // this shard's search
  std::vector<PlanRow> rows;        // its candidates' best points, in candidate order
};

void write_plan_shard(std::ostream& out, const PlanShard& shard);

// Whether a shard file's text is a plan's (its first line), not a sweep grid's.
bool is_plan_shard(const std::string& text);

// One shard file's text; an InputError names the file, the line and the key at fault.
PlanShard read_plan_shard(const std::string& text, const std::string& file);

// Every row of the plan from its shards (in any order), in candidate order: the shards of one plan (the same
// candidates, shard count, machines, goal and prices), each once. `whole` gets the plan's header and the summed work;
// an InputError names the file that breaks that.
std::vector<PlanRow> merge_plan_shards(const std::vector<std::pair<std::string, PlanShard>>& shards, PlanShard& whole);

}  // namespace tiersim::app
