#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "schedule/csv.h"
#include "schedule/generators.h"
#include "schedule/lower.h"
#include "schedule/validate.h"

namespace pipetwin {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Schedule Gen(const char* name, int pp, int m, int vpp = 1) {
  auto s = FindGenerator(name)->generate({pp, vpp, m});
  EXPECT_TRUE(s.ok()) << name << " pp " << pp << " m " << m << ": "
                      << (s.ok() ? "" : s.error().message);
  return s.ok() ? *s : Schedule{};
}

class Golden : public ::testing::TestWithParam<const char*> {};

TEST_P(Golden, ReproducesTheZeroBubblePaperFigure) {
  const std::string name = GetParam();
  const std::string golden =
      ReadFile(std::string(PIPETWIN_TEST_DATA_DIR) + "/reference/" + name + "-p4-m8.csv");
  ASSERT_FALSE(golden.empty()) << "missing golden file for " << name;
  EXPECT_EQ(WriteScheduleCsv(Gen(name.c_str(), 4, 8), CsvFormat::kComputeOnly), golden);
}

INSTANTIATE_TEST_SUITE_P(Reference, Golden, ::testing::Values("1f1b", "zb-h1", "zb-h2"));

// ZB-V with fewer than 2p − 1 microbatches, against torch 2.15's own order (README there).
TEST(Generators, ZbvBelowAFullPipelineFollowsTorch) {
  const std::string golden =
      ReadFile(std::string(PIPETWIN_TEST_DATA_DIR) + "/reference/zbv-p4-m4.csv");
  ASSERT_FALSE(golden.empty());
  EXPECT_EQ(WriteScheduleCsv(Gen("zbv", 4, 4), CsvFormat::kComputeOnly), golden);
}

// DualPipeV against DeepSeek's reference order, worked by hand (tests/data/reference/README.md).
TEST(Generators, DualPipeVFollowsDeepSeeksReference) {
  for (const auto& [pp, m] : {std::pair{4, 8}, std::pair{2, 4}}) {
    const std::string file = std::string(PIPETWIN_TEST_DATA_DIR) + "/reference/dualpipev-p" +
                             std::to_string(pp) + "-m" + std::to_string(m) + ".csv";
    const std::string golden = ReadFile(file);
    ASSERT_FALSE(golden.empty()) << "missing " << file;
    EXPECT_EQ(WriteScheduleCsv(Gen("dualpipev", pp, m), CsvFormat::kComputeOnly), golden) << file;
  }
}

// Every generator, every pp 1..16 and m 1..64 that it allows, lowered, must validate
// (counts, order, no deadlock).
TEST(Generators, AllValidateOverTheGrid) {
  int checked = 0;
  for (const GeneratorInfo& g : AllGenerators()) {
    const int vpp = g.name == "interleaved-1f1b" ? 2 : 1;
    for (int pp = 1; pp <= 16; ++pp) {
      for (int m = 1; m <= 64; ++m) {
        auto s = g.generate({pp, vpp, m});
        if (!s.ok()) {
          // Only the documented limits may refuse.
          if (g.name == "interleaved-1f1b") {
            EXPECT_NE(m % pp, 0) << "pp " << pp << " m " << m;
          } else if (g.name == "dualpipev") {
            EXPECT_LT(m, 2 * pp) << "pp " << pp << " m " << m;
          } else {
            ADD_FAILURE() << g.name << " refused pp " << pp << " m " << m << ": "
                          << s.error().message;
          }
          EXPECT_NE(s.error().message.find(std::string(g.name)), std::string::npos);
          continue;
        }
        Schedule lowered = Lower(*s, {.reduce_grad = true, .optimizer = true});
        Status st = ValidateSchedule(lowered, std::string(g.name));
        ASSERT_TRUE(st.ok()) << g.name << " pp " << pp << " m " << m << "\n" << st.error().message;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 6000);
}

TEST(Generators, EdgeCasesSingleRankAndSingleMicrobatch) {
  Schedule s = Gen("1f1b", 1, 1);
  EXPECT_EQ(WriteScheduleCsv(s, CsvFormat::kComputeOnly), "0F0,0B0\n");
  s = Gen("zb-h1", 1, 2);
  EXPECT_EQ(WriteScheduleCsv(s, CsvFormat::kComputeOnly), "0F0,0I0,0W0,0F1,0I1,0W1\n");
  s = Gen("gpipe", 2, 1);
  EXPECT_EQ(WriteScheduleCsv(s, CsvFormat::kComputeOnly), "0F0,0B0\n1F0,1B0\n");
  // m < pp: 1F1B warms up with only the microbatches there are.
  s = Gen("1f1b", 4, 2);
  EXPECT_EQ(WriteScheduleCsv(s, CsvFormat::kComputeOnly),
            "0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n2F0,2F1,2B0,2B1\n3F0,3B0,3F1,3B1\n");
}

TEST(Generators, InterleavedFollowsMegatronOrder) {
  // pp 2, vpp 2, m 4 (hand-worked): rank 0 holds stages 0 and 2, rank 1 stages 1 and 3.
  // Forwards go in groups of pp per chunk: (c0,0) (c0,1) (c1,0) (c1,1) (c0,2) ...
  // Rank 0 warms up with 2(p − r − 1) + (v − 1)p = 4 forwards, rank 1 with 2.
  Schedule s = Gen("interleaved-1f1b", 2, 4, 2);
  EXPECT_EQ(WriteScheduleCsv(s, CsvFormat::kComputeOnly),
            "0F0,0F1,2F0,2F1,0F2,2B0,0F3,2B1,2F2,0B0,2F3,0B1,2B2,2B3,0B2,0B3\n"
            "1F0,1F1,3F0,3B0,3F1,3B1,1F2,1B0,1F3,1B1,3F2,3B2,3F3,3B3,1B2,1B3\n");
  EXPECT_FALSE(FindGenerator("interleaved-1f1b")->generate({4, 2, 6}).ok());
}

TEST(Generators, VShapePlacement) {
  Schedule s = Gen("zbv", 4, 8);
  EXPECT_EQ(s.num_stages, 8);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  s = Gen("dualpipev", 4, 8);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  auto bad = FindGenerator("dualpipev")->generate({4, 2, 6});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("at least 2·pp = 8"), std::string::npos);
  // DeepSeek's reference asserts m >= 2p: 2p − 1 is refused, 2p runs.
  EXPECT_FALSE(FindGenerator("dualpipev")->generate({4, 2, 7}).ok());
  EXPECT_TRUE(FindGenerator("dualpipev")->generate({4, 2, 8}).ok());
}

TEST(Lowering, FusedPassEqualsTheSeparatePasses) {
  for (const GeneratorInfo& g : AllGenerators()) {
    for (int pp : {1, 2, 3, 4}) {
      for (int m : {1, 3, 4, 8, 12}) {
        auto s = g.generate({pp, g.name == "interleaved-1f1b" ? 2 : 1, m});
        if (!s.ok()) continue;
        const Schedule fused = Lower(*s, {.reduce_grad = true, .optimizer = true});
        const Schedule separate = AddOptimizer(AddReduceGrad(AddSendRecv(*s)));
        EXPECT_EQ(fused.programs, separate.programs) << g.name << " pp " << pp << " m " << m;
        // A compute_comms schedule (already lowered sends) gets only what it lacks.
        const Schedule comms = AddSendRecv(*s);
        EXPECT_EQ(Lower(comms, {.reduce_grad = true, .optimizer = true}).programs,
                  separate.programs);
      }
    }
  }
}

TEST(Lowering, AddsSendRecvOnlyAcrossRanks) {
  // V placement: stages 3 and 4 share rank 3, so nothing is sent between them.
  Schedule s = Lower(Gen("zbv", 4, 4), {.reduce_grad = false, .optimizer = false});
  for (const Action& a : s.programs[3]) {
    if (a.kind == ActionKind::kSendF) {
      EXPECT_EQ(a.stage, 4) << a.ToString();
    }
    if (a.kind == ActionKind::kRecvF) {
      EXPECT_EQ(a.stage, 3) << a.ToString();
    }
  }
  // 1F1B pp 2 m 1 by hand.
  Schedule t = Lower(Gen("1f1b", 2, 1), {.reduce_grad = true, .optimizer = true});
  EXPECT_EQ(WriteScheduleCsv(t, CsvFormat::kPipetwin),
            "0F0,0SEND_F0,0RECV_B0,0B0,0REDUCE_GRAD,0OPT\n"
            "1RECV_F0,1F0,1B0,1SEND_B0,1REDUCE_GRAD,1OPT\n");
}

}  // namespace
}  // namespace pipetwin
