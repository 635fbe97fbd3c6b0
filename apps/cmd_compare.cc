// `pipetwin compare PREDICTED.json MEASURED.json --out DIR [--profile PROFILE.yaml]`: the error
// table (with a calibration profile, "Where time goes") and the plots (workflow/compare_files.h).
#include <cstdio>
#include <string>

#include "apps/cli.h"
#include "apps/commands.h"
#include "workflow/compare_files.h"
#include "workflow/process.h"

namespace pipetwin {

int CmdCompare(int argc, char** argv) {
  po::options_description o("options");
  o.add_options()("out", Text(), "the folder for the tables (required)")(
      "predicted-trace", Text(),
      "the predicted trace (simulate --trace; plain or .gz), checked and copied for the "
      "timeline plot")("measured-trace", Text(),
                       "the measured trace (run --trace; plain or .gz), checked and copied for the "
                       "timeline plot")(
      "tolerance", Text(), "allowed relative error in [0, 1] (default 0.05)")("title", Text(),
                                                                              "the table's title")(
      "profile", Text(),
      "a calibration profile: errors.md gains \"Where time goes\" (per stage and action: "
      "median, GFLOP, GFLOP/s, % of its roofline)")("no-plots", po::bool_switch(),
                                                    "write the tables only");
  auto a =
      ParseArgs(argc, argv,
                {"compare", "pipetwin compare PREDICTED.json MEASURED.json --out DIR [options]",
                 "Error table (DIR/errors.md, DIR/errors.csv) and plots (scripts/plot.py, "
                 "matplotlib).",
                 "PREDICTED.json MEASURED.json", 2, 2},
                o);
  if (!a) return Fail(a.error());
  if (a->help) return 0;
  workflow::CompareRequest r;
  r.predicted = a->positional[0];
  r.measured = a->positional[1];
  r.dir = a->Get("out");
  r.predicted_trace = a->Get("predicted-trace");
  r.measured_trace = a->Get("measured-trace");
  r.title = a->Get("title");
  r.profile = a->Get("profile");
  if (a->Has("profile") && r.profile.empty()) {
    return Fail(Error::BadInput("--profile: needs a calibration profile's path"));
  }
  if (r.dir.empty()) return Fail(Error::BadInput("compare: --out DIR is required"));
  if (Status s = CheckOutputFolder(
          "--out", r.dir,
          {{"errors.md", ""},
           {"errors.csv", ""},
           {"predicted.json", r.predicted},
           {"measured.json", r.measured},
           {"predicted.trace.json", r.predicted_trace},
           {"measured.trace.json", r.measured_trace}},
          {r.predicted, r.measured, r.predicted_trace, r.measured_trace, r.profile});
      !s) {
    return Fail(s.error());
  }
  if (a->Has("tolerance")) {
    auto tol = workflow::ParseTolerance(a->Get("tolerance"));
    if (!tol) return Fail(tol.error());
    r.tolerance = *tol;
  }
  auto c = workflow::CompareInto(r);
  if (!c) return Fail(c.error());
  std::printf("iteration time: predicted %.3f ms, measured %.3f ms, error %+.2f%% (%s)\n",
              c->rows[0].predicted, c->rows[0].measured, 100.0 * c->iteration_error,
              c->iteration_error_abs() <= r.tolerance ? "within tolerance" : "OUTSIDE tolerance");
  std::printf("memory: %s (%d rows); communication bytes: %s (%d rows)\n",
              c->memory_equal ? "equal" : "DIFFERS", c->memory_rows,
              c->bytes_equal ? "equal" : "DIFFER", c->bytes_rows);
  std::printf("table: %s/errors.md, %s/errors.csv\n", r.dir.c_str(), r.dir.c_str());
  if (!r.profile.empty()) {
    std::printf("where time goes (from %s): %s/errors.md\n", r.profile.c_str(), r.dir.c_str());
  }
  if (!a->Has("no-plots")) {
    if (r.predicted_trace.empty() != r.measured_trace.empty()) {
      std::printf("no timeline: timeline.png needs both --predicted-trace and --measured-trace\n");
    }
    workflow::RunPlots(r.dir, {});
  }
  return 0;
}

}  // namespace pipetwin
