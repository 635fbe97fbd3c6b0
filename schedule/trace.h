// trace.h — Chrome trace event JSON of a Timeline (opens in Perfetto and chrome://tracing).
//
// pid = rank, one tid per stream (compute, send, recv, collective), `ph: "X"` slices named
// by action ("2F0"), and a flow arrow from each SEND to its RECV. The output is
// deterministic: the same timeline gives the same bytes. Files are written in pieces (a trace
// of pp 64 × m 1024 is over 100 MB) and gzip-compressed where the path ends in ".gz".
//
//   if (Status s = WriteTraceFile("t.json.gz", sim->timeline, "1f1b"); !s) return s;
//   std::string text = TraceJson(sim->timeline, "1f1b");   // the same bytes, uncompressed
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "schedule/expected.h"
#include "schedule/timeline.h"

namespace pipetwin {

// Receives the trace text in consecutive pieces (about 1 MiB each).
using TraceSink = std::function<void(std::string_view)>;

void StreamTraceJson(const Timeline& t, const std::string& title, const TraceSink& sink);
std::string TraceJson(const Timeline& t, const std::string& title);
// Writes the trace atomically, gzip-compressed when `path` ends in ".gz"; `json_bytes`, where
// given, receives the size of its JSON text (before compression).
Status WriteTraceFile(const std::string& path, const Timeline& t, const std::string& title,
                      std::int64_t* json_bytes = nullptr);

}  // namespace pipetwin
