#include <array>
#include <string>

#include "schedule/generators.h"

namespace pipetwin {
namespace {

constexpr std::array<GeneratorInfo, 7> kGenerators = {{
    {"gpipe", "all forwards, then all backwards (Huang et al. 2019)", &GenerateGpipe, false},
    {"1f1b", "one forward, one backward after a warm-up (PipeDream-Flush)", &Generate1F1B, false},
    {"interleaved-1f1b", "Megatron-LM's interleaved 1F1B, vpp chunks per rank",
     &GenerateInterleaved1F1B, false},
    {"zb-h1", "Zero Bubble ZB-H1: 1F1B memory, W fills the cool-down bubble", &GenerateZbH1, true},
    {"zb-h2", "Zero Bubble ZB-H2: longer warm-up, W fills every bubble", &GenerateZbH2, true},
    {"zbv", "Zero Bubble V: two chunks per rank in a V, split backward", &GenerateZbv, true},
    {"dualpipev", "DualPipeV: DualPipe cut in half, two chunks per rank in a V", &GenerateDualPipeV,
     true},
}};

}  // namespace

std::span<const GeneratorInfo> AllGenerators() { return kGenerators; }

const GeneratorInfo* FindGenerator(std::string_view name) {
  for (const GeneratorInfo& g : kGenerators) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

Expected<Schedule> NewSchedule(std::string_view name, const GeneratorParams& p, int chunks,
                               bool v_shape) {
  if (p.pp < 1) return Error::BadInput(std::string(name) + ": pp must be at least 1");
  if (p.microbatches < 1) {
    return Error::BadInput(std::string(name) + ": microbatches must be at least 1");
  }
  Schedule s;
  s.num_ranks = p.pp;
  s.num_stages = p.pp * chunks;
  s.num_microbatches = p.microbatches;
  s.stage_to_rank = v_shape ? VPlacement(p.pp) : LoopPlacement(p.pp, chunks);
  s.programs.resize(static_cast<std::size_t>(p.pp));
  return s;
}

}  // namespace pipetwin
