// Ring attention (context parallelism) in one process, one thread per CP rank: its output and
// input gradient equal the unsplit causal attention's on the same rows; a whole chunk under
// cp = 2 and 3 (and cp 2 × tp 2 with SP) gives the loss and, summed over the CP ranks, the
// gradients of the unsplit model; the Accountant's bytes equal the inventory's prediction.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "exec/cpu/chunk.h"
#include "exec/cpu/inventory.h"
#include "exec/cpu/ring_attention.h"
#include "exec/model/data.h"
#include "tests/exec/cpu_test_util.h"
#include "tests/exec/kv_widen_reference.h"

namespace pipetwin::cpu {
namespace {

using testing::KvWiden;
using testing::RandomVector;
using testing::RelErr;

// An in-process CP group: a send copies into the receiver's mailbox at once; a receive
// completes in Wait, when the message of its tag from its source has arrived (in send order).
class ThreadRingGroup {
 public:
  explicit ThreadRingGroup(int size) : size_(size) {}
  int size() const { return size_; }
  void Put(int dst, int src, int tag, std::vector<float> msg) {
    {
      std::lock_guard lock(mu_);
      box_[{dst, src, tag}].push_back(std::move(msg));
    }
    cv_.notify_all();
  }
  std::vector<float> Take(int dst, int src, int tag) {
    std::unique_lock lock(mu_);
    auto& q = box_[{dst, src, tag}];
    cv_.wait(lock, [&] { return !q.empty(); });
    std::vector<float> m = std::move(q.front());
    q.pop_front();
    return m;
  }

 private:
  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<float>>> box_;
};

class ThreadRing final : public RingComm {
 public:
  ThreadRing(ThreadRingGroup& g, int rank) : g_(&g), rank_(rank) {}
  int size() const override { return g_->size(); }
  int rank() const override { return rank_; }
  int SendTo(int dst, std::span<const float> data, int tag) override {
    g_->Put(dst, rank_, tag, std::vector<float>(data.begin(), data.end()));
    bytes_sent += static_cast<std::int64_t>(data.size() * sizeof(float));
    return Add({});
  }
  int RecvFrom(int src, std::span<float> data, int tag) override {
    return Add({data, src, tag, true});
  }
  void Wait(int handle) override {
    const Pending p = pending_.at(handle);
    pending_.erase(handle);
    if (!p.recv) return;
    const std::vector<float> m = g_->Take(rank_, p.src, p.tag);
    ASSERT_EQ(m.size(), p.data.size());
    std::copy(m.begin(), m.end(), p.data.begin());
  }
  std::int64_t bytes_sent = 0;

