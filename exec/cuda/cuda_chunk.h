// cuda_chunk.h — one pipeline stage (model chunk) of the GPT decoder on one GPU: the CUDA twin
// of cpu::Chunk (same parameter layout, same math, same F / I / W split), in bf16 or fp32.
//
// Saved tensors follow the GPU inventory of models/layer_costs.h (unfused attention, no
// dropout), per block and microbatch, e elements bytes:
//   F keeps: LN1 input, QKV input (LN1 output), Q K V, softmax probabilities, attention-output
//            GEMM input, LN2 input, fc1 input (LN2 output), GeLU input, fc2 input;
//   I keeps for W: the four weight GEMMs' inputs and the gradients of their outputs.
// Recompute (Korthikanti et al. 2022), as Megatron-LM runs it and as models/ counts it:
//   selective: F drops the softmax probabilities; I runs the core attention's forward again
//              (QK^T, softmax, AV into a scratch buffer) from the kept Q K V, just before the
//              core's backward;
//   full:      F keeps the block's input only (what it produces beside it is workspace, freed
//              as the block ends); I runs the block's forward again from it, TP collectives
//              included, just before the block's backward: one block's F state at a time.
// LayerNorm statistics are recomputed from the saved input in I (models/ stores none).
// First chunk: nothing in F; the embedding's output gradient from I to W. Last chunk: final
// norm input and output, float32 logits (F); the output GEMM input and d(logits) (I to W).
// Deviations, documented in README "Running on GPUs": under sequence parallelism the GEMM
// inputs and output gradients kept for W are the gathered N-row tensors (as on the CPU), not
// sequence-sharded; the tokens and labels of a microbatch in flight (int32) are counted as
// communication/input buffers, not activations.
//
// TP collectives run on the TP stream, ordered with the compute stream by events.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "exec/cuda/device.h"
#include "exec/model/config.h"
#include "exec/model/params.h"

namespace pipetwin::cuda {

// What every chunk of a rank shares.
struct DeviceContext {
  cudaStream_t compute = nullptr;
  cudaStream_t tp_stream = nullptr;
  DeviceAllocator* alloc = nullptr;
  Gemm* gemm = nullptr;
  ncclComm_t tp_comm = nullptr;  // null when tp == 1
  std::int64_t tp_bytes = 0;     // bytes this rank sent in TP collectives (ring estimate)
};

template <class T>
class CudaChunk {
 public:
  using DT = DeviceTensor<T>;
  struct OptimizerConfig {
    bool adam = true;
    float lr = 1e-3f;
    float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  };

  CudaChunk(const gpt::ModelConfig& model, const gpt::ChunkSpec& spec, const gpt::TpConfig& tp,
            DeviceContext& ctx, const OptimizerConfig& opt,
            gpt::Recompute recompute = gpt::Recompute::kNone);
  ~CudaChunk();
  CudaChunk(const CudaChunk&) = delete;
  CudaChunk& operator=(const CudaChunk&) = delete;

  // F. tokens/labels are host spans [micro_batch, seq_len] (first/last chunk), uploaded and
  // kept until the microbatch's W / I. input/output: device [activation_rows, hidden].
  // The last chunk adds its mean loss to *loss_sum (device).
  void Forward(std::int64_t mb, std::span<const std::int32_t> tokens,
               std::span<const std::int32_t> labels, const T* input, T* output, float* loss_sum);
  void BackwardInput(std::int64_t mb, const T* grad_output, T* grad_input);
  void BackwardWeight(std::int64_t mb);
  void ZeroGrads();
  void SyncSequenceParallelGrads();
  void OptimizerStep();
  // *out += sum of squared gradients (device, compute stream).
  void AddGradNormSquared(double* out);

  T* grads() { return grads_.data(); }
  std::int64_t num_params() const { return static_cast<std::int64_t>(layout_.total); }
  const gpt::ParamLayout& layout() const { return layout_; }
  std::vector<float> DownloadGrads() const;
  std::int64_t activation_rows() const { return dims_.rows; }
  std::int64_t hidden() const { return dims_.hidden; }
  void set_loss_scale(float s) { loss_scale_ = s; }

 private:
  struct BlockSaved;
  struct State;
  struct BlockOffsets;
  T* P(std::size_t off) const { return params_.data() + off; }
  T* G(std::size_t off) const { return grads_.data() + off; }
  DT New(std::int64_t rows, std::int64_t cols) const;
  DeviceTensor<float> ColumnWork(std::int64_t rows, std::int64_t cols, int sums) const;
  DT Reduce(DT partial);
  DT Gather(DT local);
  void Mm(const RowMajorGemm& g, const T* a, const T* b, void* c, DType c_type);
  void Mm(const RowMajorGemm& g, const T* a, const T* b, T* c) { Mm(g, a, b, c, DTypeOf<T>()); }
  void Linear(const DT& x, std::size_t w, std::size_t b, std::int64_t out, DT* y);
  void LinearInput(const DT& dy, std::size_t w, std::int64_t in, DT* dx);
  void LinearWeight(const DT& x, const DT& dy, std::size_t w, std::size_t b,
                    std::int64_t bias_row_begin, std::int64_t bias_rows);
  DT BlockForward(const BlockOffsets& o, DT x, BlockSaved* s);
  // QK^T and the causal softmax into probs (allocated here, kept as `saved_`), then AV into out.
  void CoreAttentionForward(const DT& qkv, DT* probs, T* out);
  DT BlockBackwardInput(const BlockOffsets& o, DT dy, BlockSaved* s);
  void BlockBackwardWeight(const BlockOffsets& o, BlockSaved* s);
  void TpCollective(int kind, const T* in, T* out, std::size_t count);

  gpt::ModelConfig model_;
  gpt::ChunkSpec spec_;
  gpt::TpConfig tp_;
  gpt::Recompute recompute_;
  // The category BlockForward counts its saved tensors under: activations, or workspace while
  // full recompute's F runs a block whose state it does not keep.
  gpt::MemCategory saved_ = gpt::MemCategory::kActivations;
  gpt::LocalDims dims_;
  DeviceContext* ctx_;
  OptimizerConfig opt_;
  gpt::ParamLayout layout_;
  std::vector<BlockOffsets> blocks_;
  DT params_, grads_;
  DeviceTensor<float> master_, adam_m_, adam_v_;
  DeviceTensor<float> ln_stats_;  // workspace for LayerNorm backward, 2 floats per row
  std::int64_t adam_t_ = 0;
  float loss_scale_ = 1.0f;
  std::map<std::int64_t, std::unique_ptr<State>> states_;
};

}  // namespace pipetwin::cuda
