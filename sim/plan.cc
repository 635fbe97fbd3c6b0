// plan.cc — the layout search of plan.h.
#include "sim/plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <tuple>

#include "models/costs.h"
#include "models/program_memory.h"
#include "schedule/build.h"
#include "schedule/lower.h"
#include "sim/engine.h"
#include "sim/known_misses.h"
#include "sim/model_costs.h"
#include "sim/rebalance.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

// Compute actions of one kind on one stage of one rank: F, B, I, W, OPT.
struct StageCounts {
  int stage = 0;
  std::array<std::int64_t, 5> n{};
};

// One rank's memory over its program (models::RankMemoryOverProgram), reduced once per shape
// to the moments that can be its peak: at each, the activation bytes are a sum over the
// rank's stages of (in flight) x full + (pending W) x W part + (in I or B) x working set;
// repeated and dominated count vectors are dropped (every byte count is >= 0), so the peak
// is the same integer, found from a handful of dot products.
struct RankMemoryShape {
  std::vector<int> stages;                        // the stages the program touches
  std::vector<std::vector<std::int64_t>> points;  // 3 counts per stage: full, W part, working set
};

// y >= x in every count.
bool Covers(const std::vector<std::int64_t>& y, const std::vector<std::int64_t>& x) {
  for (std::size_t j = 0; j < x.size(); ++j) {
    if (y[j] < x[j]) return false;
  }
  return true;
}

RankMemoryShape ReduceRankMemory(const std::vector<Action>& program) {
  RankMemoryShape m;
  for (const Action& a : program) {
    if (std::find(m.stages.begin(), m.stages.end(), a.stage) == m.stages.end()) {
      m.stages.push_back(a.stage);
    }
  }
  const std::size_t k = m.stages.size();
  std::vector<std::int64_t> cur(3 * k, 0), p(3 * k, 0);
  // The points no other point covers, kept as they come.
  auto offer = [&](const std::vector<std::int64_t>& x) {
    for (const auto& y : m.points) {
      if (Covers(y, x)) return;
    }
    std::erase_if(m.points, [&](const std::vector<std::int64_t>& y) { return Covers(x, y); });
    m.points.push_back(x);
  };
  auto local = [&](int stage) {
    return static_cast<std::size_t>(std::find(m.stages.begin(), m.stages.end(), stage) -
                                    m.stages.begin());
  };
  for (const Action& a : program) {
    const std::size_t i = local(a.stage);
    switch (a.kind) {
      case ActionKind::kForward:
        ++cur[3 * i];
        offer(cur);
        break;
      case ActionKind::kBackwardInput:
        p = cur;
        ++p[3 * i + 1];
        ++p[3 * i + 2];
        offer(p);
        ++cur[3 * i + 1];
        --cur[3 * i];
        break;
      case ActionKind::kBackward:
        p = cur;
        ++p[3 * i + 2];
        offer(p);
        --cur[3 * i];
        break;
      case ActionKind::kBackwardWeight:
        --cur[3 * i + 1];
        break;
      default:
        break;
    }
  }
  return m;
}

// The peak of RankMemoryOverProgram, from the reduced shape.
std::int64_t RankPeak(const RankMemoryShape& m, const models::JobCosts& jc) {
  const MemoryBytes base = models::RankFixedMemory(jc, m.stages);
  const std::int64_t fixed = base.params + base.grads + base.optimizer + base.comm_buffers;
  std::int64_t peak = fixed;
  for (const auto& p : m.points) {
    std::int64_t act = 0;
    for (std::size_t i = 0; i < m.stages.size(); ++i) {
      const models::StageCost& c = jc.stages[static_cast<std::size_t>(m.stages[i])];
      act += p[3 * i] * c.activation_bytes_per_microbatch +
             p[3 * i + 1] * c.activation_bytes_pending_w +
             p[3 * i + 2] * c.activation_transient_bytes;
    }
    peak = std::max(peak, fixed + act);
  }
  return peak;
}

// A schedule built once per shape, with what the bound and the memory check need from it.
// The bound and the memory come from the compute actions alone (lowering adds only sends,
// receives, the reduction and OPT, each on the rank's own stages); the lowered schedule the
// engine plays is made the first time a layout of the shape is timed.
struct Shape {
  std::optional<Schedule> schedule;  // compute only; absent: the generator refused
  bool reduce_grad = false;
  mutable std::once_flag lower_once;
  mutable Schedule lowered_schedule;
  const Schedule& Lowered() const {
    std::call_once(lower_once, [this] {
      lowered_schedule = Lower(*schedule, {.reduce_grad = reduce_grad, .optimizer = true});
    });
    return lowered_schedule;
  }
  std::vector<std::vector<StageCounts>> counts;  // per rank
  std::vector<int> first_forward_stage;  // per rank: the stage of its first compute action, an F
  std::vector<RankMemoryShape> memory;   // per rank
};

// The schedule of a layout depends only on (schedule, pp, vpp, microbatches, reduce).
struct ShapeKey {
  std::string name;
  int pp = 0, vpp = 0, m = 0;
  bool reduce = false;
  auto operator<=>(const ShapeKey&) const = default;
};