 private:
  struct Pending {
    std::span<float> data;
    int src = 0;
    int tag = 0;
    bool recv = false;
  };
  int Add(Pending p) {
    pending_.emplace(next_, p);
    return next_++;
  }
  ThreadRingGroup* g_;
  int rank_;
  std::map<int, Pending> pending_;
  int next_ = 0;
};

// Rows of the full sequence-major [S * B, c] matrix that CP rank r holds, in its local order.
std::vector<Index> LocalRows(const CpConfig& cp, Index seq, Index batch) {
  std::vector<Index> rows;
  for (Index t = 0; t < seq / cp.size; ++t) {
    for (Index b = 0; b < batch; ++b) rows.push_back(CpGlobalPosition(cp, seq, t) * batch + b);
  }
  return rows;
}

TEST(RingAttention, GlobalPositionsAreTheBalancedChunks) {
  // seq 16, cp 2: chunks of 4; rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2.
  const std::vector<Index> r0 = {0, 1, 2, 3, 12, 13, 14, 15};
  const std::vector<Index> r1 = {4, 5, 6, 7, 8, 9, 10, 11};
  for (Index t = 0; t < 8; ++t) {
    EXPECT_EQ(CpGlobalPosition({.size = 2, .rank = 0}, 16, t), r0[static_cast<std::size_t>(t)]);
    EXPECT_EQ(CpGlobalPosition({.size = 2, .rank = 1}, 16, t), r1[static_cast<std::size_t>(t)]);
  }
}

// Output and dqkv of the ring on cp ranks equal those of the unsplit causal attention.
// With dropout > 0 both draw the attention dropout masks of the same key (of 2 × heads heads,
// these the second half, as TP rank 1 of 2 holds them).
// With kv_heads (grouped-query attention) the ring takes qkv with K and V of kv_heads heads and
// the unsplit multi-head core the same widened to every query head (KvWiden, the test's own
// copy-based reference); the ring's dqkv equals the unsplit one summed back over each group,
// and its blocks and all-to-alls carry K and V of the kv heads.
void CheckAgainstUnsplit(int cp, bool unmasked_diagonal, bool expect_equal, Index per_rank = 12,
                         CpExchange exchange = CpExchange::kRing, int a2a_size = 0,
                         float dropout = 0.0f, Index kv_heads = 0) {
  const CpConfig shape{.size = cp, .exchange = exchange, .a2a_size = a2a_size};
  const Index a = shape.AllToAllRanks(), rings = cp / a;
  const Index batch = 2, seq = per_rank * cp,
              heads = kv_heads > 0 ? std::max<Index>(4, 2 * a) : 2 * a, d = 8, hl = heads * d;
  const Index kv = kv_heads > 0 ? kv_heads : heads, kvw = kv * d, qw = hl + 2 * kvw;
  const KvWiden widen(heads, kv, d);
  const char* how = exchange == CpExchange::kRing        ? ""
                    : exchange == CpExchange::kAllGather ? " all_gather"
                    : a < cp                             ? " a2a+p2p"
                                                         : " a2a";
  const Index n = batch * seq;
  Accountant ref_acc;
  Tensor qkv(ref_acc, MemCategory::kWorkspace, n, qw);  // as the ring takes it
  const auto qv = RandomVector(static_cast<std::size_t>(n * qw), 5, 0.5f);
  std::copy(qv.begin(), qv.end(), qkv.data());
  Tensor dout(ref_acc, MemCategory::kWorkspace, n, hl);
  const auto dv = RandomVector(static_cast<std::size_t>(n * hl), 6);
  std::copy(dv.begin(), dv.end(), dout.data());
  const AttentionDropout drop(dropout, 2 * heads, heads);
  const std::uint64_t key = 4242;
  CausalSelfAttention ref(batch, seq, heads, d, drop);
  CausalSelfAttention::Saved rs;
  Tensor ref_out = ref.Forward(widen.active() ? widen.Forward(qkv) : Copy(qkv), &rs, key);
  Tensor ref_dqkv = ref.BackwardInput(dout, &rs);
  if (widen.active()) ref_dqkv = widen.Backward(ref_dqkv);

  ThreadRingGroup group(cp);
  std::vector<std::vector<float>> out(static_cast<std::size_t>(cp)), dqkv(out.size());
  std::vector<std::int64_t> sent(out.size());
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < cp; ++r) {
      threads.emplace_back([&, r] {
        const CpConfig cfg{.size = cp, .rank = r, .exchange = exchange, .a2a_size = a2a_size};
        ThreadRing ring(group, r);
        Accountant acc;
        const std::vector<Index> rows = LocalRows(cfg, seq, batch);
        const auto nl = static_cast<Index>(rows.size());
        Tensor q(acc, MemCategory::kWorkspace, nl, qw), g(acc, MemCategory::kWorkspace, nl, hl);
        for (Index i = 0; i < nl; ++i) {
          q.mat().row(i) = qkv.mat().row(rows[static_cast<std::size_t>(i)]);
          g.mat().row(i) = dout.mat().row(rows[static_cast<std::size_t>(i)]);
        }
        RingAttention attn(batch, seq / cp, heads, d, CpContext{cfg, &ring, unmasked_diagonal},
                           drop, kv);
        RingAttention::Saved s;
        Tensor o = attn.Forward(std::move(q), &s, key);
        // Saved: qkv, the output and the log-sum-exp per row and head.
        EXPECT_EQ(acc.current(MemCategory::kActivations),
                  static_cast<std::size_t>(4 * (nl * qw + nl * hl + nl * heads)));
        Tensor dq = attn.BackwardInput(g, &s);
        EXPECT_EQ(acc.current(MemCategory::kActivations), 0u);
        auto& mo = out[static_cast<std::size_t>(r)];
        auto& md = dqkv[static_cast<std::size_t>(r)];
        mo.assign(o.data(), o.data() + o.size());
        md.assign(dq.data(), dq.data() + dq.size());
        sent[static_cast<std::size_t>(r)] = ring.bytes_sent;
      });
    }
  }
  // Reassemble in global row order.
  std::vector<float> got_out(static_cast<std::size_t>(n * hl)),
      got_d(static_cast<std::size_t>(n * qw));
  for (int r = 0; r < cp; ++r) {
    const std::vector<Index> rows = LocalRows({.size = cp, .rank = r}, seq, batch);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Index local = static_cast<Index>(i), row = rows[i];
      std::copy_n(out[static_cast<std::size_t>(r)].begin() + local * hl, hl,
                  got_out.begin() + row * hl);
      std::copy_n(dqkv[static_cast<std::size_t>(r)].begin() + local * qw, qw,
                  got_d.begin() + row * qw);
    }
    // (cp − 1) K/V blocks in F, (cp − 1) K/V and (cp − 1) dK/dV blocks in I (all_gather: the
    // ring all-gather's, twice, and the ring reduce-scatter's). a2a over a ranks: (a − 1)/a of
    // the rank's Q K V and output in F, of its dOut and dQ dK dV in I (hl + 2 kvw + hl
    // columns); then the ring's blocks over the cp / a rings.
    const std::int64_t want = 2 * (a - 1) * (n / cp) * (2 * hl + 2 * kvw) / a * 4 +
                              3 * (rings - 1) * (n / cp) * 2 * kvw * 4;
    EXPECT_EQ(sent[static_cast<std::size_t>(r)], want) << how;
  }
  const double e_out = RelErr(got_out, ref_out.span());
  const double e_d = RelErr(got_d, ref_dqkv.span());
  if (expect_equal) {
    EXPECT_LT(e_out, 1e-6) << "cp " << cp << how << " dropout " << dropout;
    EXPECT_LT(e_d, 1e-6) << "cp " << cp << how << " dropout " << dropout;
  } else {
    EXPECT_GT(e_out, 1e-2) << "cp " << cp << how << " dropout " << dropout;
  }
  if (dropout > 0) {  // the masks were drawn: without them the output differs
    CausalSelfAttention plain(batch, seq, heads, d);
    CausalSelfAttention::Saved ps;
    EXPECT_GT(
        RelErr(got_out, plain.Forward(widen.active() ? widen.Forward(qkv) : Copy(qkv), &ps).span()),
        1e-2);
  }
}

