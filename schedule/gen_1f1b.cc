// 1F1B (PipeDream-Flush, Narayanan et al. 2021): rank r runs min(p − r, m) forwards, then
// alternates one backward and one forward, then drains the backwards. At most p − r
// microbatches are in flight on rank r. Matches shared/reference/1f1b-p4-m8.csv.
#include <algorithm>

#include "schedule/generators.h"

namespace pipetwin {

Expected<Schedule> Generate1F1B(const GeneratorParams& p) {
  if (p.vpp != 1) {
    return Error::BadInput("1f1b: vpp must be 1 (use interleaved-1f1b for several chunks)");
  }
  auto s = NewSchedule("1f1b", p, 1, false);
  if (!s) return s;
  const int m = p.microbatches;
  for (int r = 0; r < p.pp; ++r) {
    auto& prog = s->programs[static_cast<std::size_t>(r)];
    const int warmup = std::min(p.pp - r, m);
    int f = 0;
    int b = 0;
    while (f < warmup) prog.push_back({r, ActionKind::kForward, f++});
    while (b < m) {
      prog.push_back({r, ActionKind::kBackward, b++});
      if (f < m) prog.push_back({r, ActionKind::kForward, f++});
    }
  }
  return s;
}

}  // namespace pipetwin