std::shared_ptr<const Shape> BuildShape(const std::string& name, int pp, int vpp, int m,
                                        bool reduce) {
  auto shape = std::make_shared<Shape>();
  ScheduleRequest req;
  req.name = name;
  req.pp = pp;
  req.vpp = vpp;
  req.microbatches = m;
  req.reduce_grad = reduce;
  req.validate_generated = false;
  shape->reduce_grad = reduce;
  if (auto s = ComputeSchedule(req)) {
    shape->schedule = std::move(*s);
    // Lowering adds one OPT per stage of each rank (AddOptimizer) unless the schedule has it.
    bool has_opt = false;
    for (const auto& prog : shape->schedule->programs) {
      for (const Action& a : prog) has_opt = has_opt || a.kind == ActionKind::kOptimizer;
    }
    int rank = 0;
    for (const auto& prog : shape->schedule->programs) {
      std::vector<StageCounts> c;
      for (const Action& a : prog) {
        int k = -1;
        switch (a.kind) {
          case ActionKind::kForward:
            k = 0;
            break;
          case ActionKind::kBackward:
            k = 1;
            break;
          case ActionKind::kBackwardInput:
            k = 2;
            break;
          case ActionKind::kBackwardWeight:
            k = 3;
            break;
          case ActionKind::kOptimizer:
            k = 4;
            break;
          default:
            break;
        }
        if (k < 0) continue;
        auto it = std::find_if(c.begin(), c.end(),
                               [&](const StageCounts& x) { return x.stage == a.stage; });
        if (it == c.end()) it = c.insert(c.end(), StageCounts{a.stage, {}});
        ++it->n[static_cast<std::size_t>(k)];
      }
      if (!has_opt) {
        for (int st : StagesOfRank(*shape->schedule, rank)) {
          auto it =
              std::find_if(c.begin(), c.end(), [&](const StageCounts& x) { return x.stage == st; });
          if (it == c.end()) it = c.insert(c.end(), StageCounts{st, {}});
          ++it->n[4];
        }
      }
      ++rank;
      shape->counts.push_back(std::move(c));
      int first = -1;
      for (const Action& a : prog) {
        if (a.kind == ActionKind::kForward) first = a.stage;
        if (IsCompute(a.kind)) break;
      }
      shape->first_forward_stage.push_back(first);
      shape->memory.push_back(ReduceRankMemory(prog));
    }
  }
  return shape;
}

int ChunksOf(const std::string& schedule, int vpp) {
  if (schedule == "zbv" || schedule == "dualpipev") return 2;
  return schedule == "interleaved-1f1b" ? vpp : 1;
}

// The job of one layout, as `simulate` would read it back.
JobConfig ConfigOf(const JobConfig& base, const PlanRow& row) {
  JobConfig c = base;
  c.schedule = row.schedule;
  c.parallel = row.parallel;
  c.training.micro_batch = row.micro_batch;
  c.training.recompute = row.recompute;
  c.training.overlap = row.overlap;
  c.cluster.rank_order = row.rank_order;
  c.microbatches.reset();  // from the global batch
  return c;
}

double Ms(std::int64_t ns) { return static_cast<double>(ns) * 1e-6; }

// Tokens per second of a step of `iteration_ns`, computed as the report builder does.
double TokensPerS(double samples, int seq_len, std::int64_t iteration_ns) {
  const double iter_s = Ms(iteration_ns) * 1e-3;
  return iter_s > 0 ? samples * seq_len / iter_s : 1e300;
}

// The cost model's inputs for one layout, exactly as ResolveJob gives them (CostInputsOf).
Expected<models::JobCosts> CostsOf(const JobConfig& base, const PlanRow& row, int num_stages) {
  models::CostInputs in;
  in.parallel = row.parallel;
  in.model = base.model;
  in.training = base.training;
  in.training.micro_batch = row.micro_batch;
  in.training.recompute = row.recompute;
  in.training.overlap = row.overlap;
  in.cluster = base.cluster;
  in.cluster.rank_order = row.rank_order;
  if (!in.cluster.nodes_given) {
    in.cluster.nodes = std::max(
        1, (row.parallel.WorldSize() + in.cluster.gpus_per_node - 1) / in.cluster.gpus_per_node);
  }
  in.microbatches = row.microbatches;
  return models::BuildJobCosts(in, num_stages);
}

struct Context {
  const JobConfig& base;
  std::vector<ShapeKey> keys;                        // the distinct shapes, built in parallel
  std::vector<std::shared_ptr<const Shape>> built;   // per key
  std::vector<int> shape_of;                         // per row: an index into keys, or -1
  std::vector<std::shared_ptr<const Shape>> shapes;  // per row that fits, for the simulation
};