TEST(RingAttention, EqualsUnsplitAttention) {
  for (int cp : {2, 3, 4}) CheckAgainstUnsplit(cp, false, true);
}

// cp = 1 is the CPU backend's attention (no ring): blocks of kBlock positions, the last one
// short (600 positions: chunks of 300 = 128 + 128 + 44), and under cp 2 (chunks of 150).
TEST(RingAttention, BlockedEqualsUnsplitAttention) {
  CheckAgainstUnsplit(1, false, true);
  CheckAgainstUnsplit(1, false, true, 600);
  CheckAgainstUnsplit(2, false, true, 300);
}

// Attention dropout (model.dropout): every split draws the masks of the global (batch row,
// head, query, key) positions, so the ring, its all-gather form, Ulysses' all-to-all and the
// hierarchical form equal the unsplit core with the same masks, output and gradients; so does
// the CPU backend's blocked attention at cp 1 (two blocks and a short one).
TEST(RingAttention, WithDropoutEqualsUnsplitAttention) {
  constexpr float p = 0.2f;
  CheckAgainstUnsplit(1, false, true, 300, CpExchange::kRing, 0, p);
  for (int cp : {2, 3}) {
    CheckAgainstUnsplit(cp, false, true, 12, CpExchange::kRing, 0, p);
    CheckAgainstUnsplit(cp, false, true, 12, CpExchange::kAllGather, 0, p);
    CheckAgainstUnsplit(cp, false, true, 12, CpExchange::kAllToAll, 0, p);
  }
  CheckAgainstUnsplit(2, false, true, 150, CpExchange::kRing, 0, p);
  CheckAgainstUnsplit(4, false, true, 12, CpExchange::kAllToAll, 2, p);
}

TEST(RingAttention, WithoutTheDiagonalMaskItDiffers) {
  CheckAgainstUnsplit(2, true, false);
  CheckAgainstUnsplit(2, true, false, 12, CpExchange::kAllGather);
  CheckAgainstUnsplit(2, true, false, 12, CpExchange::kAllToAll);
}

