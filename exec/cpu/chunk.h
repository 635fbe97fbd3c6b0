// chunk.h — one pipeline stage (model chunk) of the GPT decoder on one rank: F, I and W over
// microbatches, with the saved state of every microbatch in flight kept by microbatch id.
//
// A chunk owns its parameters and gradients as two flat buffers (see params.h for the layout)
// and the saved tensors of each microbatch between its F, I and W. The engine feeds it
// activations and gradients as spans (its communication buffers) and never sees a layer.
//
//   Accountant acc;
//   Chunk stage(model, ChunkSpec{.first_layer = 0, .num_layers = 2, .first = true,
//                                .last = false}, TpConfig{}, acc);
//   std::vector<float> act(stage.activation_size());
//   stage.Forward(/*microbatch=*/0, {.tokens = tokens, .output = act});
//   ... send act, receive its gradient into grad ...
//   stage.BackwardInput(0, grad, {});   // I (first stage: no input gradient to write)
//   stage.BackwardWeight(0);            // W: gradients += this microbatch's share
//   optimizer.Step(stage.params(), stage.grads());
//
// Spans: tokens and labels are [micro_batch, seq_len] int32 (b-major); activations and their
// gradients are [activation_rows(), hidden] float32, rows sequence-major (config.h), so under
// sequence parallelism each TP rank sends/receives only its own N / tp rows.
//
// The loss: a last chunk's Forward returns the microbatch's mean token loss (the whole
// microbatch's, also under TP/SP; under CP the share of this CP rank's tokens: the sum of the
// rank's token losses over the microbatch's token count, so that the CP ranks' values add up
// to the mean), and its backward starts from loss_scale() * that mean. Set
// loss_scale to 1 / (microbatches × dp) so that summed (DP all-reduced) gradients are those of
// the step's mean loss.
//
// Gradients accumulate over microbatches until ZeroGrads(). Under sequence parallelism call
// SyncSequenceParallelGrads() once after the last W of a step (before the DP reduction): it
// all-reduces the replicated segment over the TP group.
//
// Tensor parallelism: the blocks are Megatron-sharded (QKV/fc1 column-parallel, out-proj/fc2
// row-parallel, heads split). The embedding and the head (final LayerNorm, output layer, loss)
// are replicated on every TP rank, not vocab-parallel: without SP each TP rank computes them in
// full; with SP each computes them on its own rows. TP collectives are issued inside Forward and
// BackwardInput only (2 per block each, plus one 1-float all-reduce of the loss under SP), in
// the same order on every TP rank; BackwardWeight never communicates.
//
// Tied embeddings (model.tied_embeddings): the output layer is the token embedding applied
// transposed; a last chunk without the embedding holds a copy ("embed.tok", seeded alike)
// whose gradients the backend sums with the first chunk's before the optimizer step.
//
// Activation recomputation: spec.recompute applies to every transformer block of the chunk
// (block.h: what F keeps, what I re-runs, what W needs); the embedding and the head always
// keep their tensors. The bytes are models/cpu_inventory.h's (inventory.h).
//
// Errors: calling F twice for a microbatch, I before F, W before I, or passing spans of the
// wrong size throws std::logic_error / std::invalid_argument (an engine bug, not bad input).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "exec/cpu/block.h"
#include "exec/cpu/model.h"

namespace pipetwin::cpu {

class Chunk {
 public:
  struct ForwardArgs {
    std::span<const std::int32_t> tokens = {};  // first chunk only
    std::span<const float> input = {};          // non-first chunks: activation_size()
    std::span<const std::int32_t> labels = {};  // last chunk only
    std::span<float> output = {};               // non-last chunks: activation_size()
    std::int64_t step = 0;                      // training step: only keys the dropout masks
    // The microbatch's index among the step's dp × microbatches (data-parallel rank ×
    // microbatches + its id on the rank), which the dropout masks are keyed by, so that each
    // data-parallel replica draws its own microbatches' masks, those of a single-process run
    // of all of them; −1: the microbatch id given to Forward.
    std::int64_t sample = -1;
  };

  // comm is the TP group (may be null when tp.size == 1); cp the CP group (ring attention;
  // cp.comm may be null when cp.cfg.size == 1). Throws std::invalid_argument with Validate()'s
  // message on a bad configuration.
  Chunk(const ModelConfig& model, const ChunkSpec& spec, const TpConfig& tp, Accountant& acc,
        Collectives* comm = nullptr, const CpContext& cp = {});
  ~Chunk();
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  // F: returns the microbatch's mean loss on the last chunk, 0 elsewhere.
  float Forward(std::int64_t microbatch, const ForwardArgs& args);
  // I: grad_output (non-last) is d loss / d output; grad_input (non-first) receives
  // d loss / d input. Frees everything but what W needs.
  void BackwardInput(std::int64_t microbatch, std::span<const float> grad_output,
                     std::span<float> grad_input);
  // W: accumulates the weight gradients and frees the microbatch's remaining state.
  void BackwardWeight(std::int64_t microbatch);
  // B = I then W.
  void Backward(std::int64_t microbatch, std::span<const float> grad_output,
                std::span<float> grad_input);

  void ZeroGrads();
  void SyncSequenceParallelGrads();

  std::span<float> params() { return params_.span(); }
  std::span<const float> params() const { return params_.span(); }
  std::span<float> grads() { return grads_.span(); }
  std::span<const float> grads() const { return grads_.span(); }
  // The replicated segment (parameters every TP rank holds whole): [0, layout().replicated).
  std::span<float> replicated_grads() { return grads().first(layout_.replicated); }
  const ParamLayout& layout() const { return layout_; }
  // The same chunk's tp = 1 flat buffers ↔ this rank's shards (tests, reference checks).
  void LoadFullParams(std::span<const float> full);
  void ExportFullParams(std::span<float> full) const;
  void ExportFullGrads(std::span<float> full) const;

  const ModelConfig& model() const { return model_; }
  const ChunkSpec& spec() const { return spec_; }
  const TpConfig& tp() const { return tp_.cfg; }
  const LocalDims& dims() const { return dims_; }
  Index activation_rows() const { return dims_.rows; }
  std::size_t activation_size() const {
    return static_cast<std::size_t>(dims_.rows * dims_.hidden);
  }
  float loss_scale() const { return loss_scale_; }
  void set_loss_scale(float s) { loss_scale_ = s; }

  // Microbatches whose F is done and I is not / whose I is done and W is not.
  int inflight() const;
  int pending_weight() const;

 private:
  struct State;
  State& Find(std::int64_t microbatch, const char* action);
  ParamRef Ref(const std::string& name);
  // An empty ParamRef where the model has no such parameter (model.bias false, RMSNorm's beta).
  ParamRef RefIfAny(const std::string& name);

  ModelConfig model_;
  ChunkSpec spec_;
  TpContext tp_;
  CpContext cp_;
  LocalDims dims_;
  Accountant* acc_;
  ParamLayout layout_;
  Tensor params_;
  Tensor grads_;
  float loss_scale_ = 1.0f;

  Embedding embed_;
  std::vector<TransformerBlock> blocks_;
  LayerNorm final_ln_;
  Linear out_;
  SoftmaxCrossEntropy loss_;

  std::map<std::int64_t, std::unique_ptr<State>> states_;
};

}  // namespace pipetwin::cpu
