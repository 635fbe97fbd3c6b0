// stragglers.h — `execution.stragglers`: ranks that run slower than the others, as a factor
// on every compute action's time of a rank in a step. The same factors are played by the
// simulator (sim/simulate.h) and applied by the sleep backend (exec/sleep/), so that a
// prediction and a measurement see the same slow ranks in the same steps.
//
//   execution:
//     stragglers:
//       fixed: [{rank: 3, slowdown: 1.5}]          # world rank 3 always 1.5x slower
//       variability: {distribution: lognormal, cv: 0.1}   # and every rank, every step, a
//       seed: 7                                             # seeded random factor
//   execution: {stragglers: [{rank: 3, slowdown: 1.5}]}     # the list alone: fixed only
//
// One concept with `cluster.variability` (models/cluster.h): the random part is the same
// Variability (a distribution of mean 1 and coefficient of variation cv, or slow_fraction's
// share of slow ranks, parsed by the same function). cluster.variability is the cost model's
// expectation over many ranks (E[max]); execution.stragglers draws the factors themselves, per
// (seed, world rank, step), so that both sides play the same draws.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <vector>

#include "models/cluster.h"
#include "schedule/expected.h"
#include "schedule/yaml_fields.h"

namespace pipetwin::models {

struct Stragglers {
  struct Fixed {
    int rank = 0;           // world rank
    double slowdown = 1.0;  // >= 1
  };
  std::vector<Fixed> fixed;
  Variability variability;  // per rank and step (slow_fraction's slow ranks: per rank); kNone: none
  std::uint64_t seed = 1;

  bool any() const { return !fixed.empty() || variability.active(); }
  bool random() const { return variability.active(); }
};

// `execution.stragglers` of a job of `world_size` ranks; bad input names the key.
Status ParseStragglers(const YAML::Node& node, const YamlFields& f, int world_size,
                       Stragglers* out);

// The factor on world rank `rank`'s compute times in step `step` (0-based, warm-up included):
// its fixed slowdown (1 if none) times, with variability, a draw of mean 1 and coefficient of
// variation cv (normal: 1 + cv z; lognormal: exp(mu + sigma z), sigma^2 = ln(1 + cv^2),
// mu = -sigma^2 / 2) from a standard normal z that is a pure function of (seed, rank, step).
// slow_fraction: the rank's mode (slowdown with chance fraction, else 1) is a pure function of
// (seed, rank) alone, as a slow GPU stays slow, times 1 + cv z per step.
// Never below 0.05 (a normal draw 4 sigma low is clamped there).
double StragglerFactor(const Stragglers& s, int rank, std::int64_t step);
// Its variability's draw alone (1 without variability): StragglerFactor is the rank's fixed
// slowdown times this.
double VariabilityFactor(const Stragglers& s, int rank, std::int64_t step);

// With variability, simulate plays every measured step with its own draws, one per world rank
// (sim/simulate.h): at most this many draws (steps x world ranks) and schedule actions (steps x
// actions) a job, so that a prediction never runs for minutes; each is about 1 to 10 s.
inline constexpr std::int64_t kMaxStragglerDraws = 1LL << 26;
inline constexpr std::int64_t kMaxStragglerPlayActions = 1LL << 27;

}  // namespace pipetwin::models
