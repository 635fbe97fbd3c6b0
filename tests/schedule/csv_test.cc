#include "schedule/csv.h"

#include <gtest/gtest.h>

#include "schedule/generators.h"
#include "schedule/lower.h"

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
        for (CsvFormat f : {CsvFormat::kComputeOnly, CsvFormat::kComputeComms}) {
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
