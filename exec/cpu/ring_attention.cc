#include "exec/cpu/ring_attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>

#include "exec/cpu/gemm.h"
#include "exec/cpu/layers.h"

namespace pipetwin::cpu {

namespace {

constexpr int kKvTag = 0;   // K and V blocks (forward and backward)
constexpr int kDkvTag = 1;  // partial sums of dK and dV (backward)
constexpr int kA2aTag = 2;  // Ulysses' all-to-alls
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Tensor NewLike(const Tensor& like, Index rows, Index cols) {
  assert(like.accountant() != nullptr);
  return Tensor(*like.accountant(), MemCategory::kWorkspace, rows, cols);
}

// The K and V columns of qkv [N, hl + 2 w] (w = hl, or kv d under grouped-query attention)
// packed into one contiguous [N, 2 w] block (the message a rank sends).
Tensor PackKv(const Tensor& qkv, Index w) {
  Tensor kv = NewLike(qkv, qkv.rows(), 2 * w);
  kv.mat() = qkv.mat().rightCols(2 * w);
  return kv;
}

// How a key chunk relates to a query chunk (global chunk indices) under the causal mask.
enum class Pair { kSkip, kDiagonal, kFull };
Pair Relation(Index query_chunk, Index key_chunk) {
  if (key_chunk > query_chunk) return Pair::kSkip;
  return key_chunk == query_chunk ? Pair::kDiagonal : Pair::kFull;
}

// Global chunk index of a rank's local half (0: chunk rank, 1: chunk 2cp − 1 − rank).
Index GlobalChunk(const CpConfig& cp, int rank, int half) {
  return half == 0 ? rank : 2 * cp.size - 1 - rank;
}

}  // namespace

SubgroupComm::SubgroupComm(RingComm* parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)) {
  const auto it = std::find(members_.begin(), members_.end(), parent->rank());
  assert(it != members_.end());
  rank_ = static_cast<int>(it - members_.begin());
}

void RingAttention::ForwardBlock(const Tensor& qkv, const float* kv, Index kv_row, int src,
                                 std::uint64_t dropout_key, Tensor& m, Tensor& l,
                                 Tensor& acc) const {
  const Index hl = heads_ * head_dim_;
  const Index c = seq_ / 2;  // positions per chunk
  const Index bs = std::min(c, kBlock);
  const Index ld_q = batch_ * qkv_width();
  const Index ld_kv = batch_ * kv_row;
  const Index ld_o = batch_ * hl;
  const Index ld_s = batch_ * heads_;  // m, l: [N, heads]
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  RowMatrix<float> sc(bs, bs);
  const bool drop = dropout_.active();
  Eigen::RowVectorXf mask(drop ? bs : 0);
  for (int qh = 0; qh < 2; ++qh) {
    for (int kh = 0; kh < 2; ++kh) {
      const Index query_chunk = GlobalChunk(cp_.cfg, cp_.cfg.rank, qh);
      const Index key_chunk = GlobalChunk(cp_.cfg, src, kh);
      const Pair pair = Relation(query_chunk, key_chunk);
      if (pair == Pair::kSkip) continue;
      const bool masked = pair == Pair::kDiagonal && !cp_.unmasked_diagonal;
      for (Index b = 0; b < batch_; ++b) {
        for (Index hd = 0; hd < heads_; ++hd) {
          for (Index qi = 0; qi < c; qi += bs) {
            const Index qn = std::min(bs, c - qi);
            const Index qrow = (qh * c + qi) * batch_ + b;
            const float* q = qkv.data() + qrow * qkv_width() + hd * head_dim_;
            float* o = acc.data() + qrow * hl + hd * head_dim_;
            float* mr = m.data() + qrow * heads_ + hd;
            float* lr = l.data() + qrow * heads_ + hd;
            // Key blocks after the query block are masked whole: skipped.
            for (Index ki = 0; ki < c && (!masked || ki <= qi); ki += bs) {
              const Index kn = std::min(bs, c - ki);
              const bool triangle = masked && ki == qi;
              const float* k = kv + ((kh * c + ki) * batch_ + b) * kv_row + KvHead(hd) * head_dim_;
              const float* v = k + kv_width();
              Gemm(Trans::kNo, Trans::kYes, qn, kn, head_dim_, scale, q, ld_q, k, ld_kv, 0.0f,
                   sc.data(), bs);
              for (Index i = 0; i < qn; ++i) {
                const Index keys = triangle ? i + 1 : kn;
                auto row = sc.row(i).head(kn);
                const float old_m = mr[i * ld_s];
                const float new_m = std::max(old_m, row.head(keys).maxCoeff());
                const float alpha = old_m == kNegInf ? 0.0f : std::exp(old_m - new_m);
                row.head(keys) = (row.head(keys).array() - new_m).exp().matrix();
                row.tail(kn - keys).setZero();
                lr[i * ld_s] = lr[i * ld_s] * alpha + row.head(keys).sum();
                mr[i * ld_s] = new_m;
                Eigen::Map<Eigen::RowVectorXf>(o + i * ld_o, head_dim_) *= alpha;
                if (drop) {  // the sum above is of the undropped P; acc gathers dropout(P) V
                  dropout_.Row(dropout_key, b, hd, seq_ * cp_.cfg.size, query_chunk * c + qi + i,
                               key_chunk * c + ki, kn, mask.data());
                  row.array() *= mask.head(kn).array();
                }
              }
              // acc += P V
              Gemm(Trans::kNo, Trans::kNo, qn, head_dim_, kn, 1.0f, sc.data(), bs, v, ld_kv, 1.0f,
                   o, ld_o);
            }
          }
        }
      }
    }
  }
}

