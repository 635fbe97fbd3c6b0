#include "sim/rebalance.h"

#include <algorithm>

#include "models/costs.h"
#include "schedule/stats.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

// The most moves tried: each is one re-simulation.
constexpr int kMaxMoves = 16;
constexpr double kUnevenShare = 0.05;  // busiest over median, to look at all
constexpr double kMinGain = 0.01;      // the step shorter by at least this, to say so

struct Played {
  double iteration_ms = 0;
  std::vector<double> busy;  // per pipeline rank: its most loaded replica's compute
};

// A step's per-pipeline-rank compute from its report; none where a row has no pipeline rank.
std::optional<Played> FromReport(const Report& r) {
  Played p{.iteration_ms = r.iteration_time_ms,
           .busy = std::vector<double>(static_cast<std::size_t>(std::max(0, r.pp)), 0.0)};
  for (const RankReport& rk : r.ranks) {
    if (rk.pp_rank < 0 || rk.pp_rank >= r.pp) return std::nullopt;
    double& b = p.busy[static_cast<std::size_t>(rk.pp_rank)];
    b = std::max(b, rk.compute_busy_ms);
  }
  return p;
}

// The job's step with `split` as its model.layers_per_stage: the same schedule (the split
// does not change it), costed again.
std::optional<Played> Play(const ResolvedJob& job, const std::vector<int>& split) {
  JobConfig c = job.config;
  c.model.layers_per_stage = split;
  auto resolved =
      ResolveJob(std::move(c), {.validate_generated = false, .schedule = &job.schedule});
  if (!resolved) return std::nullopt;
  auto res = Simulate(*resolved, {.record_timeline = false, .per_world_rank = false});
  if (!res) return std::nullopt;
  return FromReport(res->report);
}

}  // namespace

std::optional<Rebalance> SuggestRebalance(const ResolvedJob& job, const Report& r,
                                          bool with_profile) {
  const Schedule& s = job.schedule;
  if (with_profile || !job.model_costs || job.config.costs || r.pp < 2 || s.num_stages < 2 ||
      r.iteration_time_ms <= 0) {
    return std::nullopt;
  }
  auto split = models::SplitLayers(job.config.model, s.num_stages);
  if (!split) return std::nullopt;
  const std::optional<Played> now = FromReport(r);
  if (!now) return std::nullopt;
  const auto busiest = [](const std::vector<double>& busy) {
    return static_cast<int>(std::max_element(busy.begin(), busy.end()) - busy.begin());
  };
  const double median = Median(now->busy);
  const int top = busiest(now->busy);
  if (median <= 0 || now->busy[static_cast<std::size_t>(top)] < (1 + kUnevenShare) * median) {
    return std::nullopt;
  }
  Rebalance out{.layers_per_stage = *split,
                .before = *split,
                .iteration_ms = now->iteration_ms,
                .before_ms = now->iteration_ms,
                .busiest_pp_rank = top,
                .busiest_over_median = now->busy[static_cast<std::size_t>(top)] / median - 1};
  std::vector<int> cur = *split;
  Played best = *now;
  for (int move = 0; move < kMaxMoves; ++move) {
    const int from = busiest(best.busy);
    const int to =
        static_cast<int>(std::min_element(best.busy.begin(), best.busy.end()) - best.busy.begin());
    if (from == to) break;
    // The busiest rank's fullest stage (the later one on a tie: the output layer's) gives one
    // layer to the least busy rank's emptiest stage (the earlier one on a tie).
    int src = -1, dst = -1;
    for (int st = 0; st < s.num_stages; ++st) {
      const int rank = s.stage_to_rank[static_cast<std::size_t>(st)];
      const int n = cur[static_cast<std::size_t>(st)];
      if (rank == from && n >= 1 && (src < 0 || n >= cur[static_cast<std::size_t>(src)])) src = st;
      if (rank == to && (dst < 0 || n < cur[static_cast<std::size_t>(dst)])) dst = st;
    }
    if (src < 0 || dst < 0) break;
    std::vector<int> next = cur;
    --next[static_cast<std::size_t>(src)];
    ++next[static_cast<std::size_t>(dst)];
    std::optional<Played> p = Play(job, next);
    if (!p || p->iteration_ms >= best.iteration_ms) break;
    cur = std::move(next);
    best = std::move(*p);
  }
  if (best.iteration_ms > (1 - kMinGain) * now->iteration_ms) return std::nullopt;
  out.layers_per_stage = cur;
  out.iteration_ms = best.iteration_ms;
  return out;
}

std::string LayersList(const std::vector<int>& layers) {
  std::string s;
  for (int n : layers) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return "[" + s + "]";
}

}  // namespace pipetwin
