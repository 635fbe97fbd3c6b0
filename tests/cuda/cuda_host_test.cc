// CPU checks of the CUDA backend's host-side parts: the per-element math of every kernel
// (elementwise.h) against the CPU layers, the GEMM call plans (row-major → column-major cuBLAS)
// executed by a naive column-major GEMM against Eigen and the CPU attention, the parameter
// layout against cpu::Chunk's, and the NCCL channel plan of every schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "exec/cpu/chunk.h"
#include "exec/cpu/layers.h"
#include "exec/cpu/optimizer.h"
#include "exec/cuda/elementwise.h"
#include "exec/cuda/gemm_plan.h"
#include "exec/cuda/layout.h"
#include "exec/cuda/p2p_plan.h"
#include "job/job.h"
#include "schedule/build.h"

namespace pipetwin::cuda {
namespace {

using cpu::Accountant;
using cpu::MemCategory;
using cpu::Tensor;

Tensor Random(Accountant& acc, cpu::Index r, cpu::Index c, unsigned seed, float scale = 1.0f) {
  Tensor t(acc, MemCategory::kWorkspace, r, c);
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  for (cpu::Index i = 0; i < t.size(); ++i) t.data()[i] = d(gen);
  return t;
}

TEST(Elementwise, GeluMatchesCpuLayer) {
  Accountant acc;
  Tensor x = Random(acc, 7, 33, 1, 2.0f);
  Tensor dy = Random(acc, 7, 33, 2);
  std::vector<float> xs(x.data(), x.data() + x.size());
  cpu::Gelu gelu;
  cpu::Gelu::Saved s;
  Tensor y = gelu.Forward(cpu::Copy(x), &s);
  Tensor dx = gelu.BackwardInput(dy, &s);
  // The CPU layer evaluates tanh by Eigen's vectorised approximation, within its stated bound
  // (exec/cpu/layers.h: 4e-7 max(1, |x|) for GeLU, 2e-6 max(1, |x|) for GeLU'); the CUDA
  // kernels' host functions use tanhf (a few ulp): they agree within the CPU's bound.
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const float scale = std::max(1.0f, std::abs(xs[i]));
    EXPECT_NEAR(ew::GeluForward(xs[i]), y.data()[i], 4e-7f * scale + 1e-7f) << xs[i];
    EXPECT_NEAR(ew::GeluBackward(xs[i], dy.data()[i]), dx.data()[i],
                (2e-6f * scale + 1e-7f) * std::max(1.0f, std::abs(dy.data()[i])))
        << xs[i];
  }
}

TEST(Elementwise, LayerNormMatchesCpuLayer) {
  Accountant acc;
  const cpu::Index n = 5, h = 48;
  Tensor x = Random(acc, n, h, 3, 3.0f);
  Tensor dy = Random(acc, n, h, 4);
  Tensor gb = Random(acc, 2, h, 5);
  Tensor gg(acc, MemCategory::kWorkspace, 2, h);
  cpu::LayerNorm ln({gb.data(), gg.data(), 1, h}, {gb.data() + h, gg.data() + h, 1, h}, 1e-5f);
  cpu::LayerNorm::Saved s;
  Tensor y = ln.Forward(x, &s);
  Tensor dx = ln.BackwardInput(dy, &s);
  std::vector<float> dgamma(static_cast<std::size_t>(h)), dbeta(static_cast<std::size_t>(h));
  for (cpu::Index r = 0; r < n; ++r) {
    const float* xr = x.data() + r * h;
    const float* dyr = dy.data() + r * h;
    float mean = 0, var = 0;
    for (cpu::Index c = 0; c < h; ++c) mean += xr[c];
    mean /= static_cast<float>(h);
    for (cpu::Index c = 0; c < h; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    const float rstd = ew::LayerNormRstd(var / static_cast<float>(h), 1e-5f);
    float md = 0, mdx = 0;
    for (cpu::Index c = 0; c < h; ++c) {
      const float g = dyr[c] * gb.data()[c];
      md += g;
      mdx += g * ew::LayerNormXhat(xr[c], mean, rstd);
    }
    md /= static_cast<float>(h);
    mdx /= static_cast<float>(h);
    for (cpu::Index c = 0; c < h; ++c) {
      const float xhat = ew::LayerNormXhat(xr[c], mean, rstd);
      EXPECT_NEAR(ew::LayerNormForward(xr[c], mean, rstd, gb.data()[c], gb.data()[h + c]),
                  y.data()[r * h + c], 1e-5f);
      EXPECT_NEAR(ew::LayerNormBackward(dyr[c], gb.data()[c], xhat, rstd, md, mdx),
                  dx.data()[r * h + c], 1e-4f);
      dgamma[static_cast<std::size_t>(c)] += dyr[c] * xhat;
      dbeta[static_cast<std::size_t>(c)] += dyr[c];
    }
  }
  for (cpu::Index c = 0; c < h; ++c) {
    EXPECT_NEAR(dgamma[static_cast<std::size_t>(c)], gg.data()[c], 1e-4f);
    EXPECT_NEAR(dbeta[static_cast<std::size_t>(c)], gg.data()[h + c], 1e-4f);
  }
}

TEST(Elementwise, CrossEntropyMatchesCpuLayer) {
  Accountant acc;
  const cpu::Index batch = 2, seq = 3, v = 11, rows = batch * seq;
  Tensor logits = Random(acc, rows, v, 6, 2.0f);
  std::vector<std::int32_t> labels = {1, 4, 10, 0, 7, 3};
  std::vector<float> l(logits.data(), logits.data() + logits.size());
  cpu::SoftmaxCrossEntropy ce(batch, seq, 0, rows);
  cpu::SoftmaxCrossEntropy::Saved s;
  const float scale = 0.25f;
  const double loss = ce.Forward(cpu::Copy(logits), labels, scale, &s);
  double mine = 0;
  for (cpu::Index r = 0; r < rows; ++r) {
    const float* lr = l.data() + r * v;
    float m = lr[0];
    for (cpu::Index j = 1; j < v; ++j) m = std::max(m, lr[j]);
    float sum = 0;
    for (cpu::Index j = 0; j < v; ++j) sum += ew::Exp(lr[j] - m);
    const float lse = ew::LogSumExp(m, sum);
    const std::int32_t label = labels[static_cast<std::size_t>(ew::TokenIndexOfRow(r, batch, seq))];
    mine += static_cast<double>(ew::CrossEntropyLoss(lse, lr[label]));
    for (cpu::Index j = 0; j < v; ++j) {
      EXPECT_NEAR(ew::CrossEntropyGrad(lr[j], lse, j == label, scale), s.dlogits.data()[r * v + j],
                  1e-6f);
    }
  }
  EXPECT_NEAR(mine, loss, 1e-4);
}

TEST(Elementwise, EmbeddingRowsMatchCpuLayer) {
  Accountant acc;
  const cpu::Index batch = 3, seq = 4, h = 5, v = 9;
  Tensor tok = Random(acc, v, h, 7);
  Tensor pos = Random(acc, seq, h, 8);
  std::vector<std::int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3};
  cpu::Embedding emb({tok.data(), nullptr, v, h}, {pos.data(), nullptr, seq, h}, batch, seq, 2, 8);
  cpu::Embedding::Saved s;
  Tensor y = emb.Forward(tokens, &s, acc);
  for (cpu::Index i = 0; i < 8; ++i) {
    const cpu::Index g = 2 + i;
    const std::int32_t t = tokens[static_cast<std::size_t>(ew::TokenIndexOfRow(g, batch, seq))];
    for (cpu::Index c = 0; c < h; ++c) {
      EXPECT_FLOAT_EQ(ew::EmbeddingForward(tok.data()[t * h + c],
                                           pos.data()[ew::PositionOfRow(g, batch) * h + c]),
                      y.data()[i * h + c]);
    }
  }
}

TEST(Elementwise, AdamAndSgdMatchCpuOptimizers) {
  Accountant acc;
  const std::size_t n = 17;
  std::vector<float> p(n), g(n);
  std::mt19937 gen(9);
  std::normal_distribution<float> d;
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = d(gen);
    g[i] = d(gen);
  }
  std::vector<float> ref = p, mine = p, m(n), v(n);
  cpu::AdamConfig cfg{.lr = 0.01f, .weight_decay = 0.1f};
  cpu::Adam adam(n, cfg, acc);
  for (int t = 1; t <= 3; ++t) {
    adam.Step(ref, g);
    const ew::AdamScalars a{cfg.lr,
                            cfg.beta1,
                            cfg.beta2,
                            cfg.eps,
                            cfg.weight_decay,
                            static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta1), t)),
                            static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta2), t))};
    for (std::size_t i = 0; i < n; ++i) ew::AdamUpdate(mine[i], m[i], v[i], g[i], a);
  }
  for (std::size_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(mine[i], ref[i]);
  std::vector<float> sref = p, smine = p;
  cpu::Sgd sgd(n, cpu::SgdConfig{.lr = 0.1f}, acc);
  sgd.Step(sref, g);
  for (std::size_t i = 0; i < n; ++i) ew::SgdUpdate(smine[i], g[i], 0.1f, 0.0f);
  for (std::size_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(smine[i], sref[i]);
}

TEST(Elementwise, Bf16RoundingIsNearestEven) {
  EXPECT_EQ(ew::RoundToBf16(1.0f), 1.0f);
  EXPECT_EQ(ew::RoundToBf16(1.0f + 0x1.0p-8f), 1.0f);                  // tie → even
  EXPECT_EQ(ew::RoundToBf16(1.0f + 3 * 0x1.0p-8f), 1.0f + 0x1.0p-6f);  // tie → even (up)
  EXPECT_NEAR(ew::RoundToBf16(3.14159f), 3.14159f, 3.14159f * 0x1.0p-8f);
  EXPECT_TRUE(std::isnan(ew::RoundToBf16(std::nanf(""))));
}

// Runs a placed row-major GEMM through its cuBLAS plan on the host.
void RunPlaced(const RowMajorGemm& g, const float* a, const float* b, float* c) {
  Expected<CublasCall> call = PlanGemm(g);
  ASSERT_TRUE(call) << call.error().message;
  ReferenceColumnMajorGemm(*call, b, a, c);
}
void RunPlaced(const PlacedGemm& p, const float* a, const float* b, float* c) {
  RunPlaced(p.g, a + p.a_offset, b + p.b_offset, c + p.c_offset);
}

TEST(GemmPlan, LinearGemmsMatchEigen) {
  Accountant acc;
  const cpu::Index n = 6, in = 5, out = 7;
  Tensor x = Random(acc, n, in, 10), w = Random(acc, in, out, 11), dy = Random(acc, n, out, 12);
  Tensor y(acc, MemCategory::kWorkspace, n, out), dx(acc, MemCategory::kWorkspace, n, in);
  Tensor dw = Random(acc, in, out, 13);
  cpu::RowMatrix<float> dw0 = dw.mat();
  RunPlaced(LinearForwardGemm(n, in, out), x.data(), w.data(), y.data());
  RunPlaced(LinearInputGemm(n, in, out), dy.data(), w.data(), dx.data());
  RunPlaced(LinearWeightGemm(n, in, out), x.data(), dy.data(), dw.data());
  EXPECT_LT((y.mat() - x.mat() * w.mat()).norm(), 1e-5f);
  EXPECT_LT((dx.mat() - dy.mat() * w.mat().transpose()).norm(), 1e-5f);
  EXPECT_LT((dw.mat() - (dw0 + x.mat().transpose() * dy.mat())).norm(), 1e-5f);
}

TEST(GemmPlan, RejectsShortLeadingDimensions) {
  RowMajorGemm g = LinearForwardGemm(4, 3, 2);
  g.lda = 2;
  EXPECT_FALSE(PlanGemm(g));
  g = LinearInputGemm(4, 3, 2);
  g.ldb = 1;
  EXPECT_FALSE(PlanGemm(g));
  g = LinearForwardGemm(4, 3, 2);
  g.ldc = 1;
  EXPECT_FALSE(PlanGemm(g));
  EXPECT_FALSE(PlanGemm(RowMajorGemm{}));
}

// The CUDA chunk's attention (its GEMM plans + the per-element softmax) against the CPU layer.
TEST(GemmPlan, AttentionSequenceMatchesCpuAttention) {
  Accountant acc;
  const AttentionShape sh{.batch = 2, .seq = 5, .heads = 3, .head_dim = 4};
  const cpu::Index n = sh.batch * sh.seq, hl = sh.hl(), S = sh.seq;
  Tensor qkv = Random(acc, n, 3 * hl, 14);
  Tensor dout = Random(acc, n, hl, 15);
  cpu::CausalSelfAttention attn(sh.batch, sh.seq, sh.heads, sh.head_dim);
  cpu::CausalSelfAttention::Saved s;
  Tensor out = attn.Forward(cpu::Copy(qkv), &s);
  Tensor ref_probs = cpu::Copy(s.probs);
  Tensor dqkv = attn.BackwardInput(dout, &s);

  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
  std::vector<float> probs(static_cast<std::size_t>(sh.batch * sh.heads * S * S));
  std::vector<float> o(static_cast<std::size_t>(n * hl)), d(static_cast<std::size_t>(n * 3 * hl));
  std::vector<float> dp(static_cast<std::size_t>(sh.heads * S * S));
  auto softmax_rows = [&](float* rows_begin, cpu::Index rows) {
    for (cpu::Index r = 0; r < rows; ++r) {
      float* row = rows_begin + r * S;
      const cpu::Index q = r % S;
      float m = -INFINITY, sum = 0;
      for (cpu::Index j = 0; j <= q; ++j) m = std::max(m, row[j] * scale);
      for (cpu::Index j = 0; j <= q; ++j) sum += ew::SoftmaxNumerator(row[j], scale, m);
      for (cpu::Index j = 0; j < S; ++j) {
        row[j] = ew::CausalMasked(q, j) ? 0.0f : ew::SoftmaxNumerator(row[j], scale, m) / sum;
      }
    }
  };
  for (cpu::Index b = 0; b < sh.batch; ++b)
    RunPlaced(ScoresGemm(sh, b), qkv.data(), qkv.data(), probs.data());
  softmax_rows(probs.data(), sh.batch * sh.heads * S);
  for (cpu::Index b = 0; b < sh.batch; ++b)
    RunPlaced(AttnOutGemm(sh, b), probs.data(), qkv.data(), o.data());
  for (cpu::Index b = 0; b < sh.batch; ++b) {
    RunPlaced(GradVGemm(sh, b), probs.data(), dout.data(), d.data());
    RunPlaced(GradProbsGemm(sh, b), dout.data(), qkv.data(), dp.data());
    const float* p = probs.data() + b * sh.heads * S * S;
    for (cpu::Index r = 0; r < sh.heads * S; ++r) {
      float dot = 0;
      for (cpu::Index j = 0; j < S; ++j)
        dot += p[r * S + j] * dp[static_cast<std::size_t>(r * S + j)];
      for (cpu::Index j = 0; j < S; ++j) {
        float& x = dp[static_cast<std::size_t>(r * S + j)];
        x = ew::SoftmaxBackward(p[r * S + j], x, dot, scale);
      }
    }
    RunPlaced(GradQGemm(sh, b), dp.data(), qkv.data(), d.data());
    RunPlaced(GradKGemm(sh, b), dp.data(), qkv.data(), d.data());
  }
  for (std::size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(probs[i], ref_probs.data()[i], 1e-5f);
  for (std::size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(o[i], out.data()[i], 1e-5f);
  for (std::size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(d[i], dqkv.data()[i], 1e-5f);
}

TEST(Layout, EqualsCpuChunkLayout) {
  cpu::ModelConfig model;
  // tp = 1 only: the CPU chunk needs a live TP group for tp > 1 (both use ParamLayoutBuilder).
  const cpu::TpConfig tp;
  {
    for (const cpu::ChunkSpec spec :
         {cpu::ChunkSpec{0, 2, true, false}, cpu::ChunkSpec{2, 2, false, true}}) {
      Accountant acc;
      cpu::Chunk chunk(model, spec, tp, acc);
      const cpu::ParamLayout mine = ChunkParamLayout(model, spec, tp);
      ASSERT_EQ(mine.params.size(), chunk.layout().params.size());
      EXPECT_EQ(mine.total, chunk.layout().total);
      EXPECT_EQ(mine.replicated, chunk.layout().replicated);
      for (std::size_t i = 0; i < mine.params.size(); ++i) {
        EXPECT_EQ(mine.params[i].name, chunk.layout().params[i].name);
        EXPECT_EQ(mine.params[i].offset, chunk.layout().params[i].offset);
        EXPECT_EQ(mine.params[i].size(), chunk.layout().params[i].size());
      }
    }
  }
}

TEST(P2pPlan, EveryScheduleHasOneOrderedChannelPerDirectionAndKind) {
  for (const char* sched :
       {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev"}) {
    const std::string name = sched;
    const int vpp = name == "interleaved-1f1b" || name == "zbv" || name == "dualpipev" ? 2 : 1;
    const std::string yaml =
        std::string("schedule: ") + sched +
        "\nmicrobatches: 8\nparallel: {pp: 4, vpp: " + std::to_string(vpp) +
        ", dp: 1, tp: 1}\ncosts: {forward_ms: 1, backward_input_ms: 1, backward_weight_ms: 1}\n";
    Expected<ResolvedJob> job = ParseJob(yaml, "test.yaml");
    ASSERT_TRUE(job) << sched << ": " << job.error().message;
    const Schedule* s = &job->schedule;
    const P2pPlan plan = P2pPlan::Build(*s);
    std::size_t recvs = 0;
    for (const auto& prog : s->programs) {
      for (const Action& a : prog) {
        if (a.kind != ActionKind::kRecvF && a.kind != ActionKind::kRecvB) continue;
        ++recvs;
        const P2pPlan::Slot slot = plan.RecvSlot(a);
        const Channel& c = plan.channels()[static_cast<std::size_t>(slot.channel)];
        EXPECT_EQ(c.order[static_cast<std::size_t>(slot.position)], a);
        EXPECT_NE(c.sender, c.receiver);
        EXPECT_EQ(c.forward, a.kind == ActionKind::kRecvF);
      }
    }
    std::size_t total = 0;
    for (const Channel& c : plan.channels()) total += c.order.size();
    EXPECT_EQ(total, recvs) << sched;
    // The sender's order: each channel lists its receives in the sender's program order.
    for (const Channel& c : plan.channels()) {
      std::vector<Action> sent;
      for (const Action& a : s->programs[static_cast<std::size_t>(c.sender)]) {
        if ((a.kind == ActionKind::kSendF && c.forward) ||
            (a.kind == ActionKind::kSendB && !c.forward)) {
          const Action r = P2pPlan::MatchingRecv(a);
          if (s->stage_to_rank[static_cast<std::size_t>(r.stage)] == c.receiver) sent.push_back(r);
        }
      }
      EXPECT_EQ(sent, c.order) << sched;
    }
  }
}

}  // namespace
}  // namespace pipetwin::cuda
