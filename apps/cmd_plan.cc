// `pipetwin plan`: the best layouts and schedules for a model on a cluster (sim/plan.h).
#include <cstdio>
#include <filesystem>
#include <string>

#include "apps/cli.h"
#include "apps/commands.h"
#include "job/plan_file.h"
#include "schedule/csv.h"
#include "sim/plan.h"
#include "workflow/process.h"

namespace pipetwin {
namespace {

Expected<int> PositiveInt(const Args& a, const char* option, int fallback, int max = 100000) {
  if (!a.Has(option)) return fallback;
  const std::string v = a.Get(option);
  std::size_t used = 0;
  int x = 0;
  try {
    x = std::stoi(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || x < 1 || x > max) {
    return Error::BadInput(std::string("--") + option + ": must be an integer in [1, " +
                           std::to_string(max) + "], got '" + v + "'");
  }
  return x;
}

// The file name of the i-th best layout under --emit-jobs (1-based): top01.yaml.
std::string TopJobName(int i) {
  char name[32];
  std::snprintf(name, sizeof name, "top%02d.yaml", i);
  return name;
}

}  // namespace

int CmdPlan(int argc, char** argv) {
  po::options_description o("options");
  o.add_options()("top", Text(), "how many layouts to list (default 10)")(
      "report", Text(), "write the result (JSON) to this file")(
      "csv", Text(), "write every evaluated layout (CSV) to this file")(
      "plot", Text(), "plot tokens/s against peak memory per GPU (PNG; needs --csv or writes one)")(
      "threads", Text(), "threads (default: every core)")(
      "emit-jobs", Text(), "write the top layouts as job files into this folder");
  auto a = ParseArgs(argc, argv,
                     {"plan", "pipetwin plan PLAN.yaml [options]",
                      "Search the layouts and schedules listed in the plan file's search: and "
                      "list the fastest that fit in memory (tokens/s, MFU, bubble, memory).",
                      "exactly one plan file", 1, 1},
                     o);
  if (!a) return Fail(a.error());
  if (a->help) return 0;
  auto top = PositiveInt(*a, "top", 10);
  if (!top) return Fail(top.error());
  auto threads = PositiveInt(*a, "threads", 0, 1024);  // as execution.threads
  if (!threads) return Fail(threads.error());
  // Every output checked before the search: none is the plan file or another output.
  const std::string plan_path = a->positional[0];
  std::string csv = a->Get("csv");
  const std::string csv_option = csv.empty() && a->Has("plot") ? "--plot" : "--csv";
  if (csv.empty() && a->Has("plot")) csv = a->Get("plot") + ".csv";
  if (Status s = CheckOutputs(
          {{"--report", a->Get("report")}, {csv_option, csv}, {"--plot", a->Get("plot")}},
          {plan_path});
      !s) {
    return Fail(s.error());
  }
  if (a->Has("emit-jobs")) {
    std::vector<std::pair<std::string, std::string>> files;
    for (int i = 1; i <= *top; ++i) files.emplace_back(TopJobName(i), "");
    if (Status s = CheckOutputFolder("--emit-jobs", a->Get("emit-jobs"), files,
                                     {plan_path, a->Get("report"), csv, a->Get("plot")});
        !s) {
      return Fail(s.error());
    }
  }
  auto plan = ReadPlanFile(plan_path);
  if (!plan) return Fail(plan.error());
  auto res = RunPlan(*plan, {.top = *top, .threads = *threads});
  if (!res) return Fail(res.error());

  if (a->Has("report")) {
    if (Status s = WriteFileAtomic(a->Get("report"), PlanToJson(*res)); !s) return Fail(s.error());
  }
  if (!csv.empty()) {
    if (Status s = WriteFileAtomic(csv, PlanCsv(*res)); !s) return Fail(s.error());
  }
  if (a->Has("emit-jobs")) {
    const std::string dir = a->Get("emit-jobs");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Fail(Error::Failure("--emit-jobs: cannot create " + dir + ": " + ec.message()));
    for (std::size_t i = 0; i < res->top.size(); ++i) {
      const std::string name = "/" + TopJobName(static_cast<int>(i) + 1);
      const PlanRow& r = res->top[i].row;
      char comment[160];
      std::snprintf(comment, sizeof comment,
                    "pipetwin plan %s: #%zu, %.3f ms per iteration, %.0f tokens/s",
                    a->positional[0].c_str(), i + 1, r.iteration_time_ms, r.tokens_per_s);
      if (Status s = WriteFileAtomic(dir + name, WriteJobConfig(res->top[i].job, comment)); !s) {
        return Fail(s.error());
      }
    }
  }
  std::printf("%s: %s", a->positional[0].c_str(), PlanSummary(*res).c_str());
  if (a->Has("plot")) {
    workflow::RunPlanPlot(csv, a->Get("plot"), static_cast<double>(res->hbm_bytes));
  }
  return 0;
}

}  // namespace pipetwin
