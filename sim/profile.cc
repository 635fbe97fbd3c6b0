#include "sim/profile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "models/costs.h"
#include "schedule/file_io.h"
#include "schedule/quote.h"
#include "schedule/stats.h"
#include "schedule/yaml_fields.h"
#include "sim/model_costs.h"

namespace pipetwin {
namespace {

constexpr double kMaxMs = 1e9;
constexpr long long kMaxBytes = 1LL << 50;
constexpr double kMaxStepMs = 1e12;  // as job/resolve.cc: about 31 years
constexpr double kMaxRate = 1e18;    // GFLOP/s or GB/s: far beyond any machine

struct StageProfile {
  double f = -1, i = -1, w = -1, b = -1, opt = -1, dp_ms = 0;
  std::int64_t transfer_bytes = 0, dp_bytes = 0;
};

// An informational rate: a finite number > 0.
Expected<double> Rate(const YamlFields& f, const YAML::Node& node, const std::string& key,
                      const char* unit) {
  auto v = f.Number(node, key, -kMaxRate, kMaxRate);
  if (v && *v > 0) return *v;
  const std::string shown = !node.IsDefined() || node.IsNull() ? "nothing"
                            : node.IsScalar()                  ? Quoted(node.Scalar())
                            : node.IsSequence()                ? "a list"
                                                               : "a mapping";
  return f.At(node, key,
              std::string("must be a number in (0, 1e+18] (") + unit + "), got " + shown);
}

// The whole parse; without a schedule (`sched` null) what needs the job is not checked and
// the cost table is left empty.
Expected<Profile> Parse(const std::string& yaml_text, const std::string& path,
                        const Schedule* sched, const ActionMedians* replace);

}  // namespace

Expected<Profile> LoadProfile(const std::string& path, const Schedule& s,
                              const ActionMedians* replace) {
  auto text = ReadInputFile(path, "the profile (--profile)");
  if (!text) return text.error();
  return ParseProfile(*text, path, s, replace);
}

Expected<Profile> ParseProfile(const std::string& yaml_text, const std::string& path,
                               const Schedule& s, const ActionMedians* replace) {
  return Parse(yaml_text, path, &s, replace);
}

Expected<Profile> LoadProfileWithoutJob(const std::string& path, const std::string& option) {
  auto text = ReadInputFile(path, "the profile (" + option + ")");
  if (!text) return text.error();
  return ParseProfileWithoutJob(*text, path);
}

Expected<Profile> ParseProfileWithoutJob(const std::string& yaml_text, const std::string& path) {
  return Parse(yaml_text, path, nullptr, nullptr);
}

namespace {

Expected<Profile> Parse(const std::string& yaml_text, const std::string& path,
                        const Schedule* sched, const ActionMedians* replace) {
  YamlFields f{path};
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Error::BadInput(path + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap())
    return Error::BadInput(path + ": a profile is a YAML mapping (see sim/profile.h)");
  if (Status st = f.CheckKeys(
          root, "profile",
          {"version", "backend", "job", "schedule", "microbatches", "parallel", "stages", "engine",
           "sync_ms", "p2p", "dp_allreduce", "jitter", "recompute", "roofline"});
      !st) {
    return st.error();
  }
  if (!root["version"]) return f.At(root, "version", "required (1)");
  if (auto v = f.Int(root["version"], "version", 1, 1); !v) return v.error();
  if (root["parallel"]) {
    const YAML::Node p = root["parallel"];
    if (Status st = f.CheckKeys(p, "parallel", {"pp", "dp", "tp", "cp", "sp"}); !st) {
      return st.error();
    }
    if (p["pp"]) {
      auto pp = f.Int(p["pp"], "parallel.pp", 1, 1 << 20);
      if (!pp) return pp.error();
      if (sched != nullptr && *pp != sched->num_ranks) {
        return f.At(p["pp"], "parallel.pp",
                    "the profile was measured with pp " + std::to_string(*pp) +
                        ", the job has pp " + std::to_string(sched->num_ranks) +
                        " (calibrate the job itself)");
      }
    }
  }
  std::string recompute;
  if (root["recompute"]) {
    auto r = f.Choice(root["recompute"], "recompute", {"none", "selective", "full"});
    if (!r) return r.error();
    recompute = *r;
  }
  std::string backend;
  if (root["backend"] && root["backend"].IsScalar()) backend = root["backend"].Scalar();
  std::optional<ProfileRoofline> roofline;
  if (const YAML::Node r = root["roofline"]; r) {
    if (Status st = f.CheckKeys(r, "roofline", {"gemm_gflops", "memory_gb_s"}); !st) {
      return st.error();
    }
    if (!r.IsMap()) return f.At(r, "roofline", "must be a mapping {gemm_gflops, memory_gb_s}");
    roofline.emplace();
    for (const auto& [name, out, unit] :
         {std::tuple{"gemm_gflops", &roofline->gemm_gflops, "GFLOP/s"},
          std::tuple{"memory_gb_s", &roofline->memory_gb_s, "GB/s"}}) {
      if (!r[name]) continue;
      auto v = Rate(f, r[name], std::string("roofline.") + name, unit);
      if (!v) return v.error();
      *out = *v;
    }
  }

  const YAML::Node stages = root["stages"];
  if (!stages) return f.At(root, "stages", "required: one entry per model chunk");
  if (!stages.IsSequence() ||
      (sched != nullptr && static_cast<int>(stages.size()) != sched->num_stages)) {
    return f.At(stages, "stages",
                sched == nullptr
                    ? std::string("must be a list, one entry per model chunk")
                    : "must list " + std::to_string(sched->num_stages) +
                          " stages (one per model chunk of this schedule), got " +
                          (stages.IsSequence() ? std::to_string(stages.size()) : "no list"));
  }
  const int num_stages = static_cast<int>(stages.size());

  // Which compute kinds each stage runs (with a schedule).
  std::vector<std::set<ActionKind>> runs(static_cast<std::size_t>(num_stages));
  if (sched != nullptr) {
    for (const auto& prog : sched->programs) {
      for (const Action& a : prog) {
        if (IsCompute(a.kind)) runs[static_cast<std::size_t>(a.stage)].insert(a.kind);
      }
    }
  }

  std::vector<StageProfile> sp(static_cast<std::size_t>(num_stages));
  ActionMedians listed, gflops;
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const YAML::Node e = stages[k];
    const std::string key = "stages[" + std::to_string(k) + "]";
    if (Status st = f.CheckKeys(
            e, key,
            {"stage", "forward_ms", "backward_input_ms", "backward_weight_ms", "backward_ms",
             "optimizer_ms", "transfer_bytes", "dp_reduce_ms", "dp_reduce_bytes", "forward_gflops",
             "backward_input_gflops", "backward_weight_gflops", "backward_gflops"});
        !st) {
      return st.error();
    }
    if (e["stage"]) {
      auto v =
          f.Int(e["stage"], key + ".stage", static_cast<long long>(k), static_cast<long long>(k));
      if (!v) return v.error();
    }
    StageProfile& p = sp[k];
    auto num = [&](const char* name, double& out) -> Status {
      if (!e[name]) return OkStatus();
      auto v = f.Number(e[name], key + "." + name, 0, kMaxMs);
      if (!v) return v.error();
      out = *v;
      return OkStatus();
    };
    auto bytes = [&](const char* name, std::int64_t& out) -> Status {
      if (!e[name]) return OkStatus();
      auto v = f.Int(e[name], key + "." + name, 0, kMaxBytes);
      if (!v) return v.error();
      out = *v;
      return OkStatus();
    };
    for (Status st :
         {num("forward_ms", p.f), num("backward_input_ms", p.i), num("backward_weight_ms", p.w),
          num("backward_ms", p.b), num("optimizer_ms", p.opt), num("dp_reduce_ms", p.dp_ms),
          bytes("transfer_bytes", p.transfer_bytes), bytes("dp_reduce_bytes", p.dp_bytes)}) {
      if (!st) return st.error();
    }
    // Informational: each measured kind's achieved rate, and the medians as listed.
    const struct {
      ActionKind kind;
      double ms;
      const char* ms_name;
      const char* rate_name;
    } kinds[] = {{ActionKind::kForward, p.f, "forward_ms", "forward_gflops"},
                 {ActionKind::kBackwardInput, p.i, "backward_input_ms", "backward_input_gflops"},
                 {ActionKind::kBackwardWeight, p.w, "backward_weight_ms", "backward_weight_gflops"},
                 {ActionKind::kBackward, p.b, "backward_ms", "backward_gflops"},
                 {ActionKind::kOptimizer, p.opt, "optimizer_ms", nullptr}};
    for (const auto& kd : kinds) {
      const int stage = static_cast<int>(k);
      if (kd.ms >= 0) listed[{stage, kd.kind}] = kd.ms;
      if (kd.rate_name == nullptr || !e[kd.rate_name]) continue;
      const std::string rkey = key + "." + kd.rate_name;
      auto v = Rate(f, e[kd.rate_name], rkey, "GFLOP/s");
      if (!v) return v.error();
      if (kd.ms < 0) {
        return f.At(e[kd.rate_name], rkey,
                    std::string("given without ") + kd.ms_name +
                        " (the rate of a measured action: list its median too)");
      }
      gflops[{stage, kd.kind}] = *v;
    }
    if (replace != nullptr) {
      for (const auto& [what, v] : *replace) {
        if (what.first != static_cast<int>(k)) continue;
        switch (what.second) {
          case ActionKind::kForward:
            p.f = v;
            break;
          case ActionKind::kBackward:
            p.b = v;
            break;
          case ActionKind::kBackwardInput:
            p.i = v;
            break;
          case ActionKind::kBackwardWeight:
            p.w = v;
            break;
          case ActionKind::kOptimizer:
            p.opt = v;
            break;
          case ActionKind::kSendF:
          case ActionKind::kRecvF:
          case ActionKind::kSendB:
          case ActionKind::kRecvB:
          case ActionKind::kReduceGrad:
          case ActionKind::kWaitSendF:
          case ActionKind::kWaitSendB:
          case ActionKind::kUnshard:
          case ActionKind::kReshard:
          case ActionKind::kWaitReduceGrad:
            break;
        }
      }
    }
    if (p.b < 0 && p.i >= 0 && p.w >= 0) p.b = p.i + p.w;
    const struct {
      ActionKind kind;
      double value;
      const char* name;
    } need[] = {{ActionKind::kForward, p.f, "forward_ms"},
                {ActionKind::kBackward, p.b, "backward_ms"},
                {ActionKind::kBackwardInput, p.i, "backward_input_ms"},
                {ActionKind::kBackwardWeight, p.w, "backward_weight_ms"},
                {ActionKind::kOptimizer, p.opt, "optimizer_ms"}};
    for (const auto& n : need) {
      if (n.value < 0 && runs[k].count(n.kind) > 0) {  // (no schedule: runs nothing)
        return f.At(e, key + "." + n.name,
                    "required: the schedule runs " + std::string(KindName(n.kind)) + " on stage " +
                        std::to_string(k) + " (calibrate with the same schedule)");
      }
    }
  }

