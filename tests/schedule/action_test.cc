#include "schedule/action.h"

#include <gtest/gtest.h>

namespace pipetwin {
namespace {

TEST(Action, ParsesPyTorchSyntax) {
  auto a = Action::Parse("2F0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->stage, 2);
  EXPECT_EQ(a->kind, ActionKind::kForward);
  EXPECT_EQ(a->microbatch, 0);
  auto s = Action::Parse("13SEND_F107");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->stage, 13);
  EXPECT_EQ(s->kind, ActionKind::kSendF);
  EXPECT_EQ(s->microbatch, 107);
  auto r = Action::Parse("4REDUCE_GRAD");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, ActionKind::kReduceGrad);
  EXPECT_EQ(r->microbatch, -1);
}

TEST(Action, RoundTripsEveryKind) {
  const char* texts[] = {"0F1",      "1B3",      "0I1",      "0W1",          "3SEND_F1",
                         "1RECV_F0", "2SEND_B9", "1RECV_B0", "7REDUCE_GRAD", "0OPT"};
  for (const char* t : texts) {
    auto a = Action::Parse(t);
    ASSERT_TRUE(a.ok()) << t;
    EXPECT_EQ(a->ToString(), t);
  }
}

TEST(Action, RejectsMalformedText) {
  for (const char* t :
       {"", "F0", "2X0", "2F", "2F-1", "2Fa", "2OPT3", "2REDUCE_GRAD1", "2f0", "99999999999F0"}) {
    auto a = Action::Parse(t);
    EXPECT_FALSE(a.ok()) << t;
    if (!a.ok()) {
      EXPECT_NE(a.error().message.find("allowed"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace pipetwin
