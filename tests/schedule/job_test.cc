#include "schedule/job.h"

#include <gtest/gtest.h>

#include "schedule/build.h"

namespace pipetwin {
namespace {

// Parses `yaml`; expects an error whose message contains every piece of `parts`.
void ExpectError(const std::string& yaml, std::initializer_list<const char*> parts) {
  auto j = ParseJob(yaml, "job.yaml");
  ASSERT_FALSE(j.ok()) << yaml;
  EXPECT_EQ(j.error().exit_status(), 2);
  for (const char* p : parts) {
    EXPECT_NE(j.error().message.find(p), std::string::npos)
        << "missing '" << p << "' in: " << j.error().message;
  }
}

TEST(Job, ParsesTheDesignExample) {
  auto j = ParseJob(R"(
schedule: 1f1b
microbatches: 8
optimizer_sync: true
parallel: {pp: 4, vpp: 1, dp: 1, tp: 1, sp: false, cp: 1, zero: 0}
costs:
  forward_ms: 1.0
  backward_input_ms: 1.0
  backward_weight_ms: 1.0
  p2p_ms: 0.0
)",
                    "job.yaml");
  ASSERT_TRUE(j.ok()) << j.error().message;
  EXPECT_EQ(j->schedule, "1f1b");
  EXPECT_EQ(*j->microbatches, 8);
  EXPECT_EQ(j->parallel.pp, 4);
  ASSERT_TRUE(j->costs.has_value());
  EXPECT_DOUBLE_EQ(j->costs->forward_ms, 1.0);
}

TEST(Job, BadValuesNameFileKeyAndRule) {
  const std::string costs = "costs: {forward_ms: 1}\n";
  ExpectError("schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 0}\n" + costs,
              {"job.yaml:3:", "parallel.pp", "[1, 4096]", "got '0'"});
  ExpectError("schedule: 1f1b\nmicrobatches: 8\nparallel: {ppp: 2}\n" + costs,
              {"parallel", "unknown key 'ppp'", "allowed: pp, vpp"});
  ExpectError("schedule: 1f1b\nmicrobatchs: 8\n" + costs, {"unknown key 'microbatchs'"});
  ExpectError("schedule: 1f1c\nmicrobatches: 8\n" + costs,
              {"schedule", "must be one of gpipe, 1f1b", "got '1f1c'"});
  ExpectError("schedule: 1f1b\nmicrobatches: 8\ncosts: {forward_ms: -1}\n",
              {"costs.forward_ms", "got '-1'"});
  ExpectError("schedule: 1f1b\nmicrobatches: 8\ncosts: {p2p_ms: abc}\n", {"costs.p2p_ms"});
  ExpectError("schedule: 1f1b\nmicrobatches: 8\n", {"give either costs:"});
  ExpectError("schedule: 1f1b\n" + costs, {"microbatches", "missing"});
  ExpectError("schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 2, vpp: 2}\n" + costs,
              {"parallel.vpp", "must be 1 for 1f1b"});
  ExpectError("schedule: zbv\nmicrobatches: 8\nparallel: {pp: 2, vpp: 3}\n" + costs,
              {"parallel.vpp", "two chunks per rank"});
  ExpectError("schedule: 1f1b\nmicrobatches: 8\nparallel: {tp: 1, sp: true}\n" + costs,
              {"parallel.sp", "needs tp"});
  ExpectError("schedule: 1f1b\nmicrobatches: [8\n", {"job.yaml:", "not valid YAML"});
  ExpectError("optimizer_sync: maybe\nschedule: 1f1b\nmicrobatches: 8\n" + costs,
              {"optimizer_sync", "true or false"});
}

TEST(Job, InterleavedNeedsAMultipleOfPp) {
  auto j = ParseJob(
      "schedule: interleaved-1f1b\nmicrobatches: 6\nparallel: {pp: 4, vpp: 2}\n"
      "costs: {forward_ms: 1}\n",
      "job.yaml");
  ASSERT_TRUE(j.ok()) << j.error().message;
  auto s = BuildSchedule(*j, 6);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().exit_status(), 2);
  EXPECT_NE(s.error().message.find("job.yaml:2:"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("multiple of pp"), std::string::npos);
}

}  // namespace
}  // namespace pipetwin
