// fuzz_report.cc — libFuzzer target: report JSON (what compare reads) through ReportFromJson;
// what parses must write back and parse again.
//
//   scripts/fuzz.sh 60          # or: build/fuzz/fuzz/fuzz_report CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <string>

#include "schedule/report.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto r = pipetwin::ReportFromJson(text, "fuzz.json");
  if (!r) return 0;
  (void)pipetwin::ReportToJson(*r);
  return 0;
}
