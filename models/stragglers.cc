#include "models/stragglers.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

namespace pipetwin::models {
namespace {

std::uint64_t Mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A standard normal number from a key: Box-Muller on two uniforms in (0, 1).
double NormalFromKey(std::uint64_t key) {
  const double u1 = (static_cast<double>(Mix(key) >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = (static_cast<double>(Mix(key ^ 0x5851f42d4c957f2dULL) >> 11) + 0.5) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::acos(-1.0) * u2);
}

Status ParseFixed(const YAML::Node& list, const YamlFields& f, const std::string& key,
                  int world_size, Stragglers* out) {
  if (!list.IsSequence()) {
    return f.At(list, key, "must be a list of {rank, slowdown}");
  }
  std::set<long long> seen;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const YAML::Node e = list[k];
    const std::string at = key + "[" + std::to_string(k) + "]";
    if (!e.IsMap()) return f.At(e, at, "must be a map {rank, slowdown}");
    if (Status s = f.CheckKeys(e, at, {"rank", "slowdown"}); !s) return s;
    if (!e["rank"]) return f.At(e, at + ".rank", "required: a world rank in [0, world size)");
    if (!e["slowdown"]) return f.At(e, at + ".slowdown", "required: a factor >= 1");
    auto rank = f.Int(e["rank"], at + ".rank", 0, world_size - 1);
    if (!rank) return rank.error();
    if (!seen.insert(*rank).second) {
      return f.At(e["rank"], at + ".rank",
                  "rank " + std::to_string(*rank) + " is listed twice (one slowdown per rank)");
    }
    auto slowdown = f.Number(e["slowdown"], at + ".slowdown", 1.0, 1e3);
    if (!slowdown) return slowdown.error();
    out->fixed.push_back({static_cast<int>(*rank), *slowdown});
  }
  return OkStatus();
}

}  // namespace

Status ParseStragglers(const YAML::Node& node, const YamlFields& f, int world_size,
                       Stragglers* out) {
  const std::string key = "execution.stragglers";
  if (!node || node.IsNull()) return OkStatus();
  if (node.IsSequence()) return ParseFixed(node, f, key, world_size, out);
  if (!node.IsMap()) {
    return f.At(node, key,
                "must be a list of {rank, slowdown} or a map {fixed, variability, seed}");
  }
  if (Status s = f.CheckKeys(node, key, {"fixed", "variability", "seed"}); !s) return s;
  if (node["fixed"]) {
    if (Status s = ParseFixed(node["fixed"], f, key + ".fixed", world_size, out); !s) return s;
  }
  if (Status s = ParseVariability(node["variability"], f, key + ".variability", &out->variability);
      !s) {
    return s;
  }
  if (node["seed"]) {
    auto v = f.Int(node["seed"], key + ".seed", 0, 1LL << 62);
    if (!v) return v.error();
    out->seed = static_cast<std::uint64_t>(*v);
  }
  return OkStatus();
}

double StragglerFactor(const Stragglers& s, int rank, std::int64_t step) {
  double x = 1.0;
  for (const Stragglers::Fixed& fx : s.fixed) {
    if (fx.rank == rank) x *= fx.slowdown;
  }
  return x * VariabilityFactor(s, rank, step);
}

double VariabilityFactor(const Stragglers& s, int rank, std::int64_t step) {
  if (!s.random()) return 1.0;
  const Variability& v = s.variability;
  const double z = NormalFromKey(
      Mix(s.seed ^ Mix(static_cast<std::uint64_t>(rank) ^ Mix(static_cast<std::uint64_t>(step)))));
  double r = 1.0;
  switch (v.distribution) {
    case Variability::Distribution::kNormal:
      r = 1.0 + v.cv * z;
      break;
    case Variability::Distribution::kLognormal: {
      const double sigma = std::sqrt(std::log1p(v.cv * v.cv));
      r = std::exp(-sigma * sigma / 2 + sigma * z);
      break;
    }
    case Variability::Distribution::kSlowFraction: {
      // The rank's mode depends on (seed, rank) only: a slow GPU is slow in every step.
      const std::uint64_t key = Mix(s.seed ^ 0x736c6f77ULL ^ Mix(static_cast<std::uint64_t>(rank)));
      const double u = (static_cast<double>(Mix(key) >> 11) + 0.5) * 0x1.0p-53;
      r = (u < v.fraction ? v.slowdown : 1.0) * (1.0 + v.cv * z);
      break;
    }
    case Variability::Distribution::kNone:
      break;
  }
  return std::max(r, 0.05);
}

}  // namespace pipetwin::models
