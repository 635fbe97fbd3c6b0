// GPU checks of the CUDA backend (CTest label `gpu`): skipped, with the reason printed, where
// cudaGetDeviceCount finds no device. One process, one GPU (MPI initialised as a singleton):
//   - loss and every gradient of step 0 equal the CPU reference (fp32: 1e-4; bf16: 3e-2);
//   - every schedule runs with pp = 1 (V-shaped ones hold both chunks on the one rank);
//   - the measured activation memory equals models/'s GPU inventory (GPipe, pp = 1);
//   - selective and full recompute: the same gradients for every schedule, and the activation
//     peak between its closed-form bounds (below the peak without recompute).
// Multi-GPU runs (pp = number of GPUs) are gpu_multi.sh, under mpirun.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "exec/cpu/register.h"
#include "exec/cuda/factory.h"
#include "exec/run.h"
#include "job/job.h"
#include "models/layer_costs.h"
#include "models/model.h"
#include "models/training.h"

namespace pipetwin::exec {
namespace {

class CudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || count == 0) {
      GTEST_SKIP() << "no CUDA device found (cudaGetDeviceCount: "
                   << (rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices") << ")";
    }
    // The backends this test runs (and the CPU reference of --check-reference).
    cpu::RegisterCpuBackend();
    RegisterCudaBackend();
    int init = 0;
    MPI_Initialized(&init);
    if (init == 0) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    }
  }
};

Expected<RunResult> RunCuda(const std::string& yaml, bool reference) {
  Expected<ResolvedJob> job = ParseJob(yaml, "gpu_test.yaml");
  if (!job) return job.error();
  RunOptions o;
  o.backend = "cuda";
  o.check_reference = reference;
  return RunJob(*job, o);
}

std::string Job(const std::string& schedule, const std::string& precision, int vpp = 1,
                const std::string& recompute = "none") {
  return "schedule: " + schedule +
         "\nmicrobatches: 4\nparallel: {pp: 1, vpp: " + std::to_string(vpp) +
         ", dp: 1, tp: 1}\nmodel: {preset: tiny, seq_len: 16, dropout: false}\n" +
         "training: {micro_batch: 2, optimizer: adam, precision: " + precision +
         ", recompute: " + recompute + "}\n" + "execution: {steps: 2, warmup: 1, timeout_s: 120}\n";
}

int VppOf(const std::string& s) {
  return s == "zbv" || s == "dualpipev" || s == "interleaved-1f1b" ? 2 : 1;
}

TEST_F(CudaGpu, GradientsMatchCpuReferenceFp32) {
  Expected<RunResult> r = RunCuda(Job("1f1b", "fp32"), true);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LE(r->max_relative_error, 1e-4);
}

// 12 x 32 = 384 rows a microbatch: the bias and LayerNorm gradients' column sums take two
// blocks of rows (256 and 128), summed in order (kernels.cu, ColumnPartialsK).
TEST_F(CudaGpu, GradientsMatchCpuReferenceAcrossRowBlocks) {
  std::string yaml = Job("1f1b", "fp32");
  const auto swap = [&](const std::string& from, const std::string& to) {
    const std::size_t at = yaml.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    yaml.replace(at, from.size(), to);
  };
  swap("seq_len: 16", "seq_len: 32");
  swap("micro_batch: 2", "micro_batch: 12");
  Expected<RunResult> r = RunCuda(yaml, true);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LE(r->max_relative_error, 1e-4);
}

TEST_F(CudaGpu, GradientsMatchCpuReferenceBf16) {
  Expected<RunResult> r = RunCuda(Job("1f1b", "bf16"), true);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LE(r->max_relative_error, 3e-2);
}

TEST_F(CudaGpu, EveryScheduleRunsOnOneGpu) {
  for (const std::string s : {"gpipe", "1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev"}) {
    Expected<RunResult> r = RunCuda(Job(s, "fp32", VppOf(s)), true);
    ASSERT_TRUE(r) << s << ": " << r.error().message;
    EXPECT_LE(r->max_relative_error, 1e-4) << s;
  }
  Expected<RunResult> r = RunCuda(Job("interleaved-1f1b", "fp32", 2), true);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LE(r->max_relative_error, 1e-4);
}