// parallel.cp_comm: all_gather: K and V gathered whole before the attention, dK and dV
// reduce-scattered after; the same result and the same bytes as the ring.
TEST(RingAttention, AllGatherEqualsUnsplitAttention) {
  for (int cp : {2, 3, 4}) CheckAgainstUnsplit(cp, false, true, 12, CpExchange::kAllGather);
  CheckAgainstUnsplit(2, false, true, 300, CpExchange::kAllGather);
}

// parallel.cp_comm: a2a (DeepSpeed-Ulysses): every token of 1/cp of the heads on each rank,
// the unsplit attention on them; the same result, (cp − 1)/cp of Q K V and the output sent.
TEST(RingAttention, AllToAllEqualsUnsplitAttention) {
  for (int cp : {2, 3, 4}) CheckAgainstUnsplit(cp, false, true, 12, CpExchange::kAllToAll);
  CheckAgainstUnsplit(2, false, true, 300, CpExchange::kAllToAll);
}

// Grouped-query attention: 4 query heads reading 2 K/V heads, or 1; the ring (cp 1 blocked, 2,
// 3) and the all-gather pass K and V of the kv heads only (the bytes checked in
// CheckAgainstUnsplit: kv / heads of multi-head attention's), with and without dropout.
// Ulysses' all-to-all (cp 2 over 4 heads and 2 K/V heads, cp 4 over 8 and 4) and a2a+p2p (pairs
// of cp 4, then the ring) give each member its share of the query heads and the K/V heads
// they read, and move K and V of the kv heads only.
TEST(RingAttention, GroupedQueryEqualsUnsplitAttention) {
  for (const Index kv : {2, 1}) {
    CheckAgainstUnsplit(1, false, true, 300, CpExchange::kRing, 0, 0.0f, kv);
    for (int cp : {2, 3}) {
      CheckAgainstUnsplit(cp, false, true, 12, CpExchange::kRing, 0, 0.0f, kv);
      CheckAgainstUnsplit(cp, false, true, 12, CpExchange::kAllGather, 0, 0.0f, kv);
    }
    CheckAgainstUnsplit(2, false, true, 12, CpExchange::kRing, 0, 0.2f, kv);
  }
  CheckAgainstUnsplit(2, false, true, 12, CpExchange::kAllToAll, 0, 0.0f, 2);
  CheckAgainstUnsplit(2, false, true, 12, CpExchange::kAllToAll, 0, 0.2f, 2);
  CheckAgainstUnsplit(4, false, true, 12, CpExchange::kAllToAll, 0, 0.0f, 4);
  CheckAgainstUnsplit(4, false, true, 12, CpExchange::kAllToAll, 2, 0.0f, 2);
  CheckAgainstUnsplit(2, true, false, 12, CpExchange::kRing, 0, 0.0f, 1);
  CheckAgainstUnsplit(4, true, false, 12, CpExchange::kAllToAll, 2, 0.0f, 2);
}

// parallel.cp_comm: a2a+p2p (Megatron-Core's hierarchical CP): all-to-all within groups of
// cp_a2a ranks, ring attention over the cp / cp_a2a groups; the same result, both levels' bytes.
TEST(RingAttention, HierarchicalAllToAllAndRingEqualsUnsplitAttention) {
  CheckAgainstUnsplit(4, false, true, 12, CpExchange::kAllToAll, 2);
  CheckAgainstUnsplit(6, false, true, 12, CpExchange::kAllToAll, 2);
  CheckAgainstUnsplit(6, false, true, 12, CpExchange::kAllToAll, 3);
  CheckAgainstUnsplit(4, true, false, 12, CpExchange::kAllToAll, 2);
}

ModelConfig SmallModel() {
  return ModelConfig{.layers = 2,
                     .hidden = 16,
                     .ffn_hidden = 32,
                     .heads = 4,
                     .vocab = 17,
                     .seq_len = 24,
                     .micro_batch = 2,
                     .seed = 99};
}