Tensor RingAttention::AllGatherKv(const Tensor& kv) const {
  const int cp = cp_.cfg.size;
  const int me = cp_.cfg.rank;
  const auto block = static_cast<std::size_t>(kv.size());
  Tensor all = NewLike(kv, cp * kv.rows(), kv.cols());
  const auto part = [&](int rank) {
    return all.span().subspan(static_cast<std::size_t>(rank) * block, block);
  };
  std::copy_n(kv.data(), block, part(me).data());
  // Step i passes on the block of rank (me − i) and receives that of rank (me − i − 1).
  for (int i = 0; i + 1 < cp; ++i) {
    const int hs = cp_.comm->SendNext(part((me - i + cp) % cp), kKvTag);
    const int hr = cp_.comm->RecvPrev(part((me - i - 1 + cp) % cp), kKvTag);
    cp_.comm->Wait(hs);
    cp_.comm->Wait(hr);
  }
  return all;
}

Tensor RingAttention::ReduceScatterKv(Tensor& all) const {
  const int cp = cp_.cfg.size;
  const int me = cp_.cfg.rank;
  const Index rows = all.rows() / cp;
  const auto block = static_cast<std::size_t>(rows * all.cols());
  const auto part = [&](int rank) {
    return all.span().subspan(static_cast<std::size_t>(rank) * block, block);
  };
  // Step i sends this rank's running sum for the block of rank (me − i − 1) and adds the
  // previous rank's for rank (me − i − 2) to its own; after cp − 1 steps the sum that arrives
  // last is for this rank's block, with every other rank's contribution in it.
  Tensor in = NewLike(all, rows, all.cols());
  for (int i = 0; i + 1 < cp; ++i) {
    const int hs = cp_.comm->SendNext(part((me - i - 1 + cp) % cp), kDkvTag);
    const int hr = cp_.comm->RecvPrev(in.span(), kDkvTag);
    cp_.comm->Wait(hs);
    cp_.comm->Wait(hr);
    const std::span<float> mine = part((me - i - 2 + 2 * cp) % cp);
    for (std::size_t k = 0; k < block; ++k) mine[k] += in.data()[k];
  }
  Tensor own = NewLike(all, rows, all.cols());
  std::copy_n(part(me).data(), block, own.data());
  return own;
}

