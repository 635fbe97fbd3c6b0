#include "exec/model/params.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <thread>
#include <vector>

namespace pipetwin::gpt {

const ParamInfo* ParamLayout::TryFind(const std::string& name) const {
  for (const ParamInfo& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const ParamInfo& ParamLayout::Find(const std::string& name) const {
  if (const ParamInfo* p = TryFind(name)) return *p;
  throw std::out_of_range("no parameter named " + name);
}

void ParamLayoutBuilder::Add(std::string name, Index full_rows, Index full_cols, ShardKind shard,
                             InitKind init, std::vector<Index> col_groups) {
  ParamInfo p;
  p.name = std::move(name);
  p.full_rows = full_rows;
  p.full_cols = full_cols;
  p.shard = shard;
  p.init = init;
  p.col_groups = std::move(col_groups);
  p.rows = full_rows;
  p.cols = full_cols;
  const Index t = tp_.size;
  switch (shard) {
    case ShardKind::kReplicated:
      break;
    case ShardKind::kColumns:
      p.cols = full_cols / t;
      break;
    case ShardKind::kRows:
      p.rows = full_rows / t;
      break;
  }
  params_.push_back(std::move(p));
}

ParamLayout ParamLayoutBuilder::Build() && {
  ParamLayout layout;
  for (int pass = 0; pass < 2; ++pass) {
    const bool want_replicated = pass == 0;
    for (ParamInfo& p : params_) {
      if ((p.shard == ShardKind::kReplicated) != want_replicated) continue;
      p.offset = layout.total;
      p.full_offset = layout.full_total;
      layout.total += static_cast<std::size_t>(p.size());
      layout.full_total += static_cast<std::size_t>(p.full_size());
    }
    if (want_replicated) layout.replicated = layout.total;
  }
  layout.params = std::move(params_);
  return layout;
}

namespace {

// Index in the unsharded tensor of element (r, c) of this rank's shard.
Index FullIndex(const ParamInfo& p, const TpConfig& tp, Index r, Index c) {
  switch (p.shard) {
    case ShardKind::kReplicated:
      return r * p.full_cols + c;
    case ShardKind::kRows:
      return (tp.rank * p.rows + r) * p.full_cols + c;
    case ShardKind::kColumns: {
      if (p.col_groups.empty()) return r * p.full_cols + tp.rank * p.cols + c;
      Index full_begin = 0;  // the group's first column in the full tensor
      for (const Index width : p.col_groups) {
        const Index piece = width / tp.size;  // this rank's part of the group
        if (c < piece) return r * p.full_cols + full_begin + tp.rank * piece + c;
        c -= piece;
        full_begin += width;
      }
      return -1;  // past the shard's columns: not reached
    }
  }
  return 0;
}

}  // namespace

void ShardFromFull(const ParamInfo& p, const TpConfig& tp, const float* full, float* local) {
  for (Index r = 0; r < p.rows; ++r) {
    for (Index c = 0; c < p.cols; ++c) local[r * p.cols + c] = full[FullIndex(p, tp, r, c)];
  }
}

void UnshardIntoFull(const ParamInfo& p, const TpConfig& tp, const float* local, float* full) {
  for (Index r = 0; r < p.rows; ++r) {
    for (Index c = 0; c < p.cols; ++c) full[FullIndex(p, tp, r, c)] = local[r * p.cols + c];
  }
}

std::uint64_t Mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t HashString(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (char ch : s) {
    h ^= static_cast<std::uint8_t>(ch);
    h *= 0x100000001b3ULL;
  }
  return h;
}

float NormalFromKey(std::uint64_t key) {
  const std::uint64_t a = Mix64(key);
  const std::uint64_t b = Mix64(a ^ 0x5851f42d4c957f2dULL);
  // Uniforms in (0, 1] and [0, 1) from the top 53 bits.
  const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

namespace {

// Rows [row_begin, row_end) of InitParam.
void InitParamRows(const ParamInfo& p, const TpConfig& tp, const ModelConfig& model, float* local,
                   Index row_begin, Index row_end) {
  const std::uint64_t base = Mix64(model.seed ^ HashString(p.name));
  for (Index r = row_begin; r < row_end; ++r) {
    for (Index c = 0; c < p.cols; ++c) {
      float v = 0.0f;
      switch (p.init) {
        case InitKind::kNormal:
          v = model.init_std *
              NormalFromKey(base + static_cast<std::uint64_t>(FullIndex(p, tp, r, c)));
          break;
        case InitKind::kOnes:
          v = 1.0f;
          break;
        case InitKind::kZeros:
          v = 0.0f;
          break;
      }
      local[r * p.cols + c] = v;
    }
  }
}

}  // namespace

void InitParam(const ParamInfo& p, const TpConfig& tp, const ModelConfig& model, float* local) {
  InitParamRows(p, tp, model, local, 0, p.rows);
}

void InitParams(const ParamLayout& layout, const TpConfig& tp, const ModelConfig& model,
                float* base, int threads) {
  // Work items of about 2^20 values: one parameter's block of rows each.
  struct Item {
    const ParamInfo* p;
    Index row_begin, row_end;
  };
  constexpr Index kBlock = Index{1} << 20;
  std::vector<Item> items;
  for (const ParamInfo& p : layout.params) {
    const Index rows = std::max<Index>(1, kBlock / std::max<Index>(1, p.cols));
    for (Index r = 0; r < p.rows; r += rows) items.push_back({&p, r, std::min(p.rows, r + rows)});
  }
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < items.size(); i = next++) {
      const Item& it = items[i];
      InitParamRows(*it.p, tp, model, base + it.p->offset, it.row_begin, it.row_end);
    }
  };
  const auto n = static_cast<std::size_t>(std::max(1, threads));
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < std::min(n, items.size()); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

std::string BlockParamName(int layer, const char* what) {
  return "block" + std::to_string(layer) + "." + what;
}

ParamLayout ChunkParamLayout(const ModelConfig& model, const ChunkSpec& spec, const TpConfig& tp) {
  const LocalDims d = MakeLocalDims(model, tp);
  const Index h = d.hidden;
  const Index f = model.ffn_hidden;
  const Index v = d.vocab;
  ParamLayoutBuilder b(tp);
  if (spec.first) {
    b.Add("embed.tok", v, h, ShardKind::kReplicated, InitKind::kNormal);
    if (!model.rope) b.Add("embed.pos", d.seq, h, ShardKind::kReplicated, InitKind::kNormal);
  }
  // A bias of a linear layer (model.bias) and a norm's beta (LayerNorm only) are left out of the
  // layout where the model has none: Chunk finds no such parameter and runs without it.
  const auto bias = [&](std::string name, Index cols, ShardKind shard,
                        std::vector<Index> col_groups = {}) {
    if (model.bias) b.Add(std::move(name), 1, cols, shard, InitKind::kZeros, std::move(col_groups));
  };
  const auto norm = [&](const std::string& gamma, const std::string& beta) {
    b.Add(gamma, 1, h, ShardKind::kReplicated, InitKind::kOnes);
    if (!model.rms_norm) b.Add(beta, 1, h, ShardKind::kReplicated, InitKind::kZeros);
  };
  // QKV's columns: Q | K | V, K and V of kv_heads heads each (fewer than Q's under grouped-query
  // attention); SwiGLU's fc1: gate | up. Each group is split over TP on its own.
  const Index kv = Index{model.KvHeads()} * d.head_dim;
  const std::vector<Index> qkv_groups = {h, kv, kv};
  const Index qkv = h + 2 * kv;
  const std::vector<Index> fc1_groups =
      model.swiglu ? std::vector<Index>{f, f} : std::vector<Index>{};
  const Index fc1 = model.swiglu ? 2 * f : f;
  for (int l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l) {
    norm(BlockParamName(l, "ln1_g"), BlockParamName(l, "ln1_b"));
    b.Add(BlockParamName(l, "qkv_w"), h, qkv, ShardKind::kColumns, InitKind::kNormal, qkv_groups);
    bias(BlockParamName(l, "qkv_b"), qkv, ShardKind::kColumns, qkv_groups);
    b.Add(BlockParamName(l, "proj_w"), h, h, ShardKind::kRows, InitKind::kNormal);
    bias(BlockParamName(l, "proj_b"), h, ShardKind::kReplicated);
    norm(BlockParamName(l, "ln2_g"), BlockParamName(l, "ln2_b"));
    b.Add(BlockParamName(l, "fc1_w"), h, fc1, ShardKind::kColumns, InitKind::kNormal, fc1_groups);
    bias(BlockParamName(l, "fc1_b"), fc1, ShardKind::kColumns, fc1_groups);
    b.Add(BlockParamName(l, "fc2_w"), f, h, ShardKind::kRows, InitKind::kNormal);
    bias(BlockParamName(l, "fc2_b"), h, ShardKind::kReplicated);
  }
  if (spec.last) {
    norm("head.ln_g", "head.ln_b");
    if (!model.tied_embeddings) {
      b.Add("head.out_w", h, v, ShardKind::kReplicated, InitKind::kNormal);
    } else if (!spec.first) {
      // The last stage's copy of the tied embedding: its name gives it the embedding's values.
      b.Add("embed.tok", v, h, ShardKind::kReplicated, InitKind::kNormal);
    }
  }
  return std::move(b).Build();
}

}  // namespace pipetwin::gpt
