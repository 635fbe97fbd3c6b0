#include "schedule/quote.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "schedule/action.h"
#include "schedule/report.h"
#include "schedule/trace.h"

namespace pipetwin {
namespace {

TEST(Quoted, EscapesControlCharactersAndBadUtf8) {
  EXPECT_EQ(Quoted("gpt3"), "'gpt3'");
  EXPECT_EQ(Quoted("a\tb\nc\x07"), "'a\\tb\\nc\\x07'");
  EXPECT_EQ(Quoted("\xff"), "'\\xFF'");
  EXPECT_EQ(Quoted("h\xc3\xa9"), "'h\xc3\xa9'");  // é stays
}

TEST(Quoted, ShowsAtMost80Characters) {
  const std::string q = Quoted(std::string(100000, 'x'));
  EXPECT_LT(q.size(), 120u);
  EXPECT_NE(q.find("(100000 bytes)"), std::string::npos);
}

TEST(Quoted, CsvCellsInMessagesAreEscapedAndShort) {
  auto a = Action::Parse("0F\x01" + std::string(500, 'Z'));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().message.find('\x01'), std::string::npos);
  EXPECT_LT(a.error().message.size(), 400u);
}

TEST(JsonEscape, TraceWithATabInItsTitleIsValidJson) {
  const std::string json = TraceJson(Timeline{}, "/tmp/a\tb\xff/job.yaml");
  const auto j = nlohmann::json::parse(json);  // throws on invalid JSON
  EXPECT_EQ(j["otherData"]["title"].get<std::string>(), "/tmp/a\tb\xef\xbf\xbd/job.yaml");
}

constexpr const char* kReport = R"({"iteration_time_ms": 10, "bubble_fraction": 0.1,
 "ranks": [{"rank": RANK, "compute_busy_ms": BUSY, "bubble_fraction": 0.1,
            "peak_memory_bytes": 10,
            "memory_bytes": {"params": PARAMS, "grads": 1, "optimizer": 1, "activations": 1},
            "comm_bytes_sent": 0}],
 "comm": {"bytes_total": 0, "by_group": {"pp": 0}}, "throughput": {}})";

std::string Report(const std::string& rank, const std::string& busy, const std::string& params) {
  std::string s = kReport;
  s.replace(s.find("RANK"), 4, rank);
  s.replace(s.find("BUSY"), 4, busy);
  s.replace(s.find("PARAMS"), 6, params);
  return s;
}

TEST(ReportFromJson, RefusesOutOfRangeNumbersNamingKeyAndRank) {
  ASSERT_TRUE(ReportFromJson(Report("0", "5", "1"), "r.json").ok());
  struct Case {
    std::string text, want;
  } cases[] = {
      {Report("1e18", "5", "1"), "ranks[0].rank: must be an integer in [0, 2147483648]"},
      {Report("-1", "5", "1"), "ranks[0].rank: must be an integer"},
      {Report("2", "-5", "1"), "rank 2: compute_busy_ms: must be a number in"},
      {Report("2", "5", "-1"), "rank 2: memory_bytes.params: must be an integer in [0, "},
      {Report("2", "5", "18446744073709551615"), "rank 2: memory_bytes.params: must be an integer"},
      {Report("2", "5", "1.5"), "rank 2: memory_bytes.params"},
  };
  for (const Case& c : cases) {
    auto r = ReportFromJson(c.text, "r.json");
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_NE(r.error().message.find(c.want), std::string::npos) << r.error().message;
  }
  std::string zero = Report("0", "5", "1");
  zero.replace(zero.find("10"), 2, "0");
  auto z = ReportFromJson(zero, "r.json");
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.error().message.find("iteration_time_ms: must be a number above 0"),
            std::string::npos)
      << z.error().message;
}

TEST(ReportFromJson, WrongTypesAndMissingKeysAreNamed) {
  // Issue 16: compare passed the JSON library's messages through ("cannot use at() with
  // number"), naming no key and no rank.
  const std::string ok = Report("2", "5", "1");
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string s = ok;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  struct Case {
    std::string text, want;
  } cases[] = {
      {edit("\"ranks\": [", "\"ranks\": 5, \"x\": ["), "ranks: must be a list"},
      {edit("\"ranks\": [", "\"ranks\": [7, "), "ranks[0].rank: expected inside a JSON object"},
      {edit("\"memory_bytes\": {", "\"memory_bytes\": [], \"x\": {"),
       "rank 2: memory_bytes: must be a JSON object"},
      {edit("\"iteration_time_ms\": 10", "\"iteration_time_ms\": \"10\""),
       "iteration_time_ms: must be a number"},
      {edit("\"throughput\": {}", "\"throughputs\": {}"), "throughput: missing"},
      {edit("\"iteration_time_ms\"", "\"schedule\": 5, \"iteration_time_ms\""),
       "schedule: must be a string"},
      {edit("\"iteration_time_ms\"", "\"measured_steps_ms\": [1, \"a\"], \"iteration_time_ms\""),
       "measured_steps_ms[1]: must be a number"},
      {"[1, 2]", "must be a JSON object"},
      {"{\"a\": ", "not valid JSON"},
  };
  ASSERT_TRUE(ReportFromJson(ok, "r.json").ok());
  for (const Case& c : cases) {
    auto r = ReportFromJson(c.text, "r.json");
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_EQ(r.error().exit_status(), 2);
    EXPECT_NE(r.error().message.find("r.json: " + c.want), std::string::npos) << r.error().message;
    if (c.want != "not valid JSON") {
      EXPECT_EQ(r.error().message.find("json.exception"), std::string::npos) << r.error().message;
    }
  }
}

TEST(ReportToJson, APathThatIsNotUtf8DoesNotThrow) {
  auto r = ReportFromJson(Report("0", "5", "1"), "r.json");
  ASSERT_TRUE(r.ok());
  r->schedule = "csv:\xff.csv";
  std::string json;
  ASSERT_NO_THROW(json = ReportToJson(*r));
  EXPECT_TRUE(ReportFromJson(json, "back.json").ok());
}

}  // namespace
}  // namespace pipetwin