RingAttention::Levels RingAttention::MakeLevels() const {
  const int cp = cp_.cfg.size;
  const int me = cp_.cfg.rank;
  const int a = cp_.cfg.AllToAllRanks();
  const int group = me / a, k = me % a;
  std::vector<int> a2a, ring;
  for (int j = 0; j < a; ++j) a2a.push_back(group * a + j);
  for (int j = 0; j < cp / a; ++j) ring.push_back(j * a + k);
  return {.a2a = SubgroupComm(cp_.comm, std::move(a2a)),
          .ring = SubgroupComm(cp_.comm, std::move(ring))};
}

RingAttention RingAttention::RingLevel(SubgroupComm* ring) const {
  const int a = cp_.cfg.AllToAllRanks();
  // This rank's share of the heads is the (rank mod a)-th of its all-to-all group's (SeqToHeads):
  // query heads [m h/a, (m + 1) h/a) and K/V heads [m kv/a, (m + 1) kv/a), the ones those query
  // heads read (h/a is a whole number of groups of h/kv), so the share is grouped as the whole.
  assert(heads_ % a == 0 && kv_heads_ % a == 0);
  return RingAttention(batch_, seq_ * a, heads_ / a, head_dim_,
                       CpContext{{.size = ring->size(), .rank = ring->rank()},
                                 ring->size() > 1 ? ring : nullptr,
                                 cp_.unmasked_diagonal},
                       dropout_.Share(heads_, a, cp_.cfg.rank % a), kv_heads_ / a);
}

Index RingAttention::RingLevelRow(int member, Index i) const {
  // Member `member` of this rank's all-to-all group is CP rank group · a + member; its local
  // row i holds position t = i / batch of its two chunks. The ring level's rank `group` holds
  // super-chunks group and 2R − 1 − group of a · c positions (R = cp / a rings, c = the
  // chunk): the union of its group's chunks, the balanced split over R ranks again.
  const int cp = cp_.cfg.size;
  const Index a = cp_.cfg.AllToAllRanks(), rings = cp / a;
  const Index group = cp_.cfg.rank / a;
  const Index seq = seq_ * cp, chunk = a * (seq / (2 * cp));
  const CpConfig from{.size = cp, .rank = static_cast<int>(group * a + member)};
  const Index g = CpGlobalPosition(from, seq, i / batch_);
  const Index local =
      g / chunk == group ? g - group * chunk : chunk + g - (2 * rings - 1 - group) * chunk;
  return local * batch_ + i % batch_;
}

void RingAttention::AllToAll(RingComm& comm, std::vector<Tensor>& send,
                             std::vector<Tensor>& recv) const {
  const int n = comm.size();
  const int me = comm.rank();
  std::vector<int> handles;
  for (int k = 1; k < n; ++k) {
    const int dst = (me + k) % n;
    const int src = (me - k + n) % n;
    handles.push_back(comm.SendTo(dst, send[static_cast<std::size_t>(dst)].span(), kA2aTag));
    handles.push_back(comm.RecvFrom(src, recv[static_cast<std::size_t>(src)].span(), kA2aTag));
  }
  for (const int h : handles) comm.Wait(h);
}

