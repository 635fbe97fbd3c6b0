// Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's order). Each rank holds vpp chunks;
// stage c·p + r is chunk c of rank r. Forwards run in groups of p microbatches per chunk:
// the k-th forward of a rank is chunk (k / p) mod v on microbatch (k / (p·v))·p + k mod p;
// backwards visit the chunks in reverse. Rank r warms up with 2(p − r − 1) + (v − 1)·p
// forwards, then alternates one forward and one backward, then drains. The bubble shrinks
// by v: (p − 1)(F + B) of one chunk. Megatron requires m to be a multiple of p.
#include <algorithm>
#include <string>

#include "schedule/generators.h"

namespace pipetwin {

Expected<Schedule> GenerateInterleaved1F1B(const GeneratorParams& p) {
  if (p.vpp < 1) return Error::BadInput("interleaved-1f1b: vpp must be at least 1");
  if (p.vpp == 1) return Generate1F1B(p);
  if (p.microbatches % p.pp != 0) {
    return Error::BadInput("interleaved-1f1b: microbatches must be a multiple of pp (got " +
                           std::to_string(p.microbatches) + " microbatches, pp " +
                           std::to_string(p.pp) +
                           "): Megatron's order runs microbatches in groups of pp per chunk");
  }
  auto s = NewSchedule("interleaved-1f1b", p, p.vpp, false);
  if (!s) return s;
  const int pp = p.pp;
  const int v = p.vpp;
  const int total = p.microbatches * v;
  auto mb_of = [&](int k) { return (k / (pp * v)) * pp + k % pp; };
  for (int r = 0; r < pp; ++r) {
    auto& prog = s->programs[static_cast<std::size_t>(r)];
    auto forward = [&](int k) {
      prog.push_back({((k / pp) % v) * pp + r, ActionKind::kForward, mb_of(k)});
    };
    auto backward = [&](int k) {
      prog.push_back({(v - 1 - (k / pp) % v) * pp + r, ActionKind::kBackward, mb_of(k)});
    };
    const int warmup = std::min(2 * (pp - r - 1) + (v - 1) * pp, total);
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = 0; k < total - warmup; ++k) {
      forward(warmup + k);
      backward(k);
    }
    for (int k = total - warmup; k < total; ++k) backward(k);
  }
  return s;
}

}  // namespace pipetwin
