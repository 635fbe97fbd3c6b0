// The chunk as the engine will use it: a 2-stage pipeline split equals the whole model, TP = 2
// and TP = 2 + SP equal the unsharded model, the model trains, and the Accountant's bytes equal
// the inventory's prediction.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "exec/cpu/chunk.h"
#include "exec/cpu/inventory.h"
#include "exec/cpu/optimizer.h"
#include "exec/model/data.h"
#include "tests/exec/cpu_test_util.h"

namespace pipetwin::cpu {
namespace {

using testing::RandomVector;
using testing::RelErr;

ModelConfig SmallModel() {
  return ModelConfig{.layers = 4,
                     .hidden = 16,
                     .ffn_hidden = 32,
                     .heads = 4,
                     .vocab = 17,
                     .seq_len = 8,
                     .micro_batch = 2,
                     .seed = 99};
}

std::span<const float> ParamOf(const Chunk& c, std::span<const float> flat, const std::string& n) {
  const ParamInfo& p = c.layout().Find(n);
  return flat.subspan(p.offset, static_cast<std::size_t>(p.size()));
}

struct Batch {
  std::vector<std::int32_t> tokens, labels;
};

std::vector<Batch> MakeBatches(const ModelConfig& m, int count, std::uint64_t seed) {
  SyntheticData data({.vocab = m.vocab,
                      .seq_len = m.seq_len,
                      .micro_batch = m.micro_batch,
                      .seed = seed,
                      .noise = 0.2f});
  std::vector<Batch> out(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    Batch& b = out[static_cast<std::size_t>(i)];
    b.tokens.resize(data.tokens_per_microbatch());
    b.labels.resize(data.tokens_per_microbatch());
    data.Fill(0, i, b.tokens, b.labels);
  }
  return out;
}

// F and B of every batch on the whole model and on the pipeline s0 -> s1 (loss scale
// 1 / batches): the losses are equal, and about ln(vocab) at initialisation.
void RunWholeAndPipeline(Chunk& whole, Chunk& s0, Chunk& s1, const std::vector<Batch>& batches) {
  const int micro = static_cast<int>(batches.size());
  for (Chunk* c : {&whole, &s0, &s1}) c->set_loss_scale(1.0f / static_cast<float>(micro));
  std::vector<float> act(s0.activation_size()), grad(s0.activation_size());
  for (int i = 0; i < micro; ++i) {
    const Batch& b = batches[static_cast<std::size_t>(i)];
    const float loss_whole = whole.Forward(i, {.tokens = b.tokens, .labels = b.labels});
    whole.Backward(i, {}, {});
    s0.Forward(i, {.tokens = b.tokens, .output = act});
    const float loss_pipe = s1.Forward(i, {.input = act, .labels = b.labels});
    s1.Backward(i, {}, grad);
    s0.Backward(i, grad, {});
    EXPECT_EQ(loss_whole, loss_pipe);
    EXPECT_GT(loss_whole, 2.0f);  // about ln(17) = 2.83 at initialisation
  }
}

// The 4-layer model whole, and split in two stages of 2 layers.
struct WholeAndStages {
  WholeAndStages(const ModelConfig& m, Accountant& acc)
      : whole(m, ChunkSpec{.first_layer = 0, .num_layers = 4}, TpConfig{}, acc),
        s0(m, ChunkSpec{.first_layer = 0, .num_layers = 2, .first = true, .last = false},
           TpConfig{}, acc),
        s1(m, ChunkSpec{.first_layer = 2, .num_layers = 2, .first = false, .last = true},
           TpConfig{}, acc) {}
  Chunk whole, s0, s1;
};

TEST(CpuChunk, TwoStagePipelineEqualsWholeModel) {
  const ModelConfig m = SmallModel();
  Accountant acc;
  WholeAndStages chunks(m, acc);
  Chunk &whole = chunks.whole, &s0 = chunks.s0, &s1 = chunks.s1;
  // Seeded initialisation by name already agrees; randomise LayerNorms and biases as well.
  testing::RandomFill(whole.params(), 5, 0.2f);
  for (Chunk* stage : {&s0, &s1}) {
    for (const ParamInfo& p : stage->layout().params) {
      auto src = ParamOf(whole, whole.params(), p.name);
      std::copy(src.begin(), src.end(), stage->params().begin() + static_cast<long>(p.offset));
    }
  }
  RunWholeAndPipeline(whole, s0, s1, MakeBatches(m, 3, 3));
  for (const Chunk* stage : {&s0, &s1}) {
    for (const ParamInfo& p : stage->layout().params) {
      EXPECT_LE(
          RelErr(ParamOf(*stage, stage->grads(), p.name), ParamOf(whole, whole.grads(), p.name)),
          1e-6)
          << p.name;
    }
  }
}

// Tied embeddings: the whole model uses one [vocab, hidden] tensor as embedding and output
// layer; split in two stages, the last keeps a copy, initialised alike, and the two copies'
// gradients add up to the whole model's, while each copy's alone is far from it: both uses
// feed the gradient.
TEST(CpuChunk, TiedEmbeddingsSplitSumToWholeModel) {
  ModelConfig m = SmallModel();
  m.tied_embeddings = true;
  Accountant acc;
  WholeAndStages chunks(m, acc);
  Chunk &whole = chunks.whole, &s0 = chunks.s0, &s1 = chunks.s1;
  EXPECT_THROW(whole.layout().Find("head.out_w"), std::exception);
  EXPECT_EQ(whole.params().size() + static_cast<std::size_t>(m.vocab * m.hidden),
            s0.params().size() + s1.params().size());
  // The copy starts from the embedding's values (seeded by name).
  const auto e0 = ParamOf(s0, s0.params(), "embed.tok");
  const auto e1 = ParamOf(s1, s1.params(), "embed.tok");
  ASSERT_EQ(e0.size(), e1.size());
  EXPECT_TRUE(std::equal(e0.begin(), e0.end(), e1.begin()));

  RunWholeAndPipeline(whole, s0, s1, MakeBatches(m, 2, 4));
  const auto g0 = ParamOf(s0, s0.grads(), "embed.tok");
  const auto g1 = ParamOf(s1, s1.grads(), "embed.tok");
  std::vector<float> sum(g0.size());
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = g0[i] + g1[i];
  const auto gw = ParamOf(whole, whole.grads(), "embed.tok");
  EXPECT_LE(RelErr(sum, gw), 1e-6);
  // Each use alone is far from the whole: both feed the gradient.
  EXPECT_GT(RelErr(g0, gw), 0.05);
  EXPECT_GT(RelErr(g1, gw), 0.05);
  for (const Chunk* stage : {&s0, &s1}) {
    for (const ParamInfo& p : stage->layout().params) {
      if (p.name == "embed.tok") continue;
      EXPECT_LE(
          RelErr(ParamOf(*stage, stage->grads(), p.name), ParamOf(whole, whole.grads(), p.name)),
          1e-6)
          << p.name;
    }
  }
}

// ------------------------------------------------------------------------------------------
// Tensor parallelism: two ranks in two threads against the unsharded chunk.

struct RunResult {
  std::vector<float> losses;
  std::vector<float> outputs;  // all microbatches, full rows
  std::vector<float> grad_inputs;
  std::vector<float> full_grads;
};

// Runs F then B on `micro` microbatches. Inputs/output gradients are full [N, h] per microbatch;
// under SP each rank gets and returns its row slice.
RunResult RunChunk(Chunk& c, const std::vector<Batch>& batches,
                   const std::vector<std::vector<float>>& inputs,
                   const std::vector<std::vector<float>>& grad_outputs) {
  RunResult r;
  const ChunkSpec& spec = c.spec();
  const std::size_t n = c.activation_size();
  const std::size_t offset = static_cast<std::size_t>(c.dims().row_begin * c.dims().hidden);
  std::vector<float> out(n), gin(n);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const auto mb = static_cast<std::int64_t>(i);
    Chunk::ForwardArgs args{.tokens = batches[i].tokens, .labels = batches[i].labels};
    if (!spec.first) args.input = std::span<const float>(inputs[i]).subspan(offset, n);
    if (!spec.last) args.output = out;
    r.losses.push_back(c.Forward(mb, args));
    r.outputs.insert(r.outputs.end(), out.begin(), out.end());
    std::span<const float> gout;
    if (!spec.last) gout = std::span<const float>(grad_outputs[i]).subspan(offset, n);
    c.Backward(mb, gout, spec.first ? std::span<float>() : std::span<float>(gin));
    r.grad_inputs.insert(r.grad_inputs.end(), gin.begin(), gin.end());
  }
  c.SyncSequenceParallelGrads();
  return r;
}

// (sp, 0: whole model or 1: middle chunk, 0: plain, 1: dropout, 2: Llama's blocks (RMSNorm, no
// biases, rotary positions, SwiGLU, 2 K/V heads for 4) or 3: SwiGLU and grouped-query attention
// with biases (fc1's two column groups and QKV's three unequal ones, weight and bias, each split
// over TP))
class CpuTensorParallel : public ::testing::TestWithParam<std::tuple<bool, int, int>> {};

TEST_P(CpuTensorParallel, EqualsUnsharded) {
  const bool sp = std::get<0>(GetParam());
  const int which = std::get<1>(GetParam());  // 0: whole model, 1: middle chunk
  ModelConfig m = SmallModel();
  if (std::get<2>(GetParam()) == 1) m.dropout = 0.2f;
  if (std::get<2>(GetParam()) == 2) {
    m.rms_norm = true;  // Llama's norms, linear layers and positions
    m.bias = false;
    m.rope = true;
    m.swiglu = true;
    m.kv_heads = 2;
  }
  if (std::get<2>(GetParam()) == 3) {
    m.swiglu = true;
    m.kv_heads = 2;
  }
  const ChunkSpec spec =
      which == 0 ? ChunkSpec{.first_layer = 0, .num_layers = 4}
                 : ChunkSpec{.first_layer = 1, .num_layers = 2, .first = false, .last = false};
  const int micro = 2;
  const auto batches = MakeBatches(m, micro, 11);

  Accountant ref_acc;
  Chunk ref(m, spec, TpConfig{}, ref_acc);
  testing::RandomFill(ref.params(), 17, 0.2f);
  ref.set_loss_scale(1.0f / micro);
  const std::size_t full_act = ref.activation_size();
  std::vector<std::vector<float>> inputs, grad_outputs;
  for (int i = 0; i < micro; ++i) {
    inputs.push_back(RandomVector(full_act, 100 + static_cast<std::uint64_t>(i)));
    grad_outputs.push_back(RandomVector(full_act, 200 + static_cast<std::uint64_t>(i), 0.1f));
  }
  const RunResult want = RunChunk(ref, batches, inputs, grad_outputs);

  const int tp = 2;
  ThreadGroup group(tp);
  std::vector<ThreadCollectives> comms;
  std::vector<std::unique_ptr<Accountant>> accs;
  std::vector<std::unique_ptr<Chunk>> ranks;
  for (int r = 0; r < tp; ++r) {
    comms.push_back(group.Rank(r));
    accs.push_back(std::make_unique<Accountant>());
  }
  for (int r = 0; r < tp; ++r) {
    const TpConfig cfg{.size = tp, .rank = r, .sequence_parallel = sp};
    ranks.push_back(std::make_unique<Chunk>(m, spec, cfg, *accs[static_cast<std::size_t>(r)],
                                            &comms[static_cast<std::size_t>(r)]));
    ranks.back()->LoadFullParams(std::vector<float>(ref.params().begin(), ref.params().end()));
    ranks.back()->set_loss_scale(1.0f / micro);
  }
  std::vector<RunResult> got(tp);
  {
    std::vector<std::jthread> threads;
    for (std::size_t r = 0; r < static_cast<std::size_t>(tp); ++r) {
      threads.emplace_back([&, r] { got[r] = RunChunk(*ranks[r], batches, inputs, grad_outputs); });
    }
  }
  // Every rank reports the microbatch's whole loss.
  double worst = 0.0;
  auto expect_close = [&worst](std::span<const float> a, std::span<const float> b,
                               const std::string& what) {
    const double e = RelErr(a, b);
    worst = std::max(worst, e);
    EXPECT_LE(e, 1e-5) << what;
  };
  for (int r = 0; r < tp; ++r) {
    expect_close(got[static_cast<std::size_t>(r)].losses, want.losses, "loss");
  }
  if (!spec.last || !spec.first) {
    // Reassemble activations and input gradients: under SP each rank has its rows.
    std::vector<float> out, gin;
    const std::size_t n = ranks[0]->activation_size();
    for (int i = 0; i < micro; ++i) {
      for (int r = 0; r < (sp ? tp : 1); ++r) {
        const auto& g = got[static_cast<std::size_t>(r)];
        const auto off = static_cast<long>(static_cast<std::size_t>(i) * n);
        out.insert(out.end(), g.outputs.begin() + off,
                   g.outputs.begin() + off + static_cast<long>(n));
        gin.insert(gin.end(), g.grad_inputs.begin() + off,
                   g.grad_inputs.begin() + off + static_cast<long>(n));
      }
    }
    expect_close(out, want.outputs, "output");
    expect_close(gin, want.grad_inputs, "input gradient");
  }
  // Replicated gradients agree across ranks; sharded ones reassemble into the reference.
  const std::size_t rep = ranks[0]->layout().replicated;
  EXPECT_TRUE(std::equal(ranks[0]->grads().begin(),
                         ranks[0]->grads().begin() + static_cast<long>(rep),
                         ranks[1]->grads().begin()));
  std::vector<float> full(ref.layout().full_total, std::numeric_limits<float>::quiet_NaN());
  for (const auto& c : ranks) c->ExportFullGrads(full);
  for (const ParamInfo& p : ref.layout().params) {
    expect_close(ParamOf(ref, full, p.name), ParamOf(ref, ref.grads(), p.name), p.name);
  }
  RecordProperty("worst_rel_err", std::to_string(worst));
  std::printf("worst relative error against unsharded: %.3g\n", worst);
  // And each rank's bytes are what the inventory predicts for its shard.
  const ChunkInventory inv =
      PredictChunkMemory(m, spec, TpConfig{.size = tp, .rank = 0, .sequence_parallel = sp});
  EXPECT_EQ(accs[0]->current(MemCategory::kParams), inv.param_bytes);
  EXPECT_EQ(accs[1]->current(MemCategory::kGrads), inv.grad_bytes);
  EXPECT_LT(inv.param_bytes, PredictChunkMemory(m, spec, TpConfig{}).param_bytes);
}

INSTANTIATE_TEST_SUITE_P(TpSp, CpuTensorParallel,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(0, 1),
                                            ::testing::Values(0, 1, 2, 3)),
                         [](const auto& test_info) {
                           const int variant = std::get<2>(test_info.param);
                           return std::string(std::get<0>(test_info.param) ? "tp2_sp" : "tp2") +
                                  (std::get<1>(test_info.param) == 0 ? "_whole" : "_middle") +
                                  (variant == 1   ? "_dropout"
                                   : variant == 2 ? "_llama"
                                   : variant == 3 ? "_swiglu_gqa"
                                                  : "");
                         });

