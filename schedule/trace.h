// trace.h — Chrome trace event JSON of a Timeline (opens in Perfetto and chrome://tracing).
//
// pid = rank, one tid per stream (compute, send, recv, collective), `ph: "X"` slices named
// by action ("2F0"), and a flow arrow from each SEND to its RECV. The output is
// deterministic: the same timeline gives the same bytes.
#pragma once

#include <string>

#include "schedule/timeline.h"

namespace pipetwin {

std::string TraceJson(const Timeline& t, const std::string& title);

}  // namespace pipetwin
