// trace_read.h — reading back a Chrome trace that `simulate --trace` or `run --trace` wrote
// (trace.h), for `compare`'s timeline plot: plain or gzip-compressed, checked before use.
//
//   Expected<std::string> json = ReadTraceFile("measured.trace.json.gz", "--measured-trace");
//   if (!json) return json.error();   // bad input: names the file, the event and the field
//
// A trace is accepted when it is an object with a "traceEvents" array (or a bare array) of
// objects, every complete slice ("ph": "X") carries an integer pid >= 0 and tid >= 0, a string
// name, a number ts and a number dur >= 0, and at least one slice is a compute action ("2F0")
// on the compute stream (tid 0): what the timeline draws.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "schedule/action.h"
#include "schedule/expected.h"

namespace pipetwin {

// The largest trace read back, as JSON text (after gunzip): 256 MiB (`simulate --trace` of
// pp 64 × 1,024 microbatches is about 100 MB).
inline constexpr std::int64_t kMaxTraceBytes = 256LL << 20;

// Said where a trace just written is larger than `compare` reads back (`json_bytes` of JSON text,
// before compression); empty where it is not.
std::string TraceTooLargeToReadNote(const std::string& path, std::int64_t json_bytes);

// A compute action on the compute stream (tid 0): its rank (pid) and duration (dur, in µs).
struct ComputeSlice {
  std::int64_t rank = 0;
  Action action;
  double dur_us = 0;
};
// Receives each compute slice, in file order, as the events stream past.
using ComputeSliceSink = std::function<void(const ComputeSlice&)>;

// The number of compute slices on the compute stream, or bad input naming `path` and `what`
// (the option: "--predicted-trace"), the event's index and the field. `sink`, where given,
// receives every compute slice (of a trace that may still turn out bad further on).
Expected<std::int64_t> CheckTraceJson(std::string_view json, const std::string& path,
                                      const std::string& what,
                                      const ComputeSliceSink& sink = nullptr);

// The file's JSON text, gunzipped where it starts with gzip's magic bytes (whatever its name),
// once CheckTraceJson accepts it (with `sink`); at most `max_bytes`, compressed or not.
Expected<std::string> ReadTraceFile(const std::string& path, const std::string& what,
                                    std::int64_t max_bytes = kMaxTraceBytes,
                                    const ComputeSliceSink& sink = nullptr);

}  // namespace pipetwin