// A whole chunk on cp ranks (tp ranks each, SP) under a recompute mode against the unsplit
// chunk that stores every activation: loss and gradients; memory against the inventory.
void CheckChunk(int cp, int tp, Recompute recompute = Recompute::kNone,
                CpExchange exchange = CpExchange::kRing, int a2a_size = 0, float dropout = 0.0f,
                int kv_heads = 0) {
  ModelConfig m = SmallModel();
  m.dropout = dropout;
  m.kv_heads = kv_heads;
  const CpConfig shape{.size = cp, .exchange = exchange, .a2a_size = a2a_size};
  if (exchange == CpExchange::kAllToAll) {  // each TP rank's heads split over the a2a ranks
    m.heads = tp * shape.AllToAllRanks();
    if (kv_heads > 0) {  // and its K/V heads too: groups of 2 query heads
      m.kv_heads = m.heads;
      m.heads *= 2;
    }
    m.hidden = 4 * m.heads;
  }
  const ChunkSpec stored{.first_layer = 0, .num_layers = m.layers, .first = true, .last = true};
  ChunkSpec spec = stored;
  spec.recompute = recompute;
  SyntheticData data({.vocab = m.vocab,
                      .seq_len = m.seq_len,
                      .micro_batch = m.micro_batch,
                      .seed = 3,
                      .noise = 0.2f});
  std::vector<std::int32_t> tokens(data.tokens_per_microbatch()), labels(tokens.size());
  data.Fill(0, 0, tokens, labels);
  Accountant ref_acc;
  Chunk ref(m, stored, TpConfig{}, ref_acc);
  const float ref_loss = ref.Forward(0, {.tokens = tokens, .labels = labels});
  ref.Backward(0, {}, {});
  const std::vector<float> full_params(ref.params().begin(), ref.params().end());

  ThreadRingGroup rings_by_tp[2] = {ThreadRingGroup(cp), ThreadRingGroup(cp)};
  std::vector<std::unique_ptr<ThreadGroup>> tp_groups;
  for (int c = 0; c < cp; ++c) tp_groups.push_back(std::make_unique<ThreadGroup>(tp));
  std::vector<float> loss(static_cast<std::size_t>(cp * tp));
  // Per CP rank, its TP ranks' shards unsharded into one full gradient (replicated parameters
  // are written by each TP rank with the same values).
  std::vector<std::vector<float>> grads(static_cast<std::size_t>(cp),
                                        std::vector<float>(full_params.size(), 0.0f));
  std::mutex export_mu;
  {
    std::vector<std::jthread> threads;
    for (int c = 0; c < cp; ++c) {
      for (int t = 0; t < tp; ++t) {
        threads.emplace_back([&, c, t] {
          ThreadRing ring(rings_by_tp[t], c);
          ThreadCollectives coll = tp_groups[static_cast<std::size_t>(c)]->Rank(t);
          const TpConfig tpc{.size = tp, .rank = t, .sequence_parallel = tp > 1};
          const CpContext cpc{{.size = cp, .rank = c, .exchange = exchange, .a2a_size = a2a_size},
                              &ring};
          Accountant acc;
          Chunk ch(m, spec, tpc, acc, tp > 1 ? &coll : nullptr, cpc);
          ch.LoadFullParams(full_params);
          const std::size_t me = static_cast<std::size_t>(c * tp + t);
          loss[me] = ch.Forward(0, {.tokens = tokens, .labels = labels});
          const ChunkInventory inv = PredictChunkMemory(m, spec, tpc, cpc.cfg);
          EXPECT_EQ(acc.current(MemCategory::kActivations), inv.activations_full);
          const std::size_t before = acc.current(MemCategory::kActivations);
          acc.ResetPeaks();
          ch.BackwardInput(0, {}, {});
          EXPECT_EQ(acc.current(MemCategory::kActivations), inv.activations_pending_w);
          EXPECT_EQ(acc.peak(MemCategory::kActivations), before + inv.activations_i_transient);
          ch.BackwardWeight(0);
          EXPECT_EQ(acc.current(MemCategory::kActivations), 0u);
          EXPECT_EQ(acc.current(MemCategory::kParams), inv.param_bytes);
          ch.SyncSequenceParallelGrads();
          std::lock_guard lock(export_mu);
          const ParamLayout& layout = ch.layout();
          for (const ParamInfo& p : layout.params) {
            UnshardIntoFull(p, tpc, ch.grads().data() + p.offset,
                            grads[static_cast<std::size_t>(c)].data() + p.full_offset);
          }
        });
      }
    }
  }
  // Each CP rank's loss is its share; the shares add up to the unsplit mean.
  double sum = 0;
  for (int c = 0; c < cp; ++c) sum += static_cast<double>(loss[static_cast<std::size_t>(c * tp)]);
  const std::string what =
      "cp " + std::to_string(cp) + " tp " + std::to_string(tp) + " recompute " +
      (recompute == Recompute::kFull        ? "full"
       : recompute == Recompute::kSelective ? "selective"
                                            : "none") +
      (exchange == CpExchange::kAllGather  ? " all_gather"
       : exchange == CpExchange::kAllToAll ? " a2a"
                                           : "") +
      " dropout " + std::to_string(dropout) + " kv_heads " + std::to_string(kv_heads);
  EXPECT_NEAR(sum, static_cast<double>(ref_loss), 1e-6 * std::abs(static_cast<double>(ref_loss)))
      << what;
  std::vector<float> total(full_params.size(), 0.0f);
  for (int c = 0; c < cp; ++c) {
    const auto& g = grads[static_cast<std::size_t>(c)];
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += g[i];
  }
  EXPECT_LT(RelErr(total, ref.grads()), 1e-6) << what;
}

