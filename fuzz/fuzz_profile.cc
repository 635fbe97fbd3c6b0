// fuzz_profile.cc — libFuzzer target: profile YAML (pipetwin calibrate's output) through
// ParseProfile against a fixed 1F1B schedule (pp 2, 4 microbatches).
//
//   scripts/fuzz.sh 60          # or: build/fuzz/fuzz/fuzz_profile CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "schedule/generators.h"
#include "sim/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const pipetwin::Schedule kSchedule = [] {
    auto s = pipetwin::FindGenerator("1f1b")->generate({.pp = 2, .vpp = 1, .microbatches = 4});
    if (!s) std::abort();
    return *s;
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)pipetwin::ParseProfile(text, "fuzz.yaml", kSchedule);
  return 0;
}
