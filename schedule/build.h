// build.h — from a job to validated per-rank programs: generate (or load the user's CSV),
// lower (sends and receives, gradient reduction, optimizer step), validate. Everything that
// runs a schedule goes through here, so nothing runs an unchecked program.
//
//   Expected<Schedule> s = BuildSchedule(job, /*microbatches=*/8);
#pragma once

#include "schedule/job.h"
#include "schedule/schedule.h"

namespace pipetwin {

// The compute-only schedule the job asks for (generated, or read from its CSV), checked
// against the job's pp and microbatches.
Expected<Schedule> ComputeSchedule(const JobSpec& job, int microbatches);
struct BuildOptions {
  // Built-in generators are validated over pp 1..16 × m 1..64 by the test suite; a sweep
  // over many configurations may trust them. A user's CSV is always validated.
  bool validate_generated = true;
};
// ComputeSchedule, lowered and validated.
Expected<Schedule> BuildSchedule(const JobSpec& job, int microbatches, BuildOptions opts = {});

}  // namespace pipetwin
