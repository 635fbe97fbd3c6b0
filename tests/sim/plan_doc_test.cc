// docs/plan-report.md lists exactly the keys `plan --report` writes: plans that between them
// produce every optional part (known misses, rebalanced splits, searched rank orders,
// hierarchical CP, invalid layouts) are run, their JSON key paths collected and compared both
// ways with the paths the doc's tables name. Invalid reasons are written only where they
// occur; those these plans do not meet are exempt from the doc-to-JSON direction.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "job/plan_file.h"
#include "sim/plan.h"
#include "tests/common/doc_keys.h"

namespace pipetwin {
namespace {

std::string PlanJson(const std::string& text) {
  auto plan = ParsePlanFile(text, "plan.yaml");
  EXPECT_TRUE(plan) << plan.error().message;
  if (!plan) return "{}";
  auto r = RunPlan(*plan, {.top = 4, .threads = 1});
  EXPECT_TRUE(r) << r.error().message;
  return r ? PlanToJson(*r) : "{}";
}

TEST(PlanReportDoc, ListsExactlyTheKeysThePlanReportWrites) {
  const std::string plans[] = {
      // Uneven pipelines: rebalanced splits and fastest_rebalanced.
      "schedule: 1f1b\nmodel: {preset: llama3.1-8b}\ntraining: {global_batch: 64, micro_batch: "
      "1}\ncluster: {device: h100-sxm-80gb, gpus_per_node: 8, nodes: 1}\nsearch: {schedule: "
      "[1f1b, interleaved-1f1b], tp: [1, 2], pp: [2, 4], vpp: [2]}\n",
      // One microbatch a step with hidden DP collectives: a known miss.
      "schedule: 1f1b\nmodel: {preset: llama3.1-8b}\ntraining: {global_batch: 64, micro_batch: "
      "1, flash_attention: true, grad_reduce_dtype: bf16, overlap: {grad_reduce: true, "
      "param_gather: true}}\ncluster: {device: h100-sxm-80gb, gpus_per_node: 8, nodes: 8}\n"
      "search: {tp: [1], pp: [1], zero: [1]}\n",
      // Two rank orders, and CP in two levels (cp_comm and cp_a2a in the job).
      "schedule: 1f1b\nparallel: {cp_comm: a2a+p2p, cp_a2a: 2}\nmodel: {preset: llama3-8b, "
      "seq_len: 16384}\ntraining: {global_batch: 16, micro_batch: 1, recompute: selective}\n"
      "cluster: {device: h100-sxm-80gb, gpus_per_node: 8, nodes: 2}\nsearch: {tp: [2], pp: [1], "
      "cp: [4], rank_order: [tp-cp-dp-pp, tp-dp-cp-pp]}\n",
      // Invalid layouts of several kinds.
      "schedule: 1f1b\nmodel: {preset: tiny, layers: 5}\ntraining: {global_batch: 8}\ncluster: "
      "{device: a100-sxm-80gb, gpus_per_node: 8, nodes: 1}\nsearch: {tp: [1, 2, 3], pp: [1, 2, "
      "3, 4], sp: [false, true], micro_batch: [1, 3]}\n",
  };
  std::set<std::string> written;
  for (const std::string& p : plans) {
    testing::JsonKeyPaths(nlohmann::json::parse(PlanJson(p)), "", &written);
  }
  const std::set<std::string> documented =
      testing::DocumentedKeyPaths(testing::ReadDoc("plan-report.md"));
  ASSERT_GT(written.size(), 60u);
  for (const std::string& p : written) {
    EXPECT_TRUE(documented.count(p)) << p << " is written but not in docs/plan-report.md";
  }
  for (const std::string& p : documented) {
    if (p.rfind("invalid.", 0) == 0) continue;
    EXPECT_TRUE(written.count(p)) << p << " is in docs/plan-report.md but never written";
  }
}

}  // namespace
}  // namespace pipetwin