TEST(RingAttention, ChunkEqualsUnsplitModel) {
  CheckChunk(2, 1);
  CheckChunk(3, 1);
  CheckChunk(2, 2);
}

// Recompute under CP: full re-runs the whole block (its ring included) in I, selective the
// ring's forward alone (from the kept qkv); both equal the unsplit chunk that stores
// everything, and the Accountant equals the inventory after F, through I and after W.
TEST(RingAttention, RecomputedChunkEqualsUnsplitModel) {
  for (const Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
    CheckChunk(2, 1, mode);
    CheckChunk(3, 1, mode);
    CheckChunk(2, 2, mode);
  }
}

TEST(RingAttention, AllGatherChunkEqualsUnsplitModel) {
  for (const Recompute mode : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    CheckChunk(2, 1, mode, CpExchange::kAllGather);
    CheckChunk(3, 2, mode, CpExchange::kAllGather);
  }
}

// Hidden and attention dropout under CP: the hidden masks are keyed by the rows' global
// positions, the attention's by (batch row, head, query, key) of the unsplit sequence, so a
// chunk on cp ranks (tp ranks each, SP) equals the unsplit chunk with the same masks, under
// every recompute mode and exchange; memory still equals the inventory (no mask is saved).
TEST(RingAttention, ChunkWithDropoutEqualsUnsplitModel) {
  constexpr float p = 0.1f;
  for (const Recompute mode : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    CheckChunk(2, 1, mode, CpExchange::kRing, 0, p);
    CheckChunk(2, 2, mode, CpExchange::kRing, 0, p);
  }
  CheckChunk(3, 1, Recompute::kNone, CpExchange::kRing, 0, p);
  CheckChunk(2, 1, Recompute::kNone, CpExchange::kAllGather, 0, p);
  CheckChunk(3, 2, Recompute::kSelective, CpExchange::kAllToAll, 0, p);
  CheckChunk(4, 1, Recompute::kFull, CpExchange::kAllToAll, 2, p);
}

// Grouped-query attention in a whole chunk: the ring, the all-gather and the all-to-alls pass
// K and V of the kv heads; under every recompute mode, with TP (one K/V head a rank for the
// ring) and without, equal to the unsplit chunk, memory equal to the inventory. (With a2a the
// kv_heads argument asks for groups: CheckChunk sets heads 2 tp a, kv tp a.)
TEST(RingAttention, GroupedQueryChunkEqualsUnsplitModel) {
  for (const Recompute mode : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    CheckChunk(2, 1, mode, CpExchange::kRing, 0, 0.0f, 2);
    CheckChunk(2, 2, mode, CpExchange::kRing, 0, 0.0f, 2);
    CheckChunk(3, 1, mode, CpExchange::kAllGather, 0, 0.0f, 1);
    CheckChunk(2, 2, mode, CpExchange::kAllToAll, 0, 0.0f, 1);
    CheckChunk(4, 1, mode, CpExchange::kAllToAll, 2, 0.0f, 1);
  }
}

TEST(RingAttention, AllToAllChunkEqualsUnsplitModel) {
  for (const Recompute mode : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    CheckChunk(2, 1, mode, CpExchange::kAllToAll);
    CheckChunk(3, 2, mode, CpExchange::kAllToAll);
    CheckChunk(4, 1, mode, CpExchange::kAllToAll, 2);  // a2a+p2p
  }
}

}  // namespace
}  // namespace pipetwin::cpu
