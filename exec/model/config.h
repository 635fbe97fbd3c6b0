// config.h — the plain description of the executor's GPT model (every backend runs it) and of
// one rank's share of it.
//
//   ModelConfig model;                       // small default: one step well under 1 s on 1 core
//   model.layers = 8;
//   ChunkSpec stage1{.first_layer = 4, .num_layers = 4, .first = false, .last = true};
//   TpConfig tp{.size = 2, .rank = 1, .sequence_parallel = true};
//   if (auto err = Validate(model, stage1, tp)) return Error::BadInput(*err);
//
// Activation layout: a microbatch's activations are a [tokens, hidden] row-major matrix whose
// rows are ordered sequence-major, row = t * micro_batch + b (Megatron's [s, b, h]). Tokens and
// labels are [micro_batch, seq_len] int32 (row-major, b-major). Under sequence parallelism
// tensor-parallel rank r holds the contiguous rows [r * N / tp, (r + 1) * N / tp), N =
// micro_batch * seq_len, i.e. sequence positions [r * seq_len / tp, (r + 1) * seq_len / tp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace pipetwin::gpt {

struct ModelConfig {
  int layers = 4;
  int hidden = 64;
  int ffn_hidden = 256;
  int heads = 4;
  int vocab = 128;
  int seq_len = 64;
  int micro_batch = 2;
  std::uint64_t seed = 1234;  // parameter initialisation
  float init_std = 0.02f;     // weights ~ N(0, init_std); norm gamma = 1; biases = 0
  float layernorm_eps = 1e-5f;
  // Hidden dropout on the attention and MLP branches before each residual add, and attention
  // dropout on the probabilities, at this probability (0: off). Masks are counter-based on
  // (dropout_seed, step, microbatch, layer, branch, global token row, column), and for the
  // attention (batch row, global head, query and key position), so they are reproducible and
  // identical under any pipeline/TP/SP/CP split; nothing is saved.
  float dropout = 0.0f;
  std::uint64_t dropout_seed = 4321;
  // Tied embeddings: the output layer is the token embedding, transposed (logits = x Eᵀ). A
  // chunk holding both uses the one tensor; a last chunk without the embedding keeps its own
  // copy, named and initialised as the embedding ("embed.tok"), whose gradient the backend
  // sums with the first chunk's before the optimizer step (Megatron's embedding group).
  bool tied_embeddings = false;
  // model.bias: biases in the linear layers (QKV, projection, both MLP layers), as GPT-2/3 and
  // Megatron-LM's default; false as --disable-bias-linear (the norms keep theirs).
  bool bias = true;
  // model.norm: LayerNorm, or RMSNorm (y = x / sqrt(mean(x²) + eps) · gamma: no mean, no beta).
  bool rms_norm = false;
  // model.position: a learned position table added to the token embedding, or rotary
  // positions (RoPE) turning each block's Q and K (no parameters).
  bool rope = false;
  // model.mlp: a GeLU MLP (fc1 [h, f] → GeLU → fc2 [f, h]), or SwiGLU (Shazeer 2020, Megatron-LM's
  // --swiglu): fc1 [h, 2f] gives [gate | up], SiLU(gate) ⊙ up → fc2 [f, h]. Under TP each rank
  // holds its slice of the gate columns and of the up columns (two column groups).
  bool swiglu = false;
  // model.kv_heads: the heads of K and V (grouped-query attention, Ainslie et al. 2023): each
  // group of heads / kv_heads query heads shares one. 0: heads (multi-head attention).
  int kv_heads = 0;
  int KvHeads() const { return kv_heads > 0 ? kv_heads : heads; }
};

// Activation recomputation of the transformer blocks (Korthikanti et al. 2022), the job's
// `training.recompute`: kFull keeps each block's input only and re-runs the block's forward
// in its I; kSelective drops the attention core's probabilities and re-runs the core (QK^T,
// softmax, probabilities x V) in I. The embedding and the head are never recomputed.
enum class Recompute : std::uint8_t { kNone, kSelective, kFull };

