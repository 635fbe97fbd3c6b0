// engine.h — the discrete-event engine that plays per-rank programs against a cost table.
//
// Resources: each rank has a compute stream (F, B, I, W, OPT run one at a time, in program
// order), a collective stream (REDUCE_GRAD, overlapping compute), and a link to each
// pipeline neighbour in each direction (transfers on one link run one after another, in the
// order they were sent). Communication overlaps computation: a SEND is posted and the rank
// goes on; a RECV posts too (torch's meaning), and the compute that consumes its data waits
// until it has arrived (the wait is recorded as the RECV's event). WAIT_SEND_* waits until its
// send's transfer is done, WAIT_REDUCE_GRAD until the rank's reductions are. UNSHARD gathers a
// stage's parameters on the collective stream (FSDP over whole stages: ZeRO-3 with dp > 1, else it
// costs nothing) and the stage's computes wait for it and, until RESHARD, gather nothing
// themselves; such a stage reduces its gradients once, at REDUCE_GRAD (sim/costs.h). With
// optimizer_sync, every rank's first OPT waits for a barrier across all ranks (DESIGN.md,
// "Iteration time").
//
// Events are kept in a queue ordered by (time, insertion sequence), so the order is
// deterministic; time is an integer. The engine asserts that time never runs backwards and
// that no event is left when it ends.
//
//   TimelineRecorder rec(s.num_ranks);
//   SimStats st = RunEngine(s, costs, {.optimizer_sync = true}, &rec);
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/schedule.h"
#include "schedule/timeline.h"
#include "sim/costs.h"
#include "sim/sim_time.h"

namespace pipetwin {

// Subscribers see every action as it is placed on the timeline.
class SimObserver {
 public:
  virtual ~SimObserver() = default;
  virtual void OnEvent(int rank, const TimelineEvent& e) = 0;
};

// Records the full Timeline (the trace, the ASCII view and the report read it).
class TimelineRecorder final : public SimObserver {
 public:
  explicit TimelineRecorder(int num_ranks) {
    timeline_.events.resize(static_cast<std::size_t>(num_ranks));
  }
  void OnEvent(int rank, const TimelineEvent& e) override {
    timeline_.events[static_cast<std::size_t>(rank)].push_back(e);
  }
  const Timeline& timeline() const { return timeline_; }
  Timeline Take() { return std::move(timeline_); }

 private:
  Timeline timeline_;
};

struct EngineOptions {
  bool optimizer_sync = true;
};

struct RankStats {
  RankStepStats step;  // busy time and span, as the executor defines them (timeline.h)
  SimTime dp_exposed;  // gradient reduction still running when the rank reached its OPT
  std::int64_t bytes_sent_pp = 0;
  std::int64_t bytes_sent_dp = 0;
};

struct SimStats {
  SimTime makespan;
  std::vector<RankStats> ranks;
  std::uint64_t events_processed = 0;
  std::uint64_t actions = 0;
};

// The schedule must be lowered and valid (BuildSchedule); observer may be null.
SimStats RunEngine(const Schedule& s, const CostTable& costs, const EngineOptions& opts,
                   SimObserver* observer);

}  // namespace pipetwin