// The checks that need no schedule; a valid layout gets its shape's key.
std::optional<ShapeKey> Classify(const JobConfig& base, PlanRow& row) {
  ParallelConfig& p = row.parallel;
  auto invalid = [&](const char* reason) -> std::optional<ShapeKey> {
    row.status = PlanStatus::kInvalid;
    row.invalid_reason = reason;
    return std::nullopt;
  };
  const long long gpus = static_cast<long long>(base.cluster.world_size());
  const long long tpc = static_cast<long long>(p.tp) * p.pp * p.cp;
  if (p.dp == 0) {  // auto
    if (tpc > gpus || gpus % tpc != 0) return invalid("gpus");
    p.dp = static_cast<int>(gpus / tpc);
  } else if (tpc * p.dp > gpus) {
    return invalid("gpus");
  }
  if (p.sp && p.tp < 2) return invalid("sp");
  const models::ModelConfig& mc = base.model;
  if (mc.heads % p.tp != 0 || mc.kv_heads % p.tp != 0) return invalid("heads");
  const int chunks = ChunksOf(row.schedule, p.vpp);
  // An even split, or Megatron-Core's with the embedding and the loss counted as layers.
  if (mc.layers_per_stage.empty() && !models::LayersSplit(mc.layers, p.pp * chunks)) {
    return invalid("layers");
  }
  const long long per_mb = static_cast<long long>(row.micro_batch) * p.dp;
  if (base.training.global_batch % per_mb != 0) return invalid("batch");
  row.microbatches = static_cast<int>(base.training.global_batch / per_mb);
  return ShapeKey{row.schedule, p.pp, p.vpp, row.microbatches, p.dp * p.cp > 1};
}

// Memory and the bound of one valid layout (no timing).
void Evaluate(Context& ctx, std::size_t index, PlanRow& row) {
  const JobConfig& base = ctx.base;
  const ParallelConfig& p = row.parallel;
  const models::ModelConfig& mc = base.model;
  auto invalid = [&](const char* reason) {
    row.status = PlanStatus::kInvalid;
    row.invalid_reason = reason;
  };
  std::shared_ptr<const Shape> shape = ctx.built[static_cast<std::size_t>(ctx.shape_of[index])];
  if (!shape->schedule) return invalid("schedule");
  const Schedule& s = *shape->schedule;

  auto jc = CostsOf(base, row, s.num_stages);
  if (!jc) return invalid("model");

  // Memory (a layout that cannot fit is never timed) and the bound.
  row.peak_memory_bytes = -1;
  for (int q = 0; q < s.num_ranks; ++q) {
    const std::int64_t peak =
        jc->cpu_executor ? models::PipelineRankMemory(s, q, *jc, base.execution.recv_window).peak
                         : RankPeak(shape->memory[static_cast<std::size_t>(q)], *jc);
    if (peak > row.peak_memory_bytes) {
      row.peak_memory_bytes = peak;
      row.fullest_rank = q;
    }
  }
  // The bound: no rank's compute stream is busy for less than the sum of its actions, and
  // under optimizer_sync (the step is the makespan) its first action, an F of stage s,
  // starts no earlier than the same microbatch's F on stages 0..s-1 (none on this rank)
  // have run one after another. Where the reductions wait for the rank's last gradient
  // (CostTable::reduce_after_backward) they run one after another between its last backward
  // and its first optimizer step, so they add to its busy time.
  const CostTable t = CostTableFromModel(*jc);
  const bool reductions_in_series = t.reduce_after_backward && shape->reduce_grad;
  std::int64_t busiest = 0;
  for (std::size_t r = 0; r < shape->counts.size(); ++r) {
    std::int64_t busy = 0;
    if (base.optimizer_sync) {
      for (int st = 0; st < shape->first_forward_stage[r]; ++st) {
        busy += t.stages[static_cast<std::size_t>(st)].forward.nanos();
      }
    }
    for (const StageCounts& c : shape->counts[r]) {
      const StageTimes& st = t.stages[static_cast<std::size_t>(c.stage)];
      busy += c.n[0] * st.forward.nanos() + c.n[1] * st.backward.nanos() +
              c.n[2] * st.backward_input.nanos() + c.n[3] * st.backward_weight.nanos() +
              c.n[4] * st.optimizer.nanos();
      if (reductions_in_series) busy += st.dp_reduce.nanos();
    }
    busiest = std::max(busiest, busy);
  }
  const double samples = static_cast<double>(row.microbatches) * row.micro_batch * p.dp;
  row.tokens_per_s_bound = TokensPerS(samples, mc.seq_len, busiest);
  row.fits = row.peak_memory_bytes <= jc->hbm_bytes;
  if (!row.fits) {
    row.status = PlanStatus::kNoFit;
    return;
  }
  row.status = PlanStatus::kPruned;  // until simulated
  ctx.shapes[index] = std::move(shape);
}

// Times one layout with the engine alone (no report): iteration time and tokens/s as the
// report builder computes them (RunPlan checks them against the full report for the top K).
Status TimeRow(const Context& ctx, std::size_t index, PlanRow& row) {
  const Schedule& s = ctx.shapes[index]->Lowered();
  auto jc = CostsOf(ctx.base, row, s.num_stages);
  if (!jc) return jc.error();
  const bool sync = ctx.base.optimizer_sync;
  const SimStats st =
      RunEngine(s, CostTableFromModel(*jc, s.stage_to_rank), {.optimizer_sync = sync}, nullptr);
  const StepRecord rec = StepRecordOf(st);
  const std::int64_t iter = IterationNs(sync, rec);
  const double samples = static_cast<double>(row.microbatches) * row.micro_batch * row.parallel.dp;
  row.status = PlanStatus::kSimulated;
  row.iteration_time_ms = Ms(iter);
  row.tokens_per_s = TokensPerS(samples, ctx.base.model.seq_len, iter);
  double busy = 0, flops = 0;
  for (const StepRecord::Row& r : rec.rows) busy += static_cast<double>(r.step.busy_ns);
  for (const models::StageCost& c : jc->stages) flops += c.model_flops_per_microbatch;
  const double it = static_cast<double>(iter);
  row.bubble_fraction = iter > 0 ? 1.0 - busy / (static_cast<double>(rec.rows.size()) * it) : 0;
  const double iter_s = row.iteration_time_ms * 1e-3;
  const double world = row.parallel.WorldSize();
  row.mfu =
      iter_s > 0 && jc->peak_flops_per_device > 0
          ? flops * row.microbatches * row.parallel.dp / iter_s / world / jc->peak_flops_per_device
          : 0;
  return OkStatus();
}

