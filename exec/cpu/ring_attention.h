// ring_attention.h — causal self-attention under context parallelism (ring attention, Li et
// al. 2021; the load-balanced split of Megatron-Core), exact in float32.
//
// Each of the cp ranks holds two chunks of the sequence, r and 2cp − 1 − r (config.h:
// CpConfig), and its own rows of Q, K and V for them. The K and V blocks travel around the CP
// group: at step i rank r attends with its queries to the block of rank (r − i) mod cp, while
// the block of rank (r − i − 1) mod cp is already on its way in (nonblocking send to the next
// rank, receive from the previous one, waited for only after the step's computation). Chunk
// pairs are masked per pair: a key chunk after the query chunk is skipped, the same chunk gets
// the causal triangle, an earlier one is attended in full. The softmax is computed online
// (running row maximum and sum, flash-attention style), and the forward keeps the
// log-sum-exp of every row and head and its normalised output.
//
// The backward is the same ring: K and V travel again; at step i >= 1 a rank adds its
// contribution to dK and dV of the block it holds to the partial sum received from the
// previous rank (the block's earlier visitors) and passes it on, so that after cp − 1 hops the
// sum of every other rank's contributions reaches the block's owner, which adds its own.
// Per layer and microbatch a rank sends (cp − 1) K/V blocks in F, and (cp − 1) K/V blocks plus
// (cp − 1) dK/dV blocks in I: 3 (cp − 1) × N × 2 × kw floats (N local tokens, hl = h / tp,
// kw = hl, or kv_heads × d under grouped-query attention: K and V of the kv heads only).
//
// With CpConfig::all_gather (parallel.cp_comm: all_gather, Llama 3's way) the same blocks
// travel the same ring, but as collectives in series with the attention: F all-gathers every
// rank's K/V block first (ring all-gather, cp − 1 steps), then attends to all of them; I
// gathers them again, accumulates dK and dV of every block into a buffer of the whole
// sequence, and reduce-scatters it (ring reduce-scatter, cp − 1 steps), each rank keeping its
// own block's sum. The same 3 (cp − 1) blocks a rank sends; the gathered K/V and the whole
// dK/dV ([cp N, 2 kw] each) are workspace.
//
// With CpExchange::kAllToAll (parallel.cp_comm: a2a, DeepSpeed-Ulysses; each rank's heads a
// multiple of cp, and its kv heads too) there is no ring: F all-to-alls Q, K and V so that each
// rank holds every token of 1/cp of the query heads and of the K/V heads they read, runs the
// unsplit causal attention on them (the cp = 1 code below, the sequence in global order), and
// all-to-alls the output back to the tokens' owners; I does the same with dOut in and dQ dK dV
// back. A rank sends (cp − 1)/cp of N × (2 hl + 2 kw) floats in F and again in I. Saved: the
// head-sharded qkv [cp N, (hl + 2 kw) / cp], output and log-sum-exp, the same bytes as the
// ring's. With a2a_size = a < cp (a2a+p2p, Megatron-Core's
// hierarchical CP) the all-to-all spans the a consecutive CP ranks of this rank's group only,
// whose chunks together are super-chunks g and 2R − 1 − g of the sequence split into 2R
// (R = cp / a): the balanced layout of ring attention over R ranks, which then runs over the
// ranks with this rank's place in the other groups, on 1/a of the heads. A rank sends
// (a − 1)/a of N × (2 hl + 2 kw) floats in F and in I, and the ring's 3 (R − 1) K/V blocks.
//
// Within a chunk pair the work is blocked, flash-attention style: query and key blocks of at
// most kBlock positions, one kBlock × kBlock score block at a time (never the s × s matrix);
// on a diagonal pair the key blocks after a query block are skipped and the one on the diagonal
// gets the causal triangle. With cp = 1 (no ring, no communication) this is the CPU backend's
// attention for recompute none and full (selective recompute keeps CausalSelfAttention, whose
// probabilities it recomputes).
//
// Saved between F and I (MemCategory::kActivations): the local qkv [N, hl + 2 kw], the output
// [N, hl] and the log-sum-exp [N, heads] (instead of cp = 1's probabilities).
//
//   RingAttention attn(batch, seq_local, heads_local, head_dim, cp, &ring);
//   RingAttention::Saved s;
//   Tensor out = attn.Forward(std::move(qkv), &s);   // [N, hl]
//   Tensor dqkv = attn.BackwardInput(dout, &s);      // [N, hl + 2 kw]; s empty
#pragma once

