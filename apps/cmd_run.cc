// `mpirun -np N pipetwin run JOB.yaml --backend cpu|cuda`: execute the step for real.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include "apps/cli.h"
#include "apps/commands.h"
#include "exec/calibrate.h"
#include "exec/mpi_session.h"
#include "exec/mpi_util.h"
#include "exec/run.h"
#include "job/job.h"
#include "schedule/csv.h"
#include "schedule/report.h"
#include "schedule/trace.h"
#include "schedule/trace_read.h"
#include "sim/profile.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

// --test-fault KIND:RANK, KIND one of hang, kill, perturb, cp-mask.
Expected<exec::TestFault> ParseTestFault(const std::string& text) {
  using Kind = exec::TestFault::Kind;
  const Error bad =
      Error::BadInput("--test-fault: must be hang|kill|perturb|cp-mask:RANK, got '" + text + "'");
  const auto colon = text.find(':');
  if (colon == std::string::npos) return bad;
  const std::string kind = text.substr(0, colon), rank = text.substr(colon + 1);
  exec::TestFault f;
  if (kind == "hang") {
    f.kind = Kind::kHang;
  } else if (kind == "kill") {
    f.kind = Kind::kKill;
  } else if (kind == "perturb") {
    f.kind = Kind::kPerturb;
  } else if (kind == "cp-mask") {
    f.kind = Kind::kCpMask;
  } else {
    return bad;
  }
  if (rank.empty() || rank.find_first_not_of("0123456789") != std::string::npos ||
      rank.size() > 6) {
    return bad;
  }
  f.rank = std::stoi(rank);
  return f;
}

// The options of `run`, checked before MPI starts (the same on every rank).
struct RunArgs {
  std::string job, report, trace, profile_out;
  std::string profile_in;  // --profile: the sleep backend's times
  exec::RunOptions opts;
};

Expected<RunArgs> ParseRun(int argc, char** argv, bool* help) {
  po::options_description o("options");
  o.add_options()("backend", Text(), "cpu | cuda | sleep (required)")(
      "report", Text(), "write the measured report (JSON) to this file")(
      "trace", Text(), "write the median step's Chrome trace (.gz: compressed)")(
      "check-reference", po::bool_switch(),
      "compare the loss and every gradient with a single-process run")(
      "calibrate", Text(),
      "alternate measured and calibration steps; write the profile to this file")(
      "profile", Text(),
      "--backend sleep: sleep each compute action for this calibration profile's median "
      "(default: the job's costs:)")(
      "test-fault", Text(),
      "for tests only: hang|kill|perturb|cp-mask:RANK makes that world rank stall or die at the "
      "first measured step, perturbs its gradients (with --check-reference), or drops the "
      "causal mask of its ring attention's diagonal chunk pairs (cp > 1)");
  auto a =
      ParseArgs(argc, argv,
                {"run", "mpirun -np N pipetwin run JOB.yaml --backend cpu|cuda|sleep [options]",
                 "Execute one job's schedule for real, N = pp × dp × tp × cp ranks.",
                 "exactly one job file", 1, 1},
                o);
  if (!a) return a.error();
  *help = a->help;
  RunArgs r;
  if (a->help) return r;
  r.job = a->positional[0];
  r.report = a->Get("report");
  r.trace = a->Get("trace");
  r.profile_out = a->Get("calibrate");
  if (!a->Has("backend")) return Error::BadInput("run: --backend cpu|cuda|sleep is required");
  r.opts.backend = a->Get("backend");
  r.opts.check_reference = a->Has("check-reference");
  r.profile_in = a->Get("profile");
  if (!r.profile_in.empty() && r.opts.backend != "sleep") {
    return Error::BadInput("run: --profile: only with --backend sleep (the times it sleeps)");
  }
  if (!r.profile_out.empty() && r.opts.check_reference) {
    return Error::BadInput("run: --calibrate and --check-reference cannot be combined");
  }
  if (a->Has("test-fault")) {
    auto f = ParseTestFault(a->Get("test-fault"));
    if (!f) return f.error();
    if (!r.profile_out.empty()) return Error::BadInput("run: --test-fault: not with --calibrate");
    r.opts.fault = *f;
  }
  if (Status s = CheckOutputs(
          {{"--calibrate", r.profile_out}, {"--report", r.report}, {"--trace", r.trace}},
          {r.job, r.profile_in});
      !s) {
    return s.error();
  }
  return r;
}