// Recompute changes what is kept, never what is computed: every schedule's gradients equal
// the CPU reference (which runs without recompute) as tightly as without it.
TEST_F(CudaGpu, RecomputeKeepsGradientsForEverySchedule) {
  for (const std::string rc : {"selective", "full"}) {
    for (const std::string s :
         {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev"}) {
      Expected<RunResult> r = RunCuda(Job(s, "fp32", VppOf(s), rc), true);
      ASSERT_TRUE(r) << s << ", " << rc << ": " << r.error().message;
      EXPECT_LE(r->max_relative_error, 1e-4) << s << ", " << rc;
    }
    Expected<RunResult> r = RunCuda(Job("1f1b", "bf16", 1, rc), true);
    ASSERT_TRUE(r) << rc << ": " << r.error().message;
    EXPECT_LE(r->max_relative_error, 3e-2) << rc;
  }
}

// GPipe on one rank, bf16. The peak is at least what is held when the first backward starts:
// every microbatch's F state under the recompute setting (models/ inventory) plus d(logits).
// It stays below the peak without recompute, which drops every layer's scores (selective) or
// everything but each layer's input (full) for all four microbatches, and rebuilds one
// layer's at a time. (The exact peak under recompute, with I's working set and W's pending
// tensors, is not asserted: it has not been checked on a GPU yet.)
TEST_F(CudaGpu, RecomputeLowersTheActivationPeakWithinBounds) {
  auto peak = [](const std::string& rc, double* held_at_first_backward) -> double {
    Expected<ResolvedJob> job = ParseJob(Job("gpipe", "bf16", 1, rc), "gpu_test.yaml");
    EXPECT_TRUE(job);
    if (!job) return -1;
    RunOptions o;
    o.backend = "cuda";
    Expected<RunResult> r = RunJob(*job, o);
    EXPECT_TRUE(r) << rc << ": " << (r ? "" : r.error().message);
    if (!r || r->report.ranks.size() != 1) return -1;
    const models::ModelConfig& model = job->config.model;
    const models::TrainingConfig& training = job->config.training;
    const models::Sharding sh{};
    const double layer = models::DecoderLayerActivations(model, training, sh).inflight;
    const double emb = models::EmbeddingActivations(model, training, sh).inflight;
    const double out = models::OutputActivations(model, training, sh).inflight;
    const double tokens = models::TokensPerRank(model, training.micro_batch, sh);
    *held_at_first_backward =
        4 * (model.layers * layer + emb + out) + tokens * model.vocab * training.element_bytes();
    return static_cast<double>(r->report.ranks[0].memory.activations);
  };
  double none_held = 0, selective_held = 0, full_held = 0;
  const double none = peak("none", &none_held);
  const double selective = peak("selective", &selective_held);
  const double full = peak("full", &full_held);
  EXPECT_EQ(none, none_held);  // the closed form of ActivationMemoryEqualsModelInventory
  EXPECT_GE(selective, selective_held);
  EXPECT_LT(selective, none);
  EXPECT_GE(full, full_held);
  EXPECT_LT(full, selective);
  EXPECT_LT(selective_held, none_held);
  EXPECT_LT(full_held, selective_held);
}

// GPipe on one rank: at the peak every microbatch's forward state is held, plus the last
// stage's d(logits) of the first backward (the transient documented in cuda_chunk.h).
TEST_F(CudaGpu, ActivationMemoryEqualsModelInventory) {
  const std::string yaml = Job("gpipe", "bf16");
  Expected<ResolvedJob> job = ParseJob(yaml, "gpu_test.yaml");
  ASSERT_TRUE(job);
  RunOptions o;
  o.backend = "cuda";
  Expected<RunResult> r = RunJob(*job, o);
  ASSERT_TRUE(r) << r.error().message;
  const models::ModelConfig* model = &job->config.model;
  const models::TrainingConfig* training = &job->config.training;
  const models::Sharding sh{};
  const double layer = models::DecoderLayerActivations(*model, *training, sh).inflight;
  const double emb = models::EmbeddingActivations(*model, *training, sh).inflight;
  const double out = models::OutputActivations(*model, *training, sh).inflight;
  const double tokens = models::TokensPerRank(*model, training->micro_batch, sh);
  const double dlogits = tokens * model->vocab * training->element_bytes();
  const double expected = 4 * (model->layers * layer + emb + out) + dlogits;
  ASSERT_EQ(r->report.ranks.size(), 1u);
  EXPECT_EQ(static_cast<double>(r->report.ranks[0].memory.activations), expected);
}

}  // namespace
}  // namespace pipetwin::exec