// ------------------------------------------------------------------------------------------

TEST(CpuChunk, LossFallsOnSyntheticData) {
  const ModelConfig m{.layers = 2,
                      .hidden = 32,
                      .ffn_hidden = 64,
                      .heads = 4,
                      .vocab = 32,
                      .seq_len = 16,
                      .micro_batch = 4,
                      .seed = 3};
  Accountant acc;
  Chunk model(m, ChunkSpec{.first_layer = 0, .num_layers = 2}, TpConfig{}, acc);
  Adam adam(model.params().size(), AdamConfig{.lr = 1e-2f}, acc);
  SyntheticData data(
      {.vocab = m.vocab, .seq_len = m.seq_len, .micro_batch = m.micro_batch, .seed = 8});
  std::vector<std::int32_t> tokens(data.tokens_per_microbatch()), labels(tokens.size());
  const int micro = 1;
  model.set_loss_scale(1.0f / micro);
  std::vector<float> losses;
  for (int step = 0; step < 50; ++step) {
    float loss = 0.0f;
    model.ZeroGrads();
    for (int i = 0; i < micro; ++i) {
      data.Fill(step, i, tokens, labels);
      loss += model.Forward(i, {.tokens = tokens, .labels = labels}) / micro;
      model.Backward(i, {}, {});
    }
    adam.Step(model.params(), model.grads());
    losses.push_back(loss);
  }
  std::printf("loss: step 0 %.4f, step 10 %.4f, step 25 %.4f, step 49 %.4f\n",
              static_cast<double>(losses[0]), static_cast<double>(losses[10]),
              static_cast<double>(losses[25]), static_cast<double>(losses[49]));
  EXPECT_NEAR(losses[0], std::log(32.0f), 0.2f);
  EXPECT_LT(losses[49], 0.7f * losses[0]);
}

