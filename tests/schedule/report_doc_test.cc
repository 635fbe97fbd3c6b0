// docs/report.md lists exactly the keys the report writer can emit: a report with every
// optional section present is written, its key paths collected (arrays as `[]`), and compared
// both ways with the paths the doc's tables name in their first column.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "schedule/report.h"
#include "tests/common/doc_keys.h"

namespace pipetwin {
namespace {

// Every optional part filled, every list non-empty.
Report FullReport() {
  Report r;
  r.source = "run";
  r.schedule = "1f1b";
  r.pp = 2;
  r.microbatches = 4;
  r.iteration_time_ms = 10;
  r.makespan_ms = 10;
  RankReport k;
  k.pp_rank = 0;
  r.ranks.push_back(k);
  r.hardware_flops = HardwareFlops{1, 0.5};
  r.breakdown = Breakdown{};
  r.memory = MemorySummary{};
  r.job = JobSummary{"gpt3-125m", 2, 1, 1000, 1e12, 1.2e12, "cpu", {6, 6}};
  r.profile = ProfileUse{"p.yaml", true, 3, 10, 9, 11};
  r.measured = Measured{{10, 11}, {2.5, 2.4}, "cpu", true, 1e-9};
  r.parameter_servers.push_back({0, 2, 100, 100});
  r.dp_sync = DpSyncReport{"stale", 2, 3, {1.0, 1.1}, 1.05, 8.4, 0.5, 1};
  return r;
}

TEST(ReportDoc, ListsExactlyTheKeysTheWriterEmits) {
  const std::set<std::string> documented =
      testing::DocumentedKeyPaths(testing::ReadDoc("report.md"));
  std::set<std::string> written;
  testing::JsonKeyPaths(nlohmann::json::parse(ReportToJson(FullReport())), "", &written);
  ASSERT_GT(written.size(), 60u);
  for (const std::string& p : written) {
    EXPECT_TRUE(documented.count(p)) << p << " is written but not in docs/report.md";
  }
  for (const std::string& p : documented) {
    EXPECT_TRUE(written.count(p)) << p << " is in docs/report.md but never written";
  }
}

}  // namespace
}  // namespace pipetwin
