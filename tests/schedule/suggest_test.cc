#include "schedule/suggest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedule/yaml_fields.h"

namespace pipetwin {
namespace {

const std::vector<std::string> kSchedules = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1",
                                             "zb-h2", "zbv",  "dualpipev"};

TEST(Suggest, OneEditAwayFromAShortName) {
  EXPECT_EQ(ClosestNames("1fb1", kSchedules), std::vector<std::string>{"1f1b"});   // a swap
  EXPECT_EQ(ClosestNames("gpip", kSchedules), std::vector<std::string>{"gpipe"});  // a deletion
  EXPECT_EQ(ClosestNames("zvb", kSchedules), std::vector<std::string>{"zbv"});
  // "zb-h3" is one replacement from both zero-bubble schedules: both are offered, in order.
  EXPECT_EQ(ClosestNames("zb-h3", kSchedules), (std::vector<std::string>{"zb-h1", "zb-h2"}));
  // Two edits are too many for a name of 7 characters or fewer.
  EXPECT_TRUE(ClosestNames("gpp", kSchedules).empty());
}

TEST(Suggest, LongerNamesAllowMoreEdits) {
  const std::vector<std::string> keys = {"global_batch", "micro_batch", "precision",
                                         "grad_reduce_dtype"};
  EXPECT_EQ(ClosestNames("micro_bach", keys), std::vector<std::string>{"micro_batch"});
  EXPECT_EQ(ClosestNames("micro-batch", keys), std::vector<std::string>{"micro_batch"});
  EXPECT_EQ(ClosestNames("microbtch", keys), std::vector<std::string>{"micro_batch"});  // 2
  EXPECT_EQ(ClosestNames("grad_reduce_typ", keys),
            std::vector<std::string>{"grad_reduce_dtype"});  // 17 characters: 3 edits allowed
  EXPECT_TRUE(ClosestNames("batch", keys).empty());
}

TEST(Suggest, IgnoresCaseAndTheNearestWin) {
  const std::vector<std::string> presets = {"gpt3-1.3b", "gpt3-2.7b", "gpt3-13b"};
  // Case alone differs: zero edits, so the one-edit neighbours are not offered beside it.
  EXPECT_EQ(ClosestNames("GPT3-1.3B", presets), std::vector<std::string>{"gpt3-1.3b"});
  EXPECT_EQ(ClosestNames("gpt3-1.3", presets), std::vector<std::string>{"gpt3-1.3b"});
}

TEST(Suggest, APrefixOfOneToThreeNames) {
  EXPECT_EQ(ClosestNames("interleaved", kSchedules), std::vector<std::string>{"interleaved-1f1b"});
  EXPECT_EQ(ClosestNames("dual", kSchedules), std::vector<std::string>{"dualpipev"});
  // Three letters are too few to guess from; four names equally near are too many.
  EXPECT_TRUE(ClosestNames("int", kSchedules).empty());
  const std::vector<std::string> four = {"llama3-8b", "llama3-70b", "llama3-405b", "llama3.1-8b"};
  EXPECT_TRUE(ClosestNames("llama", four).empty());
  // An edit beats a prefix.
  EXPECT_EQ(ClosestNames("llama3-8c", four), std::vector<std::string>{"llama3-8b"});
}

TEST(Suggest, NothingForFarEmptyOrHugeWords) {
  EXPECT_TRUE(ClosestNames("bogus_key", {"pp", "vpp", "dp", "tp"}).empty());
  EXPECT_TRUE(ClosestNames("", kSchedules).empty());
  EXPECT_TRUE(ClosestNames(std::string(100000, 'z'), kSchedules).empty());
  EXPECT_TRUE(ClosestNames("1f1b", {}).empty());
  EXPECT_EQ(DidYouMean("bogus", kSchedules), "");
}

TEST(Suggest, Phrasing) {
  EXPECT_EQ(DidYouMean("1fb1", kSchedules), "did you mean '1f1b'?");
  EXPECT_EQ(DidYouMean("zb-h3", kSchedules), "did you mean 'zb-h1' or 'zb-h2'?");
  EXPECT_EQ(DidYouMean("x", {"a", "b", "c"}), "did you mean 'a', 'b' or 'c'?");
  EXPECT_EQ(DidYouMean("reprot", {"report", "trace"}, "--"), "did you mean '--report'?");
  // A name holding control characters is shown escaped, as every value in a message is.
  EXPECT_EQ(DidYouMean("a", {"a\x01"}), "did you mean 'a\\x01'?");
}

TEST(Suggest, InTheJobFileMessages) {
  const YamlFields f{"job.yaml"};
  const YAML::Node training = YAML::Load("{global_batch: 8, micro_bach: 1}");
  const Status keys = f.CheckKeys(training, "training", {"global_batch", "micro_batch"});
  ASSERT_FALSE(keys.ok());
  EXPECT_EQ(keys.error().message,
            "job.yaml:1:19: training: unknown key 'micro_bach', did you mean 'micro_batch'? "
            "(allowed: global_batch, micro_batch)");
  const YAML::Node schedule = YAML::Load("1fb1");
  const Expected<std::string> choice = f.Choice(schedule, "schedule", kSchedules);
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.error().message,
            "job.yaml:1:1: schedule: must be one of gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, "
            "zbv, dualpipev, got '1fb1'; did you mean '1f1b'?");
  const YAML::Node far = YAML::Load("bogus");
  const Expected<std::string> none = f.Choice(far, "schedule", kSchedules);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message.find("did you mean"), std::string::npos);
}

}  // namespace
}  // namespace pipetwin