  double overhead = 0, step_start = 0, sync = 0, latency = 0, bandwidth = 0;
  if (const YAML::Node e = root["engine"]; e) {
    if (Status st = f.CheckKeys(e, "engine", {"action_overhead_ms", "step_start_ms"}); !st) {
      return st.error();
    }
    if (e["action_overhead_ms"]) {
      auto v = f.Number(e["action_overhead_ms"], "engine.action_overhead_ms", 0, kMaxMs);
      if (!v) return v.error();
      overhead = *v;
    }
    if (e["step_start_ms"]) {
      auto v = f.Number(e["step_start_ms"], "engine.step_start_ms", 0, kMaxMs);
      if (!v) return v.error();
      step_start = *v;
    }
  }
  if (root["sync_ms"]) {
    auto v = f.Number(root["sync_ms"], "sync_ms", 0, kMaxMs);
    if (!v) return v.error();
    sync = *v;
  }
  bool has_cross_rank_transfer = false;
  for (int st = 0; sched != nullptr && st + 1 < sched->num_stages; ++st) {
    has_cross_rank_transfer =
        has_cross_rank_transfer || sched->stage_to_rank[static_cast<std::size_t>(st)] !=
                                       sched->stage_to_rank[static_cast<std::size_t>(st + 1)];
  }
  if (const YAML::Node p = root["p2p"]; p) {
    if (Status st = f.CheckKeys(p, "p2p", {"latency_ms", "bandwidth_bytes_per_ms", "samples"});
        !st) {
      return st.error();
    }
    if (!p["latency_ms"]) return f.At(p, "p2p.latency_ms", "required with p2p");
    if (!p["bandwidth_bytes_per_ms"])
      return f.At(p, "p2p.bandwidth_bytes_per_ms", "required with p2p");
    auto l = f.Number(p["latency_ms"], "p2p.latency_ms", 0, kMaxMs);
    if (!l) return l.error();
    auto b = f.Number(p["bandwidth_bytes_per_ms"], "p2p.bandwidth_bytes_per_ms", 1e-9, 1e18);
    if (!b) return b.error();
    latency = *l;
    bandwidth = *b;
    if (const YAML::Node smp = p["samples"]; smp) {
      if (!smp.IsSequence()) return f.At(smp, "p2p.samples", "must be a list of {bytes, ms}");
      for (std::size_t k = 0; k < smp.size(); ++k) {
        const std::string key = "p2p.samples[" + std::to_string(k) + "]";
        if (Status st = f.CheckKeys(smp[k], key, {"bytes", "ms"}); !st) return st.error();
      }
    }
  } else if (has_cross_rank_transfer) {
    return f.At(root, "p2p",
                "required: the schedule sends activations between ranks (latency_ms, "
                "bandwidth_bytes_per_ms)");
  }
  if (const YAML::Node d = root["dp_allreduce"]; d) {
    if (!d.IsSequence()) return f.At(d, "dp_allreduce", "must be a list");
    for (std::size_t k = 0; k < d.size(); ++k) {
      const std::string key = "dp_allreduce[" + std::to_string(k) + "]";
      if (Status st = f.CheckKeys(d[k], key, {"group_size", "stage", "bytes_sent", "ms"}); !st) {
        return st.error();
      }
    }
  }

