#include "workflow/compare_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "schedule/csv.h"
#include "schedule/file_io.h"
#include "schedule/report.h"
#include "schedule/trace_read.h"
#include "sim/profile.h"

namespace pipetwin::workflow {

Expected<std::string> ReadText(const std::string& path) { return ReadInputFile(path, "the file"); }

Expected<WhereTimeGoes> WhereTimeGoesOf(const std::string& profile) {
  auto p = LoadProfileWithoutJob(profile, "--profile");
  if (!p) return p.error();
  WhereTimeGoes w;
  w.profile = profile;
  w.backend = p->backend;
  if (p->roofline) {
    w.roofline_gflops = p->roofline->gemm_gflops;
    w.roofline_gb_s = p->roofline->memory_gb_s;
  }
  // Stage by stage, in the order a microbatch meets them.
  constexpr ActionKind kOrder[] = {ActionKind::kForward, ActionKind::kBackward,
                                   ActionKind::kBackwardInput, ActionKind::kBackwardWeight,
                                   ActionKind::kOptimizer};
  int stages = 0;
  for (const auto& [key, ms] : p->listed_ms) stages = std::max(stages, key.first + 1);
  for (int s = 0; s < stages; ++s) {
    for (const ActionKind k : kOrder) {
      const auto it = p->listed_ms.find({s, k});
      if (it == p->listed_ms.end()) continue;
      const auto g = p->gflops.find({s, k});
      w.rows.push_back({s, k, it->second, g == p->gflops.end() ? 0.0 : g->second});
    }
  }
  return w;
}

Expected<Comparison> CompareFiles(const std::string& predicted, const std::string& measured,
                                  const std::string& dir, const std::string& title,
                                  double tolerance, const std::string& profile) {
  auto pt = ReadText(predicted);
  if (!pt) return pt.error();
  auto mt = ReadText(measured);
  if (!mt) return mt.error();
  auto p = ReportFromJson(*pt, predicted);
  if (!p) return p.error();
  auto m = ReportFromJson(*mt, measured);
  if (!m) return m.error();
  auto c = CompareReports(*p, *m);
  if (!c) return c.error();
  std::string md = ComparisonMarkdown(*c, title, tolerance);
  if (!profile.empty()) {
    auto w = WhereTimeGoesOf(profile);
    if (!w) return w.error();
    md += "\n" + WhereTimeGoesMarkdown(*w);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error::Failure(dir + ": cannot create the folder: " + ec.message());
  if (Status s = WriteFileAtomic(dir + "/errors.md", md); !s) return s.error();
  if (Status s = WriteFileAtomic(dir + "/errors.csv", ComparisonCsv(*c, tolerance)); !s) {
    return s.error();
  }
  return c;
}

Expected<Comparison> CompareInto(const CompareRequest& r) {
  const std::string title = r.title.empty() ? r.predicted + " against " + r.measured : r.title;
  // The plot script reads the folder: the reports (and traces) under fixed names. Every input
  // is read before anything is written, so that a missing trace replaces no table.
  std::vector<std::pair<std::string, std::string>> copies;  // {target, contents}
  // Traces are checked (plot.py would skip what it cannot draw, and say nothing) and land
  // uncompressed, whichever way they came.
  struct Input {
    std::string from, to, option;
  };
  for (const Input& in : std::vector<Input>{
           {r.predicted, "predicted.json", ""},
           {r.measured, "measured.json", ""},
           {r.predicted_trace, "predicted.trace.json", "the predicted trace (--predicted-trace)"},
           {r.measured_trace, "measured.trace.json", "the measured trace (--measured-trace)"}}) {
    if (in.from.empty()) continue;
    const std::string target = r.dir + "/" + in.to;
    std::error_code ec;
    const bool in_place =
        std::filesystem::exists(target, ec) && std::filesystem::equivalent(in.from, target, ec);
    if (in.option.empty()) {
      if (in_place) continue;
      auto text = ReadText(in.from);
      if (!text) return text.error();
      copies.emplace_back(target, std::move(*text));
      continue;
    }
    auto text = ReadTraceFile(in.from, in.option);
    if (!text) return text.error();
    if (!in_place) copies.emplace_back(target, std::move(*text));
  }
  auto c = CompareFiles(r.predicted, r.measured, r.dir, title, r.tolerance, r.profile);
  if (!c) return c;
  for (const auto& [target, text] : copies) {
    if (Status s = WriteFileAtomic(target, text); !s) return s.error();
  }
  return c;
}

Expected<double> ParseTolerance(const std::string& text) {
  char* end = nullptr;
  const double tol = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(tol >= 0 && tol <= 1)) {
    return Error::BadInput("--tolerance: must be a number in [0, 1] (0.05 is 5%), got '" + text +
                           "'");
  }
  return tol;
}

}  // namespace pipetwin::workflow
