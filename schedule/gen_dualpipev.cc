// DualPipeV (DeepSeek-V3 technical report, 2024; the "cut in half" DualPipe): two chunks per
// rank in a V, as ZB-V (rank r holds stage r and stage 2p − 1 − r). DualPipe's point is that
// in its steady state every step pairs the forward of one chunk with the backward of the
// other, so that one's communication hides behind the other's computation; here the pair is
// two consecutive actions, and the simulator charges them one after the other.
//
// Rank r's program, in phases. Read against ZB-V (gen_zbv.cc): the warm-up is the same up to
// the first chunk-1 backward; from there on DualPipeV pairs each forward with a backward of
// the OTHER chunk, where ZB-V pairs it with the same chunk's.
//   1. 2(p − r − 1) chunk-0 forwards;
//   2. r + 1 times: chunk-0 F, chunk-1 F;
//   3. p − r − 1 times: chunk-1 I, W, F (zero bubble: backward split, W right away);
//   4. steady state, m − 2p + r + 1 times: chunk-0 F + chunk-1 B, chunk-1 F + chunk-0 B;
//   5. p − r − 1 times: chunk-1 B, chunk-1 F + chunk-0 B (the last chunk-1 forwards);
//   6. r + 1 times: chunk-1 B, chunk-0 B, the later half split into I with W deferred;
//   7. p − r − 1 times: one deferred W, chunk-0 I (W deferred);
//   8. the deferred Ws, oldest first.
// DeepSeek's reference needs m ≥ 2p microbatches; this order needs m ≥ 2p − 1.
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
  if (p.microbatches < 2 * p.pp - 1) {
    return Error::BadInput("dualpipev: needs at least 2·pp − 1 = " + std::to_string(2 * p.pp - 1) +
                           " microbatches (got " + std::to_string(p.microbatches) +
                           "): its steady state pairs a forward with a backward, and the first "
                           "backward reaches the first rank only after 2·pp − 1 forwards");
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
    for (int k = 0; k < r + 1; ++k) {
      const bool split = k >= (r + 1) / 2;
      B(1, split);
      B(0, split);
    }
    for (int k = 0; k < down; ++k) {
      PopW();
      B(0, true);
    }
    while (!deferred_w.empty()) PopW();
  }
  return s;
}

}  // namespace pipetwin
