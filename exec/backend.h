// backend.h — what the executor needs from a device: compute a model chunk's actions and move
// tensors between ranks. The engine (engine.h) interprets a rank's program and calls these;
// backends (CPU: Eigen + MPI; CUDA: cuBLAS + NCCL) differ only here.
//
// Communication is split into post and test so the engine can overlap it with computation
// and enforce a deadline: PostSend/PostRecv start a transfer and return at once; TestRecv and
// TestSends report completion without blocking. Collectives that the engine itself issues
// (the data-parallel gradient reduction) follow the same pattern.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exec/comm_group.h"
#include "exec/model/config.h"
#include "exec/model/params.h"
#include "exec/param_server.h"
#include "job/job.h"
#include "schedule/action.h"
#include "schedule/report.h"
#include "schedule/schedule.h"
#include "schedule/timeline.h"

namespace pipetwin::exec {

// Everything a backend is built from (RunJob fills it; exec/backend_registry.h makes the
// backend by name). Backend-neutral: the model is the executor's GPT (exec/model/).
struct BackendConfig {
  gpt::ModelConfig model;
  std::vector<int> layers_per_stage;  // every stage of the pipeline, in model order
  std::vector<int> stage_to_rank;
  int pp_rank = 0;
  int microbatches = 1;
  int dp = 1;
  int dp_rank = 0;
  gpt::TpConfig tp;
  gpt::Recompute recompute =
      gpt::Recompute::kNone;  // training.recompute (the CPU and CUDA backends)
  gpt::CpConfig cp;  // context parallelism (ring, all-gather, all-to-all); CPU backend only
  // The group the gradients are reduced over: dp × cp ranks (the DP group when cp is 1), and
  // this rank's place in it (ZeRO-1 shards over it).
  int grad_size = 1;
  int grad_rank = 0;
  // Test hook (`run --test-fault cp-mask:RANK`): ring attention without the causal triangle.
  bool test_cp_unmasked = false;
  bool adam = true;
  float momentum = 0.0f;  // SGD only: 0.9 for `optimizer: sgd-momentum`
  // ZeRO-1 (dp × cp > 1): gradients reduce-scattered over the gradient group (grad_size
  // ranks), each rank steps its 1/grad_size shard of the parameters with its shard of the
  // optimizer state, then the parameters are all-gathered. Shards are ceil(params /
  // grad_size) elements (the last one zero-padded).
  bool zero1 = false;
  float learning_rate = 1e-3f;
  std::uint64_t data_seed = 1;
  double timeout_s = 300;
  int threads = 1;  // compute threads of this rank (execution.threads)
  MPI_Comm pp_comm = MPI_COMM_NULL;
  MPI_Comm dp_comm = MPI_COMM_NULL;
  MPI_Comm tp_comm = MPI_COMM_NULL;
  MPI_Comm cp_comm = MPI_COMM_NULL;
  MPI_Comm grad_comm = MPI_COMM_NULL;  // dp × cp
  // Reduced precision: bf16 tensors with fp32 master weights and optimizer state (backends
  // that compute in float32 only, like the CPU backend, ignore it); false: fp32.
  bool bf16 = false;
  const Schedule* schedule = nullptr;  // every rank's program (e.g. the NCCL channel plan)
  // The resolved job, for a backend's own checks of what it supports (messages name the field).
  const ResolvedJob* job = nullptr;
  // Milliseconds of each compute action by (stage, kind), for the backends that sleep instead
  // of computing (exec/sleep/): a calibration profile's medians (`run --profile`); empty: the
  // job's `costs:`.
  std::map<std::pair<int, ActionKind>, double> compute_ms;
  // Parameter servers (exec/param_server.h; RunJob owns the client): REDUCE_GRAD pushes the
  // gradients to them and pulls the updated parameters; OPT then has nothing to do. Null: the
  // ring.
  PsClient* ps = nullptr;
};

// What REDUCE_GRAD of a stage does: the elements of the buffer it reduces in place (the
// gradients; under ZeRO-1 a copy padded to a multiple of dp, reduce-scattered), and the bytes
// this rank sends (a ring). Calibration benchmarks exactly this with MPI.
struct GradReduction {
  std::size_t elements = 0;
  bool reduce_scatter = false;
  std::int64_t bytes_sent = 0;
};

// What one core of the host attains (exec/cpu/roofline.h): the fp32 GEMM rate on a
// 512 x 512 x 2048 product through the backend's GEMM and a triad's memory bandwidth, one
// thread, over its CPU time. Calibrate writes it as the profile's `roofline:`.
struct Roofline {
  double gemm_gflops = 0;
  double memory_gb_s = 0;
};

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
  // Bytes this rank has sent in a communication group since the backend was made.
  virtual std::int64_t BytesSent(CommGroup group) const = 0;
  // What REDUCE_GRAD of `stage` does, for calibration's benchmark of it; nothing where the
  // backend's reduction is not one calibrate can reproduce over MPI (e.g. NCCL on GPUs).
  virtual std::optional<GradReduction> DescribeReduceGrad(int stage) const {
    (void)stage;
    return std::nullopt;
  }

  // Sum of squares of this rank's gradients over all its stages (the optimizer's all-rank
  // gradient-norm synchronisation).
  virtual double GradNormSquared() const = 0;
  // One stage held by this rank: its parameter layout (exec/model/params.h; every backend uses
  // the same layout) and its gradients as float32 in that layout (reference checks).
  virtual const gpt::ParamLayout& StageLayout(int stage) const = 0;
  virtual std::vector<float> StageGrads(int stage) const = 0;
  // False for a backend that only sleeps for its actions' times (exec/sleep/): it has no
  // loss, gradients or memory of its own to report or check.
  virtual bool Computes() const { return true; }
  // After the engine's RunStep: waits for work the backend still has in flight and may
  // replace the engine's host times of compute events by device times (CUDA).
  virtual void FinishStep(std::vector<TimelineEvent>& events) { (void)events; }
  // The roofline its compute actions are set against, measured now (under half a second;
  // calibrate calls it after the steps, on one rank); nothing where the host core's rates say
  // nothing of its actions (sleep, CUDA).
  virtual std::optional<Roofline> MeasureRoofline() { return std::nullopt; }
};

}  // namespace pipetwin::exec