#include <array>
#include <span>
#include <vector>

#include "exec/cpu/layers.h"
#include "exec/cpu/memory.h"
#include "exec/cpu/model.h"

namespace pipetwin::cpu {

// The CP group as the attention sees it: nonblocking point-to-point transfers, to the next
// rank ((rank + 1) mod size) and from the previous one on the ring, or to and from any rank
// (the all-to-all of kAllToAll). Messages of the same tag between two ranks match in the
// order they were posted.
class RingComm {
 public:
  virtual ~RingComm() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // Starts sending `data` (alive and unchanged until Wait) to rank `dst`; returns a handle.
  virtual int SendTo(int dst, std::span<const float> data, int tag) = 0;
  // Starts receiving into `data` from rank `src`; returns a handle.
  virtual int RecvFrom(int src, std::span<float> data, int tag) = 0;
  int SendNext(std::span<const float> data, int tag) {
    return SendTo((rank() + 1) % size(), data, tag);
  }
  int RecvPrev(std::span<float> data, int tag) {
    return RecvFrom((rank() + size() - 1) % size(), data, tag);
  }
  // Blocks until the transfer of `handle` has completed (bounded by the implementation's
  // timeout), then forgets the handle.
  virtual void Wait(int handle) = 0;
};

// Some ranks of a RingComm as one of their own (ranks renumbered 0 .. members − 1, in the
// order given; this rank must be one of them); transfers go through the parent.
class SubgroupComm final : public RingComm {
 public:
  SubgroupComm(RingComm* parent, std::vector<int> members);
  int size() const override { return static_cast<int>(members_.size()); }
  int rank() const override { return rank_; }
  int SendTo(int dst, std::span<const float> data, int tag) override {
    return parent_->SendTo(members_[static_cast<std::size_t>(dst)], data, tag);
  }
  int RecvFrom(int src, std::span<float> data, int tag) override {
    return parent_->RecvFrom(members_[static_cast<std::size_t>(src)], data, tag);
  }
  void Wait(int handle) override { parent_->Wait(handle); }

 private:
  RingComm* parent_;
  std::vector<int> members_;
  int rank_ = 0;
};

// The CP group as the layers see it; comm may be null when cfg.size == 1. unmasked_diagonal is
// a test hook (`run --test-fault cp-mask:RANK`): the causal triangle of the chunk pairs on the
// diagonal is not applied, so that --check-reference must fail.
struct CpContext {
  CpConfig cfg;
  RingComm* comm = nullptr;
  bool unmasked_diagonal = false;
};

class RingAttention {
 public:
  static constexpr Index kBlock = 64;  // positions per query or key block
  struct Saved {
    Tensor qkv;  // [N, hl + 2 kw] as [Q | K | V] of this rank's heads, local rows
    Tensor out;  // [N, hl], normalised
    Tensor lse;  // [N, heads]: log-sum-exp of every row's scaled scores, per head
    std::uint64_t dropout_key = 0;  // from Forward: the backward draws the same masks
  };
  RingAttention() = default;
  // kv_heads: the heads of K and V (grouped-query attention: qkv is [N, (heads + 2 kv) d], query
  // head j reading K/V head j / (heads / kv)); 0: heads. Under CpExchange::kAllToAll the all-to-
  // all level's size must divide both heads and kv_heads: each member gets 1/a of the query
  // heads and the 1/a of the K/V heads their groups read.
  RingAttention(Index batch, Index seq_local, Index heads, Index head_dim, const CpContext& cp,
                AttentionDropout dropout = {}, Index kv_heads = 0)
      : batch_(batch),
        seq_(seq_local),
        heads_(heads),
        kv_heads_(kv_heads > 0 ? kv_heads : heads),
        head_dim_(head_dim),
        cp_(cp),
        dropout_(dropout) {}

