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

struct Timeline {
  // events[r]: rank r's events in the order they were issued.
  std::vector<std::vector<TimelineEvent>> events;
  int num_ranks() const { return static_cast<int>(events.size()); }
};

}  // namespace pipetwin