// What the full report adds to a top layout.
struct TopDetail {
  Breakdown breakdown;
  std::vector<KnownMiss> known_misses;
  std::optional<Rebalance> rebalance;
};

// Simulates one layout exactly as `simulate` would its emitted job.
Expected<TopDetail> SimulateRow(const Context& ctx, std::size_t index, PlanRow& row) {
  const PlanRow fast = row;
  auto job = ResolveJob(ConfigOf(ctx.base, row),
                        {.validate_generated = false, .schedule = &ctx.shapes[index]->Lowered()});
  if (!job) return job.error();
  auto sim = Simulate(*job, {.record_timeline = false, .per_world_rank = false});
  if (!sim) return sim.error();
  const Report& r = sim->report;
  row.status = PlanStatus::kSimulated;
  row.iteration_time_ms = r.iteration_time_ms;
  row.tokens_per_s = r.throughput.tokens_per_s;
  row.mfu = r.throughput.mfu;
  row.bubble_fraction = r.bubble_fraction;
  const Breakdown b = r.breakdown.value_or(Breakdown{});
  row.exposed_comm_ms = b.tp_cp_comm_exposed_ms + b.dp_comm_exposed_ms;
  // The memory checked before timing is the report's, exactly.
  if (!r.memory || r.memory->worst_peak_bytes != row.peak_memory_bytes ||
      r.memory->worst_rank != row.fullest_rank) {
    return Error::Failure("plan: the memory checked before timing differs from the report's");
  }
  if (fast.iteration_time_ms != row.iteration_time_ms || fast.tokens_per_s != row.tokens_per_s) {
    return Error::Failure("plan: the engine's iteration time differs from the report's");
  }
  return TopDetail{b, KnownMisses(*job, r), SuggestRebalance(*job, r, false)};
}

// Runs `body` on `threads` threads (this one included); each body takes work from a shared
// counter, so fewer threads only make it slower. A thread the system refuses (std::system_error:
// out of threads or memory) is not an error: the ones already started, and this one, do the
// work.
template <typename F>
void ParallelFor(int threads, F&& body) {
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(std::max(threads - 1, 0)));
  for (int t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(body);
    } catch (const std::system_error&) {
      break;
    }
  }
  body();
  for (std::thread& th : pool) th.join();
}

std::vector<PlanRow> Enumerate(const PlanFile& plan) {
  const SearchSpace& sp = plan.search;
  const std::vector<int> dps = sp.dp.value_or(std::vector<int>{0});
  std::vector<PlanRow> rows;
  rows.reserve(static_cast<std::size_t>(sp.Layouts()));  // at most kMaxPlanLayouts (parsed)
  for (const std::string& sched : sp.schedule) {
    // vpp is searched for the interleaved schedule only; the V schedules always hold 2.
    std::vector<int> vpps = {sched == "zbv" || sched == "dualpipev" ? 2 : 1};
    if (sched == "interleaved-1f1b") vpps = sp.vpp;
    for (int tp : sp.tp)
      for (int pp : sp.pp)
        for (int cp : sp.cp)
          for (int vpp : vpps)
            for (int dp : dps)
              for (bool seq : sp.sp)
                for (int zero : sp.zero)
                  for (int mb : sp.micro_batch)
                    for (models::Recompute rc : sp.recompute)
                      for (const models::Overlap& ov : sp.overlap)
                        for (const models::DimOrder& order : sp.rank_order)
                          for (const ParallelConfig::CpComm comm : sp.cp_comm) {
                            // Without CP the exchange means nothing: the first listed stands.
                            if (cp == 1 && comm != sp.cp_comm.front()) continue;
                            PlanRow r;
                            r.schedule = sched;
                            r.parallel = ParallelConfig{.pp = pp,
                                                        .vpp = vpp,
                                                        .dp = dp,
                                                        .tp = tp,
                                                        .sp = seq,
                                                        .cp = cp,
                                                        .cp_comm = comm,
                                                        .cp_a2a = plan.job.parallel.cp_a2a,
                                                        .zero = zero};
                            r.micro_batch = mb;
                            r.recompute = rc;
                            r.overlap = ov;
                            r.rank_order = order;
                            rows.push_back(std::move(r));
                          }
  }
  return rows;
}

}  // namespace

