// cpu_backend.h — the CPU backend: GPT chunks in float32 (exec/cpu/, Eigen) with MPI for
// pipeline transfers, tensor-parallel collectives, ring attention's transfers (context
// parallelism), the gradient reduction (over dp × cp ranks; its bytes count as DP traffic) and
// tied embeddings' gradient sum between the first and last stage (counted as PP traffic).
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
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "exec/backend.h"
#include "exec/cpu/chunk.h"
#include "exec/cpu/collectives.h"
#include "exec/cpu/model.h"
#include "exec/cpu/optimizer.h"
#include "exec/host_comm.h"
#include "exec/mpi_util.h"
#include "exec/param_server.h"
#include "models/cpu_inventory.h"

namespace pipetwin::exec {

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

// cpu::RingComm over the CP group's MPI communicator: Isend / Irecv, each wait bounded by the
// timeout; counts the bytes it sends (CommGroup::kCp).
class MpiRing final : public cpu::RingComm {
 public:
  MpiRing(MPI_Comm comm, double timeout_s);
  ~MpiRing() override;  // cancels what is still posted (a step that failed)
  int size() const override { return size_; }
  int rank() const override { return rank_; }
  int SendTo(int dst, std::span<const float> data, int tag) override;
  int RecvFrom(int src, std::span<float> data, int tag) override;
  void Wait(int handle) override;
  std::int64_t bytes_sent() const { return bytes_sent_; }

 private:
  int Add(MPI_Request req);
  MPI_Comm comm_;
  double timeout_s_;
  int size_ = 1;
  int rank_ = 0;
  std::map<int, MPI_Request> reqs_;
  int next_handle_ = 0;
  std::int64_t bytes_sent_ = 0;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendConfig& cfg);
  ~CpuBackend() override;

  void BeginStep(std::int64_t step) override;
  void Compute(const Action& a) override;
  void PostSend(const Action& send, int peer) override;
  void PostRecv(const Action& recv, int peer) override;
  bool TestRecv(const Action& recv) override;
  bool TestSends() override;
  void StartReduceGrad(int stage) override;
  bool TestReduceGrad(int stage) override;
  // In place on the gradients; under ZeRO-1 a reduce-scatter of a copy padded to a multiple
  // of dp (exec/backend.h).
  std::optional<GradReduction> DescribeReduceGrad(int stage) const override {
    return Reduction(stage);
  }
  double StepLoss() const override { return step_loss_; }
  MemoryBytes PeakMemory() const override;
  std::int64_t PeakMemoryTotal() const override;
  void ResetPeakMemory() override { acc_.ResetPeaks(); }
  std::int64_t BytesSent(CommGroup group) const override;

  // The chunk of `stage` (held by this rank), for checks against a reference.
  cpu::Chunk& chunk(int stage);
  double GradNormSquared() const override;
  const gpt::ParamLayout& StageLayout(int stage) const override;
  std::vector<float> StageGrads(int stage) const override;
  // One thread's GEMM rate (exec/cpu/roofline.h: Gemm(), best of 3) and triad bandwidth over
  // 64 MiB (best of 3), whatever execution.threads (restored after).
  std::optional<Roofline> MeasureRoofline() override;

 private:
  using Key = std::tuple<int, int, int>;  // (buffer kind, stage, microbatch)
  enum BufKind { kActOut = 0, kActIn = 1, kGradOut = 2, kGradIn = 3 };
  cpu::Tensor& NewBuffer(Key k);
  cpu::Tensor Take(Key k);

  BackendConfig cfg_;
  cpu::Accountant acc_;
  std::unique_ptr<MpiCollectives> tp_coll_;
  std::unique_ptr<MpiRing> cp_ring_;
  std::map<int, std::unique_ptr<cpu::Chunk>> chunks_;
  std::map<int, std::unique_ptr<cpu::Optimizer>> optimizers_;
  std::map<int, bool> sp_synced_;
  // ZeRO-1: per stage, the padded buffer the reduce-scatter writes (its first shard holds
  // this rank's reduced gradients) from REDUCE_GRAD to OPT, and a copy of the reduced shard
  // kept for reference checks (outside the accounting: not part of a training step).
  std::map<int, cpu::Tensor> zero_grads_;
  std::map<int, std::vector<float>> reduced_shard_;
  // The stage's ZeRO-1 blocks (models/cpu_inventory.h): a copy of the tied embedding sharded
  // apart, so that the first and last stage's rank r hold the same slice of it.
  models::Zero1Layout ZeroLayout(int stage) const;
  bool HoldsTiedCopy(int stage) const;
  GradReduction Reduction(int stage) const;
  // Tied embeddings over more than one stage: at the first OPT of stage 0 or of the last
  // stage, the two copies' gradients are summed (with the partner pipeline rank, or between
  // two chunks of this rank); under ZeRO-1 this rank's slice of them, at the front of its
  // reduced block. Their bytes count as pipeline traffic.
  std::span<float> TiedEmbeddingGrads(int stage);
  void SumTiedEmbeddingGrads(const Action& a);
  int TiedEmbeddingTag() const;
  bool tied_synced_ = false;
  std::int64_t tied_bytes_sent_ = 0;
  cpu::SyntheticData data_;
  std::map<Key, cpu::Tensor> buffers_;
  // After buffers_: destroyed first (it cancels receives into them).
  HostTransfers p2p_;
  HostGradReduce dp_reduce_;
  PsClient* ps_ = nullptr;  // parameter servers: they reduce and step the optimizer
  std::int64_t step_ = 0;
  double step_loss_ = 0;
  std::vector<std::int32_t> tokens_, labels_;
};

}  // namespace pipetwin::exec
