// fuzz_job.cc — libFuzzer target: a job file's text through ParseJob (read, resolve, build
// and validate the schedule, price it), and the same text as a plan file through
// ParsePlanFile and, for a small search (at most 64 layouts of at most 2^16 actions each),
// RunPlan on one thread. Any input must give a job, a plan or an Error, never a crash, a
// sanitizer report, an exception or unbounded memory.
//
//   scripts/fuzz.sh 60          # or: build/fuzz/fuzz/fuzz_job CORPUS_DIR
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "job/job.h"
#include "job/plan_file.h"
#include "sim/plan.h"

namespace {

// A search small enough to run under the sanitizers within libFuzzer's timeout: at most 64
// layouts, each schedule at most 2^16 actions (pp x vpp x global_batch x 4, the most
// microbatches a layout can have).
bool SmallSearch(const pipetwin::PlanFile& plan) {
  if (plan.search.Layouts() > 64) return false;
  const auto& sp = plan.search;
  const long long pp = *std::max_element(sp.pp.begin(), sp.pp.end());
  const long long vpp = *std::max_element(sp.vpp.begin(), sp.vpp.end());
  return pp * std::max(2LL, vpp) * plan.job.training.global_batch * 4 <= (1LL << 16);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto job = pipetwin::ParseJob(text, "fuzz.yaml");
  if (job) (void)job->schedule.NumActions();
  auto plan = pipetwin::ParsePlanFile(text, "fuzz.yaml");
  if (plan && SmallSearch(*plan)) (void)pipetwin::RunPlan(*plan, {.top = 3, .threads = 1});
  return 0;
}
