// GPU checks of the CUDA backend (CTest label `gpu`): skipped, with the reason printed, where
// cudaGetDeviceCount finds no device. One process, one GPU (MPI initialised as a singleton):
//   - loss and every gradient of step 0 equal the CPU reference (fp32: 1e-4; bf16: 3e-2);
//   - every schedule runs with pp = 1 (V-shaped ones hold both chunks on the one rank);
//   - the measured activation memory equals models/'s GPU inventory (GPipe, pp = 1).
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

std::string Job(const std::string& schedule, const std::string& precision, int vpp = 1) {
  return "schedule: " + schedule +
         "\nmicrobatches: 4\nparallel: {pp: 1, vpp: " + std::to_string(vpp) +
         ", dp: 1, tp: 1}\nmodel: {preset: tiny, seq_len: 16}\n" +
         "training: {micro_batch: 2, optimizer: adam, precision: " + precision + "}\n" +
         "execution: {steps: 2, warmup: 1, timeout_s: 120}\n";
}

TEST_F(CudaGpu, GradientsMatchCpuReferenceFp32) {
  Expected<RunResult> r = RunCuda(Job("1f1b", "fp32"), true);
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
    Expected<RunResult> r = RunCuda(Job(s, "fp32", s == "zbv" || s == "dualpipev" ? 2 : 1), true);
    ASSERT_TRUE(r) << s << ": " << r.error().message;
    EXPECT_LE(r->max_relative_error, 1e-4) << s;
  }
  Expected<RunResult> r = RunCuda(Job("interleaved-1f1b", "fp32", 2), true);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_LE(r->max_relative_error, 1e-4);
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