// Rank 0's summary of the measured run; 1 where the reference check failed.
int PrintRun(const ResolvedJob& job, const RunArgs& args, const exec::RunResult& res) {
  const Report& r = res.report;
  const exec::RunOptions& opts = args.opts;
  std::printf("%s: %s, pp %d, %d microbatches, %zu ranks, backend %s\n", job.path().c_str(),
              r.schedule.c_str(), r.pp, r.microbatches, r.ranks.size(), opts.backend.c_str());
  std::printf("measured iteration time %.3f ms (median of %zu steps), bubble %.2f%%\n",
              r.iteration_time_ms, res.step_ms.size(), 100.0 * r.bubble_fraction);
  std::printf("loss: first step %.6f, last step %.6f\n", res.losses.front(), res.losses.back());
  if (!args.profile_out.empty()) {
    std::printf(
        "calibration: %zu steps interleaved with the measured ones, profile written to %s\n",
        res.step_ms.size(), args.profile_out.c_str());
  }
  int status = 0;
  if (opts.check_reference) {
    const bool ok = res.max_relative_error <= opts.tolerance;
    std::printf("reference check: worst relative error %.3g (tolerance %.0e) %s\n",
                res.max_relative_error, opts.tolerance, ok ? "ok" : "FAILED");
    if (!ok) status = 1;
  }
  std::fflush(stdout);
  return status;
}

// Bytes this machine can still give: MemAvailable (/proc/meminfo), less where a cgroup (v2)
// limits this process to less. Nothing where neither can be read.
std::optional<std::int64_t> AvailableHostBytes(std::string* source) {
  std::optional<std::int64_t> avail;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::int64_t kib = 0;
    if (key == "MemAvailable:" && meminfo >> kib) {
      avail = kib * 1024;
      *source = "MemAvailable in /proc/meminfo";
      break;
    }
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  std::ifstream max_file("/sys/fs/cgroup/memory.max"),
      current_file("/sys/fs/cgroup/memory.current");
  std::int64_t max = 0, current = 0;
  if (max_file >> max && current_file >> current && max > current &&
      (!avail || max - current < *avail)) {
    avail = max - current;
    *source = "the cgroup's memory.max less memory.current";
  }
  return avail;
}

