// `mpirun -np N pipetwin run JOB.yaml --backend cpu|cuda`: execute the step for real.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "apps/cli.h"
#include "apps/commands.h"
#include "exec/calibrate.h"
#include "exec/mpi_session.h"
#include "exec/run.h"
#include "job/job.h"
#include "schedule/csv.h"
#include "schedule/report.h"
#include "schedule/trace.h"
#include "schedule/trace_read.h"
#include "sim/profile.h"

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

}  // namespace

int CmdRun(int argc, char** argv) {
  bool help = false;
  auto args = ParseRun(argc, argv, &help);
  if (auto rc = EndBeforeMpi(args ? OkStatus() : Status(args.error()), help, argc, argv)) {
    return *rc;
  }
  exec::MpiSession mpi;
  const int rank = mpi.rank();
  int exit_status = 0;
  const auto read_profile = [&](const ResolvedJob& j) -> Status {
    if (args->profile_in.empty()) return OkStatus();
    auto profile = LoadProfile(args->profile_in, j.schedule);
    if (!profile) return profile.error();
    if (Status st = CheckProfileMatchesJob(*profile, j, args->profile_in); !st) return st;
    args->opts.compute_ms = std::move(profile->medians);
    return OkStatus();
  };
  const std::optional<JobToExecute> loaded =
      StartExecution(mpi, args->job, args->opts.backend, read_profile, &exit_status);
  if (!loaded) return exit_status;
  const ResolvedJob* job = &loaded->job;
  Expected<exec::RunResult> res = Error::Failure("not run");
  std::string profile_yaml;
  const auto execute = [&] {
    if (args->profile_out.empty()) {
      res = exec::RunJob(*job, args->opts);
      return;
    }
    // Calibration steps alternate with the measured ones (exec/calibrate.h).
    auto cal = exec::Calibrate(
        *job,
        {.backend = args->opts.backend, .interleaved = true, .compute_ms = args->opts.compute_ms});
    if (!cal) {
      res = cal.error();
      return;
    }
    profile_yaml = std::move(cal->profile_yaml);
    res = std::move(*cal->run);
  };
  if (Status s = CatchOnRank(*loaded, rank, execute); !s) return mpi.Fail(s.error(), true);
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