  std::vector<std::vector<double>> jitter;
  if (const YAML::Node j = root["jitter"]; j) {
    if (!j.IsSequence()) {
      return f.At(j, "jitter", "must be a list of per-step lists, one factor per pipeline rank");
    }
    for (std::size_t k = 0; k < j.size(); ++k) {
      const std::string key = "jitter[" + std::to_string(k) + "]";
      if (!j[k].IsSequence() ||
          (sched != nullptr && static_cast<int>(j[k].size()) != sched->num_ranks)) {
        return f.At(j[k], key,
                    sched == nullptr
                        ? std::string("must be a list of factors, one per pipeline rank")
                        : "must list " + std::to_string(sched->num_ranks) +
                              " factors (one per pipeline rank)");
      }
      std::vector<double> row;
      for (std::size_t r = 0; r < j[k].size(); ++r) {
        auto v = f.Number(j[k][r], key + "[" + std::to_string(r) + "]", 1e-6, 100);
        if (!v) return v.error();
        row.push_back(*v);
      }
      jitter.push_back(std::move(row));
    }
  }

  Profile out;
  out.jitter = std::move(jitter);
  out.recompute = std::move(recompute);
  out.backend = std::move(backend);
  out.listed_ms = std::move(listed);
  out.gflops = std::move(gflops);
  out.roofline = roofline;
  for (int k = 0; k < num_stages; ++k) {  // the medians as listed
    const StageProfile& p = sp[static_cast<std::size_t>(k)];
    for (const auto& [kind, v] : {std::pair{ActionKind::kForward, p.f},
                                  {ActionKind::kBackward, p.b},
                                  {ActionKind::kBackwardInput, p.i},
                                  {ActionKind::kBackwardWeight, p.w},
                                  {ActionKind::kOptimizer, p.opt}}) {
      if (v >= 0) out.medians[{k, kind}] = v;
    }
  }
  if (sched == nullptr) return out;  // no job: no cost table
  const Schedule& s = *sched;
  auto ms = [](double v) { return SimTime::FromMillis(v); };
  auto copy = [&](std::int64_t b) {
    return bandwidth > 0 ? static_cast<double>(b) / bandwidth : 0.0;
  };
  // The step is at most the sum of its actions' times: bounded before any becomes a SimTime,
  // so that simulated time stays far inside int64 nanoseconds.
  double total = sync + step_start;
  for (int k = 0; k < s.num_stages; ++k) {
    const StageProfile& p = sp[static_cast<std::size_t>(k)];
    const double in =
        (k > 0 ? copy(sp[static_cast<std::size_t>(k - 1)].transfer_bytes) : 0) +
        (k + 1 < s.num_stages ? copy(sp[static_cast<std::size_t>(k + 1)].transfer_bytes) : 0);
    const double per_mb = std::max(p.f, 0.0) + std::max(p.b, 0.0) + std::max(p.i, 0.0) +
                          std::max(p.w, 0.0) + 4 * overhead + 2 * in + 2 * latency;
    total += s.num_microbatches * per_mb + std::max(p.opt, 0.0) + overhead + p.dp_ms;
  }
  if (!(total <= kMaxStepMs)) {
    return Error::BadInput(path + ": the profile's times give a step of up to " +
                           std::to_string(total) + " ms (" + std::to_string(s.num_microbatches) +
                           " microbatches over " + std::to_string(s.num_stages) +
                           " stages); the simulated step is limited to 1e12 ms (check "
                           "stages[].*_ms, transfer_bytes and p2p.bandwidth_bytes_per_ms)");
  }
  CostTable t;
  t.stages.resize(static_cast<std::size_t>(s.num_stages));
  for (int k = 0; k < s.num_stages; ++k) {
    const StageProfile& p = sp[static_cast<std::size_t>(k)];
    const int rank = s.stage_to_rank[static_cast<std::size_t>(k)];
    const bool recv_f = k > 0 && s.stage_to_rank[static_cast<std::size_t>(k - 1)] != rank;
    const bool recv_b =
        k + 1 < s.num_stages && s.stage_to_rank[static_cast<std::size_t>(k + 1)] != rank;
    const double in_f = recv_f ? copy(sp[static_cast<std::size_t>(k - 1)].transfer_bytes) : 0;
    const double in_b = recv_b ? copy(sp[static_cast<std::size_t>(k + 1)].transfer_bytes) : 0;
    StageTimes& st = t.stages[static_cast<std::size_t>(k)];
    st.forward = ms(std::max(p.f, 0.0) + overhead + in_f);
    st.backward = ms(std::max(p.b, 0.0) + overhead + in_b);
    st.backward_input = ms(std::max(p.i, 0.0) + overhead + in_b);
    st.backward_weight = ms(std::max(p.w, 0.0) + overhead);
    st.optimizer = ms(std::max(p.opt, 0.0) + overhead);
    st.send_forward = st.send_backward = ms(latency);
    st.send_bytes = p.transfer_bytes;
    st.dp_reduce = ms(p.dp_ms);
    st.dp_reduce_bytes = p.dp_bytes;
  }
  t.sync = ms(sync + step_start);
  out.table = std::move(t);
  return out;
}

}  // namespace

