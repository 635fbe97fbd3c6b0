// fuzz_job.cc — libFuzzer target: a job file's text through ParseJob (read, resolve, build
// and validate the schedule, price it), and the same text as a plan file through
// ParsePlanFile and, for a small search (at most 64 layouts), RunPlan on one thread. Any
// input must give a job, a plan or an Error, never a crash, a sanitizer report, an exception
// or unbounded memory.
//
//   scripts/fuzz.sh 60          # or: build/fuzz/fuzz/fuzz_job CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <string>

#include "job/job.h"
#include "job/plan_file.h"
#include "sim/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto job = pipetwin::ParseJob(text, "fuzz.yaml");
  if (job) (void)job->schedule.NumActions();
  auto plan = pipetwin::ParsePlanFile(text, "fuzz.yaml");
  if (plan && plan->search.Layouts() <= 64) {
    (void)pipetwin::RunPlan(*plan, {.top = 3, .threads = 1});
  }
  return 0;
}