Expected<PlanResult> RunPlan(const PlanFile& plan, const PlanOptions& opts) {
  const auto start = std::chrono::steady_clock::now();
  PlanResult res;
  res.threads = opts.threads > 0
                    ? opts.threads
                    : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  res.rows = Enumerate(plan);
  res.rank_orders = plan.search.rank_order.size() > 1;
  res.cp_comms = plan.search.cp_comm.size() > 1;
  const std::size_t n = res.rows.size();
  // No more threads than layouts: each would find no work.
  res.threads = static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(res.threads), std::max<std::size_t>(n, 1)));
  Context ctx{
      plan.job, {}, {}, std::vector<int>(n, -1), std::vector<std::shared_ptr<const Shape>>(n)};

  // 1. The checks that need no schedule, and the distinct shapes of the valid layouts.
  std::map<ShapeKey, int> key_index;
  for (std::size_t i = 0; i < n; ++i) {
    if (auto key = Classify(plan.job, res.rows[i])) {
      auto [it, added] = key_index.try_emplace(std::move(*key), static_cast<int>(ctx.keys.size()));
      if (added) ctx.keys.push_back(it->first);
      ctx.shape_of[i] = it->second;
    }
  }
  // 2. Each shape built once, in parallel, the longest schedules first (no thread waits for
  // another's build).
  std::vector<std::size_t> by_size(ctx.keys.size());
  for (std::size_t i = 0; i < by_size.size(); ++i) by_size[i] = i;
  std::stable_sort(by_size.begin(), by_size.end(), [&](std::size_t a, std::size_t b) {
    const auto size = [&](std::size_t i) {
      return static_cast<long long>(ctx.keys[i].pp) * ctx.keys[i].vpp * ctx.keys[i].m;
    };
    return size(a) > size(b);
  });
  ctx.built.resize(ctx.keys.size());
  std::atomic<std::size_t> next_shape{0};
  ParallelFor(res.threads, [&] {
    for (std::size_t i; (i = next_shape.fetch_add(1)) < by_size.size();) {
      const ShapeKey& k = ctx.keys[by_size[i]];
      ctx.built[by_size[i]] = BuildShape(k.name, k.pp, k.vpp, k.m, k.reduce);
    }
  });
  // 3. Memory and the bound: every valid layout.
  std::atomic<std::size_t> next{0};
  constexpr std::size_t kChunk = 16;
  ParallelFor(res.threads, [&] {
    for (std::size_t i; (i = next.fetch_add(kChunk)) < n;) {
      for (std::size_t j = i; j < std::min(n, i + kChunk); ++j) {
        if (ctx.shape_of[j] >= 0) Evaluate(ctx, j, res.rows[j]);
      }
    }
  });

  // 4. Those that fit, best bound first, until the bound falls below the K-th best found.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < n; ++i) {
    if (res.rows[i].status == PlanStatus::kPruned) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return res.rows[a].tokens_per_s_bound > res.rows[b].tokens_per_s_bound;
  });
  const std::size_t k = static_cast<std::size_t>(std::max(1, opts.top));
  std::mutex mu;
  std::vector<double> best;  // the K best tokens/s simulated so far, a min-heap
  double threshold = 0;      // the K-th best once K are known
  std::optional<Error> failure;
  std::atomic<std::size_t> pos{0};
  ParallelFor(res.threads, [&] {
    for (std::size_t i; (i = pos.fetch_add(1)) < order.size();) {
      const std::size_t row = order[i];
      {
        std::lock_guard<std::mutex> lock(mu);
        if (failure) return;
        // Sorted by bound: nothing from here on can enter the top K.
        if (opts.prune && best.size() == k && res.rows[row].tokens_per_s_bound < threshold) return;
      }
      Status b = TimeRow(ctx, row, res.rows[row]);
      std::lock_guard<std::mutex> lock(mu);
      if (!b) {
        failure = b.error();
        return;
      }
      best.push_back(res.rows[row].tokens_per_s);
      std::push_heap(best.begin(), best.end(), std::greater<>());
      if (best.size() > k) {
        std::pop_heap(best.begin(), best.end(), std::greater<>());
        best.pop_back();
      }
      if (best.size() == k) threshold = best.front();
    }
  });
  if (failure) return *failure;

  std::vector<std::size_t> simulated;
  for (std::size_t i = 0; i < n; ++i) {
    const PlanRow& r = res.rows[i];
    ++res.evaluated;
    switch (r.status) {
      case PlanStatus::kInvalid:
        ++res.invalid[r.invalid_reason];
        break;
      case PlanStatus::kNoFit:
        ++res.infeasible_memory;
        break;
      case PlanStatus::kPruned:
        ++res.feasible;
        ++res.pruned;
        break;
      case PlanStatus::kSimulated:
        ++res.feasible;
        ++res.simulated;
        simulated.push_back(i);
        break;
    }
  }
  std::stable_sort(simulated.begin(), simulated.end(), [&](std::size_t a, std::size_t b) {
    return res.rows[a].tokens_per_s > res.rows[b].tokens_per_s;
  });
  // The top K through the full report, as `simulate` gives them (one layout per thread).
  const std::size_t top = std::min(k, simulated.size());
  std::vector<Expected<TopDetail>> full(top, Error::Failure("plan: not simulated"));
  std::atomic<std::size_t> next_top{0};
  ParallelFor(std::min<int>(res.threads, static_cast<int>(std::max<std::size_t>(top, 1))), [&] {
    for (std::size_t i; (i = next_top.fetch_add(1)) < top;) {
      full[i] = SimulateRow(ctx, simulated[i], res.rows[simulated[i]]);
    }
  });
  for (std::size_t i = 0; i < top; ++i) {
    const std::size_t r = simulated[i];
    if (!full[i]) return full[i].error();
    res.top.push_back(PlanTop{ConfigOf(plan.job, res.rows[r]), res.rows[r], full[i]->breakdown,
                              std::move(full[i]->known_misses), std::move(full[i]->rebalance)});
  }
  res.hbm_bytes = plan.job.cluster.device.hbm_bytes;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  res.configs_per_second = res.seconds > 0 ? static_cast<double>(res.evaluated) / res.seconds : 0;
  return res;
}

