// ZB-V (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory"): two chunks per rank
// placed in a V, so rank r holds stage r (chunk 0, on the way down) and stage 2p − 1 − r
// (chunk 1, on the way back); the loss is computed on rank 0. Backward is split into I and W.
// With F = I = W this has the memory of 1F1B and almost no bubble.
//
// Rank r's program, in phases (each step only emits what is still to do):
//   1. 2(p − r) − 1 chunk-0 forwards, until the first chunk-1 activation comes back;
//   2. r times: chunk-1 F, chunk-0 F;
//   3. p − r times: chunk-1 F, I, W (the first gradients start at the bottom of the V);
//   4. steady state: chunk-0 F, I, W, chunk-1 F, I, W, while forwards remain;
//   5. cool-down: r times chunk-0 I, chunk-1 I (Ws wait); p − r times chunk-0 I, W;
//   6. the Ws that are left, chunk 1 first.
// With m < 2p − 1 the phases run for 2p − 1 microbatches and the actions of the missing ones
// are dropped (torch.distributed.pipelining's ScheduleZBVZeroBubble does the same).
#include <algorithm>

#include "schedule/generators.h"

namespace pipetwin {
namespace {

struct ChunkCursor {
  int stage;
  int f = 0, i = 0, w = 0;
};

}  // namespace

Expected<Schedule> GenerateZbv(const GeneratorParams& p) {
  if (p.vpp != 1 && p.vpp != 2) {
    return Error::BadInput("zbv: vpp must be 2 (ZB-V always places two chunks per rank)");
  }
  auto s = NewSchedule("zbv", p, 2, true);
  if (!s) return s;
  const int pp = p.pp;
  // Below 2p − 1 microbatches the order is that of 2p − 1 with the missing microbatches
  // left out, as torch's ScheduleZBVZeroBubble builds it (the phases assume a full pipeline).
  const int m = std::max(p.microbatches, 2 * pp - 1);
  for (int r = 0; r < pp; ++r) {
    auto& prog = s->programs[static_cast<std::size_t>(r)];
    ChunkCursor c0{r};
    ChunkCursor c1{2 * pp - 1 - r};
    auto F = [&](ChunkCursor& c) {
      if (c.f < m) prog.push_back({c.stage, ActionKind::kForward, c.f++});
    };
    auto I = [&](ChunkCursor& c) {
      if (c.i < c.f) prog.push_back({c.stage, ActionKind::kBackwardInput, c.i++});
    };
    auto W = [&](ChunkCursor& c) {
      if (c.w < c.i) prog.push_back({c.stage, ActionKind::kBackwardWeight, c.w++});
    };
    for (int k = 0; k < 2 * (pp - r) - 1; ++k) F(c0);
    for (int k = 0; k < r; ++k) {
      F(c1);
      F(c0);
    }
    for (int k = 0; k < pp - r; ++k) {
      F(c1);
      I(c1);
      W(c1);
    }
    while (c0.f < m || c1.f < m) {
      F(c0);
      I(c0);
      W(c0);
      F(c1);
      I(c1);
      W(c1);
    }
    for (int k = 0; k < r; ++k) {
      I(c0);
      I(c1);
    }
    while (c0.i < m || c1.i < m) {
      I(c0);
      W(c0);
      I(c1);
    }
    while (c1.w < m) W(c1);
    while (c0.w < m) W(c0);
    std::erase_if(prog, [&](const Action& a) { return a.microbatch >= p.microbatches; });
  }
  return s;
}

}  // namespace pipetwin