  // dropout_key: per (step, microbatch, layer); ignored without dropout (layers.h,
  // AttentionDropout: the masks of the global positions, whatever the split).
  Tensor Forward(Tensor qkv, Saved* s, std::uint64_t dropout_key = 0) const;
  Tensor BackwardInput(const Tensor& dout, Saved* s) const;  // returns dqkv, frees s
  // Whether Saved::qkv is Forward's qkv (not under kAllToAll: there it is the head-sharded one).
  bool SavesItsInput() const {
    return cp_.cfg.size == 1 || cp_.cfg.exchange != CpExchange::kAllToAll;
  }

 private:
  // One K/V block (of the rank `src`) against this rank's queries: forward accumulation into
  // the running maxima, sums and unnormalised output. kv points at the first row's K, V follows
  // kw floats later; kv_row floats from one (position, batch) row to the next (2 kw packed for
  // the ring, hl + 2 kw in place in qkv).
  void ForwardBlock(const Tensor& qkv, const float* kv, Index kv_row, int src,
                    std::uint64_t dropout_key, Tensor& m, Tensor& l, Tensor& acc) const;
  // Its backward: dQ += into dqkv, dK and dV of the block += into dkv (laid out as kv).
  void BackwardBlock(const Saved& s, const Tensor& dout, const Tensor& delta, const float* kv,
                     Index kv_row, int src, Tensor& dqkv, float* dkv) const;
  // all_gather: every rank's packed K/V block [N, 2 kw], rank-major [cp N, 2 kw] (ring
  // all-gather); and the reverse, the sums of every rank's [cp N, 2 kw] for this rank's block
  // (ring reduce-scatter).
  Tensor AllGatherKv(const Tensor& kv) const;
  Tensor ReduceScatterKv(Tensor& all) const;
  // kAllToAll: the all-to-all level (a consecutive CP ranks; a = cp for Ulysses) and the
  // ring level (the cp / a ranks with this rank's place in their groups).
  struct Levels {
    SubgroupComm a2a;
    SubgroupComm ring;
  };
  Levels MakeLevels() const;
  // The attention of the ring level: every position of this group's ranks, 1/a of the heads
  // (with one ring, a = cp, the unsplit attention over the sequence in global order).
  RingAttention RingLevel(SubgroupComm* ring) const;
  // Where member `member`'s local row i lands in the ring level's rows.
  Index RingLevelRow(int member, Index i) const;
  // This rank's rows [N, Σ widths] of every head (column groups of the given widths: Q K V, or
  // the output) to the ring level's rows of its group [a N, Σ widths / a], this member's 1/a
  // of the heads of each group; and back.
  Tensor SeqToHeads(const Tensor& x, std::span<const Index> widths, RingComm& comm) const;
  Tensor HeadsToSeq(const Tensor& y, std::span<const Index> widths, RingComm& comm) const;
  void AllToAll(RingComm& comm, std::vector<Tensor>& send, std::vector<Tensor>& recv) const;

  Index batch_ = 0;
  Index seq_ = 0;  // local positions (two chunks)
  // Widths: K's (or V's) columns, and a qkv row's.
  Index kv_width() const { return kv_heads_ * head_dim_; }
  Index qkv_width() const { return heads_ * head_dim_ + 2 * kv_width(); }
  // qkv's column groups (Q, K, V) and the output's (one).
  std::array<Index, 3> QkvWidths() const { return {heads_ * head_dim_, kv_width(), kv_width()}; }
  std::array<Index, 1> OutWidths() const { return {heads_ * head_dim_}; }
  // The K/V head of query head `head`.
  Index KvHead(Index head) const { return KvHeadOf(head, heads_, kv_heads_); }

  Index heads_ = 0;
  Index kv_heads_ = 0;
  Index head_dim_ = 0;
  CpContext cp_;
  AttentionDropout dropout_;
};

}  // namespace pipetwin::cpu