// A contiguous range of transformer blocks forming one pipeline stage (model chunk).
// `first` adds the token + position embedding in front, `last` the final LayerNorm, output
// layer and loss behind.
struct ChunkSpec {
  int first_layer = 0;
  int num_layers = 0;
  bool first = true;
  bool last = true;
  Recompute recompute = Recompute::kNone;
};

// Megatron tensor parallelism inside one chunk, from one rank's point of view.
struct TpConfig {
  int size = 1;
  int rank = 0;
  bool sequence_parallel = false;
};

// Context parallelism (ring attention), from one rank's point of view. The sequence is cut
// into 2 × size chunks of seq_len / (2 × size) positions; rank r holds chunks r and
// 2 × size − 1 − r (one from each end, so that every rank has the same share of the causal
// attention's work, as Megatron-Core balances it), in that order: its local position t is
// global position CpGlobalPosition(cp, seq_len, t). Activations of a rank are the rows of its
// seq_len / size local positions, sequence-major as above (row = t_local * micro_batch + b).
// How the attention sees the whole sequence (parallel.cp_comm): kRing (p2p), K and V passed
// around the ring, overlapped with the attention; kAllGather (all_gather, as Llama 3
// trained), K and V all gathered first and dK, dV reduce-scattered after (the same bytes, in
// series); kAllToAll (a2a, DeepSpeed-Ulysses), Q, K and V all-to-all'd from this rank's
// tokens of every head to every token of 1/size of the heads, the output back; with
// a2a_size (a2a+p2p, Megatron-Core's hierarchical CP) the all-to-all spans groups of a2a_size
// consecutive CP ranks only, and ring attention runs over the size / a2a_size groups.
enum class CpExchange : std::uint8_t { kRing, kAllGather, kAllToAll };
struct CpConfig {
  int size = 1;
  int rank = 0;
  CpExchange exchange = CpExchange::kRing;
  int a2a_size = 0;  // kAllToAll: ranks of the all-to-all level; 0 = size (no ring level)
  int AllToAllRanks() const {
    return exchange != CpExchange::kAllToAll ? 1 : a2a_size > 0 ? a2a_size : size;
  }
};

// The global sequence position of local position t (0 <= t < seq_len / cp.size).
inline std::int64_t CpGlobalPosition(const CpConfig& cp, std::int64_t seq_len, std::int64_t t) {
  if (cp.size == 1) return t;
  const std::int64_t c = seq_len / (2 * cp.size);
  return t < c ? cp.rank * c + t : (2 * cp.size - 1 - cp.rank) * c + (t - c);
}

// Returns a message naming the offending field, or nothing when the combination is valid.
std::optional<std::string> Validate(const ModelConfig& model, const ChunkSpec& chunk,
                                    const TpConfig& tp, const CpConfig& cp = {});

// Per-rank sizes derived from the configuration (all in elements).
struct LocalDims {
  std::int64_t batch = 0;           // micro_batch
  std::int64_t seq = 0;             // seq_len (the whole sequence)
  std::int64_t tokens = 0;          // micro_batch * seq_len (the whole microbatch)
  std::int64_t seq_local = 0;       // positions this CP rank holds: seq_len / cp
  std::int64_t tokens_local = 0;    // N = micro_batch * seq_local (rows inside the TP region)
  std::int64_t rows = 0;            // rows this rank holds outside the TP region (N or N / tp)
  std::int64_t row_begin = 0;       // first of those rows, among the N
  std::int64_t hidden = 0;          // h
  std::int64_t hidden_local = 0;    // h / tp (width of this rank's heads)
  std::int64_t heads_local = 0;     // heads / tp
  std::int64_t kv_heads_local = 0;  // kv_heads / tp (heads_local without grouped-query attention)
  std::int64_t head_dim = 0;        // h / heads
  std::int64_t ffn_local = 0;       // ffn_hidden / tp
  std::int64_t vocab = 0;
};
LocalDims MakeLocalDims(const ModelConfig& model, const TpConfig& tp, const CpConfig& cp = {});

}  // namespace pipetwin::gpt
