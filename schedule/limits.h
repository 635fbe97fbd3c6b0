// limits.h — the sizes pipetwin accepts, checked before anything is allocated or built.
//
// A schedule holds at most kMaxScheduleActions (2^22) actions, counted as stages × microbatches × 4
// (F, I, W and the communication around them), whether a generator builds it or a CSV names it.
//
//   if (stages * microbatches * 4 > kMaxScheduleActions) return Error::BadInput("...");
#pragma once

#include <cstdint>

namespace pipetwin {

inline constexpr std::int64_t kMaxScheduleActions = 1LL << 22;
// The most ranks (rows) in a schedule CSV — parallel.pp's own limit — and its largest numbers.
inline constexpr int kMaxCsvRanks = 4096;
inline constexpr int kMaxCsvStage = 65535;
inline constexpr int kMaxCsvMicrobatch = 999999;

}  // namespace pipetwin
