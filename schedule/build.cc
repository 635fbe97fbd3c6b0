#include "schedule/build.h"

#include "schedule/csv.h"
#include "schedule/lower.h"
#include "schedule/validate.h"
#include "schedule/yaml_fields.h"

namespace pipetwin {
namespace {

Expected<Schedule> LoadUserSchedule(const JobSpec& job, int microbatches) {
  const std::string csv = job.CsvPath();
  auto s = LoadScheduleCsv(csv);
  if (!s) return s;
  YamlFields f{job.path};
  if (s->num_ranks != job.parallel.pp) {
    return f.At(job.root["schedule"], "schedule",
                csv + " has " + std::to_string(s->num_ranks) + " rows (ranks) but parallel.pp is " +
                    std::to_string(job.parallel.pp));
  }
  if (s->num_microbatches != microbatches) {
    return f.At(job.root["schedule"], "schedule",
                csv + " uses " + std::to_string(s->num_microbatches) +
                    " microbatches but the job has " + std::to_string(microbatches));
  }
  // Validate the file as written (its own sends and receives, if it has any) before
  // anything is added to it.
  if (Status st = ValidateSchedule(*s, csv); !st) return st.error();
  return s;
}

}  // namespace

Expected<Schedule> ComputeSchedule(const JobSpec& job, int microbatches) {
  if (job.IsCsvSchedule()) return LoadUserSchedule(job, microbatches);
  const GeneratorInfo* g = FindGenerator(job.schedule);
  if (g == nullptr) return Error::BadInput(job.path + ": schedule: unknown '" + job.schedule + "'");
  auto s = g->generate({job.parallel.pp, job.parallel.vpp, microbatches});
  if (!s) {
    YamlFields f{job.path};
    const YAML::Node at =
        job.root["microbatches"] ? job.root["microbatches"] : job.root["schedule"];
    return f.At(at, "microbatches", s.error().message);
  }
  return s;
}

Expected<Schedule> BuildSchedule(const JobSpec& job, int microbatches, BuildOptions opts) {
  auto s = ComputeSchedule(job, microbatches);
  if (!s) return s;
  Schedule lowered = Lower(*s, {.reduce_grad = job.parallel.dp > 1, .optimizer = true});
  if (!job.IsCsvSchedule() && !opts.validate_generated) return lowered;
  const std::string source = job.IsCsvSchedule() ? job.CsvPath() : job.schedule + " (generated)";
  if (Status st = ValidateSchedule(lowered, source); !st) {
    // A generated schedule that fails validation is a bug in pipetwin, not bad input.
    if (!job.IsCsvSchedule()) return Error::Failure(st.error().message);
    return st.error();
  }
  return lowered;
}

}  // namespace pipetwin