namespace {

// The fastest of the top layouts with each one's step given by `step` (#1's too).
template <typename Step>
FastestOfTop FastestBy(const PlanResult& r, Step step) {
  FastestOfTop best{0, step(r.top[0]), step(r.top[0])};
  for (std::size_t i = 1; i < r.top.size(); ++i) {
    const double ms = step(r.top[i]);
    if (ms < best.iteration_ms) best.index = i, best.iteration_ms = ms;
  }
  return best;
}

// A layout's step were it as slow as the worst of its known misses' runs.
double AtKnownWorst(const PlanTop& t) {
  double worst_pct = 0;
  for (const KnownMiss& m : t.known_misses) worst_pct = std::max(worst_pct, m.optimistic_pct);
  return t.row.iteration_time_ms * (1 + worst_pct / 100);
}

// "<lead> #1 stays the fastest of the top N: X ms<tail>" or "<lead> #k is the fastest of the top
// N: X ms against #1's Y ms<tail>", with a newline.
std::string FastestLine(const char* lead, const FastestOfTop& f, std::size_t n, const char* tail) {
  char buf[256];
  if (f.index == 0) {
    std::snprintf(buf, sizeof buf, "%s #1 stays the fastest of the top %zu: %.1f ms%s\n", lead, n,
                  f.iteration_ms, tail);
  } else {
    std::snprintf(buf, sizeof buf,
                  "%s #%zu is the fastest of the top %zu: %.1f ms against #1's %.1f ms%s\n", lead,
                  f.index + 1, n, f.iteration_ms, f.first_ms, tail);
  }
  return buf;
}

}  // namespace

std::optional<FastestRebalanced> FindFastestRebalanced(const PlanResult& r) {
  if (std::none_of(r.top.begin(), r.top.end(),
                   [](const PlanTop& t) { return t.rebalance.has_value(); })) {
    return std::nullopt;
  }
  FastestOfTop f = FastestBy(r, [](const PlanTop& t) {
    return t.rebalance ? std::min(t.rebalance->iteration_ms, t.row.iteration_time_ms)
                       : t.row.iteration_time_ms;
  });
  f.first_ms =
      r.top[0].rebalance ? r.top[0].rebalance->iteration_ms : r.top[0].row.iteration_time_ms;
  return f;
}

std::optional<FastestAtKnownWorst> FindFastestAtKnownWorst(const PlanResult& r) {
  if (std::all_of(r.top.begin(), r.top.end(),
                  [](const PlanTop& t) { return t.known_misses.empty(); })) {
    return std::nullopt;
  }
  return FastestBy(r, AtKnownWorst);
}

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

const char* StatusName(PlanStatus s) {
  switch (s) {
    case PlanStatus::kInvalid:
      return "invalid";
    case PlanStatus::kNoFit:
      return "no_fit";
    case PlanStatus::kPruned:
      return "skipped_by_bound";
    case PlanStatus::kSimulated:
      return "simulated";
  }
  return "";
}

nlohmann::ordered_json JobJson(const JobConfig& c, int microbatches) {
  const ParallelConfig& p = c.parallel;
  const models::ModelConfig& m = c.model;
  nlohmann::ordered_json j;
  j["schedule"] = c.schedule;
  j["microbatches"] = microbatches;
  j["optimizer_sync"] = c.optimizer_sync;
  j["parallel"] = {{"pp", p.pp}, {"vpp", p.vpp}, {"dp", p.dp},    {"tp", p.tp},
                   {"sp", p.sp}, {"cp", p.cp},   {"zero", p.zero}};
  if (p.cp_comm == ParallelConfig::CpComm::kAllGather) j["parallel"]["cp_comm"] = "all_gather";
  if (p.cp_comm == ParallelConfig::CpComm::kAllToAll) j["parallel"]["cp_comm"] = "a2a";
  if (p.cp_comm == ParallelConfig::CpComm::kAllToAllP2P) {
    j["parallel"]["cp_comm"] = "a2a+p2p";
    j["parallel"]["cp_a2a"] = p.cp_a2a;
  }
  j["model"] = {{"name", m.name},     {"layers", m.layers},
                {"hidden", m.hidden}, {"ffn_hidden", m.ffn_hidden},
                {"heads", m.heads},   {"kv_heads", m.kv_heads},
                {"vocab", m.vocab},   {"seq_len", m.seq_len}};
  const models::TrainingConfig& t = c.training;
  j["training"] = {{"global_batch", t.global_batch},
                   {"micro_batch", t.micro_batch},
                   {"precision", std::string(models::ToString(t.precision))},
                   {"optimizer", std::string(models::ToString(t.optimizer))},
                   {"recompute", std::string(models::ToString(t.recompute))},
                   {"flash_attention", t.flash_attention},
                   {"overlap",
                    {{"tp_comm", t.overlap.tp_comm},
                     {"grad_reduce", t.overlap.grad_reduce},
                     {"param_gather", t.overlap.param_gather}}}};
  j["cluster"] = {{"device", c.cluster.device.name},
                  {"gpus_per_node", c.cluster.gpus_per_node},
                  {"nodes", c.cluster.nodes}};
  j["yaml"] = WriteJobConfig(c);
  return j;
}

