// plan_file.h — the plan file of `pipetwin plan`: a job file (model, training with
// global_batch, cluster) plus a `search:` section that lists candidate values per key.
// ParseJobConfig keeps refusing `search:`; ParsePlanFile splits it off and types it, so that
// nothing past this point reads YAML.
//
//   search: {schedule: [1f1b, zb-h1], tp: [4, 8], pp: [8, 16], dp: auto,
//            micro_batch: [1, 2], recompute: [selective, full],
//            overlap: [false, true, {grad_reduce: true}], rank_order: [tp-cp-dp-pp, tp-cp-pp-dp]}
//
//   Expected<PlanFile> p = ReadPlanFile("examples/plan/gpt3-175b.yaml");
//   if (!p) return p.error().exit_status();          // 2, naming e.g. "search.tp"
//   for (int tp : p->search.tp) { ... }
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "job/job.h"
#include "models/placement.h"
#include "models/training.h"
#include "schedule/expected.h"

namespace pipetwin {

// Candidate values per key; every list is non-empty once parsed (an omitted key holds the
// job's own value).
struct SearchSpace {
  std::vector<std::string> schedule;  // generator names (no csv:)
  std::vector<int> tp, pp, cp, vpp, micro_batch, zero;
  std::optional<std::vector<int>> dp;  // absent: `auto`, the GPUs filled by tp × pp × cp
  std::vector<bool> sp;
  std::vector<models::Recompute> recompute;
  std::vector<models::Overlap> overlap;  // each: a map, or a bool for all three flags
  // cluster.rank_order's candidates: which groups share a node, and on a cluster.fabric with
  // oversubscribed blocks which leave a block.
  std::vector<models::DimOrder> rank_order;
  // parallel.cp_comm's candidates (searched where cp > 1; a2a+p2p with the job's cp_a2a).
  std::vector<ParallelConfig::CpComm> cp_comm;

  // The layouts plan enumerates: the product of the lists, with vpp's for the interleaved
  // schedule only and cp_comm's where cp > 1 (as a double: a hostile file's product
  // overflows any integer).
  double Layouts() const;
};

// A search of more layouts is refused (exit 2): plan keeps a row for every layout it
// evaluates, about 280 bytes each, and a million take about 1 s to 15 s.
inline constexpr double kMaxPlanLayouts = 1e6;
// Values one search list may give: more only slows the parse (each is checked against the
// others to drop repeats).
inline constexpr std::size_t kMaxSearchValues = 4096;

struct PlanFile {
  JobConfig job;  // the base job (its `parallel:` is the default for omitted keys)
  SearchSpace search;
};

Expected<PlanFile> ParsePlanFile(const std::string& yaml_text, const std::string& path);
Expected<PlanFile> ReadPlanFile(const std::string& path);

}  // namespace pipetwin
