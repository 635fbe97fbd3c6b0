#include "schedule/trace_read.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "schedule/atomic_file.h"
#include "schedule/file_io.h"

namespace pipetwin {
namespace {

namespace fs = std::filesystem;

// One compute slice on rank 1 (stage 1's forward of microbatch 0) beside a metadata event.
constexpr const char* kGood =
    R"({"traceEvents":[{"ph":"M","name":"process_name","pid":1,"args":{"name":"rank 1"}},)"
    R"({"ph":"X","name":"1F0","cat":"F","pid":1,"tid":0,"ts":0.5,"dur":2,"args":{"stage":1}}]})";

std::string Message(std::string_view json) {
  auto n = CheckTraceJson(json, "t.json", "--measured-trace");
  if (n.ok()) return "accepted";
  EXPECT_EQ(n.error().code, ErrorCode::kBadInput);
  return n.error().message;
}

TEST(TraceRead, CountsTheComputeSlicesOfTheComputeStream) {
  std::vector<ComputeSlice> seen;
  auto n = CheckTraceJson(kGood, "t.json", "--measured-trace",
                          [&](const ComputeSlice& c) { seen.push_back(c); });
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(*n, 1);
  ASSERT_EQ(seen.size(), 1u);  // rank 1's F of stage 1, microbatch 0, 2 µs
  EXPECT_EQ(seen[0].rank, 1);
  EXPECT_EQ(seen[0].action, (Action{.stage = 1, .kind = ActionKind::kForward, .microbatch = 0}));
  EXPECT_EQ(seen[0].dur_us, 2.0);
  // A bare array of events is a Chrome trace too; slices of other streams and names that are
  // not compute actions are not counted.
  n = CheckTraceJson(R"([{"ph":"X","name":"0F0","pid":0,"tid":0,"ts":0,"dur":1},)"
                     R"({"ph":"X","name":"0SEND_F0","pid":0,"tid":1,"ts":1,"dur":1},)"
                     R"({"ph":"X","name":"0OPT","pid":0,"tid":0,"ts":2,"dur":1},)"
                     R"({"ph":"X","name":"idle","pid":0,"tid":0,"ts":3,"dur":1}])",
                     "t.json", "--measured-trace");
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(*n, 2);
}

TEST(TraceRead, BadTracesNameTheFileTheEventAndTheField) {
  const std::string at = "t.json: --measured-trace: ";
  EXPECT_EQ(Message("garbage"), at + "not JSON near byte 1 (invalid literal; last read: 'g')");
  EXPECT_EQ(Message("3"), at + "must be a Chrome trace (an object with \"traceEvents\"), not a "
                               "single value");
  EXPECT_EQ(Message(R"({"events":[]})"),
            at + "no \"traceEvents\" array (a Chrome trace, as `simulate --trace` and `run "
                 "--trace` write it)");
  EXPECT_EQ(Message(R"({"traceEvents":{}})"), at + "\"traceEvents\" must be an array of events");
  EXPECT_EQ(Message(R"({"traceEvents":[{"ph":"M"},7]})"),
            at + "traceEvents[1] must be an object (an event)");
  EXPECT_EQ(Message(R"([{"name":"0F0"}])"),
            at + "traceEvents[0].ph must be a string (the event type: \"X\" for a slice, \"M\" "
                 "for metadata)");
  const std::string slice = R"({"ph":"X","name":"0F0","pid":0,"tid":0,"ts":0,"dur":1})";
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string s = slice;
    s.replace(s.find(from), from.size(), to);
    return "[" + slice + "," + s + "]";
  };
  EXPECT_EQ(Message(with(R"("pid":0)", R"("pid":"0")")),
            at + "traceEvents[1].pid must be an integer >= 0 (the rank)");
  EXPECT_EQ(Message(with(R"("pid":0)", R"("pid":-1)")),
            at + "traceEvents[1].pid must be an integer >= 0 (the rank)");
  EXPECT_EQ(Message(with(R"("tid":0,)", "")),
            at + "traceEvents[1].tid must be an integer >= 0 (the stream: 0 is compute)");
  EXPECT_EQ(Message(with(R"("name":"0F0")", R"("name":5)")),
            at + "traceEvents[1].name must be a string (the action)");
  EXPECT_EQ(Message(with(R"("ts":0)", R"("ts":"abc")")),
            at + "traceEvents[1].ts must be a number (the start, in microseconds)");
  EXPECT_EQ(Message(with(R"("dur":1)", R"("dur":-0.5)")),
            at + "traceEvents[1].dur must be a number >= 0 (the duration, in microseconds)");
  EXPECT_EQ(Message(with(R"("dur":1)", R"("dur":[1])")),
            at + "traceEvents[1].dur must be a number >= 0 (the duration, in microseconds)");
  // Well formed, but nothing for the timeline to draw.
  EXPECT_EQ(Message(R"({"traceEvents":[{"ph":"M","name":"process_name","pid":0}]})"),
            at + "no compute action (a slice named as \"2F0\" with \"tid\": 0) to draw: not a "
                 "trace from `simulate --trace` or `run --trace`");
  // A field nested in args is not the event's own.
  EXPECT_EQ(Message(R"([{"ph":"X","name":"0F0","tid":0,"ts":0,"dur":1,"args":{"pid":0}}])"),
            at + "traceEvents[0].pid must be an integer >= 0 (the rank)");
}

fs::path FreshDir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("pipetwin_trace_read_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string Bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TraceRead, GzipIsReadByItsMagicBytes) {
  const fs::path d = FreshDir("gzip");
  const std::string text = kGood;
  // Compressed, whatever the name; two gzip members one after the other read as one text.
  ASSERT_TRUE(WriteFileAtomicGzip((d / "a.gz").string(), text.substr(0, 40)).ok());
  ASSERT_TRUE(WriteFileAtomicGzip((d / "b.gz").string(), text.substr(40)).ok());
  const std::string a = Bytes(d / "a.gz"), b = Bytes(d / "b.gz");
  ASSERT_TRUE(WriteFileAtomic((d / "both.json").string(), a + b).ok());
  auto back = ReadTraceFile((d / "both.json").string(), "--measured-trace");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, text);
  // Cut short, or over the limit once uncompressed.
  ASSERT_TRUE(WriteFileAtomic((d / "cut.json.gz").string(), a.substr(0, a.size() / 2)).ok());
  auto cut = ReadTraceFile((d / "cut.json.gz").string(), "--measured-trace");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().code, ErrorCode::kBadInput);
  EXPECT_EQ(cut.error().message, (d / "cut.json.gz").string() +
                                     ": --measured-trace: not a valid gzip file (it ends before "
                                     "the stream does)");
  const std::string big((1 << 20) + 1, ' ');
  ASSERT_TRUE(WriteFileAtomicGzip((d / "big.gz").string(), big).ok());
  auto over = ReadTraceFile((d / "big.gz").string(), "--measured-trace", 1 << 20);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().message, (d / "big.gz").string() +
                                      ": --measured-trace: larger than the limit of 1048576 "
                                      "bytes once uncompressed");
  // A plain trace is read as it is, and checked.
  ASSERT_TRUE(WriteFileAtomic((d / "plain.json").string(), text).ok());
  auto plain = ReadTraceFile((d / "plain.json").string(), "--measured-trace");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(*plain, text);
  fs::remove_all(d);
}

}  // namespace
}  // namespace pipetwin