CostTable ScaleComputeByRank(const CostTable& table, const Schedule& s,
                             const std::vector<double>& factors) {
  CostTable t = table;
  for (std::size_t k = 0; k < t.stages.size(); ++k) {
    const double x = factors.at(static_cast<std::size_t>(s.stage_to_rank[k]));
    StageTimes& st = t.stages[k];
    for (SimTime* v :
         {&st.forward, &st.backward, &st.backward_input, &st.backward_weight, &st.optimizer}) {
      *v = SimTime::FromMillis(v->ToMillis() * x);
    }
  }
  return t;
}

Status CheckProfileMatchesJob(const Profile& p, const ResolvedJob& job, const std::string& path) {
  const std::string want(models::ToString(job.config.training.recompute));
  if (p.recompute.empty() || p.recompute == want) return OkStatus();
  return Error::BadInput(path + ": recompute: the profile was measured with recompute " +
                         p.recompute + ", the job has training.recompute: " + want +
                         " (its backward-input times include the recomputed forward or not; "
                         "calibrate the job itself)");
}

Expected<SimResult> SimulateWithProfile(const ResolvedJob& job, const std::string& profile_path,
                                        const SimulateOptions& opts) {
  const Schedule& s = job.schedule;
  auto profile = LoadProfile(profile_path, s);
  if (!profile) return profile.error();
  if (Status st = CheckProfileMatchesJob(*profile, job, profile_path); !st) return st.error();
  const EngineOptions eo{.optimizer_sync = job.config.optimizer_sync};
  CostTable costs = std::move(profile->table);
  const std::vector<std::vector<double>>& jitter = profile->jitter;
  ProfileUse use;
  use.path = profile_path;
  if (!jitter.empty()) {
    // One play per calibration step; the median one is reported (run's estimator: the
    // upper middle of the sorted iteration times).
    auto iteration = [&](const CostTable& t) {
      return IterationNs(eo.optimizer_sync, StepRecordOf(RunEngine(s, t, eo, nullptr)));
    };
    std::vector<std::int64_t> plays;
    for (const std::vector<double>& factors : jitter) {
      plays.push_back(iteration(ScaleComputeByRank(costs, s, factors)));
    }
    const auto [lo, hi] = std::minmax_element(plays.begin(), plays.end());
    use.has_jitter = true;
    use.jitter_samples = static_cast<int>(jitter.size());
    use.nominal_iteration_time_ms = static_cast<double>(iteration(costs)) * 1e-6;
    use.jitter_min_ms = static_cast<double>(*lo) * 1e-6;
    use.jitter_max_ms = static_cast<double>(*hi) * 1e-6;
    costs = ScaleComputeByRank(costs, s, jitter[UpperMedianIndex(plays)]);
  }
  SimResult res = SimulateWithCosts(job, std::move(costs), opts);
  res.report.profile = use;
  return res;
}

}  // namespace pipetwin
