// build.h — from a schedule request to validated per-rank programs: generate (or load the
// user's CSV), lower (sends and receives, gradient reduction, optimizer step), validate.
// Everything that runs a schedule goes through here (job/ calls it once, when it resolves a
// job), so nothing runs an unchecked program.
//
//   ScheduleRequest r{.name = "1f1b", .pp = 4, .microbatches = 8};
//   Expected<Schedule> s = BuildSchedule(r);
#pragma once

#include <string>

#include "schedule/expected.h"
#include "schedule/schedule.h"

namespace pipetwin {

struct ScheduleRequest {
  std::string name;      // a generator name, or "csv:PATH"
  std::string csv_path;  // the file to read for "csv:PATH" (resolved against the job's folder)
  int pp = 1;
  int vpp = 1;
  int microbatches = 1;
  bool reduce_grad = false;  // data-parallel gradient reduction (dp > 1)
  // Message prefixes that locate the job's keys, e.g. "job.yaml:2:11: schedule".
  std::string where_schedule = "schedule";
  std::string where_microbatches = "microbatches";
  // Built-in generators are validated over pp 1..16 × m 1..64 by the test suite; a sweep
  // over many configurations may trust them. A user's CSV is always validated.
  bool validate_generated = true;

  bool IsCsv() const { return name.rfind("csv:", 0) == 0; }
};

// The compute-only schedule asked for (generated, or read from the CSV), checked against
// the request's pp and microbatches.
Expected<Schedule> ComputeSchedule(const ScheduleRequest& r);
// ComputeSchedule, lowered and validated.
Expected<Schedule> BuildSchedule(const ScheduleRequest& r);

}  // namespace pipetwin