// The address space this process may still map: its RLIMIT_AS (`ulimit -v`) less what it maps
// now (VmSize in /proc/self/status). Nothing where the limit is infinite or cannot be read.
std::optional<std::int64_t> AddressSpaceLeft(std::int64_t* limit) {
  rlimit rl{};
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return std::nullopt;
  std::ifstream status("/proc/self/status");
  for (std::string key; status >> key;) {
    std::int64_t kib = 0;
    if (key == "VmSize:" && status >> kib) {
      *limit = static_cast<std::int64_t>(std::min<rlim_t>(
          rl.rlim_cur, static_cast<rlim_t>(std::numeric_limits<std::int64_t>::max())));
      return std::max<std::int64_t>(0, *limit - kib * 1024);
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

std::string Gib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

// This rank's row in the prediction (per world rank), or nothing.
const RankReport* PredictedRow(const JobToExecute& j, int world_rank) {
  if (!j.predicted) return nullptr;
  for (const RankReport& r : j.predicted->ranks) {
    if (r.rank == world_rank) return &r;
  }
  return nullptr;
}

}  // namespace

// The CPU backend allocates every rank's model, gradients, optimizer state and activations in
// this machine's memory, exactly as simulate predicts them on the cpu device (results/memory/).
// Ranks that need more than the machine has would end in std::bad_alloc or the kernel's OOM
// killer part way through: refused before anything is allocated, naming the figures. The
// predicted peak leaves out the workspace inside an action, so a job just under the line may
// still not fit. Each rank also checks its own address-space limit (below). A collective over
// MPI_COMM_WORLD.
Status CheckHostMemory(const JobToExecute& j, const std::string& backend) {
  const ResolvedJob& job = j.job;
  if (backend != "cpu" || job.config.cluster.device.name != "cpu") return OkStatus();
  if (!j.predicted) return OkStatus();  // simulate's own errors are said where they matter
  const std::vector<int> here = exec::WorldRanksOnThisMachine();
  std::string source;
  if (const std::optional<std::int64_t> avail = AvailableHostBytes(&source)) {
    std::int64_t need = 0, most = 0;
    int fullest = -1;
    for (const RankReport& r : j.predicted->ranks) {
      if (std::find(here.begin(), here.end(), r.rank) == here.end()) continue;
      need += r.peak_memory_bytes;
      if (r.peak_memory_bytes > most) {
        most = r.peak_memory_bytes;
        fullest = r.rank;
      }
    }
    if (need > *avail) {
      return Error::BadInput(
          job.path() + ": the " + std::to_string(here.size()) + " rank" +
          (here.size() == 1 ? " on this machine needs " : "s on this machine need ") + Gib(need) +
          " (simulate's predicted peaks on the cpu device, the CPU backend's own inventory; "
          "rank " +
          std::to_string(fullest) + " the most, " + Gib(most) + "), and it has " + Gib(*avail) +
          " available (" + source +
          "): make the model smaller (model.layers, hidden, seq_len, training.micro_batch) or "
          "spread the ranks over more machines");
    }
  }
  // Each rank is a process of its own: its address space may be limited too (ulimit -v). Beyond
  // the tensors it maps the BLAS library's buffers (128 MiB a thread in OpenBLAS) and malloc's
  // arenas: a rank predicted at 3.84 GiB on 2 cores mapped 0.15 GiB more than that after this
  // check, and with 0.09 GiB to spare OpenBLAS spun forever in a failing malloc. So the check
  // keeps 128 MiB + 128 MiB per hardware thread free.
  constexpr std::int64_t kMiB = 1 << 20;
  const std::int64_t headroom =
      128 * kMiB + 128 * kMiB * std::max<std::int64_t>(1, std::thread::hardware_concurrency());
  std::int64_t limit = 0;
  const RankReport* mine = PredictedRow(j, exec::WorldRank());
  const std::optional<std::int64_t> left = AddressSpaceLeft(&limit);
  if (!mine || !left || mine->peak_memory_bytes + headroom <= *left) return OkStatus();
  return Error::BadInput(
      job.path() + ": rank " + std::to_string(mine->rank) + " needs " +
      Gib(mine->peak_memory_bytes) + " (simulate's predicted peak on the cpu device) and " +
      Gib(headroom) + " more for the BLAS library's buffers, and its address space is limited to " +
      Gib(limit) + " (RLIMIT_AS, ulimit -v), " + Gib(*left) +
      " of it left: raise the limit or make the model smaller (model.layers, hidden, seq_len, "
      "training.micro_batch)");
}

Error OutOfHostMemory(const JobToExecute& j, int world_rank) {
  std::string msg = "rank " + std::to_string(world_rank) + ": out of memory (std::bad_alloc)";
  if (const RankReport* mine = PredictedRow(j, world_rank)) {
    msg += "; simulate predicts a peak of " + Gib(mine->peak_memory_bytes) +
           " for this rank, which was checked against the memory available at the start, but "
           "not the workspace inside an action or what other processes took since";
  }
  return Error::Failure(msg);
}

Expected<JobToExecute> LoadJobToExecute(const std::string& path) {
  auto job = LoadJob(path);
  if (!job) return job.error();
  JobToExecute out{.job = std::move(*job), .predicted = std::nullopt};
  auto sim = Simulate(out.job, {.record_timeline = false, .per_world_rank = true});
  if (sim) out.predicted = std::move(sim->report);
  // No execution.timeout_s in the job: 10 × the predicted step + a margin.
  if (!sim && out.job.config.execution.timeout_s <= 0) return sim.error();
  std::optional<double> step_ms;
  if (out.predicted) step_ms = out.predicted->iteration_time_ms;
  if (auto t = SizeRunTimeout(out.job, step_ms); !t) return t.error();
  return out;
}

int CmdRun(int argc, char** argv) {
  bool help = false;
  auto args = ParseRun(argc, argv, &help);
  if (args && help) return 0;
  // A bad command line is said before MPI starts (exit 2, whatever the backend).
  if (!args) return FailBeforeMpi(args.error());
  // Before MPI starts: this process may become pipetwin-cuda.
  if (auto rc = HandOverBackend(argc, argv)) return *rc;
  exec::MpiSession mpi;
  const int rank = mpi.rank();
  // Bad input is the same on every process: they agree on it first; one says it and exits 2,
  // every one leaves through MPI_Finalize (exec/mpi_util.h).
  std::optional<JobToExecute> loaded_job;
  const ResolvedJob* job = nullptr;
  const Status ready = [&]() -> Status {
    auto loaded = LoadJobToExecute(args->job);
    if (!loaded) return loaded.error();
    loaded_job.emplace(std::move(*loaded));
    job = &loaded_job->job;
    if (!args->profile_in.empty()) {
      auto profile = LoadProfile(args->profile_in, job->schedule);
      if (!profile) return profile.error();
      if (Status st = CheckProfileMatchesJob(*profile, *job, args->profile_in); !st) return st;
      args->opts.compute_ms = std::move(profile->medians);
    }
    return OkStatus();
  }();
  if (Status s = exec::AgreeAcrossWorld(ready); !s) return mpi.Fail(s.error(), false);
  if (Status s = exec::AgreeAcrossWorld(CheckHostMemory(*loaded_job, args->opts.backend)); !s) {
    return mpi.Fail(s.error(), false);
  }
  Expected<exec::RunResult> res = Error::Failure("not run");
  std::string profile_yaml;
  try {
    if (args->profile_out.empty()) {
      res = exec::RunJob(*job, args->opts);
    } else {
      // Calibration steps alternate with the measured ones (exec/calibrate.h).
      auto cal = exec::Calibrate(*job, {.backend = args->opts.backend,
                                        .interleaved = true,
                                        .compute_ms = args->opts.compute_ms});
      if (cal) {
        profile_yaml = std::move(cal->profile_yaml);
        res = std::move(*cal->run);
      } else {
        res = cal.error();
      }
    }
  } catch (const exec::TimeoutError& e) {
    return mpi.Fail(Error::Failure(e.what()), true);
  } catch (const std::bad_alloc&) {
    return mpi.Fail(OutOfHostMemory(*loaded_job, rank), true);
  } catch (const std::exception& e) {
    return mpi.Fail(Error::Failure("rank " + std::to_string(rank) + ": " + e.what()), true);
  }
  if (!res) return mpi.Fail(res.error(), rank == 0 || res.error().code != ErrorCode::kBadInput);
  int status = 0;
  if (res->root) {
    for (const auto& [path, text] :
         {std::pair<std::string, std::string>{args->profile_out, profile_yaml},
          {args->report, ReportToJson(res->report)}}) {
      if (path.empty()) continue;
      if (Status s = WriteFileAtomic(path, text); !s) return mpi.Fail(s.error(), true);
    }
    std::int64_t trace_bytes = 0;
    if (!args->trace.empty()) {
      if (Status s =
              WriteTraceFile(args->trace, res->timeline, job->path() + " (measured)", &trace_bytes);
          !s) {
        return mpi.Fail(s.error(), true);
      }
    }
    status = PrintRun(*job, *args, *res);
    if (const std::string note = TraceTooLargeToReadNote(args->trace, trace_bytes); !note.empty()) {
      std::printf("note: %s\n", note.c_str());
    }
  }
  return mpi.BroadcastStatus(status);
}

}  // namespace pipetwin
