// ZB-H1 and ZB-H2, the handcrafted schedules of the Zero Bubble paper (Qi et al., ICLR 2024,
// Section 3, Figure 3). Backward is split into I (input gradient, on the critical path) and
// W (weight gradient, free to move). Both follow one rule with two parameters:
//   - warm-up: rank r runs `warmup(r)` forwards;
//   - then for each microbatch k: I_k, then W_{k − lag(r)} once k ≥ lag(r), then the next F;
//   - finally the Ws that are left.
// ZB-H1 keeps 1F1B's warm-up (p − r) and lets W lag r steps, so the W of the last ranks
// fills the cool-down bubble: the peak number of in-flight microbatches stays p − r.
// ZB-H2 adds p − r − 1 forwards to the warm-up (2(p − r) − 1 in all) and lets W lag 2r
// steps: the warm-up bubble is filled with forwards and the cool-down with Ws, so with
// F = I = W the pipeline is a parallelogram without bubbles (when optimizer steps do not
// synchronise), at the price of up to 2p − 1 microbatches in flight.
// Both reproduce shared/reference/zb-h{1,2}-p4-m8.csv.
#include <algorithm>

#include "schedule/generators.h"

namespace pipetwin {
namespace {

template <class WarmupFn, class LagFn>
void EmitZeroBubbleH(Schedule& s, WarmupFn warmup_of, LagFn lag_of) {
  const int m = s.num_microbatches;
  for (int r = 0; r < s.num_ranks; ++r) {
    auto& prog = s.programs[static_cast<std::size_t>(r)];
    const int warmup = std::min(warmup_of(r), m);
    const int lag = lag_of(r);
    int f = 0;
    int w = 0;
    while (f < warmup) prog.push_back({r, ActionKind::kForward, f++});
    for (int i = 0; i < m; ++i) {
      prog.push_back({r, ActionKind::kBackwardInput, i});
      if (i >= lag) prog.push_back({r, ActionKind::kBackwardWeight, w++});
      if (f < m) prog.push_back({r, ActionKind::kForward, f++});
    }
    while (w < m) prog.push_back({r, ActionKind::kBackwardWeight, w++});
  }
}

}  // namespace

Expected<Schedule> GenerateZbH1(const GeneratorParams& p) {
  if (p.vpp != 1) return Error::BadInput("zb-h1: vpp must be 1 (one chunk per rank)");
  auto s = NewSchedule("zb-h1", p, 1, false);
  if (!s) return s;
  const int pp = p.pp;
  EmitZeroBubbleH(
      *s, [pp](int r) { return pp - r; }, [](int r) { return r; });
  return s;
}

Expected<Schedule> GenerateZbH2(const GeneratorParams& p) {
  if (p.vpp != 1) return Error::BadInput("zb-h2: vpp must be 1 (one chunk per rank)");
  auto s = NewSchedule("zb-h2", p, 1, false);
  if (!s) return s;
  const int pp = p.pp;
  EmitZeroBubbleH(
      *s, [pp](int r) { return 2 * (pp - r) - 1; }, [](int r) { return 2 * r; });
  return s;
}

}  // namespace pipetwin
