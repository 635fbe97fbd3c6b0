// backend.h — what the executor needs from a device: compute a model chunk's actions and move
// tensors between ranks. The engine (engine.h) interprets a rank's program and calls these;
// backends (CPU: Eigen + MPI; CUDA: cuBLAS + NCCL) differ only here.
//
// Communication is split into post and test so the engine can overlap it with computation
// and enforce a deadline: PostSend/PostRecv start a transfer and return at once; TestRecv and
// TestSends report completion without blocking. Collectives that the engine itself issues
// (the data-parallel gradient reduction) follow the same pattern.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/cpu/params.h"
#include "schedule/action.h"
#include "schedule/report.h"
#include "schedule/timeline.h"

namespace pipetwin::exec {

class Backend {
 public:
  virtual ~Backend() = default;

  // Once per step, before the first action: zero gradients, pick the step's data.
  virtual void BeginStep(std::int64_t step) = 0;
  // F, B, I, W or OPT of one stage held by this rank.
  virtual void Compute(const Action& a) = 0;

  virtual void PostSend(const Action& send, int peer) = 0;
  virtual void PostRecv(const Action& recv, int peer) = 0;
  virtual bool TestRecv(const Action& recv) = 0;
  // True once every posted send has completed (and its buffer is released).
  virtual bool TestSends() = 0;

  // Data-parallel gradient reduction of one stage.
  virtual void StartReduceGrad(int stage) = 0;
  virtual bool TestReduceGrad(int stage) = 0;

  // Sum of the last stage's microbatch losses this step (0 on other ranks).
  virtual double StepLoss() const = 0;
  // Memory by category: at the peak since the last ResetPeakMemory, and the peak total.
  virtual MemoryBytes PeakMemory() const = 0;
  virtual std::int64_t PeakMemoryTotal() const = 0;
  virtual void ResetPeakMemory() = 0;
  virtual std::int64_t BytesSent(int group) const = 0;  // 0 pp, 1 dp, 2 tp

  // Sum of squares of this rank's gradients over all its stages (the optimizer's all-rank
  // gradient-norm synchronisation).
  virtual double GradNormSquared() const = 0;
  // One stage held by this rank: its parameter layout (exec/cpu/params.h; every backend uses
  // the CPU chunk's layout) and its gradients as float32 in that layout (reference checks).
  virtual const cpu::ParamLayout& StageLayout(int stage) const = 0;
  virtual std::vector<float> StageGrads(int stage) const = 0;
  // After the engine's RunStep: waits for work the backend still has in flight and may
  // replace the engine's host times of compute events by device times (CUDA).
  virtual void FinishStep(std::vector<TimelineEvent>& events) { (void)events; }
};

}  // namespace pipetwin::exec
