#include "schedule/validate.h"

#include <gtest/gtest.h>

#include "schedule/csv.h"

namespace pipetwin {
namespace {

Status ValidateText(const std::string& text) {
  auto s = ParseScheduleCsv(text, "user.csv");
  EXPECT_TRUE(s.ok()) << s.error().message;
  return ValidateSchedule(*s, "user.csv");
}

TEST(Validate, AcceptsAHandWrittenSchedule) {
  EXPECT_TRUE(ValidateText("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n").ok());
}

TEST(Validate, RejectsAMissingReceiveWithTheGrid) {
  Status st = ValidateText("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().exit_status(), 2);
  EXPECT_NE(st.error().message.find("missing 1RECV_F0"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("rank 1"), std::string::npos);
}

TEST(Validate, RejectsACrossedOrderAndMarksBothSteps) {
  Status st = ValidateText("0F0,0F1,0B1,0B0\n1B0,1F0,1F1,1B1\n");
  ASSERT_FALSE(st.ok());
  const std::string& msg = st.error().message;
  EXPECT_NE(msg.find("1B0 (step 0) comes before 1F0 (step 1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find(">1B0<"), std::string::npos) << msg;
  EXPECT_NE(msg.find(">1F0<"), std::string::npos) << msg;
}

TEST(Validate, DetectsDeadlockBetweenRanks) {
  // Rank 0 runs B0 (which needs rank 1's gradient of microbatch 0) before it sends the
  // activation of microbatch 1; rank 1 runs F1 (which needs that activation) before it
  // produces the gradient of microbatch 0. Each rank's own order is legal; only the dry run
  // over both ranks finds the cycle.
  Status st = ValidateText(
      "0F0,0SEND_F0,0RECV_B0,0B0,0F1,0SEND_F1,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1RECV_F1,1F1,1B1,1SEND_B1,1B0,1SEND_B0\n");
  ASSERT_FALSE(st.ok());
  const std::string& msg = st.error().message;
  EXPECT_NE(msg.find("deadlock"), std::string::npos) << msg;
  EXPECT_NE(msg.find(">0B0<"), std::string::npos) << msg;
  EXPECT_NE(msg.find(">1F1<"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1F1 waits for 0SEND_F1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0B0 waits for 1SEND_B0"), std::string::npos) << msg;
  // Rank 1 running B0 before F1 breaks the cycle.
  EXPECT_TRUE(ValidateText("0F0,0SEND_F0,0RECV_B0,0B0,0F1,0SEND_F1,0RECV_B1,0B1\n"
                           "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n")
                  .ok());
}

// A receive posts; the compute that consumes it waits (torch's meaning). Receives posted long
// before their data is sent are fine, even ahead of sends the peer is waiting for.
TEST(Validate, ReceivesPostAndTheComputeWaits) {
  EXPECT_TRUE(ValidateText("0F0,0SEND_F0,0RECV_B1,0F1,0SEND_F1,0RECV_B0,0B0,0B1\n"
                           "1RECV_F0,1RECV_F1,1F0,1F1,1B1,1SEND_B1,1B0,1SEND_B0\n")
                  .ok());
  // ... but never after that compute.
  Status st = ValidateText("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("a forward needs its input received first"), std::string::npos)
      << st.error().message;
}

TEST(Validate, DetectsDeadlockWithoutComms) {
  // Compute-only: rank 0 runs B0 before F1, but rank 1 runs F1 (which needs 0F1) first.
  Status st = ValidateText("0F0,0B0,0F1,0B1\n1F0,1F1,1B0,1B1\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("deadlock"), std::string::npos) << st.error().message;
}

TEST(Validate, RejectsCountsAndDuplicates) {
  Status st = ValidateText("0F0,0F0,0B0\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("appears twice"), std::string::npos);
  st = ValidateText("0F0,0I0\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("an I without its W"), std::string::npos);
  st = ValidateText("0F0,0W0,0I0\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("0W0 (step 1) comes before 0I0 (step 2)"), std::string::npos)
      << st.error().message;
  st = ValidateText("0F0,0B0,0I0,0W0\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("both a full backward"), std::string::npos);
}

TEST(Validate, GridIsCutToAWindowForLongPrograms) {
  Schedule s;
  s.num_ranks = 1;
  s.num_stages = 1;
  s.num_microbatches = 100;
  s.stage_to_rank = {0};
  s.programs.resize(1);
  for (int i = 0; i < 100; ++i) s.programs[0].push_back({0, ActionKind::kForward, i});
  const std::string grid = FormatGrid(s, {{0, 60}});
  EXPECT_NE(grid.find(">0F60<"), std::string::npos);
  EXPECT_EQ(grid.find("0F10 "), std::string::npos);
}

}  // namespace
}  // namespace pipetwin
