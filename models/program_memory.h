// program_memory.h — the memory of one pipeline rank over its program, from the cost model's
// per-stage bytes: what the simulator predicts and what the report builder (job/report.h)
// shows, on the predicted side, for every rank.
//
//   RankMemory m = models::RankMemoryOverProgram(s.programs[0], job_costs);
//   bool fits = m.peak <= job_costs.hbm_bytes;
#pragma once

#include <cstdint>
#include <vector>

#include "models/costs.h"
#include "schedule/report.h"
#include "schedule/schedule.h"

namespace pipetwin::models {

struct RankMemory {
  MemoryBytes at_peak;  // by category when the total peaks
  std::int64_t peak = 0;
};

// What a rank holds whatever it computes: the model state of `stages` (its stages), summed,
// and the communication buffers of the largest of them (one stage computes at a time).
MemoryBytes RankFixedMemory(const JobCosts& jc, const std::vector<int>& stages);

// Memory of one pipeline rank over its program: model state of its stages, plus the
// activations of every microbatch-chunk in flight (full from F until I or B, the W part from
// I until W, the transient working set inside I or B), plus the communication buffers of its
// largest stage (one stage computes at a time; their sum before 2026-11-28), plus
// (ZeRO-3, FSDP over whole stages) each stage's gathered parameters from UNSHARD until RESHARD,
// counted as params.
RankMemory RankMemoryOverProgram(const std::vector<Action>& program, const JobCosts& jc);

// The CPU executor's memory on one pipeline rank (`cluster.device: cpu`), replayed over its
// program exactly as exec/ allocates it: chunk state from models/cpu_inventory.h; a buffer
// per activation or gradient between chunks, from the action that produces it (or the
// posting of its receive: the engine keeps `recv_window` receives posted beyond those its
// computes have consumed, in program order, and a RECV posts itself if that has not)
// until the action that consumes it or the send that takes it over. at_peak holds each
// category's own peak (as the executor's accountant measures them) and peak the peak of
// their sum.
RankMemory CpuExecutorRankMemory(const Schedule& s, int pp_rank, const JobCosts& jc,
                                 int recv_window);

// The one the report uses for this job: the CPU executor's replay for `cluster.device: cpu`,
// else RankMemoryOverProgram.
RankMemory PipelineRankMemory(const Schedule& s, int pp_rank, const JobCosts& jc, int recv_window);

}  // namespace pipetwin::models
