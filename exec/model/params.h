// params.h — where a chunk's parameters live in its flat buffers, and how they are sharded.
//
// A chunk keeps all of its parameters in one flat float buffer and all of their gradients in
// another of the same layout, so data parallelism and the optimizer work on plain spans.
// The layout puts every parameter that is replicated across tensor-parallel ranks first (the
// "replicated segment": LayerNorms, row-parallel biases, embeddings, the output layer) and the
// sharded ones after it. Under sequence parallelism the replicated segment's gradients are
// partial sums over sequence slices and need one all-reduce over the TP group per step.
//
// Every parameter's initial value is a pure function of (model seed, parameter name, element
// index in the unsharded tensor), so a model split over pipeline stages or TP ranks starts
// from exactly the numbers of the unsplit model.
//
//   ParamLayout layout = ...;                  // built by Chunk
//   for (const ParamInfo& p : layout.params) std::cout << p.name << " " << p.offset << "\n";
//   ShardFromFull(p, tp, full_flat.data() + p.full_offset, local_flat.data() + p.offset);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/model/config.h"
#include "exec/model/memory.h"

namespace pipetwin::gpt {

enum class ShardKind : std::uint8_t {
  kReplicated,  // every TP rank holds the whole tensor
  kColumns,     // columns split: each column group (ParamInfo::col_groups) is cut into tp pieces
  kRows,        // rows split into tp pieces
};

enum class InitKind : std::uint8_t { kNormal, kOnes, kZeros };

struct ParamInfo {
  std::string name;  // e.g. "block3.qkv_w", "embed.tok", "head.out_w"
  Index full_rows = 0;
  Index full_cols = 0;
  ShardKind shard = ShardKind::kReplicated;
  // kColumns: the full widths of the column groups, each split over TP, this rank's pieces side
  // by side (QKV: Q | K | V, K and V narrower under grouped-query attention; SwiGLU's fc1: gate |
  // up). Empty: one group, all the columns.
  std::vector<Index> col_groups;
  InitKind init = InitKind::kNormal;
  Index rows = 0;  // this rank's shard
  Index cols = 0;
  std::size_t offset = 0;       // in this rank's flat buffer
  std::size_t full_offset = 0;  // in the flat buffer of the same chunk with tp = 1
  Index size() const { return rows * cols; }
  Index full_size() const { return full_rows * full_cols; }
};

struct ParamLayout {
  std::vector<ParamInfo> params;
  std::size_t total = 0;       // elements in this rank's flat buffer
  std::size_t replicated = 0;  // elements [0, replicated) are the replicated segment
  std::size_t full_total = 0;  // elements with tp = 1
  const ParamInfo& Find(const std::string& name) const;     // throws std::out_of_range if absent
  const ParamInfo* TryFind(const std::string& name) const;  // nullptr if absent
};

// Registers parameters, then assigns offsets (replicated segment first).
class ParamLayoutBuilder {
 public:
  explicit ParamLayoutBuilder(const TpConfig& tp) : tp_(tp) {}
  void Add(std::string name, Index full_rows, Index full_cols, ShardKind shard, InitKind init,
           std::vector<Index> col_groups = {});
  ParamLayout Build() &&;

 private:
  TpConfig tp_;
  std::vector<ParamInfo> params_;
};

// Writes this rank's shard of the unsharded tensor `full` into `local` (and the reverse).
void ShardFromFull(const ParamInfo& p, const TpConfig& tp, const float* full, float* local);
void UnshardIntoFull(const ParamInfo& p, const TpConfig& tp, const float* local, float* full);

// Fills `local` with this rank's shard of the parameter's seeded initial value.
void InitParam(const ParamInfo& p, const TpConfig& tp, const ModelConfig& model, float* local);

// Every parameter of `layout` (each at base + its offset), the values InitParam gives, on up
// to `threads` threads over blocks of rows. Each value depends on its key alone, so the result
// is the same bit for bit whatever the thread count. (A billion parameters take about a
// minute on one core: the CUDA backend initialises on the host, then uploads.)
void InitParams(const ParamLayout& layout, const TpConfig& tp, const ModelConfig& model,
                float* base, int threads);

// splitmix64: the counter-based hash behind every seeded number of the executor's model.
std::uint64_t Mix64(std::uint64_t x);
std::uint64_t HashString(const std::string& s);
// A standard normal number from a 64-bit key (Box-Muller on two derived uniforms).
float NormalFromKey(std::uint64_t key);

// The layout of one model chunk (GPT decoder: embedding on the first chunk, blocks, final
// LayerNorm and output layer on the last), shared by the CPU chunk and the CUDA backend so
// their flat buffers line up element for element. With tied embeddings the last chunk has no
// "head.out_w": it uses "embed.tok" (its own copy where the chunk is not also the first).
ParamLayout ChunkParamLayout(const ModelConfig& model, const ChunkSpec& spec, const TpConfig& tp);
// "block<layer>.<what>", e.g. "block3.qkv_w".
std::string BlockParamName(int layer, const char* what);

}  // namespace pipetwin::gpt
