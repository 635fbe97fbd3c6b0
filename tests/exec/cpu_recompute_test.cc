// Activation recomputation in the CPU chunk (exec/cpu/block.h): with recompute full and
// selective, every schedule run in one process (F, I, W or B of every stage in the schedule's
// own order) gives the losses and gradients of recompute none within 1e-6 relative; the
// Accountant's saved-activation bytes follow models/cpu_inventory.h through a zero-bubble order,
// also under TP and SP; and the inventory's numbers equal a hand count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exec/cpu/chunk.h"
#include "exec/cpu/inventory.h"
#include "exec/model/data.h"
#include "schedule/build.h"
#include "tests/exec/cpu_test_util.h"

namespace pipetwin::cpu {
namespace {

using testing::RelErr;

std::size_t U(int i) { return static_cast<std::size_t>(i); }

ModelConfig SmallModel() {
  return ModelConfig{.layers = 4,
                     .hidden = 16,
                     .ffn_hidden = 32,
                     .heads = 4,
                     .vocab = 17,
                     .seq_len = 8,
                     .micro_batch = 2,
                     .seed = 99,
                     .dropout = 0.1f};  // the recomputed forward must draw the same masks
}

struct PipelineResult {
  std::vector<float> losses;              // per microbatch
  std::vector<std::vector<float>> grads;  // per stage
  std::vector<std::size_t> peak_saved;    // per pipeline rank: peak of kActivations
  std::vector<std::size_t> final_saved;   // per pipeline rank, after the step (must be 0)
};

// Every compute action of `schedule`'s programs on its stage's chunk, ranks taking turns: a rank
// runs its next action once its input is there (F after the previous stage's F, I or B after
// the next stage's I or B). One Accountant per pipeline rank.
PipelineResult RunPipeline(const std::string& name, int vpp, Recompute recompute,
                           int kv_heads = 0) {
  ModelConfig m = SmallModel();
  m.kv_heads = kv_heads;
  const int pp = 2;
  const int micro = 4;
  ScheduleRequest req;
  req.name = name;
  req.pp = pp;
  req.vpp = vpp;
  req.microbatches = micro;
  auto sched = ComputeSchedule(req);
  EXPECT_TRUE(sched.ok()) << name;
  const Schedule& s = *sched;
  const int stages = s.num_stages;
  const int per = m.layers / stages;
  std::vector<Accountant> acc(U(pp));
  std::vector<std::unique_ptr<Chunk>> chunk;
  for (int st = 0; st < stages; ++st) {
    const ChunkSpec spec{.first_layer = st * per,
                         .num_layers = per,
                         .first = st == 0,
                         .last = st == stages - 1,
                         .recompute = recompute};
    chunk.push_back(std::make_unique<Chunk>(m, spec, TpConfig{}, acc[U(s.stage_to_rank[U(st)])]));
    chunk.back()->set_loss_scale(1.0f / micro);
  }
  SyntheticData data(
      {.vocab = m.vocab, .seq_len = m.seq_len, .micro_batch = m.micro_batch, .seed = 7});
  std::vector<std::vector<std::int32_t>> tokens(U(micro)), labels(U(micro));
  for (int i = 0; i < micro; ++i) {
    tokens[U(i)].resize(data.tokens_per_microbatch());
    labels[U(i)].resize(data.tokens_per_microbatch());
    data.Fill(0, i, tokens[U(i)], labels[U(i)]);
  }
  const std::size_t n = chunk[0]->activation_size();
  // (stage, microbatch) → the stage's output / the gradient of its input.
  std::map<std::pair<int, int>, std::vector<float>> out, grad_in;
  PipelineResult r;
  r.losses.assign(U(micro), 0.0f);
  std::vector<std::size_t> next(U(pp), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int rank = 0; rank < pp; ++rank) {
      const auto& prog = s.programs[U(rank)];
      std::size_t& k = next[U(rank)];
      while (k < prog.size()) {
        const Action& a = prog[k];
        const int st = a.stage;
        const int mb = a.microbatch;
        Chunk& c = *chunk[U(st)];
        if (a.kind == ActionKind::kForward) {
          if (st > 0 && out.count({st - 1, mb}) == 0) break;
          Chunk::ForwardArgs args{.tokens = tokens[U(mb)], .labels = labels[U(mb)]};
          if (st > 0) args.input = out[{st - 1, mb}];
          std::vector<float> y(c.spec().last ? 0 : n);
          args.output = y;
          const float loss = c.Forward(mb, args);
          if (c.spec().last) r.losses[U(mb)] = loss;
          out[{st, mb}] = std::move(y);
        } else if (a.kind == ActionKind::kBackwardInput || a.kind == ActionKind::kBackward) {
          if (st < stages - 1 && grad_in.count({st + 1, mb}) == 0) break;
          std::vector<float> gx(c.spec().first ? 0 : n);
          std::span<const float> gy;
          if (st < stages - 1) gy = grad_in[{st + 1, mb}];
          if (a.kind == ActionKind::kBackward) {
            c.Backward(mb, gy, gx);
          } else {
            c.BackwardInput(mb, gy, gx);
          }
          grad_in[{st, mb}] = std::move(gx);
        } else if (a.kind == ActionKind::kBackwardWeight) {
          c.BackwardWeight(mb);
        }
        ++k;
        progress = true;
      }
    }
  }
  for (int rank = 0; rank < pp; ++rank) {
    EXPECT_EQ(next[static_cast<std::size_t>(rank)],
              s.programs[static_cast<std::size_t>(rank)].size())
        << name << ": rank " << rank << " did not finish its program";
    r.peak_saved.push_back(acc[static_cast<std::size_t>(rank)].peak(MemCategory::kActivations));
    r.final_saved.push_back(acc[static_cast<std::size_t>(rank)].current(MemCategory::kActivations));
  }
  for (const auto& c : chunk) r.grads.emplace_back(c->grads().begin(), c->grads().end());
  return r;
}

struct ScheduleCase {
  const char* name;
  int vpp;
};
constexpr ScheduleCase kSchedules[] = {{"1f1b", 1},     {"gpipe", 1}, {"interleaved-1f1b", 2},
                                       {"zb-h1", 1},    {"zb-h2", 1}, {"zbv", 2},
                                       {"dualpipev", 2}};

TEST(CpuRecompute, EverySchedulesGradientsEqualStoredActivations) {
  for (const ScheduleCase& sc : kSchedules) {
    const PipelineResult none = RunPipeline(sc.name, sc.vpp, Recompute::kNone);
    ASSERT_EQ(none.grads.size(), static_cast<std::size_t>(2 * sc.vpp)) << sc.name;
    for (const Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
      const char* mode_name = mode == Recompute::kFull ? "full" : "selective";
      const PipelineResult rc = RunPipeline(sc.name, sc.vpp, mode);
      for (std::size_t i = 0; i < none.losses.size(); ++i) {
        EXPECT_GT(none.losses[i], 2.0f) << sc.name;  // about ln(17) at initialisation
        EXPECT_LE(RelErr(std::span<const float>(&rc.losses[i], 1),
                         std::span<const float>(&none.losses[i], 1)),
                  1e-6)
            << sc.name << " " << mode_name << " loss of microbatch " << i;
      }
      for (std::size_t st = 0; st < none.grads.size(); ++st) {
        EXPECT_LE(RelErr(rc.grads[st], none.grads[st]), 1e-6)
            << sc.name << " " << mode_name << " gradients of stage " << st;
      }
      for (std::size_t rank = 0; rank < rc.peak_saved.size(); ++rank) {
        EXPECT_EQ(rc.final_saved[rank], 0u) << sc.name << " " << mode_name;
        // Full keeps one [N, h] input per block, far less than the stored block.
        if (mode == Recompute::kFull) {
          EXPECT_LT(rc.peak_saved[rank], none.peak_saved[rank]) << sc.name << " rank " << rank;
        }
      }
    }
  }
}

// Grouped-query attention (2 K/V heads, or 1, for the 4 query heads): selective recompute at
// cp 1 runs CausalSelfAttention, which reads the narrow qkv, where recompute none runs the
// blocked core; both recompute modes give the stored run's losses and gradients.
TEST(CpuRecompute, GroupedQueryGradientsEqualStoredActivations) {
  for (const int kv : {2, 1}) {
    for (const ScheduleCase& sc : {kSchedules[0], kSchedules[3]}) {  // 1f1b, zb-h1 (I and W)
      const PipelineResult none = RunPipeline(sc.name, sc.vpp, Recompute::kNone, kv);
      for (const Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
        const PipelineResult rc = RunPipeline(sc.name, sc.vpp, mode, kv);
        EXPECT_LE(RelErr(rc.losses, none.losses), 1e-6) << sc.name << " kv " << kv;
        for (std::size_t st = 0; st < none.grads.size(); ++st) {
          EXPECT_LE(RelErr(rc.grads[st], none.grads[st]), 1e-6)
              << sc.name << " kv " << kv << " gradients of stage " << st;
        }
      }
    }
  }
}

// The check above can fail: a recompute that redraws the dropout masks (another step's key)
// changes the gradients far beyond 1e-6.
TEST(CpuRecompute, WrongDropoutKeyIsCaught) {
  const ModelConfig m = SmallModel();
  Accountant acc;
  const ChunkSpec none{.first_layer = 0, .num_layers = 4};
  ChunkSpec full = none;
  full.recompute = Recompute::kFull;
  Chunk a(m, none, TpConfig{}, acc), b(m, full, TpConfig{}, acc);
  SyntheticData data(
      {.vocab = m.vocab, .seq_len = m.seq_len, .micro_batch = m.micro_batch, .seed = 7});
  std::vector<std::int32_t> tok(data.tokens_per_microbatch()), lab(tok.size());
  data.Fill(0, 0, tok, lab);
  a.Forward(0, {.tokens = tok, .labels = lab, .step = 0});
  a.Backward(0, {}, {});
  b.Forward(0, {.tokens = tok, .labels = lab, .step = 1});  // other masks than a's
  b.Backward(0, {}, {});
  EXPECT_GT(RelErr(b.grads(), a.grads()), 1e-3);
}

// The Accountant against the inventory, action by action (F, then I and W interleaved as
// ZB-H2 does on one rank), in every recompute mode.
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

void CheckMemory(Chunk& c, Accountant& acc, const ChunkInventory& inv, const std::string& what) {
  SyntheticData data({.vocab = c.model().vocab,
                      .seq_len = c.model().seq_len,
                      .micro_batch = c.model().micro_batch,
                      .seed = 21});
  std::vector<std::vector<std::int32_t>> tok(3), lab(3);
  for (int i = 0; i < 3; ++i) {
    tok[U(i)].resize(data.tokens_per_microbatch());
    lab[U(i)].resize(data.tokens_per_microbatch());
    data.Fill(0, i, tok[U(i)], lab[U(i)]);
  }
  const std::size_t n = c.activation_size();
  std::vector<float> x(n, 0.1f), gout(n, 0.01f), out(n), gin(n);
  Ledger ledger{inv};
  auto check = [&](const char* after) {
    EXPECT_EQ(acc.current(MemCategory::kActivations), ledger.level) << what << " after " << after;
    EXPECT_EQ(acc.peak(MemCategory::kActivations), ledger.peak) << what << " after " << after;
  };
  auto f = [&](int i) {
    Chunk::ForwardArgs args{.tokens = tok[U(i)], .labels = lab[U(i)]};
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
  f(0), f(1), f(2), bi(0), bi(1), bw(0), bi(2), bw(1), bw(2);
  EXPECT_EQ(acc.current(MemCategory::kActivations), 0u) << what;
  EXPECT_EQ(acc.current(MemCategory::kWorkspace), 0u) << what;
}

const char* Name(Recompute r) {
  return r == Recompute::kFull ? "full" : r == Recompute::kSelective ? "selective" : "none";
}

TEST(CpuRecompute, AccountantMatchesInventory) {
  const ModelConfig m = SmallModel();
  for (const Recompute mode : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    for (ChunkSpec spec :
         {ChunkSpec{.first_layer = 0, .num_layers = 4},
          ChunkSpec{.first_layer = 0, .num_layers = 2, .first = true, .last = false},
          ChunkSpec{.first_layer = 1, .num_layers = 2, .first = false, .last = false},
          ChunkSpec{.first_layer = 2, .num_layers = 2, .first = false, .last = true}}) {
      spec.recompute = mode;
      Accountant acc;
      Chunk c(m, spec, TpConfig{}, acc);
      CheckMemory(c, acc, PredictChunkMemory(m, spec, TpConfig{}),
                  std::string(Name(mode)) + " layers " + std::to_string(spec.first_layer) + "+" +
                      std::to_string(spec.num_layers));
    }
  }
}

TEST(CpuRecompute, AccountantMatchesInventoryUnderTp) {
  const ModelConfig m = SmallModel();
  for (const Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
    for (const bool sp : {false, true}) {
      for (ChunkSpec spec :
           {ChunkSpec{.first_layer = 0, .num_layers = 2, .first = true, .last = false},
            ChunkSpec{.first_layer = 2, .num_layers = 2, .first = false, .last = true}}) {
        spec.recompute = mode;
        ThreadGroup group(2);
        std::vector<std::jthread> threads;
        for (int r = 0; r < 2; ++r) {
          threads.emplace_back([&, r, spec] {
            ThreadCollectives comm = group.Rank(r);
            Accountant acc;
            const TpConfig tp{.size = 2, .rank = r, .sequence_parallel = sp};
            Chunk c(m, spec, tp, acc, &comm);
            CheckMemory(c, acc, PredictChunkMemory(m, spec, tp),
                        std::string(Name(mode)) + (sp ? " tp2 sp" : " tp2"));
          });
        }
      }
    }
  }
}

// A middle block's inventory in floats, counted by hand: what F saves under recompute none,
// selective and full, what W keeps (the same in every mode), and I's peak rise per mode.
struct HandCount {
  std::size_t saved_none, saved_selective, saved_full, pending_w;
  std::size_t i_none, i_selective, i_full;
};

void CheckHandCount(const CpConfig& cp, const HandCount& want) {
  const ModelConfig m = SmallModel();
  const ChunkSpec mid{.first_layer = 1, .num_layers = 1, .first = false, .last = false};
  ChunkSpec sel = mid, full = mid;
  sel.recompute = Recompute::kSelective;
  full.recompute = Recompute::kFull;
  const ChunkInventory n = PredictChunkMemory(m, mid, TpConfig{}, cp);
  const ChunkInventory s = PredictChunkMemory(m, sel, TpConfig{}, cp);
  const ChunkInventory f = PredictChunkMemory(m, full, TpConfig{}, cp);
  EXPECT_EQ(n.activations_full, 4 * want.saved_none) << "cp " << cp.size;
  EXPECT_EQ(s.activations_full, 4 * want.saved_selective) << "cp " << cp.size;
  EXPECT_EQ(f.activations_full, 4 * want.saved_full) << "cp " << cp.size;
  for (const ChunkInventory* i : {&n, &s, &f}) {
    EXPECT_EQ(i->activations_pending_w, 4 * want.pending_w) << "cp " << cp.size;
  }
  EXPECT_EQ(n.activations_i_transient, 4 * want.i_none) << "cp " << cp.size;
  EXPECT_EQ(s.activations_i_transient, 4 * want.i_selective) << "cp " << cp.size;
  EXPECT_EQ(f.activations_i_transient, 4 * want.i_full) << "cp " << cp.size;
  EXPECT_EQ(n.params, f.params);
}

// tp = 1: N = R = 16 tokens, h = 16, ffn = 32, 4 heads, S = 8, B = 2. Stored (recompute none),
// the block saves N(8h + 2 ffn + 2) = 3104 floats and the blocked attention's output and
// log-sum-exp, N h + N heads = 320; selective keeps CausalSelfAttention, whose B heads S^2 = 512
// probabilities it drops and recomputes; full keeps the N h = 256 input floats. W keeps
// N(8h + 2 ffn) = 3072 floats in every mode. Inside I: none peaks at fc2's dy, N h = 256; full
// first holds the recomputed block and its input (3424 + 256 − 256 freed after: peak +3424 over
// the input it starts from); selective peaks at the attention core's recompute: N h (fc2 dy) +
// N h (proj dy) − (N h + N) (LN2 freed) + 512 = 752 floats above its start.
TEST(CpuRecompute, InventoryHandCount) {
  CheckHandCount({}, {.saved_none = 3104 + 320,
                      .saved_selective = 3104,
                      .saved_full = 256,
                      .pending_w = 3072,
                      .i_none = 256,
                      .i_selective = 752,
                      .i_full = 3424});
}

// The same block under cp 2 (ring attention): N = R = 8 tokens a rank. Stored, it saves
// N(8h + 2 ffn + 2) = 1552 floats and the ring's output and log-sum-exp, N h + N heads = 160;
// selective drops those 160 (the ring's forward runs again in I), full keeps N h = 128. W keeps
// N(8h + 2 ffn) = 1536. Inside I: none peaks at fc2's dy, N h = 128; selective at the ring's
// recompute, N h + N h − (N h + N) + 160 = 280; full at the recomputed block, 1712.
TEST(CpuRecompute, InventoryHandCountUnderCp) {
  CheckHandCount({.size = 2, .rank = 0}, {.saved_none = 1552 + 160,
                                          .saved_selective = 1552,
                                          .saved_full = 128,
                                          .pending_w = 1536,
                                          .i_none = 128,
                                          .i_selective = 280,
                                          .i_full = 1712});
}

}  // namespace
}  // namespace pipetwin::cpu
