// cpu_backend.h — the CPU backend: GPT chunks in float32 (exec/cpu/, Eigen) with MPI for
// pipeline transfers, tensor-parallel collectives and the data-parallel reduction.
//
// Buffers between chunks (activations out of F, gradients out of I or B, and what is
// received) are accounted as communication buffers until they are consumed or handed to a
// send; a sent buffer is then "sending" until the send completes (not part of the reported
// categories: its lifetime depends on timing). Everything a chunk saves between F, I and W
// counts as activations; parameters, gradients and optimizer state as such.
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "exec/backend.h"
#include "exec/cpu/chunk.h"
#include "exec/cpu/collectives.h"
#include "exec/cpu/data.h"
#include "exec/cpu/optimizer.h"
#include "exec/mpi_util.h"

namespace pipetwin::exec {

struct CpuBackendConfig {
  cpu::ModelConfig model;
  std::vector<int> layers_per_stage;  // every stage of the pipeline, in model order
  std::vector<int> stage_to_rank;
  int pp_rank = 0;
  int microbatches = 1;
  int dp = 1;
  int dp_rank = 0;
  cpu::TpConfig tp;
  bool adam = true;
  float momentum = 0.0f;  // SGD only: 0.9 for `optimizer: sgd-momentum`
  // ZeRO-1 (dp > 1): gradients reduce-scattered over DP, each rank steps its 1/dp shard of
  // the parameters with its shard of the optimizer state, then the parameters are
  // all-gathered. Shards are ceil(params / dp) elements (the last one zero-padded).
  bool zero1 = false;
  float learning_rate = 1e-3f;
  std::uint64_t data_seed = 1;
  double timeout_s = 300;
  MPI_Comm pp_comm = MPI_COMM_NULL;
  MPI_Comm dp_comm = MPI_COMM_NULL;
  MPI_Comm tp_comm = MPI_COMM_NULL;
};

// cpu::Collectives over an MPI communicator, each call bounded by the timeout.
class MpiCollectives final : public cpu::Collectives {
 public:
  MpiCollectives(MPI_Comm comm, double timeout_s);
  int size() const override { return size_; }
  int rank() const override { return rank_; }
  void AllReduceSum(std::span<float> data) override;
  void AllGather(std::span<const float> in, std::span<float> out) override;
  void ReduceScatterSum(std::span<const float> in, std::span<float> out) override;
  std::int64_t bytes_sent() const { return bytes_sent_; }

 private:
  void Wait(MPI_Request* req, const char* what);
  MPI_Comm comm_;
  double timeout_s_;
  int size_ = 1;
  int rank_ = 0;
  std::int64_t bytes_sent_ = 0;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendConfig& cfg);
  ~CpuBackend() override;

  void BeginStep(std::int64_t step) override;
  void Compute(const Action& a) override;
  void PostSend(const Action& send, int peer) override;
  void PostRecv(const Action& recv, int peer) override;
  bool TestRecv(const Action& recv) override;
  bool TestSends() override;
  void StartReduceGrad(int stage) override;
  bool TestReduceGrad(int stage) override;
  // What REDUCE_GRAD of a stage does: the elements of the buffer it reduces in place (the
  // gradients; under ZeRO-1 a copy padded to a multiple of dp, reduce-scattered), and the
  // bytes this rank sends (a ring). Calibration benchmarks exactly this.
  struct GradReduction {
    std::size_t elements = 0;
    bool reduce_scatter = false;
    std::int64_t bytes_sent = 0;
  };
  GradReduction DescribeReduceGrad(int stage) const;
  double StepLoss() const override { return step_loss_; }
  MemoryBytes PeakMemory() const override;
  std::int64_t PeakMemoryTotal() const override;
  void ResetPeakMemory() override { acc_.ResetPeaks(); }
  std::int64_t BytesSent(int group) const override;

  // The chunk of `stage` (held by this rank), for checks against a reference.
  cpu::Chunk& chunk(int stage);
  double GradNormSquared() const override;
  const cpu::ParamLayout& StageLayout(int stage) const override;
  std::vector<float> StageGrads(int stage) const override;

 private:
  using Key = std::tuple<int, int, int>;  // (buffer kind, stage, microbatch)
  enum BufKind { kActOut = 0, kActIn = 1, kGradOut = 2, kGradIn = 3 };
  cpu::Tensor& NewBuffer(Key k);
  cpu::Tensor Take(Key k);
  int Tag(int kind, int stage, int mb) const;

  CpuBackendConfig cfg_;
  cpu::Accountant acc_;
  std::unique_ptr<MpiCollectives> tp_coll_;
  std::map<int, std::unique_ptr<cpu::Chunk>> chunks_;
  std::map<int, std::unique_ptr<cpu::Optimizer>> optimizers_;
  std::map<int, bool> sp_synced_;
  std::map<int, MPI_Request> reduce_req_;
  // ZeRO-1: per stage, the padded buffer the reduce-scatter writes (its first shard holds
  // this rank's reduced gradients) from REDUCE_GRAD to OPT, and a copy of the reduced shard
  // kept for reference checks (outside the accounting: not part of a training step).
  std::map<int, cpu::Tensor> zero_grads_;
  std::map<int, std::vector<float>> reduced_shard_;
  std::size_t Shard(int stage) const;
  cpu::SyntheticData data_;
  std::map<Key, cpu::Tensor> buffers_;
  std::map<Key, MPI_Request> recv_req_;
  struct Send {
    MPI_Request req;
    Key key;
  };
  std::vector<Send> sends_;
  std::int64_t step_ = 0;
  double step_loss_ = 0;
  std::int64_t bytes_pp_ = 0;
  std::int64_t bytes_dp_ = 0;
  std::vector<std::int32_t> tokens_, labels_;
};

}  // namespace pipetwin::exec
