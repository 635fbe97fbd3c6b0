// fuzz_csv.cc — libFuzzer target: schedule CSV text through ParseScheduleCsv; what parses
// must write back and parse again to the same programs.
//
//   scripts/fuzz.sh 60          # or: build/fuzz/fuzz/fuzz_csv CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "schedule/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using pipetwin::CsvFormat;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto s = pipetwin::ParseScheduleCsv(text, "fuzz.csv");
  if (!s) return 0;
  const std::string out = pipetwin::WriteScheduleCsv(*s, CsvFormat::kPipetwin);
  auto back = pipetwin::ParseScheduleCsv(out, "fuzz.csv");
  if (!back || back->programs != s->programs) std::abort();
  return 0;
}