// ------------------------------------------------------------------------------------------
// Memory: the Accountant against PredictChunkMemory through a schedule with several
// microbatches in flight and W deferred.

struct Ledger {
  const ChunkInventory& inv;
  std::size_t level = 0;
  std::size_t peak = 0;
  void F() { peak = std::max(peak, level += inv.activations_full); }
  void I() {
    peak = std::max(peak, level + inv.activations_i_transient);
    level = level - inv.activations_full + inv.activations_pending_w;
  }
  void W() { level -= inv.activations_pending_w; }
};

void CheckMemory(Chunk& c, Accountant& acc, const ChunkInventory& inv) {
  const auto batches = MakeBatches(c.model(), 3, 21);
  const std::size_t n = c.activation_size();
  std::vector<float> x(n, 0.1f), gout(n, 0.01f), out(n), gin(n);
  Ledger ledger{inv};
  auto check = [&](const char* after) {
    EXPECT_EQ(acc.current(MemCategory::kActivations), ledger.level) << after;
    EXPECT_EQ(acc.peak(MemCategory::kActivations), ledger.peak) << after;
  };
  auto f = [&](int i) {
    const Batch& b = batches[static_cast<std::size_t>(i)];
    Chunk::ForwardArgs args{.tokens = b.tokens, .labels = b.labels};
    if (!c.spec().first) args.input = x;
    if (!c.spec().last) args.output = out;
    c.Forward(i, args);
    ledger.F();
    check("F");
  };
  auto bi = [&](int i) {
    c.BackwardInput(i, c.spec().last ? std::span<const float>() : gout,
                    c.spec().first ? std::span<float>() : std::span<float>(gin));
    ledger.I();
    check("I");
  };
  auto bw = [&](int i) {
    c.BackwardWeight(i);
    ledger.W();
    check("W");
  };
  // ZB-H2-like order on one rank: three in flight, W deferred and interleaved.
  f(0), f(1), f(2), bi(0), bi(1), bw(0), bi(2), bw(1), bw(2);
  EXPECT_EQ(acc.current(MemCategory::kActivations), 0u);
  EXPECT_EQ(acc.current(MemCategory::kParams), inv.param_bytes);
  EXPECT_EQ(acc.current(MemCategory::kGrads), inv.grad_bytes);
  EXPECT_EQ(c.params().size(), inv.params);
  EXPECT_EQ(acc.current(MemCategory::kWorkspace), 0u);  // transients do not outlive an action
}

