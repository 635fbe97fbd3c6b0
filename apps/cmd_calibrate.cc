// `mpirun -np N pipetwin calibrate --backend cpu JOB.yaml --out PROFILE.yaml`: measure what
// each action costs, for `simulate --profile` (exec/calibrate.h).
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "apps/cli.h"
#include "apps/commands.h"
#include "exec/calibrate.h"
#include "exec/mpi_session.h"
#include "job/job.h"
#include "schedule/csv.h"

namespace pipetwin {
namespace {

struct CalibrateArgs {
  std::string job, out;
  exec::CalibrateOptions opts;
};

Expected<CalibrateArgs> ParseCalibrate(int argc, char** argv, bool* help) {
  po::options_description o("options");
  o.add_options()("backend", Text(), "cpu | cuda (required)")(
      "out", Text(), "write the profile (YAML) to this file (required)")(
      "steps", Text(), "measured steps, at least (default 10)")(
      "warmup", Text(), "warm-up steps, at least (default 2)");
  auto a = ParseArgs(argc, argv,
                     {"calibrate",
                      "mpirun -np N pipetwin calibrate --backend cpu JOB.yaml --out PROFILE.yaml "
                      "[options]",
                      "Measure F, I, W, B and the optimizer step per stage, the executor's "
                      "per-action overhead, point-to-point latency and bandwidth, the DP "
                      "all-reduce; for simulate --profile.",
                      "exactly one job file", 1, 1},
                     o);
  if (!a) return a.error();
  *help = a->help;
  CalibrateArgs c;
  if (a->help) return c;
  c.job = a->positional[0];
  if (!a->Has("backend")) return Error::BadInput("calibrate: --backend cpu|cuda is required");
  c.opts.backend = a->Get("backend");
  c.out = a->Get("out");
  if (c.out.empty()) return Error::BadInput("calibrate: --out PROFILE.yaml is required");
  if (Status s = CheckOutputs({{"--out", c.out}}, {c.job}); !s) return s.error();
  for (const auto& [name, field] :
       {std::pair<const char*, int*>{"steps", &c.opts.min_steps}, {"warmup", &c.opts.min_warmup}}) {
    if (a->vm.count(name) == 0) continue;
    const std::string text = a->Get(name);
    const bool digits = !text.empty() && text.size() < 7 &&
                        text.find_first_not_of("0123456789") == std::string::npos;
    *field = digits ? std::stoi(text) : 0;
    if (*field < 1) {
      return Error::BadInput(std::string("--") + name + ": must be a positive integer, got '" +
                             text + "'");
    }
  }
  return c;
}

}  // namespace

int CmdCalibrate(int argc, char** argv) {
  bool help = false;
  auto args = ParseCalibrate(argc, argv, &help);
  if (auto rc = EndBeforeMpi(args ? OkStatus() : Status(args.error()), help, argc, argv)) {
    return *rc;
  }
  exec::MpiSession mpi;
  const int rank = mpi.rank();
  // Any failure after the start stops every rank.
  int exit_status = 0;
  const std::optional<JobToExecute> loaded =
      StartExecution(mpi, args->job, args->opts.backend, nullptr, &exit_status);
  if (!loaded) return exit_status;
  const ResolvedJob* job = &loaded->job;
  Expected<exec::CalibrateResult> res = Error::Failure("not run");
  if (Status s = CatchOnRank(*loaded, rank, [&] { res = exec::Calibrate(*job, args->opts); }); !s) {
    return mpi.Fail(s.error(), true);
  }
  if (!res) return mpi.Fail(res.error(), rank == 0 || res.error().code != ErrorCode::kBadInput);
  if (res->root) {
    if (Status s = WriteFileAtomic(args->out, res->profile_yaml); !s) {
      return mpi.Fail(s.error(), true);
    }
    std::printf("%s: calibrated on %s, profile written to %s\n", job->path().c_str(),
                args->opts.backend.c_str(), args->out.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace pipetwin
