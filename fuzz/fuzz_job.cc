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
#include <cstdio>
#include <cstdlib>
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
  // A job that reads is written back to a file that reads to the same job: write ∘ read is a
  // fixpoint (plan --emit-jobs and validate's variants depend on it).
  if (auto config = pipetwin::ParseJobConfig(text, "fuzz.yaml")) {
    const std::string once = pipetwin::WriteJobConfig(*config);
    auto back = pipetwin::ParseJobConfig(once, "fuzz.yaml");
    if (!back) {
      std::fprintf(stderr, "written job does not read back: %s\n%s", back.error().message.c_str(),
                   once.c_str());
      std::abort();
    }
    if (pipetwin::WriteJobConfig(*back) != once) {
      std::fprintf(stderr, "written job reads back to another job:\n%s", once.c_str());
      std::abort();
    }
  }
  auto job = pipetwin::ParseJob(text, "fuzz.yaml");
  if (job) (void)job->schedule.NumActions();
  auto plan = pipetwin::ParsePlanFile(text, "fuzz.yaml");
  if (plan && SmallSearch(*plan)) (void)pipetwin::RunPlan(*plan, {.top = 3, .threads = 1});
  return 0;
}
