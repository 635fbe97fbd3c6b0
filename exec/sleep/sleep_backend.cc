#include "exec/sleep/sleep_backend.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <ctime>
#include <stdexcept>
#include <string>

#include "exec/mpi_util.h"
#include "models/stragglers.h"

namespace pipetwin::exec {
namespace {

// Sleeps until `deadline` on CLOCK_MONOTONIC (the clock of std::chrono::steady_clock on
// Linux), resuming after signals.
void SleepUntil(std::int64_t deadline_ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

std::int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

Expected<std::unique_ptr<Backend>> SleepBackend::Make(const BackendConfig& cfg) {
  const JobConfig& job = cfg.job->config;
  if (cfg.tp.size > 1) {
    return job.source.At("parallel.tp",
                         "the sleep backend runs no tensor-parallel collectives (they are inside "
                         "the compute it sleeps): use tp: 1 with --backend sleep");
  }
  std::map<std::pair<int, ActionKind>, double> ms = cfg.compute_ms;
  if (ms.empty()) {
    if (!job.costs) {
      return job.source.At("costs",
                           "--backend sleep sleeps each action's time: give costs: (absolute "
                           "ms) in the job, or a calibration profile with --profile");
    }
    const AbstractCosts& c = *job.costs;
    for (int s = 0; s < static_cast<int>(cfg.layers_per_stage.size()); ++s) {
      ms[{s, ActionKind::kForward}] = c.forward_ms;
      ms[{s, ActionKind::kBackwardInput}] = c.backward_input_ms;
      ms[{s, ActionKind::kBackwardWeight}] = c.backward_weight_ms;
      ms[{s, ActionKind::kBackward}] = c.backward_input_ms + c.backward_weight_ms;
      ms[{s, ActionKind::kOptimizer}] = c.optimizer_ms;
    }
  }
  for (const Action& a : cfg.schedule->programs[static_cast<std::size_t>(cfg.pp_rank)]) {
    if (IsCompute(a.kind) && ms.count({a.stage, a.kind}) == 0) {
      return Error::BadInput("--profile: the profile has no time for " +
                             std::string(KindName(a.kind)) + " on stage " +
                             std::to_string(a.stage) + ", which the schedule runs");
    }
  }
  return std::unique_ptr<Backend>(new SleepBackend(cfg, std::move(ms)));
}

SleepBackend::SleepBackend(const BackendConfig& cfg,
                           std::map<std::pair<int, ActionKind>, double> ms)
    : cfg_(cfg),
      ms_(std::move(ms)),
      p2p_(cfg.pp_comm, cfg.microbatches),
      dp_reduce_(cfg.dp_comm, cfg.dp, cfg.timeout_s) {
  // Precise wake-ups: the default timer slack (50 us) would make every sleep late by up to it.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  // A rank that wakes from its sleep should get a core at once, not a scheduler tick later
  // behind the other work of a busy machine: the lowest real-time priority (SCHED_FIFO 1)
  // where permitted (root, CAP_SYS_NICE), else the highest CFS weight (nice -20), else as it
  // is. It computes nothing, so it takes little from that work; on 2 busy cores, 4 ms sleeps
  // woke more than 1 ms late about 10% of the time at nice -20, about 1% under SCHED_FIFO.
  const sched_param rt{.sched_priority = 1};
  if (sched_setscheduler(0, SCHED_FIFO, &rt) != 0) setpriority(PRIO_PROCESS, 0, -20);
  const gpt::LocalDims dims = gpt::MakeLocalDims(cfg_.model, cfg_.tp);
  activation_elements_ = static_cast<std::size_t>(dims.rows * dims.hidden);
  const int stages = static_cast<int>(cfg_.layers_per_stage.size());
  int first_layer = 0;
  for (int s = 0; s < stages; ++s) {
    const int n = cfg_.layers_per_stage[static_cast<std::size_t>(s)];
    if (Local(s)) {
      gpt::ParamLayout layout = gpt::ChunkParamLayout(cfg_.model,
                                                      gpt::ChunkSpec{.first_layer = first_layer,
                                                                     .num_layers = n,
                                                                     .first = s == 0,
                                                                     .last = s == stages - 1},
                                                      cfg_.tp);
      grads_[s].assign(layout.total, 0.0f);
      if (cfg_.ps != nullptr) ps_params_[s].assign(layout.total, 0.0f);
      layouts_.emplace(s, std::move(layout));
    }
    first_layer += n;
  }
  if (cfg_.ps != nullptr) {
    ps_ = cfg_.ps;
    if (cfg_.dp_rank == 0) {
      for (const auto& [s, p] : ps_params_) ps_->SendInitial(s, p);
    }
  }
}

bool SleepBackend::Local(int stage) const {
  return stage >= 0 && stage < static_cast<int>(cfg_.stage_to_rank.size()) &&
         cfg_.stage_to_rank[static_cast<std::size_t>(stage)] == cfg_.pp_rank;
}

std::vector<float>& SleepBackend::NewBuffer(Key k) {
  auto [it, inserted] = buffers_.try_emplace(k, activation_elements_, 0.0f);
  if (!inserted) throw std::logic_error("buffer allocated twice");
  return it->second;
}

void SleepBackend::Release(Key k) {
  if (buffers_.erase(k) == 0) {
    throw std::logic_error("missing buffer for stage " + std::to_string(std::get<1>(k)) +
                           ", microbatch " + std::to_string(std::get<2>(k)));
  }
}

void SleepBackend::BeginStep(std::int64_t step) {
  step_ = step;
  slowdown_ = models::StragglerFactor(cfg_.job->config.stragglers, WorldRank(), step);
}

std::int64_t SleepBackend::SleepNs(const Action& a) const {
  return std::llround(ms_.at({a.stage, a.kind}) * slowdown_ * 1e6);
}

void SleepBackend::Compute(const Action& a) {
  const std::int64_t start = MonotonicNs();
  const int s = a.stage, mb = a.microbatch;
  const int last = static_cast<int>(cfg_.layers_per_stage.size()) - 1;
  // The buffers move as in the CPU backend: an input is consumed, an output is made for the
  // next stage (sent, or taken by the local next stage).
  switch (a.kind) {
    case ActionKind::kForward:
      if (s > 0) Release({Local(s - 1) ? kActOut : kActIn, Local(s - 1) ? s - 1 : s, mb});
      if (s != last) NewBuffer({kActOut, s, mb});
      break;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      if (s != last) Release({Local(s + 1) ? kGradOut : kGradIn, Local(s + 1) ? s + 1 : s, mb});
      if (s != 0) NewBuffer({kGradOut, s, mb});
      break;
    case ActionKind::kBackwardWeight:
      break;
    case ActionKind::kOptimizer:
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
      throw std::logic_error("SleepBackend::Compute called with " + a.ToString());
  }
  SleepUntil(start + SleepNs(a));
  if (a.kind == ActionKind::kOptimizer && cfg_.zero1) {
    // ZeRO-1: the updated shard's parameters all-gathered over DP, as the CPU backend does.
    const std::size_t shard = HostGradReduce::Shard(grads_.at(s).size(), cfg_.dp);
    std::vector<float> gathered(shard * static_cast<std::size_t>(cfg_.dp), 0.0f);
    dp_reduce_.AllGather(gathered, shard, [&] {
      return a.ToString() + ": ZeRO-1 parameter all-gather over data parallelism";
    });
  }
}

void SleepBackend::PostSend(const Action& a, int peer) {
  const Key k{a.kind == ActionKind::kSendF ? kActOut : kGradOut, a.stage, a.microbatch};
  auto it = buffers_.find(k);
  if (it == buffers_.end()) throw std::logic_error("nothing to send for " + a.ToString());
  p2p_.PostSend(a, peer, it->second, k);
}

void SleepBackend::PostRecv(const Action& a, int peer) {
  const Key k{a.kind == ActionKind::kRecvF ? kActIn : kGradIn, a.stage, a.microbatch};
  p2p_.PostRecv(a, peer, NewBuffer(k), k);
}

bool SleepBackend::TestRecv(const Action& a) {
  return p2p_.TestRecv({a.kind == ActionKind::kRecvF ? kActIn : kGradIn, a.stage, a.microbatch}, a);
}

bool SleepBackend::TestSends() {
  return p2p_.TestSends([&](const Key& k) { Release(k); });
}

std::optional<GradReduction> SleepBackend::DescribeReduceGrad(int stage) const {
  return HostGradReduce::Describe(grads_.at(stage).size(), cfg_.zero1, cfg_.dp);
}

void SleepBackend::StartReduceGrad(int stage) {
  if (ps_) {
    ps_->Push(stage, grads_.at(stage), ps_params_.at(stage));
    return;
  }
  const GradReduction r = *DescribeReduceGrad(stage);
  std::vector<float>& g = grads_.at(stage);
  // Under ZeRO-1 the reduce-scatter runs on a copy padded to a multiple of dp.
  if (r.reduce_scatter) g.resize(r.elements, 0.0f);
  dp_reduce_.Start(stage, g, r);
}

bool SleepBackend::TestReduceGrad(int stage) {
  if (ps_) return ps_->Test(stage);
  const bool done = dp_reduce_.Test(stage);
  if (done && cfg_.zero1) grads_.at(stage).resize(layouts_.at(stage).total);
  return done;
}

std::int64_t SleepBackend::BytesSent(CommGroup group) const {
  switch (group) {
    case CommGroup::kPp:
      return p2p_.bytes_sent();
    case CommGroup::kDp:
      return ps_ ? ps_->bytes_sent() : dp_reduce_.bytes_sent();
    case CommGroup::kTp:
    case CommGroup::kCp:
      return 0;
  }
  return 0;
}

const gpt::ParamLayout& SleepBackend::StageLayout(int stage) const { return layouts_.at(stage); }

std::vector<float> SleepBackend::StageGrads(int stage) const {
  const std::vector<float>& g = grads_.at(stage);
  return {g.begin(), g.begin() + static_cast<std::ptrdiff_t>(layouts_.at(stage).total)};
}

}  // namespace pipetwin::exec