Tensor RingAttention::SeqToHeads(const Tensor& x, std::span<const Index> widths,
                                 RingComm& comm) const {
  const int a = comm.size();
  const int me = comm.rank();
  const Index n = x.rows();
  Index cols = 0;
  for (const Index w : widths) cols += w / a;
  assert(cols * a == x.cols());
  std::vector<Tensor> send, recv;
  for (int d = 0; d < a; ++d) {  // to member d: this rank's rows, member d's heads of each group
    send.emplace_back(*x.accountant(), MemCategory::kWorkspace, n, cols, Uninitialized{});
    Index from = 0, to = 0;
    for (const Index w : widths) {
      const Index ws = w / a;
      send.back().mat().middleCols(to, ws) = x.mat().middleCols(from + d * ws, ws);
      from += w;
      to += ws;
    }
    recv.push_back(d == me ? Tensor() : NewLike(x, n, cols));
  }
  AllToAll(comm, send, recv);
  Tensor out(*x.accountant(), MemCategory::kWorkspace, a * n, cols, Uninitialized{});
  for (int src = 0; src < a; ++src) {  // member src's rows to their places on the ring level
    const Tensor& part =
        src == me ? send[static_cast<std::size_t>(me)] : recv[static_cast<std::size_t>(src)];
    for (Index i = 0; i < n; ++i) out.mat().row(RingLevelRow(src, i)) = part.mat().row(i);
  }
  return out;
}

Tensor RingAttention::HeadsToSeq(const Tensor& y, std::span<const Index> widths,
                                 RingComm& comm) const {
  const int a = comm.size();
  const int me = comm.rank();
  const Index n = y.rows() / a;
  Index total = 0;
  for (const Index w : widths) total += w;
  assert(total == y.cols() * a);
  std::vector<Tensor> send, recv;
  for (int d = 0; d < a; ++d) {  // to member d: its rows, this rank's heads
    send.emplace_back(*y.accountant(), MemCategory::kWorkspace, n, y.cols(), Uninitialized{});
    for (Index i = 0; i < n; ++i) send.back().mat().row(i) = y.mat().row(RingLevelRow(d, i));
    recv.push_back(d == me ? Tensor() : NewLike(y, n, y.cols()));
  }
  AllToAll(comm, send, recv);
  Tensor out(*y.accountant(), MemCategory::kWorkspace, n, total, Uninitialized{});
  for (int src = 0; src < a; ++src) {  // member src's heads of this rank's rows
    const Tensor& part =
        src == me ? send[static_cast<std::size_t>(me)] : recv[static_cast<std::size_t>(src)];
    Index from = 0, to = 0;
    for (const Index w : widths) {
      const Index ws = w / a;
      out.mat().middleCols(to + src * ws, ws) = part.mat().middleCols(from, ws);
      from += ws;
      to += w;
    }
  }
  return out;
}

Tensor RingAttention::Forward(Tensor qkv, Saved* s, std::uint64_t dropout_key) const {
  const Index hl = heads_ * head_dim_;
  const Index n = batch_ * seq_;
  const int cp = cp_.cfg.size;
  const int me = cp_.cfg.rank;
  const Index w = kv_width();
  assert(qkv.rows() == n && qkv.cols() == qkv_width());
  assert(cp == 1 || (cp_.comm != nullptr && cp_.comm->size() == cp && cp_.comm->rank() == me));
  if (cp > 1 && cp_.cfg.exchange == CpExchange::kAllToAll) {
    Levels levels = MakeLevels();
    Tensor heads = SeqToHeads(qkv, QkvWidths(), levels.a2a);
    qkv.Reset();
    return HeadsToSeq(RingLevel(&levels.ring).Forward(std::move(heads), s, dropout_key),
                      OutWidths(), levels.a2a);
  }
  // With a ring, K and V travel packed; without, they are read in place in qkv. (No buffer that
  // is not needed: a large one is fresh pages, and page faults cost more than the copies.)
  const bool gather = cp > 1 && cp_.cfg.exchange == CpExchange::kAllGather;
  Tensor kv = cp > 1 ? PackKv(qkv, w) : Tensor();
  Tensor next = cp > 1 && !gather ? NewLike(qkv, n, 2 * w) : Tensor();
  Tensor acc = NewLike(qkv, n, hl);
  Tensor m = NewLike(qkv, n, heads_);
  Tensor l = NewLike(qkv, n, heads_);
  m.mat().setConstant(kNegInf);
  if (gather) {  // every block first, then the attention to each
    const Tensor all = AllGatherKv(kv);
    kv.Reset();
    for (int src = 0; src < cp; ++src) {
      ForwardBlock(qkv, all.data() + src * n * 2 * w, 2 * w, src, dropout_key, m, l, acc);
    }
  }
  for (int i = 0; i < cp && !gather; ++i) {
    const bool more = i + 1 < cp;
    int hs = -1, hr = -1;
    if (more) {  // the next block is on its way while this one is computed
      hs = cp_.comm->SendNext(kv.span(), kKvTag);
      hr = cp_.comm->RecvPrev(next.span(), kKvTag);
    }
    if (cp > 1) {
      ForwardBlock(qkv, kv.data(), 2 * w, (me - i + cp) % cp, dropout_key, m, l, acc);
    } else {
      ForwardBlock(qkv, qkv.data() + hl, qkv_width(), me, dropout_key, m, l, acc);
    }
    if (more) {
      cp_.comm->Wait(hs);
      cp_.comm->Wait(hr);
      std::swap(kv, next);
    }
  }
  // out = acc / l; lse = m + log(l).
  Tensor out = NewLike(qkv, n, hl);
  Tensor lse = NewLike(qkv, n, heads_);
  for (Index r = 0; r < n; ++r) {
    for (Index hd = 0; hd < heads_; ++hd) {
      const float sum = l.data()[r * heads_ + hd];
      out.mat().row(r).segment(hd * head_dim_, head_dim_) =
          acc.mat().row(r).segment(hd * head_dim_, head_dim_) / sum;
      lse.data()[r * heads_ + hd] = m.data()[r * heads_ + hd] + std::log(sum);
    }
  }
  s->qkv = Keep(std::move(qkv));
  s->out = Keep(Copy(out));
  s->lse = Keep(std::move(lse));
  s->dropout_key = dropout_key;
  return out;
}

