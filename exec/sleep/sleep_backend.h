// sleep_backend.h — the sleep backend ("sleep"): every compute action sleeps for its time
// (a calibration profile's median, or the job's `costs:`), so that it holds no core; the
// communication is real MPI on real buffers (the activations, gradients and DP reductions of
// the executor's GPT, in host memory, through exec/host_comm.h like the CPU backend).
//
// It measures what does not depend on the kernels: the schedule's order and waits, the
// overlap of transfers and reductions with compute, the data-parallel protocol. Many ranks
// can share few cores (8 ranks on 2 cores), as a sleeping rank leaves its core to the others.
// It computes nothing: no loss, no gradient values (the reduced buffers hold zeros), no
// memory accounting (the report takes the model's memory, exec/run.cc), no tensor
// parallelism (its collectives are inside the compute it would sleep).
//
// execution.stragglers (models/stragglers.h) scale every sleep of a rank in a step by its
// factor, the same factors the simulator plays.
//
// The sleep is absolute: each compute action sleeps until start + its time on
// CLOCK_MONOTONIC (clock_nanosleep, TIMER_ABSTIME), with the thread's timer slack set to
// 1 ns, so that an early wake-up does not shorten it and lateness does not accumulate.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "exec/backend.h"
#include "exec/host_comm.h"
#include "exec/param_server.h"
#include "schedule/expected.h"

namespace pipetwin::exec {

class SleepBackend final : public Backend {
 public:
  // Bad input where the times lack an action the schedule runs, or the job uses what the
  // sleep backend cannot run (tensor parallelism).
  static Expected<std::unique_ptr<Backend>> Make(const BackendConfig& cfg);

  void BeginStep(std::int64_t step) override;
  void Compute(const Action& a) override;
  void PostSend(const Action& send, int peer) override;
  void PostRecv(const Action& recv, int peer) override;
  bool TestRecv(const Action& recv) override;
  bool TestSends() override;
  void StartReduceGrad(int stage) override;
  bool TestReduceGrad(int stage) override;
  std::optional<GradReduction> DescribeReduceGrad(int stage) const override;
  double StepLoss() const override { return 0; }
  MemoryBytes PeakMemory() const override { return {}; }
  std::int64_t PeakMemoryTotal() const override { return 0; }
  void ResetPeakMemory() override {}
  std::int64_t BytesSent(CommGroup group) const override;
  double GradNormSquared() const override { return 0; }
  const gpt::ParamLayout& StageLayout(int stage) const override;
  std::vector<float> StageGrads(int stage) const override;
  bool Computes() const override { return false; }

  // The time one compute action sleeps this step (its straggler factor applied), in ns.
  std::int64_t SleepNs(const Action& a) const;

 private:
  using Key = HostTransfers::Key;  // (buffer kind, stage, microbatch)
  enum BufKind { kActOut = 0, kActIn = 1, kGradOut = 2, kGradIn = 3 };
  SleepBackend(const BackendConfig& cfg, std::map<std::pair<int, ActionKind>, double> ms);
  std::vector<float>& NewBuffer(Key k);
  void Release(Key k);
  bool Local(int stage) const;

  BackendConfig cfg_;
  std::map<std::pair<int, ActionKind>, double> ms_;
  std::size_t activation_elements_ = 0;
  std::map<int, gpt::ParamLayout> layouts_;
  std::map<int, std::vector<float>> grads_;  // zeros, the size of the stage's gradients
  std::map<Key, std::vector<float>> buffers_;
  HostTransfers p2p_;  // after buffers_: destroyed first (it cancels receives into them)
  HostGradReduce dp_reduce_;
  // Parameter servers: the pushes and pulls, and the parameters the pulls land in.
  PsClient* ps_ = nullptr;  // parameter servers: they reduce and step the optimizer
  std::map<int, std::vector<float>> ps_params_;
  std::int64_t step_ = 0;
  double slowdown_ = 1.0;  // execution.stragglers: this rank's factor in this step
};

}  // namespace pipetwin::exec
