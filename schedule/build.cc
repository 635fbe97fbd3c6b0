#include "schedule/build.h"

#include "schedule/csv.h"
#include "schedule/generators.h"
#include "schedule/lower.h"
#include "schedule/validate.h"

namespace pipetwin {
namespace {

Expected<Schedule> LoadUserSchedule(const ScheduleRequest& r) {
  auto s = LoadScheduleCsv(r.csv_path);
  if (!s) return s;
  if (s->num_ranks != r.pp) {
    return Error::BadInput(r.where_schedule + ": " + r.csv_path + " has " +
                           std::to_string(s->num_ranks) + " rows (ranks) but parallel.pp is " +
                           std::to_string(r.pp));
  }
  if (s->num_microbatches != r.microbatches) {
    return Error::BadInput(r.where_schedule + ": " + r.csv_path + " uses " +
                           std::to_string(s->num_microbatches) + " microbatches but the job has " +
                           std::to_string(r.microbatches));
  }
  // Validate the file as written (its own sends and receives, if it has any) before
  // anything is added to it.
  if (Status st = ValidateSchedule(*s, r.csv_path); !st) return st.error();
  return s;
}

}  // namespace

Expected<Schedule> ComputeSchedule(const ScheduleRequest& r) {
  if (r.IsCsv()) return LoadUserSchedule(r);
  const GeneratorInfo* g = FindGenerator(r.name);
  if (g == nullptr) return Error::BadInput(r.where_schedule + ": unknown '" + r.name + "'");
  auto s = g->generate({r.pp, r.vpp, r.microbatches});
  if (!s) return Error::BadInput(r.where_microbatches + ": " + s.error().message);
  return s;
}

Expected<Schedule> BuildSchedule(const ScheduleRequest& r) {
  auto s = ComputeSchedule(r);
  if (!s) return s;
  Schedule lowered = Lower(*s, {.reduce_grad = r.reduce_grad, .optimizer = true});
  if (!r.IsCsv() && !r.validate_generated) return lowered;
  const std::string source = r.IsCsv() ? r.csv_path : r.name + " (generated)";
  if (Status st = ValidateSchedule(lowered, source); !st) {
    // A generated schedule that fails validation is a bug in pipetwin, not bad input.
    if (!r.IsCsv()) return Error::Failure(st.error().message);
    return st.error();
  }
  return lowered;
}

}  // namespace pipetwin