void RingAttention::BackwardBlock(const Saved& s, const Tensor& dout, const Tensor& delta,
                                  const float* kv, Index kv_row, int src, Tensor& dqkv,
                                  float* dkv) const {
  const Index hl = heads_ * head_dim_;
  const Index c = seq_ / 2;
  const Index bs = std::min(c, kBlock);
  const Index ld_q = batch_ * qkv_width();
  const Index ld_kv = batch_ * kv_row;  // K, V and their gradients alike
  const Index ld_o = batch_ * hl;
  const Index ld_s = batch_ * heads_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  RowMatrix<float> p(bs, bs), dp(bs, bs);
  // With dropout: the block's masks and dropout(P).
  const bool drop = dropout_.active();
  RowMatrix<float> mask(drop ? bs : 0, drop ? bs : 0), dropped(drop ? bs : 0, drop ? bs : 0);
  for (int qh = 0; qh < 2; ++qh) {
    for (int kh = 0; kh < 2; ++kh) {
      const Index query_chunk = GlobalChunk(cp_.cfg, cp_.cfg.rank, qh);
      const Index key_chunk = GlobalChunk(cp_.cfg, src, kh);
      const Pair pair = Relation(query_chunk, key_chunk);
      if (pair == Pair::kSkip) continue;
      const bool masked = pair == Pair::kDiagonal && !cp_.unmasked_diagonal;
      for (Index b = 0; b < batch_; ++b) {
        for (Index hd = 0; hd < heads_; ++hd) {
          for (Index qi = 0; qi < c; qi += bs) {
            const Index qn = std::min(bs, c - qi);
            const Index qrow = (qh * c + qi) * batch_ + b;
            const float* q = s.qkv.data() + qrow * qkv_width() + hd * head_dim_;
            const float* dor = dout.data() + qrow * hl + hd * head_dim_;
            const float* lse = s.lse.data() + qrow * heads_ + hd;
            const float* dlt = delta.data() + qrow * heads_ + hd;
            float* dq = dqkv.data() + qrow * qkv_width() + hd * head_dim_;
            for (Index ki = 0; ki < c && (!masked || ki <= qi); ki += bs) {
              const Index kn = std::min(bs, c - ki);
              const bool triangle = masked && ki == qi;
              const Index krow = (kh * c + ki) * batch_ + b;
              // A K/V head's gradients gather every query head of its group.
              const float* k = kv + krow * kv_row + KvHead(hd) * head_dim_;
              const float* v = k + kv_width();
              float* dk = dkv + krow * kv_row + KvHead(hd) * head_dim_;
              float* dv = dk + kv_width();
              // P = exp(scale Q K^T − lse), the causal triangle on the diagonal block.
              Gemm(Trans::kNo, Trans::kYes, qn, kn, head_dim_, scale, q, ld_q, k, ld_kv, 0.0f,
                   p.data(), bs);
              for (Index i = 0; i < qn; ++i) {
                const Index keys = triangle ? i + 1 : kn;
                auto row = p.row(i).head(kn);
                row.head(keys) = (row.head(keys).array() - lse[i * ld_s]).exp().matrix();
                row.tail(kn - keys).setZero();
              }
              const float* pv = p.data();  // what multiplied V: P, or dropout(P)
              if (drop) {
                for (Index i = 0; i < qn; ++i) {
                  dropout_.Row(s.dropout_key, b, hd, seq_ * cp_.cfg.size, query_chunk * c + qi + i,
                               key_chunk * c + ki, kn, mask.data() + i * bs);
                  dropped.row(i).head(kn) =
                      (mask.row(i).head(kn).array() * p.row(i).head(kn).array()).matrix();
                }
                pv = dropped.data();
              }
              // dV += P^T dOut; dP = dOut V^T (through the mask with dropout).
              Gemm(Trans::kYes, Trans::kNo, kn, head_dim_, qn, 1.0f, pv, bs, dor, ld_o, 1.0f, dv,
                   ld_kv);
              Gemm(Trans::kNo, Trans::kYes, qn, kn, head_dim_, 1.0f, dor, ld_o, v, ld_kv, 0.0f,
                   dp.data(), bs);
              if (drop) {
                for (Index i = 0; i < qn; ++i) {
                  dp.row(i).head(kn).array() *= mask.row(i).head(kn).array();
                }
              }
              // dS = P (dP − rowsum(dOut ∘ Out)), through the 1/sqrt(d) of the scores.
              for (Index i = 0; i < qn; ++i) {
                dp.row(i).head(kn) = (p.row(i).head(kn).array() *
                                      (dp.row(i).head(kn).array() - dlt[i * ld_s]) * scale)
                                         .matrix();
              }
              // dQ += dS K; dK += dS^T Q.
              Gemm(Trans::kNo, Trans::kNo, qn, head_dim_, kn, 1.0f, dp.data(), bs, k, ld_kv, 1.0f,
                   dq, ld_q);
              Gemm(Trans::kYes, Trans::kNo, kn, head_dim_, qn, 1.0f, dp.data(), bs, q, ld_q, 1.0f,
                   dk, ld_kv);
            }
          }
        }
      }
    }
  }
}

