// The error table on hand-made reports.
#include "compare/compare.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pipetwin {
namespace {

Report MakeReport(double iteration_ms, std::vector<double> busy, std::int64_t act) {
  Report r;
  r.schedule = "1f1b";
  r.pp = 2;
  r.microbatches = 8;
  r.iteration_time_ms = iteration_ms;
  double total = 0;
  for (std::size_t i = 0; i < busy.size(); ++i) {
    RankReport k;
    k.rank = static_cast<int>(i);
    k.compute_busy_ms = busy[i];
    k.bubble_fraction = 1.0 - busy[i] / iteration_ms;
    k.memory = MemoryBytes{875008, 875008, 1750016, act, 131072};
    k.peak_memory_bytes = 875008 + 875008 + 1750016 + act + 131072;
    k.comm_bytes_sent = 1048576;
    r.comm.pp += k.comm_bytes_sent;
    total += busy[i];
    r.ranks.push_back(k);
  }
  r.bubble_fraction = 1.0 - total / (static_cast<double>(busy.size()) * iteration_ms);
  return r;
}

const ErrorRow& Row(const Comparison& c, const std::string& metric, int rank) {
  for (const ErrorRow& r : c.rows) {
    if (r.metric == metric && r.rank == rank) return r;
  }
  throw std::runtime_error("no row " + metric);
}

TEST(CompareTest, ErrorsOfRealNumbers) {
  const Report p = MakeReport(305.1, {270.2, 265.0}, 5832704);
  const Report m = MakeReport(298.4, {268.9, 259.3}, 5832704);
  auto c = CompareReports(p, m);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_NEAR(c->iteration_error, (305.1 - 298.4) / 298.4, 1e-12);  // +2.245%
  EXPECT_TRUE(Row(*c, "iteration_time_ms", -1).ok(0.05));
  EXPECT_FALSE(Row(*c, "iteration_time_ms", -1).ok(0.02));
  EXPECT_NEAR(Row(*c, "compute_busy_ms", 1).relative_error(), (265.0 - 259.3) / 259.3, 1e-12);
  // The bubble is compared by its difference: 0.1143 against 0.1310.
  const ErrorRow& bubble = Row(*c, "bubble_fraction", 1);
  EXPECT_NEAR(bubble.predicted - bubble.measured, (1 - 265.0 / 305.1) - (1 - 259.3 / 298.4), 1e-12);
  EXPECT_TRUE(c->memory_equal);
  EXPECT_TRUE(c->bytes_equal);
  EXPECT_EQ(c->memory_rows, 12);  // 2 ranks x (5 categories + peak)
  EXPECT_EQ(c->bytes_rows, 2 + 5);
}

TEST(CompareTest, OneByteOffIsADifference) {
  const Report p = MakeReport(100, {90, 90}, 5832704);
  Report m = MakeReport(100, {90, 90}, 5832705);
  m.ranks[1].comm_bytes_sent += 4;
  auto c = CompareReports(p, m);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->memory_equal);
  EXPECT_FALSE(c->bytes_equal);
  EXPECT_EQ(Row(*c, "memory.activations", 0).predicted - Row(*c, "memory.activations", 0).measured,
            -1);
  EXPECT_TRUE(Row(*c, "memory.params", 0).ok(0));
  EXPECT_EQ(c->iteration_error, 0);
}

TEST(CompareTest, PipelineRankRowsMatchWorldRanks) {
  // A prediction with one row per pipeline rank against a run with dp 2 (4 world ranks).
  Report p = MakeReport(200, {150, 140}, 1000);
  Report m = MakeReport(210, {151, 152, 141, 139}, 1000);
  auto c = CompareReports(p, m);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(Row(*c, "compute_busy_ms", 1).predicted, 150);  // world rank 1 is pipeline rank 0
  EXPECT_EQ(Row(*c, "compute_busy_ms", 2).predicted, 140);
  EXPECT_EQ(Row(*c, "comm.pp", -1).predicted, 2 * p.comm.pp);  // each pipeline counted twice
  EXPECT_TRUE(c->bytes_equal);
}

TEST(CompareTest, DifferentJobsAreBadInput) {
  Report p = MakeReport(100, {90, 90}, 1);
  Report m = p;
  m.schedule = "zb-h1";
  auto c = CompareReports(p, m);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().exit_status(), 2);
  EXPECT_NE(c.error().message.find("different jobs"), std::string::npos);
  m = MakeReport(100, {90, 90, 90}, 1);
  EXPECT_FALSE(CompareReports(p, m).ok());
}

TEST(CompareTest, TablesInMarkdownAndCsv) {
  const Report p = MakeReport(305.1, {270.2, 265.0}, 5832704);
  const Report m = MakeReport(298.4, {268.9, 259.3}, 5832704);
  auto c = CompareReports(p, m);
  ASSERT_TRUE(c.ok());
  const std::string md = ComparisonMarkdown(*c, "1f1b", 0.05);
  EXPECT_NE(md.find("iteration time error +2.25% (tolerance ±5%) ok"), std::string::npos) << md;
  EXPECT_NE(md.find("| iteration_time_ms | all | ms | 305.1 | 298.4 | +2.25% | yes |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("memory equal byte for byte"), std::string::npos);
  const std::string csv = ComparisonCsv(*c, 0.05);
  EXPECT_EQ(csv.rfind("metric,rank,unit,predicted,measured,difference,relative_error,ok\n", 0), 0u);
  EXPECT_NE(csv.find("\nmemory.activations,1,bytes,5832704,5832704,0,0,1\n"), std::string::npos)
      << csv;
}

// "Where time goes": GFLOP per microbatch = GFLOP/s x ms / 1000, the share of the roofline's
// GEMM rate; "–" where a rate or the roofline is not known.
TEST(CompareTest, WhereTimeGoesTable) {
  WhereTimeGoes w;
  w.profile = "prof.yaml";
  w.backend = "cpu";
  w.roofline_gflops = 50;
  w.roofline_gb_s = 12;
  w.rows = {{0, ActionKind::kForward, 40, 12.5},
            {0, ActionKind::kBackwardInput, 80, 10},
            {1, ActionKind::kOptimizer, 2.5, 0}};
  const std::string md = WhereTimeGoesMarkdown(w);
  EXPECT_EQ(md.rfind("### Where time goes\n", 0), 0u) << md;
  EXPECT_NE(md.find("`prof.yaml` (backend cpu)"), std::string::npos) << md;
  EXPECT_NE(md.find("fp32 GEMM: 50.0 GFLOP/s; memory 12.0 GB/s"), std::string::npos) << md;
  EXPECT_NE(
      md.find("| stage | action | median ms | GFLOP / microbatch | GFLOP/s | % of roofline |"),
      std::string::npos);
  EXPECT_NE(md.find("| 0 | F | 40.000 | 0.5 | 12.50 | 25.0% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0 | I | 80.000 | 0.8 | 10.00 | 20.0% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | OPT | 2.500 | – | – | – |"), std::string::npos) << md;
  w.roofline_gflops = 0;  // no roofline: no share
  EXPECT_NE(WhereTimeGoesMarkdown(w).find("| 0 | F | 40.000 | 0.5 | 12.50 | – |"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetwin
