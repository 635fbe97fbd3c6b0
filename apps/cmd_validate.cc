// `pipetwin validate JOB.yaml [JOB2.yaml ...] --schedules job|all|LIST --out DIR`: the
// validation loop (workflow/validate.h) for each job and schedule.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "apps/cli.h"
#include "apps/commands.h"
#include "workflow/compare_files.h"
#include "workflow/process.h"
#include "workflow/validate.h"

namespace pipetwin {

int CmdValidate(int argc, char** argv) {
  po::options_description o("options");
  o.add_options()("schedules", Text(), "job (default) | all | NAME,NAME (generators or csv:PATH)")(
      "out", Text(), "the folder for the results (default validate-out)")(
      "mpirun", Text(),
      "the launcher, e.g. \"mpirun --oversubscribe\" (default $PIPETWIN_MPIRUN, else mpirun)")(
      "tolerance", Text(), "allowed relative error in [0, 1] (default 0.05)")(
      "separate-calibration", po::bool_switch(), "calibrate, then run (default: one run)")(
      "calibrate-steps", Text(), "calibrate --steps (separate calibration)")(
      "no-plots", po::bool_switch(), "write the tables only")(
      "tutorial", po::bool_switch(), "the tutorial's plots (plot.py --tutorial)")(
      "backend", Text(),
      "cpu (default: calibrated, simulate --profile) | sleep (run --backend sleep against "
      "simulate from the job's costs:)");
  auto a = ParseArgs(argc, argv,
                     {"validate", "pipetwin validate JOB.yaml [JOB2.yaml ...] [options]",
                      "For each job and schedule: run --calibrate under mpirun, simulate "
                      "--profile, compare; DIR/summary.md, DIR/summary.csv and plots.",
                      "one or more job files", 1, -1},
                     o);
  if (!a) return Fail(a.error());
  if (a->help) return 0;
  workflow::ValidateOptions v;
  v.jobs = a->positional;
  v.schedules = a->Get("schedules", "job");
  v.out = a->Get("out", "validate-out");
  v.launcher = workflow::Launcher(a->Get("mpirun"), std::getenv("PIPETWIN_MPIRUN"));
  if (Status s = workflow::CheckLauncher(v.launcher, a->Has("mpirun")         ? "--mpirun"
                                                     : v.launcher == "mpirun" ? "validate"
                                                                              : "$PIPETWIN_MPIRUN");
      !s) {
    return Fail(s.error());
  }
  v.separate_calibration = a->Has("separate-calibration");
  v.calibrate_steps = a->Get("calibrate-steps");
  v.plots = !a->Has("no-plots");
  v.tutorial = a->Has("tutorial");
  v.backend = a->Get("backend", "cpu");
  if (a->Has("tolerance")) {
    auto tol = workflow::ParseTolerance(a->Get("tolerance"));
    if (!tol) return Fail(tol.error());
    v.tolerance = *tol;
  }
  v.command = "pipetwin validate";
  for (int i = 2; i < argc; ++i) v.command += std::string(" ") + argv[i];
  auto r = workflow::Validate(
      v, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  if (!r) return Fail(r.error());
  std::printf("%s", r->summary_md.c_str());
  std::printf("\nsummary: %s/summary.md, %s/summary.csv (%.0f s)\n", v.out.c_str(), v.out.c_str(),
              r->seconds);
  return r->failures > 0 ? 1 : 0;
}

}  // namespace pipetwin