TEST(CpuChunk, AccountantMatchesInventory) {
  ModelConfig m = SmallModel();
  m.dropout = 0.1f;  // masks are regenerated, never saved
  const ChunkSpec specs[] = {{.first_layer = 0, .num_layers = 4},
                             {.first_layer = 0, .num_layers = 2, .first = true, .last = false},
                             {.first_layer = 1, .num_layers = 2, .first = false, .last = false},
                             {.first_layer = 2, .num_layers = 2, .first = false, .last = true}};
  for (const bool llama : {false, true})
    for (const bool tied : {false, true})
      for (const ChunkSpec& spec : specs) {
        m.tied_embeddings = tied;
        m.rms_norm = llama;  // RMSNorm, no biases, rotary positions: fewer parameters, the
        m.bias = !llama;     // same activations
        m.rope = llama;
        m.swiglu = llama;  // and SwiGLU: fc1 and its saved output twice as wide
        m.kv_heads = llama ? 2 : 0;
        SCOPED_TRACE(std::string(tied ? "tied" : "untied") +
                     (llama ? ", rmsnorm, no bias, rope, swiglu, gqa" : ""));
        Accountant acc;
        Chunk c(m, spec, TpConfig{}, acc);
        const ChunkInventory inv = PredictChunkMemory(m, spec, TpConfig{});
        EXPECT_GT(inv.activations_full, 0u);
        CheckMemory(c, acc, inv);
        Adam adam(c.params().size(), AdamConfig{}, acc);
        Sgd sgd(c.params().size(), SgdConfig{.momentum = 0.9f}, acc);
        EXPECT_EQ(acc.current(MemCategory::kOptimizer),
                  OptimizerStateBytes(OptimizerKind::kAdam, inv.params) +
                      OptimizerStateBytes(OptimizerKind::kSgd, inv.params, 0.9f));
      }
  m.rms_norm = false;
  m.bias = true;
  m.rope = false;
  m.swiglu = false;
  m.kv_heads = 0;
  // Tied, the one-stage model holds vocab x hidden floats fewer; a last stage as many.
  m.tied_embeddings = true;
  const ChunkSpec whole{.first_layer = 0, .num_layers = 4};
  const ChunkSpec last{.first_layer = 2, .num_layers = 2, .first = false, .last = true};
  const ChunkInventory tied_whole = PredictChunkMemory(m, whole, TpConfig{});
  const ChunkInventory tied_last = PredictChunkMemory(m, last, TpConfig{});
  m.tied_embeddings = false;
  EXPECT_EQ(PredictChunkMemory(m, whole, TpConfig{}).params - tied_whole.params, 17u * 16);
  EXPECT_EQ(PredictChunkMemory(m, last, TpConfig{}).params, tied_last.params);
  // A hand count for one block chunk in the middle, tp = 1: N = 16 tokens, h = 16, ffn = 32,
  // 4 heads, S = 8, B = 2. F saves N(8h + 2ffn + 2) floats, and the blocked attention's output
  // and log-sum-exp, N h + N heads (not the B heads S^2 probabilities); W keeps N(8h + 2ffn).
  const ChunkInventory one = PredictChunkMemory(
      m, ChunkSpec{.first_layer = 1, .num_layers = 1, .first = false, .last = false}, TpConfig{});
  EXPECT_EQ(one.activations_full, 4u * (16 * (8 * 16 + 2 * 32 + 2) + 16 * 16 + 16 * 4));
  EXPECT_EQ(one.activations_pending_w, 4u * (16 * (8 * 16 + 2 * 32)));
  EXPECT_EQ(one.activations_i_transient, 4u * 16 * 16);
  // SwiGLU: the activation's input, fc1's output, is [gate | up], 2 ffn wide, in F and, as fc1's
  // output gradient, kept for W: N(8h + 3ffn + 2) and N(8h + 3ffn); fc1 holds h · 2ffn weights
  // and 2 ffn biases, h · ffn + ffn more; I's peak rise is fc2's output gradient, N h, still.
  m.swiglu = true;
  const ChunkInventory swiglu = PredictChunkMemory(
      m, ChunkSpec{.first_layer = 1, .num_layers = 1, .first = false, .last = false}, TpConfig{});
  EXPECT_EQ(swiglu.activations_full, 4u * (16 * (8 * 16 + 3 * 32 + 2) + 16 * 16 + 16 * 4));
  EXPECT_EQ(swiglu.activations_pending_w, 4u * (16 * (8 * 16 + 3 * 32)));
  EXPECT_EQ(swiglu.activations_i_transient, 4u * 16 * 16);
  EXPECT_EQ(swiglu.params - one.params, 16u * 32 + 32);
  {
    Accountant acc;
    Chunk c(m, ChunkSpec{.first_layer = 1, .num_layers = 1, .first = false, .last = false},
            TpConfig{}, acc);
    CheckMemory(c, acc, swiglu);
  }
  // Grouped-query attention, 2 K/V heads of width 4 for the 4 query heads: QKV's output is
  // h + 2 · 2 · 4 = 32 wide, not 48, so W keeps N · 16 floats fewer (its output gradient), F as
  // many fewer (the blocked attention keeps qkv as it is), and QKV holds h · 16 weights and 16
  // biases fewer.
  m.swiglu = false;
  m.kv_heads = 2;
  const ChunkInventory gqa = PredictChunkMemory(
      m, ChunkSpec{.first_layer = 1, .num_layers = 1, .first = false, .last = false}, TpConfig{});
  EXPECT_EQ(one.activations_full - gqa.activations_full, 4u * 16 * 16);
  EXPECT_EQ(one.activations_pending_w - gqa.activations_pending_w, 4u * 16 * 16);
  EXPECT_EQ(one.params - gqa.params, 16u * 16 + 16);
  {
    Accountant acc;
    Chunk c(m, ChunkSpec{.first_layer = 1, .num_layers = 1, .first = false, .last = false},
            TpConfig{}, acc);
    CheckMemory(c, acc, gqa);
  }
  // And under each recompute mode, where the cores differ: selective at cp 1 recomputes
  // CausalSelfAttention's probabilities, which reads the narrow qkv as it is (kept: N · 32, not
  // N · 48, in each of the 2 layers); full keeps the block's input alone, the same either way.
  for (const Recompute rc : {Recompute::kSelective, Recompute::kFull}) {
    const ChunkSpec spec{
        .first_layer = 1, .num_layers = 2, .first = false, .last = false, .recompute = rc};
    ModelConfig mha = m;
    mha.kv_heads = 0;
    const ChunkInventory want = PredictChunkMemory(m, spec, TpConfig{});
    const ChunkInventory multi = PredictChunkMemory(mha, spec, TpConfig{});
    EXPECT_EQ(multi.activations_full - want.activations_full,
              rc == Recompute::kSelective ? 2u * 4 * 16 * 16 : 0u);
    EXPECT_EQ(multi.activations_pending_w - want.activations_pending_w, 2u * 4 * 16 * 16);
    Accountant acc;
    Chunk c(m, spec, TpConfig{}, acc);
    CheckMemory(c, acc, want);
  }
}

