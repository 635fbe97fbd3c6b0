#include "schedule/csv.h"

#include <gtest/gtest.h>

#include "schedule/generators.h"
#include "schedule/lower.h"
#include "schedule/validate.h"

namespace pipetwin {
namespace {

TEST(Csv, RoundTripsEveryGeneratorInBothFormats) {
  for (const GeneratorInfo& g : AllGenerators()) {
    for (int pp : {1, 2, 3, 4, 8}) {
      for (int m : {1, 4, 8, 16, 24}) {
        const int vpp = g.name == "interleaved-1f1b" ? 2 : 1;
        auto s = g.generate({pp, vpp, m});
        if (!s.ok()) continue;
        const Schedule full = Lower(*s, {.reduce_grad = true, .optimizer = true});
        for (CsvFormat f : {CsvFormat::kComputeOnly, CsvFormat::kPipetwin}) {
          const Schedule& src = f == CsvFormat::kComputeOnly ? *s : full;
          const std::string text = WriteScheduleCsv(src, f);
          auto back = ParseScheduleCsv(text, "t.csv");
          ASSERT_TRUE(back.ok()) << back.error().message;
          EXPECT_EQ(back->programs, src.programs) << g.name;
          EXPECT_EQ(back->stage_to_rank, src.stage_to_rank) << g.name;
          EXPECT_EQ(back->num_microbatches, m);
          EXPECT_EQ(WriteScheduleCsv(*back, f), text);
        }
      }
    }
  }
}

// compute_comms is what torch's runtime runs: it loads back as ForTorchRuntime's programs,
// and those validate (one wait per send, after it; the reduction and its wait).
TEST(Csv, TorchFormatLoadsBackAndValidates) {
  for (const GeneratorInfo& g : AllGenerators()) {
    for (int pp : {1, 2, 4}) {
      for (int m : {4, 8}) {
        auto s = g.generate({pp, g.name == "interleaved-1f1b" ? 2 : 1, m});
        if (!s.ok()) continue;
        const Schedule full = Lower(*s, {.reduce_grad = false, .optimizer = true});
        const std::string text = WriteScheduleCsv(full, CsvFormat::kComputeComms);
        EXPECT_EQ(text.find("OPT"), std::string::npos) << g.name;
        auto back = ParseScheduleCsv(text, "t.csv");
        ASSERT_TRUE(back.ok()) << back.error().message;
        EXPECT_EQ(back->programs, ForTorchRuntime(full).programs) << g.name;
        const Status st = ValidateSchedule(*back, "t.csv");
        EXPECT_TRUE(st.ok()) << st.error().message;
        // Every send has exactly one wait, every stage one REDUCE_GRAD (dp 1 too).
        int sends = 0, waits = 0, reduces = 0, reduce_waits = 0;
        for (const auto& prog : back->programs) {
          for (const Action& a : prog) {
            sends += a.kind == ActionKind::kSendF || a.kind == ActionKind::kSendB;
            waits += IsWaitSend(a.kind);
            reduces += a.kind == ActionKind::kReduceGrad;
            reduce_waits += a.kind == ActionKind::kWaitReduceGrad;
          }
        }
        EXPECT_EQ(waits, sends) << g.name;
        EXPECT_EQ(reduces, back->num_stages) << g.name;
        EXPECT_EQ(reduce_waits, back->num_stages) << g.name;
      }
    }
  }
}

// 1F1B, pp 2, m 2, by hand from torch 2.15's lowering rules: a SEND_F's wait right after the
// local backward of the same microbatch; SEND_B's waits at the end; REDUCE_GRAD after the
// stage's last backward (and its send), its wait right after it; no OPT.
TEST(Csv, TorchFormatHandWorked1F1B) {
  auto s = FindGenerator("1f1b")->generate({2, 1, 2});
  ASSERT_TRUE(s.ok());
  const Schedule full = Lower(*s, {.reduce_grad = false, .optimizer = true});
  EXPECT_EQ(WriteScheduleCsv(full, CsvFormat::kComputeComms),
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1,"
            "0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n"
            "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1REDUCE_GRAD,"
            "1WAIT_REDUCE_GRAD,1WAIT_SEND_B0,1WAIT_SEND_B1\n");
  EXPECT_EQ(WriteScheduleCsv(full, CsvFormat::kPipetwin),
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0OPT\n"
            "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1OPT\n");
}

// Step-aligned compute_only rows (PipelineScheduleMulti), 1F1B pp 2 m 2 by hand: a cross-rank
// consumer runs at the first step after its producer.
TEST(Csv, StepAlignedRowsHandWorked) {
  auto s = FindGenerator("1f1b")->generate({2, 1, 2});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(WriteStepAlignedCsv(*s), "0F0,0F1,,0B0,,0B1\n,1F0,1B0,1F1,1B1\n");
  // Read back, the idle cells drop: the same programs.
  auto back = ParseScheduleCsv(WriteStepAlignedCsv(*s), "t.csv");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->programs, s->programs);
}

// Every kind torch 2.15 writes is read, with torch's meaning.
TEST(Csv, ReadsEveryTorchKind) {
  auto s = ParseScheduleCsv(
      "0UNSHARD,0F0,0SEND_F0,,(0F1;3B0)OVERLAP_F_B,0WAIT_SEND_F0,0REDUCE_GRAD,"
      "0WAIT_REDUCE_GRAD,0RESHARD\n"
      "1UNSHARD,1RECV_F0,1F0,2F0,1WAIT_SEND_B0,1RESHARD\n",
      "torch.csv");
  ASSERT_TRUE(s.ok()) << s.error().message;
  std::vector<std::string> row0;
  for (const Action& a : s->programs[0]) row0.push_back(a.ToString());
  EXPECT_EQ(row0,
            (std::vector<std::string>{"0UNSHARD", "0F0", "0SEND_F0", "0F1", "3B0", "0WAIT_SEND_F0",
                                      "0REDUCE_GRAD", "0WAIT_REDUCE_GRAD", "0RESHARD"}));
  EXPECT_EQ(s->programs[1][4].kind, ActionKind::kWaitSendB);
}

TEST(Csv, UnknownKindsAndBadOverlapsNameTheCell) {
  auto s = ParseScheduleCsv("0F0,0FOO1\n", "bad.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().exit_status(), 2);
  EXPECT_NE(s.error().message.find("bad.csv: row 1 (rank 0), column 2"), std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("unknown kind"), std::string::npos) << s.error().message;
  for (const char* cell : {"(0F1;0SEND_F1)OVERLAP_F_B", "(0F1;1B0)OVERLAP", "(0F1)OVERLAP_F_B",
                           "(0F1;1Q0)OVERLAP_F_B"}) {
    auto o = ParseScheduleCsv(std::string("0F0,") + cell + "\n", "bad.csv");
    ASSERT_FALSE(o.ok()) << cell;
    EXPECT_EQ(o.error().exit_status(), 2);
    EXPECT_NE(o.error().message.find("row 1 (rank 0), column 2"), std::string::npos)
        << o.error().message;
  }
}

TEST(Csv, EmptyCellsAreIdleSteps) {
  auto s = ParseScheduleCsv("0F0,,0B0\n,1F0,1B0\n", "t.csv");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->programs[0].size(), 2u);
  EXPECT_EQ(s->programs[1][0].ToString(), "1F0");
}

TEST(Csv, ErrorsNameFileRowAndColumn) {
  auto s = ParseScheduleCsv("0F0,0B0\n1F0,1Q0\n", "bad.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("bad.csv: row 2 (rank 1), column 2"), std::string::npos)
      << s.error().message;
  s = ParseScheduleCsv("0F0,0B0\n0F1,0B1\n", "two.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("stage 0 appears on rank 0 and on rank 1"), std::string::npos);
  s = ParseScheduleCsv("0F0,0B0\n2F0,2B0\n", "gap.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("stage 1 never appears"), std::string::npos);
  EXPECT_EQ(s.error().exit_status(), 2);
}

TEST(Csv, RefusesHugeNumbersBeforeAllocating) {
  auto stage = ParseScheduleCsv("999999999F0\n", "big.csv");
  ASSERT_FALSE(stage.ok());
  EXPECT_NE(stage.error().message.find("stage 999999999 is out of range (at most 65535)"),
            std::string::npos)
      << stage.error().message;
  auto mb = ParseScheduleCsv("0F9999999\n", "big.csv");
  ASSERT_FALSE(mb.ok());
  EXPECT_NE(mb.error().message.find("microbatch 9999999 is out of range"), std::string::npos);
  // 1,000 stages x microbatch 999999: each number allowed, their product is not.
  std::string row = "0F999999";
  for (int st = 1; st < 1000; ++st) row += "," + std::to_string(st) + "F0";
  auto product = ParseScheduleCsv(row + "\n", "big.csv");
  ASSERT_FALSE(product.ok());
  EXPECT_NE(product.error().message.find("exceeds the limit of 4194304 schedule actions"),
            std::string::npos)
      << product.error().message;
}

TEST(Csv, ACellThatIsNoActionIsNotEchoed) {
  // Issue 16: `schedule: csv:/etc/passwd` printed the file's first line in the message.
  auto s = ParseScheduleCsv("root:x:0:0:root:/root:/bin/bash\n", "/etc/passwd");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message.find("root:x"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("bad action of 31 characters"), std::string::npos)
      << s.error().message;
  // A mistyped action is still shown.
  auto t = ParseScheduleCsv("0F0,0X1\n", "t.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("bad action '0X1'"), std::string::npos) << t.error().message;
}

TEST(Csv, RefusesMoreRanksThanPpAllows) {
  std::string text;
  for (int r = 0; r < 4097; ++r) text += std::to_string(r) + "F0\n";
  auto s = ParseScheduleCsv(text, "rows.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("more than 4096 ranks"), std::string::npos);
}

}  // namespace
}  // namespace pipetwin
