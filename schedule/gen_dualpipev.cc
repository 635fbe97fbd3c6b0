// DualPipeV (DeepSeek-V3 technical report, 2024; the "cut in half" DualPipe): two chunks per
// rank in a V, as ZB-V (rank r holds stage r and stage 2p − 1 − r). In its steady state every
// step pairs the forward of one chunk with the full backward of the other, so that one's
// communication hides behind the other's computation; here a pair is two consecutive
// actions (F, then B), the order torch's runtime runs OVERLAP_F_B's sub-actions in.
//
// The order is DeepSeek's reference, `DualPipeV.step` in github.com/deepseek-ai/DualPipe
// (dualpipe/dualpipev.py, 2025; torch.distributed.pipelining's ScheduleDualPipeV follows it),
// learned from its eight steps and written anew. Rank r of p, chunk 0 = stage r, chunk 1 =
// stage 2p − 1 − r; I is an input-gradient backward whose W is queued, W pops the oldest:
//   1. 2(p − r − 1) chunk-0 F;
//   2. r + 1 times: chunk-0 F, chunk-1 F;
//   3. p − r − 1 times: chunk-1 I, W, chunk-1 F;
//   4. m − 2p + r + 1 times: chunk-0 F + chunk-1 B, chunk-1 F + chunk-0 B (on the last rank
//      the first of these pairs is not overlapped, which does not change the order);
//   5. p − r − 1 times: chunk-1 B, chunk-1 F + chunk-0 B;
//   6. r + 1 times: chunk-1 backward, chunk-0 backward, full B until the middle step
//      k = ⌊(r + 1)/2⌋ and I from then on; at that step an even rank still runs chunk 1's
//      backward full and splits only chunk 0's, an odd rank splits both;
//   7. p − r − 1 times: W, chunk-0 I;
//   8. r + 1 times: W (the queue is then empty).
// The reference asserts m ≥ 2p microbatches (torch: at least as many as stages); so does this
// generator. (pipetwin before issue 13 split chunk 1's backward at the middle step on even
// ranks too and allowed m = 2p − 1; that order cost one F of makespan and was dropped.)
#include <algorithm>
#include <deque>
#include <string>

#include "schedule/generators.h"

namespace pipetwin {

Expected<Schedule> GenerateDualPipeV(const GeneratorParams& p) {
  if (p.vpp != 1 && p.vpp != 2) {
    return Error::BadInput(
        "dualpipev: vpp must be 2 (DualPipeV always places two chunks per rank)");
  }
  if (p.microbatches < 2 * p.pp) {
    return Error::BadInput("dualpipev: needs at least 2·pp = " + std::to_string(2 * p.pp) +
                           " microbatches (got " + std::to_string(p.microbatches) +
                           "), as DeepSeek's reference does: one per stage of the V");
  }
  auto s = NewSchedule("dualpipev", p, 2, true);
  if (!s) return s;
  const int pp = p.pp;
  const int m = p.microbatches;
  for (int r = 0; r < pp; ++r) {
    auto& prog = s->programs[static_cast<std::size_t>(r)];
    const int st[2] = {r, 2 * pp - 1 - r};
    int f[2] = {0, 0};
    int b[2] = {0, 0};
    std::deque<Action> deferred_w;
    auto F = [&](int c) { prog.push_back({st[c], ActionKind::kForward, f[c]++}); };
    auto B = [&](int c, bool split) {
      if (split) {
        prog.push_back({st[c], ActionKind::kBackwardInput, b[c]});
        deferred_w.push_back({st[c], ActionKind::kBackwardWeight, b[c]});
      } else {
        prog.push_back({st[c], ActionKind::kBackward, b[c]});
      }
      ++b[c];
    };
    auto PopW = [&] {
      if (deferred_w.empty()) return;
      prog.push_back(deferred_w.front());
      deferred_w.pop_front();
    };
    const int down = pp - r - 1;
    for (int k = 0; k < 2 * down; ++k) F(0);
    for (int k = 0; k < r + 1; ++k) {
      F(0);
      F(1);
    }
    for (int k = 0; k < down; ++k) {
      B(1, true);
      PopW();
      F(1);
    }
    for (int k = 0; k < m - 2 * pp + r + 1; ++k) {
      F(0);
      B(1, false);
      F(1);
      B(0, false);
    }
    for (int k = 0; k < down; ++k) {
      B(1, false);
      F(1);
      B(0, false);
    }
    const int middle = (r + 1) / 2;
    const bool odd = r % 2 == 1;
    for (int k = 0; k < r + 1; ++k) {
      B(1, k > middle || (odd && k == middle));
      B(0, k >= middle);
    }
    for (int k = 0; k < down; ++k) {
      PopW();
      B(0, true);
    }
    for (int k = 0; k < r + 1; ++k) PopW();
  }
  return s;
}

}  // namespace pipetwin