TEST(CpuChunk, AccountantMatchesInventoryUnderTp) {
  ModelConfig m = SmallModel();
  for (const bool llama : {false, true})
    for (const bool sp : {false, true}) {
      m.rms_norm = llama;
      m.bias = !llama;
      m.rope = llama;
      m.swiglu = llama;
      m.kv_heads = llama ? 2 : 0;
      for (const ChunkSpec spec :
           {ChunkSpec{.first_layer = 0, .num_layers = 2, .first = true, .last = false},
            ChunkSpec{.first_layer = 2, .num_layers = 2, .first = false, .last = true}}) {
        ThreadGroup group(2);
        std::vector<std::jthread> threads;
        for (int r = 0; r < 2; ++r) {
          threads.emplace_back([&, r] {
            ThreadCollectives comm = group.Rank(r);
            Accountant acc;
            const TpConfig tp{.size = 2, .rank = r, .sequence_parallel = sp};
            Chunk c(m, spec, tp, acc, &comm);
            CheckMemory(c, acc, PredictChunkMemory(m, spec, tp));
          });
        }
      }
    }
}

TEST(CpuCollectives, ThreadGroupNumbers) {
  ThreadGroup group(3);
  std::vector<std::vector<float>> reduced(3), gathered(3), scattered(3);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] {
        ThreadCollectives c = group.Rank(r);
        const auto u = static_cast<std::size_t>(r);
        const auto f = static_cast<float>(r);
        reduced[u] = {f, 10.0f * f};
        c.AllReduceSum(reduced[u]);
        gathered[u].resize(6);
        const std::vector<float> mine = {f, -f};
        c.AllGather(mine, gathered[u]);
        const std::vector<float> in = {f, f + 1, f + 2};  // piece k = f + k
        scattered[u].resize(1);
        c.ReduceScatterSum(in, scattered[u]);
      });
    }
  }
  for (std::size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(reduced[r], (std::vector<float>{3.0f, 30.0f}));
    EXPECT_EQ(gathered[r], (std::vector<float>{0, -0.0f, 1, -1, 2, -2}));
    EXPECT_EQ(scattered[r][0], 3.0f + 3.0f * static_cast<float>(r));
  }
}

}  // namespace
}  // namespace pipetwin::cpu

namespace pipetwin::cpu {
namespace {

// InitParams on threads (what the CUDA backend uploads) gives InitParam's values bit for bit,
// for a TP shard whose embedding spans several of its 2^20-value work items.
TEST(CpuChunk, InitParamsOnThreadsEqualsOneByOne) {
  ModelConfig m = SmallModel();
  m.vocab = 20000;
  m.hidden = 128;
  m.ffn_hidden = 512;
  m.seq_len = 16;
  for (const TpConfig tp : {TpConfig{}, TpConfig{.size = 2, .rank = 1}}) {
    const ParamLayout layout = gpt::ChunkParamLayout(m, ChunkSpec{.num_layers = m.layers}, tp);
    std::vector<float> serial(layout.total, -1.0f), threaded(layout.total, -2.0f);
    for (const ParamInfo& p : layout.params) InitParam(p, tp, m, serial.data() + p.offset);
    gpt::InitParams(layout, tp, m, threaded.data(), 3);
    ASSERT_GT(layout.Find("embed.tok").size(), Index{1} << 21);  // three work items or more
    EXPECT_EQ(serial, threaded) << "tp " << tp.size;
  }
}

}  // namespace
}  // namespace pipetwin::cpu
