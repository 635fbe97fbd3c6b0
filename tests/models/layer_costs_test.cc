#include "models/layer_costs.h"

#include <gtest/gtest.h>

namespace pipetwin::models {
namespace {

ModelConfig Gpt3_175b() { return *FindPreset("gpt3-175b"); }

TrainingConfig Training(Recompute r, int micro_batch = 1) {
  TrainingConfig t;
  t.micro_batch = micro_batch;
  t.recompute = r;
  return t;  // bf16, unfused attention: Korthikanti et al. 2022's setting
}

// Korthikanti et al. 2022, Table 2: activation bytes per layer, 16-bit.
class ActivationTest : public ::testing::Test {
 protected:
  ModelConfig m = Gpt3_175b();
  double s = m.seq_len, h = m.hidden, a = m.heads, b = 2;
  double sbh = s * b * h;
};

TEST_F(ActivationTest, NoParallelism) {
  const auto inv = DecoderLayerActivations(m, Training(Recompute::kNone, 2), Sharding{});
  EXPECT_DOUBLE_EQ(inv.inflight, sbh * (34 + 5 * a * s / h));
}

TEST_F(ActivationTest, TensorParallel) {
  for (double t : {2.0, 4.0, 8.0}) {
    const auto inv = DecoderLayerActivations(m, Training(Recompute::kNone, 2),
                                             Sharding{static_cast<int>(t), false, 1});
    EXPECT_DOUBLE_EQ(inv.inflight, sbh * (10 + 24 / t + 5 * a * s / (h * t))) << t;
  }
}

TEST_F(ActivationTest, TensorAndSequenceParallel) {
  const double t = 8;
  const auto inv = DecoderLayerActivations(m, Training(Recompute::kNone, 2), Sharding{8, true, 1});
  EXPECT_DOUBLE_EQ(inv.inflight, sbh * (34 / t + 5 * a * s / (h * t)));
}

TEST_F(ActivationTest, SelectiveRecompute) {
  const double t = 8;
  const auto inv =
      DecoderLayerActivations(m, Training(Recompute::kSelective, 2), Sharding{8, true, 1});
  EXPECT_DOUBLE_EQ(inv.inflight, 34 * sbh / t);
  // Without parallelism the same as no recompute minus the scores.
  const auto one = DecoderLayerActivations(m, Training(Recompute::kSelective, 2), Sharding{});
  EXPECT_DOUBLE_EQ(one.inflight, 34 * sbh);
  // The unfused core's scores are rebuilt one layer at a time during I: the 5as/h of
  // Korthikanti's count live for that layer's backward (a random sweep found selective
  // recompute's peak under full recompute's, which counts them). Flash attention keeps none.
  EXPECT_DOUBLE_EQ(inv.transient, 5 * a * s * sbh / (h * t));
  EXPECT_DOUBLE_EQ(one.transient, 5 * a * s * sbh / h);
}

TEST_F(ActivationTest, FullRecompute) {
  const auto inv = DecoderLayerActivations(m, Training(Recompute::kFull, 2), Sharding{});
  EXPECT_DOUBLE_EQ(inv.inflight, 2 * sbh);
  // The layer is rebuilt during I: its full inventory but the stored input (2sbh) is a
  // transient working set.
  EXPECT_DOUBLE_EQ(inv.transient, sbh * (34 - 2 + 5 * a * s / h));
  // Under sp the stored input is sequence-sharded.
  const auto sp = DecoderLayerActivations(m, Training(Recompute::kFull, 2), Sharding{8, true, 1});
  EXPECT_DOUBLE_EQ(sp.inflight, 2 * sbh / 8);
  // Without sp the input is replicated over tp (Korthikanti's Table 2 row).
  const auto tp = DecoderLayerActivations(m, Training(Recompute::kFull, 2), Sharding{8, false, 1});
  EXPECT_DOUBLE_EQ(tp.inflight, 2 * sbh);
}

TEST_F(ActivationTest, ContextParallelSplitsTheSequence) {
  const auto base =
      DecoderLayerActivations(m, Training(Recompute::kSelective, 2), Sharding{8, true, 1});
  const auto cp =
      DecoderLayerActivations(m, Training(Recompute::kSelective, 2), Sharding{8, true, 4});
  EXPECT_DOUBLE_EQ(cp.inflight, base.inflight / 4);
}

TEST_F(ActivationTest, FlashAttentionKeepsNoScores) {
  TrainingConfig t = Training(Recompute::kNone, 2);
  t.flash_attention = true;
  const auto inv = DecoderLayerActivations(m, t, Sharding{});
  EXPECT_DOUBLE_EQ(inv.inflight, 34 * sbh + s * b * a * 4);  // + fp32 log-sum-exp per head
}

TEST_F(ActivationTest, PendingWeightGradientHoldsGemmInputsAndOutputGrads) {
  // MHA, GeLU, f = 4h: inputs h + h + h + 4h, output grads 3h + h + 4h + h = 16h elements.
  const auto inv = DecoderLayerActivations(m, Training(Recompute::kNone, 2), Sharding{});
  EXPECT_DOUBLE_EQ(inv.pending_w, 2 * 16 * sbh);
  EXPECT_LT(inv.pending_w, inv.inflight);
  const auto tp = DecoderLayerActivations(m, Training(Recompute::kNone, 2), Sharding{8, true, 1});
  EXPECT_DOUBLE_EQ(tp.pending_w, 2 * 16 * sbh / 8);
}

TEST_F(ActivationTest, Fp8KeepsTheGemmInputsInFp8) {
  // TransformerEngine's FP8 recipe: the QKV and fc1 inputs (h each) and the fc2 input (f = 4h)
  // are kept as 1-byte casts instead of 2-byte tensors; the attention output stays 2-byte for
  // the attention's backward and its 1-byte copy (h) is kept beside it. Net, per token and
  // layer under tp 8 + sp: (h + h + 4h - h) / 8 bytes fewer, 5 of the 34 sbh / 8.
  TrainingConfig bf16 = Training(Recompute::kSelective, 2);
  bf16.flash_attention = true;
  TrainingConfig fp8 = bf16;
  fp8.precision = Precision::kFp8;
  const Sharding sh{8, true, 1};
  const auto a16 = DecoderLayerActivations(m, bf16, sh);
  const auto a8 = DecoderLayerActivations(m, fp8, sh);
  EXPECT_DOUBLE_EQ(a16.inflight - a8.inflight, 5 * sbh / 8);
  // W's four GEMM inputs (h, h, h, 4h) at 1 byte instead of 2; their output gradients stay.
  EXPECT_DOUBLE_EQ(a16.pending_w - a8.pending_w, 7 * sbh / 8);
  // Full recompute keeps the layer input, 16-bit either way.
  EXPECT_DOUBLE_EQ(DecoderLayerActivations(m, Training(Recompute::kFull, 2), sh).inflight, [&] {
    TrainingConfig f = Training(Recompute::kFull, 2);
    f.precision = Precision::kFp8;
    return DecoderLayerActivations(m, f, sh).inflight;
  }());
}

TEST(LayerFlopsTest, NarayananPerLayer) {
  const ModelConfig m = Gpt3_175b();
  const double b = 4, s = m.seq_len, h = m.hidden;
  const LayerFlops fl = DecoderLayerFlops(m, 4, Sharding{});
  EXPECT_DOUBLE_EQ(fl.gemm, 24 * b * s * h * h);
  EXPECT_DOUBLE_EQ(fl.attention, 4 * b * s * s * h);
  // F + I + W = 3F = 72 b s h^2 (1 + s / 6h).
  EXPECT_DOUBLE_EQ(fl.F() + fl.I() + fl.W(), 72 * b * s * h * h * (1 + s / (6 * h)));
  EXPECT_DOUBLE_EQ(fl.W(), fl.gemm);
  // Split over tp and cp, FLOPs divide evenly.
  const LayerFlops split = DecoderLayerFlops(m, 4, Sharding{8, true, 2});
  EXPECT_DOUBLE_EQ(split.F() * 16, fl.F());
  EXPECT_DOUBLE_EQ(RecomputeFlops(m, 4, Sharding{}, Recompute::kFull), fl.F());
  EXPECT_DOUBLE_EQ(RecomputeFlops(m, 4, Sharding{}, Recompute::kSelective), fl.attention);
}

TEST(LayerFlopsTest, GroupedQueryAttentionAndSwiglu) {
  const ModelConfig m = *FindPreset("llama3-8b");
  const double T = 8192, h = 4096, kv = 1024, f = 14336;
  const LayerFlops fl = DecoderLayerFlops(m, 1, Sharding{});
  EXPECT_DOUBLE_EQ(fl.gemm, 2 * T * (h * (h + 2 * kv) + h * h + 3 * h * f));
}

TEST(ParamsPerRankTest, TensorParallelSumsBack) {
  const ModelConfig m = Gpt3_175b();
  const std::int64_t h = m.hidden;
  // Column-parallel parts split; row-parallel biases (2h) and LayerNorms (4h) replicated.
  EXPECT_EQ(8 * DecoderLayerParamsPerRank(m, 8) - 7 * (2 * h + 4 * h), LayerParameters(m));
  EXPECT_EQ(DecoderLayerParamsPerRank(m, 1), LayerParameters(m));
  EXPECT_EQ(EmbeddingParamsPerRank(m, 1), EmbeddingParameters(m));
  // Tied: the last stage keeps a copy of the word embedding when it is a separate stage.
  EXPECT_EQ(OutputParamsPerRank(m, 1, false), 2 * h);
  EXPECT_EQ(OutputParamsPerRank(m, 1, true), 2 * h + std::int64_t{m.vocab} * h);
}

}  // namespace
}  // namespace pipetwin::models