Tensor RingAttention::BackwardInput(const Tensor& dout, Saved* s) const {
  const Index hl = heads_ * head_dim_;
  const Index n = batch_ * seq_;
  const int cp = cp_.cfg.size;
  const int me = cp_.cfg.rank;
  const Index w = kv_width();
  assert(dout.rows() == n && dout.cols() == hl);
  if (cp > 1 && cp_.cfg.exchange == CpExchange::kAllToAll) {
    Levels levels = MakeLevels();
    const Tensor dheads = SeqToHeads(dout, OutWidths(), levels.a2a);
    return HeadsToSeq(RingLevel(&levels.ring).BackwardInput(dheads, s), QkvWidths(), levels.a2a);
  }
  // delta = rowsum(dOut ∘ Out) per row and head (the softmax backward's correction).
  Tensor delta = NewLike(dout, n, heads_);
  for (Index r = 0; r < n; ++r) {
    for (Index hd = 0; hd < heads_; ++hd) {
      delta.data()[r * heads_ + hd] =
          dout.mat()
              .row(r)
              .segment(hd * head_dim_, head_dim_)
              .dot(s->out.mat().row(r).segment(hd * head_dim_, head_dim_));
    }
  }
  Tensor dqkv = NewLike(dout, n, qkv_width());
  if (cp > 1 && cp_.cfg.exchange == CpExchange::kAllGather) {
    Tensor all = AllGatherKv(PackKv(s->qkv, w));
    Tensor dall = NewLike(dout, cp * n, 2 * w);  // zeroed
    for (int src = 0; src < cp; ++src) {
      const Index off = src * n * 2 * w;
      BackwardBlock(*s, dout, delta, all.data() + off, 2 * w, src, dqkv, dall.data() + off);
    }
    all.Reset();
    dqkv.mat().rightCols(2 * w) = ReduceScatterKv(dall).mat();
    s->qkv.Reset();
    s->out.Reset();
    s->lse.Reset();
    return dqkv;
  }
  // Without a ring K and V are read, and dK and dV written, in place (in qkv and dqkv).
  Tensor kv = cp > 1 ? PackKv(s->qkv, w) : Tensor();
  Tensor own = cp > 1 ? NewLike(dout, n, 2 * w) : Tensor();  // this rank's part of its dK, dV
  // The ring's buffers, only with a ring. Step i >= 1 computes into part[i % 2] and sends it
  // on; the partial sum for the step after is received into recv[(i + 1) % 2] meanwhile.
  const auto ring_buffer = [&] { return cp > 1 ? NewLike(dout, n, 2 * w) : Tensor(); };
  Tensor next = ring_buffer();
  Tensor part[2] = {ring_buffer(), ring_buffer()};
  Tensor recv[2] = {ring_buffer(), ring_buffer()};
  int sent[2] = {-1, -1};
  int received[2] = {-1, -1};
  for (int i = 0; i < cp; ++i) {
    const bool more = i + 1 < cp;
    int hs = -1, hr = -1;
    if (more) {
      hs = cp_.comm->SendNext(kv.span(), kKvTag);
      hr = cp_.comm->RecvPrev(next.span(), kKvTag);
    }
    if (i + 1 >= 2) received[(i + 1) % 2] = cp_.comm->RecvPrev(recv[(i + 1) % 2].span(), kDkvTag);
    Tensor* target = &own;
    if (i >= 1) {
      target = &part[i % 2];
      if (sent[i % 2] >= 0) cp_.comm->Wait(std::exchange(sent[i % 2], -1));
      target->mat().setZero();
    }
    if (cp > 1) {
      BackwardBlock(*s, dout, delta, kv.data(), 2 * w, (me - i + cp) % cp, dqkv, target->data());
    } else {
      BackwardBlock(*s, dout, delta, s->qkv.data() + hl, qkv_width(), me, dqkv, dqkv.data() + hl);
    }
    if (i >= 1) {
      if (i >= 2) {
        cp_.comm->Wait(std::exchange(received[i % 2], -1));
        target->mat() += recv[i % 2].mat();
      }
      sent[i % 2] = cp_.comm->SendNext(target->span(), kDkvTag);
    }
    if (more) {
      cp_.comm->Wait(hs);
      cp_.comm->Wait(hr);
      std::swap(kv, next);
    }
  }
  if (cp > 1) {  // the other ranks' contributions to this rank's block, after cp − 1 hops
    cp_.comm->Wait(std::exchange(received[cp % 2], -1));
    own.mat() += recv[cp % 2].mat();
  }
  for (int& h : sent) {
    if (h >= 0) cp_.comm->Wait(std::exchange(h, -1));
  }
  if (cp > 1) dqkv.mat().rightCols(2 * w) = own.mat();
  s->qkv.Reset();
  s->out.Reset();
  s->lse.Reset();
  return dqkv;
}

}  // namespace pipetwin::cpu
