// fuzz_report.cc — libFuzzer target: what compare reads. Report JSON through ReportFromJson
// (what parses must write back and parse again), and the same bytes as a trace
// (CheckTraceJson, schedule/trace_read.h).
//
//   scripts/fuzz.sh 60          # or: build/fuzz/fuzz/fuzz_report CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <string>

#include "schedule/report.h"
#include "schedule/trace_read.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)pipetwin::CheckTraceJson(text, "fuzz.json", "the trace");
  auto r = pipetwin::ReportFromJson(text, "fuzz.json");
  if (!r) return 0;
  (void)pipetwin::ReportToJson(*r);
  return 0;
}
