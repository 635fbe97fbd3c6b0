// engine.h — interprets one rank's program, action by action, through a Backend.
//
// The engine is the executor's half of "one IR, two consumers": it reads the same lowered
// per-rank programs as the simulator. A RECV posts (torch's meaning; posting also runs up to
// `recv_window` receives ahead in program order), and the compute that consumes its data waits
// for it; sends never block, so communication overlaps computation as the schedule intends. Every
// wait has a deadline: a receive, send or collective that stalls raises TimeoutError naming the
// rank, the action and the peer.
//
//   Engine engine(schedule, pp_rank, backend, {.timeout_s = 300});
//   std::vector<TimelineEvent> events = engine.RunStep(step);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "exec/backend.h"
#include "schedule/schedule.h"
#include "schedule/timeline.h"

namespace pipetwin::exec {

struct EngineOptions {
  double timeout_s = 300.0;
  int recv_window = 8;
  // Called before the first OPT of the step (Megatron's all-rank synchronisation); may be
  // empty. It must itself honour the deadline it is given.
  std::function<void(std::chrono::steady_clock::time_point deadline)> before_optimizer;
  // Without training.overlap.grad_reduce: every REDUCE_GRAD of the step waits until the
  // rank's program reaches its first OPT (or a WAIT_REDUCE_GRAD, or its end), as Megatron-LM
  // reduces after the pipeline flush; the simulator does the same (sim/costs.h).
  bool reduce_after_backward = false;
};

class Engine {
 public:
  Engine(const Schedule& s, int pp_rank, int world_rank, Backend& backend, EngineOptions opts);
  // Runs one training step; event times are nanoseconds from the call.
  std::vector<TimelineEvent> RunStep(std::int64_t step);

 private:
  int PeerOf(const Action& a) const;

  const Schedule& s_;
  int pp_rank_;
  int world_rank_;
  Backend& backend_;
  EngineOptions opts_;
};

}  // namespace pipetwin::exec
