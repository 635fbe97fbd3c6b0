// GPipe (Huang et al. 2019): every rank runs all m forwards, then all m backwards, in
// microbatch order. Every rank holds the activations of all m microbatches at its peak.
#include "schedule/generators.h"

namespace pipetwin {

Expected<Schedule> GenerateGpipe(const GeneratorParams& p) {
  if (p.vpp != 1) return Error::BadInput("gpipe: vpp must be 1 (one chunk per rank)");
  auto s = NewSchedule("gpipe", p, 1, false);
  if (!s) return s;
  for (int r = 0; r < p.pp; ++r) {
    auto& prog = s->programs[static_cast<std::size_t>(r)];
    for (int mb = 0; mb < p.microbatches; ++mb) prog.push_back({r, ActionKind::kForward, mb});
    for (int mb = 0; mb < p.microbatches; ++mb) prog.push_back({r, ActionKind::kBackward, mb});
  }
  return s;
}

}  // namespace pipetwin