// The overlap flags as three letters: t(p_comm) g(rad_reduce) p(aram_gather), '-' when off.
std::string OverlapFlags(const models::Overlap& o) {
  return {o.tp_comm ? 't' : '-', o.grad_reduce ? 'g' : '-', o.param_gather ? 'p' : '-'};
}

std::string Layout(const PlanRow& r) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-16s %3d %3d %3d %4d %3d %-3s %2d %3d %-9s %3s %4d",
                r.schedule.c_str(), r.parallel.tp, r.parallel.pp, r.parallel.vpp, r.parallel.dp,
                r.parallel.cp, r.parallel.sp ? "yes" : "no", r.parallel.zero, r.micro_batch,
                std::string(models::ToString(r.recompute)).c_str(), OverlapFlags(r.overlap).c_str(),
                r.microbatches);
  return buf;
}

}  // namespace

std::string PlanSummary(const PlanResult& r) {
  std::string out;
  char buf[512];
  std::int64_t invalid = 0;
  std::string reasons;
  for (const auto& [reason, count] : r.invalid) {
    invalid += count;
    reasons += (reasons.empty() ? "" : ", ") + reason + " " + std::to_string(count);
  }
  std::snprintf(buf, sizeof buf,
                "%lld layouts evaluated in %.3f s (%.0f configurations/s, %d thread%s)\n"
                "invalid %lld%s%s%s; refused by memory %lld; fit %lld: simulated %lld, skipped "
                "by the compute bound %lld\n",
                static_cast<long long>(r.evaluated), r.seconds, r.configs_per_second, r.threads,
                r.threads == 1 ? "" : "s", static_cast<long long>(invalid),
                reasons.empty() ? "" : " (", reasons.c_str(), reasons.empty() ? "" : ")",
                static_cast<long long>(r.infeasible_memory), static_cast<long long>(r.feasible),
                static_cast<long long>(r.simulated), static_cast<long long>(r.pruned));
  out += buf;
  if (r.top.empty()) {
    return out + (r.infeasible_memory > 0
                      ? "no layout fits in memory\n"
                      : "no layout is valid: widen search: (the reasons are counted above)\n");
  }
  std::snprintf(
      buf, sizeof buf,
      "top %zu by tokens/s:\n%2s %-16s %3s %3s %3s %4s %3s %-3s %2s %3s %-9s %3s %4s %10s "
      "%10s %6s %7s %14s %9s%s\n",
      r.top.size(), "#", "schedule", "tp", "pp", "vpp", "dp", "cp", "sp", "z", "mb", "recompute",
      "ovl", "m", "iter ms", "tokens/s", "MFU", "bubble", "peak GiB (rank)", "comm ms",
      r.rank_orders ? "  rank order" : "");
  out += buf;
  if (r.cp_comms) {
    out.pop_back();
    out += "  cp_comm\n";
  }
  for (std::size_t i = 0; i < r.top.size(); ++i) {
    const PlanRow& x = r.top[i].row;
    std::snprintf(buf, sizeof buf, "%2zu %s %10.1f %10.0f %5.1f%% %6.1f%% %8.1f (%3d) %9.1f\n",
                  i + 1, Layout(x).c_str(), x.iteration_time_ms, x.tokens_per_s, 100.0 * x.mfu,
                  100.0 * x.bubble_fraction, static_cast<double>(x.peak_memory_bytes) / kGiB,
                  x.fullest_rank, x.exposed_comm_ms);
    out += buf;
    if (r.rank_orders) {
      out.pop_back();  // the newline
      out += "  " + models::ToString(x.rank_order) + "\n";
    }
    if (r.cp_comms) {
      out.pop_back();
      out += "  " + std::string(ToString(x.parallel.cp_comm)) + "\n";
    }
    if (!r.top[i].known_misses.empty()) {
      out.pop_back();
      out += "  !\n";
    }
  }
  // Uneven pipelines: the split that shortens the step, as `simulate` suggests it.
  for (std::size_t i = 0; i < r.top.size(); ++i) {
    const std::optional<Rebalance>& b = r.top[i].rebalance;
    if (!b) continue;
    std::snprintf(buf, sizeof buf,
                  "~ #%zu: pipeline rank %d computes %.1f%% more than the median; "
                  "with model.layers_per_stage: ",
                  i + 1, b->busiest_pp_rank, 100 * b->busiest_over_median);
    out += buf + LayersList(b->layers_per_stage);
    std::snprintf(buf, sizeof buf, " %.1f ms (%+.1f%%)\n", b->iteration_ms,
                  100 * (b->iteration_ms / b->before_ms - 1));
    out += buf;
  }
  if (const std::optional<FastestRebalanced> f = FindFastestRebalanced(r)) {
    out += FastestLine("~ with those splits", *f, r.top.size(),
                       " (layouts below them not rebalanced)");
  }
  // The layouts the suite says the model misses, with what it says of their kind.
  for (std::size_t i = 0; i < r.top.size(); ++i) {
    for (const KnownMiss& m : r.top[i].known_misses) {
      std::snprintf(buf, sizeof buf, "! #%zu, a known miss (%s): ", i + 1, m.id.c_str());
      out += buf + m.note + "\n";
    }
  }
  if (const std::optional<FastestAtKnownWorst> f = FindFastestAtKnownWorst(r)) {
    out += FastestLine("! were each such layout as slow as the worst of its kind,", *f,
                       r.top.size(), "");
  }
  return out;
}

