// timeline.h — what happened (or is predicted to happen) on each rank, action by action.
//
// The simulator and the executor both produce a Timeline; the Chrome trace, the ASCII view
// and the report are built from it, so predicted and measured runs compare like with like.
// Times are integer nanoseconds from the start of the step.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/action.h"

namespace pipetwin {

// One tid per stream in the trace.
enum class Stream : std::uint8_t { kCompute = 0, kSend = 1, kRecv = 2, kCollective = 3 };
inline constexpr int kNumStreams = 4;

struct TimelineEvent {
  Action action;
  Stream stream = Stream::kCompute;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int32_t peer = -1;  // the other rank of a SEND or RECV
  std::int64_t bytes = 0;  // bytes sent (SEND, REDUCE_GRAD)
};

// One rank's step in numbers, with ONE definition for the simulator and the executor:
// busy is the time on the compute stream (F, B, I, W, OPT); the span runs from the first
// compute action's start to the last action's end, receives excluded (a receive posted
// early says nothing about the rank's own work).
struct RankStepStats {
  std::int64_t first_start_ns = -1;  // -1 until a compute action is seen
  std::int64_t last_end_ns = 0;
  std::int64_t busy_ns = 0;

  void Add(Stream stream, std::int64_t start_ns, std::int64_t end_ns) {
    if (stream == Stream::kCompute) {
      if (first_start_ns < 0) first_start_ns = start_ns;
      busy_ns += end_ns - start_ns;
    }
    if (stream != Stream::kRecv && end_ns > last_end_ns) last_end_ns = end_ns;
  }
  std::int64_t span_ns() const { return first_start_ns < 0 ? 0 : last_end_ns - first_start_ns; }
};
inline RankStepStats SummarizeRank(const std::vector<TimelineEvent>& events) {
  RankStepStats s;
  for (const TimelineEvent& e : events) s.Add(e.stream, e.start_ns, e.end_ns);
  return s;
}

struct Timeline {
  // events[r]: rank r's events in the order they were issued.
  std::vector<std::vector<TimelineEvent>> events;
  int num_ranks() const { return static_cast<int>(events.size()); }
};

}  // namespace pipetwin
