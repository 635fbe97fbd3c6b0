// compare_files.h — `pipetwin compare` on files: two report files in, DIR/errors.md and
// DIR/errors.csv out, and the reports and traces copied into DIR under the names that
// scripts/plot.py reads (predicted.json, measured.json, *.trace.json). With a calibration
// profile (`--profile`), errors.md ends with "Where time goes": its per-stage, per-action
// medians and rates (compare/compare.h: WhereTimeGoesMarkdown; sim/profile.h: the keys).
//
//   Expected<Comparison> c = CompareInto({.predicted = "p.json", .measured = "m.json",
//                                         .dir = "cmp"});
//   if (c) std::printf("error %+.2f%%\n", 100 * c->iteration_error);
#pragma once

#include <string>

#include "compare/compare.h"
#include "schedule/expected.h"

namespace pipetwin::workflow {

Expected<std::string> ReadText(const std::string& path);

// Compares two report files and writes DIR/errors.md and DIR/errors.csv; `profile`, when not
// empty, adds "Where time goes" to errors.md (a missing or bad profile is bad input naming
// the file, and nothing is written).
Expected<Comparison> CompareFiles(const std::string& predicted, const std::string& measured,
                                  const std::string& dir, const std::string& title,
                                  double tolerance, const std::string& profile = "");

// "Where time goes" of a calibration profile read without a job (sim/profile.h).
Expected<WhereTimeGoes> WhereTimeGoesOf(const std::string& profile);

struct CompareRequest {
  std::string predicted, measured, dir;
  std::string predicted_trace, measured_trace;  // optional
  std::string profile;                          // optional: "Where time goes"
  std::string title;                            // empty: "PREDICTED against MEASURED"
  double tolerance = 0.05;
};

// CompareFiles, then the reports and the traces copied into the folder.
Expected<Comparison> CompareInto(const CompareRequest& r);

// A tolerance given as text: a number in [0, 1] (0.05 is 5%).
Expected<double> ParseTolerance(const std::string& text);

}  // namespace pipetwin::workflow