std::string PlanToJson(const PlanResult& r) {
  nlohmann::ordered_json j;
  j["evaluated"] = r.evaluated;
  j["feasible"] = r.feasible;
  j["infeasible_memory"] = r.infeasible_memory;
  j["invalid"] = nlohmann::ordered_json::object();
  for (const auto& [reason, count] : r.invalid) j["invalid"][reason] = count;
  j["simulated"] = r.simulated;
  j["skipped_by_bound"] = r.pruned;
  j["seconds"] = r.seconds;
  j["configs_per_second"] = r.configs_per_second;
  j["threads"] = r.threads;
  j["device_memory_bytes"] = r.hbm_bytes;
  j["top"] = nlohmann::ordered_json::array();
  for (const PlanTop& t : r.top) {
    const PlanRow& x = t.row;
    nlohmann::ordered_json e;
    e["job"] = JobJson(t.job, x.microbatches);
    if (r.rank_orders) e["job"]["cluster"]["rank_order"] = models::ToString(x.rank_order);
    e["iteration_time_ms"] = x.iteration_time_ms;
    e["tokens_per_s"] = x.tokens_per_s;
    e["tokens_per_second"] = x.tokens_per_s;
    e["mfu"] = x.mfu;
    e["bubble_fraction"] = x.bubble_fraction;
    e["peak_memory_bytes"] = x.peak_memory_bytes;
    e["fullest_rank"] = x.fullest_rank;
    e["fits"] = x.fits;
    e["breakdown"] = BreakdownJson(t.breakdown);
    e["known_misses"] = nlohmann::ordered_json::array();
    for (const KnownMiss& m : t.known_misses) {
      e["known_misses"].push_back({{"id", m.id},
                                   {"hidden_dp_share", m.hidden_dp_pct / 100},
                                   {"optimistic_up_to", m.optimistic_pct / 100},
                                   {"note", m.note}});
    }
    if (t.rebalance) {
      e["rebalanced"] = {{"layers_per_stage", t.rebalance->layers_per_stage},
                         {"iteration_time_ms", t.rebalance->iteration_ms},
                         {"busiest_pp_rank", t.rebalance->busiest_pp_rank},
                         {"busiest_over_median", t.rebalance->busiest_over_median}};
    }
    j["top"].push_back(std::move(e));
  }
  if (const std::optional<FastestRebalanced> f = FindFastestRebalanced(r)) {
    j["fastest_rebalanced"] = {{"rank", f->index + 1}, {"iteration_time_ms", f->iteration_ms}};
  }
  if (const std::optional<FastestAtKnownWorst> f = FindFastestAtKnownWorst(r)) {
    j["fastest_at_known_worst"] = {{"rank", f->index + 1}, {"iteration_time_ms", f->iteration_ms}};
  }
  return j.dump(2) + "\n";
}

std::string PlanCsv(const PlanResult& r) {
  std::string out =
      "index,schedule,tp,pp,vpp,dp,cp,sp,zero,micro_batch,recompute,overlap,microbatches,status,"
      "reason,"
      "fits,peak_memory_bytes,fullest_rank,tokens_per_s_bound,iteration_time_ms,tokens_per_s,mfu,"
      "bubble_fraction,exposed_comm_ms";
  out += r.rank_orders ? ",rank_order" : "";
  out += r.cp_comms ? ",cp_comm\n" : "\n";
  char buf[512];
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const PlanRow& x = r.rows[i];
    const ParallelConfig& p = x.parallel;
    std::snprintf(
        buf, sizeof buf,
        "%zu,%s,%d,%d,%d,%d,%d,%d,%d,%d,%s,%s,%d,%s,%s,%d,%lld,%d,%.6g,%.9g,%.9g,%.6g,%.6g,%.6g\n",
        i, x.schedule.c_str(), p.tp, p.pp, p.vpp, p.dp, p.cp, p.sp ? 1 : 0, p.zero, x.micro_batch,
        std::string(models::ToString(x.recompute)).c_str(), OverlapFlags(x.overlap).c_str(),
        x.microbatches, StatusName(x.status), x.invalid_reason.c_str(), x.fits ? 1 : 0,
        static_cast<long long>(x.peak_memory_bytes), x.fullest_rank, x.tokens_per_s_bound,
        x.iteration_time_ms, x.tokens_per_s, x.mfu, x.bubble_fraction, x.exposed_comm_ms);
    out += buf;
    if (r.rank_orders) {
      out.pop_back();  // the newline
      out += "," + models::ToString(x.rank_order) + "\n";
    }
    if (r.cp_comms) {
      out.pop_back();
      out += "," + std::string(ToString(x.parallel.cp_comm)) + "\n";
    }
  }
  return out;
}

}  // namespace pipetwin
