// The phases of `pipetwin validate` that start processes (validate.h): measure, predict,
// compare, summarise.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <utility>

#include "schedule/action.h"
#include "schedule/csv.h"
#include "schedule/file_io.h"
#include "schedule/report.h"
#include "schedule/stats.h"
#include "schedule/trace.h"
#include "schedule/trace_read.h"
#include "sim/engine.h"
#include "sim/profile.h"
#include "sim/simulate.h"
#include "workflow/compare_files.h"
#include "workflow/process.h"
#include "workflow/validate.h"

namespace pipetwin::workflow {
namespace {

// The 1-minute load average (other work on the machine disturbs the timings).
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  return in >> one ? one : std::string("?");
}

Status MakeDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error::Failure(dir + ": cannot create the folder: " + ec.message());
  return OkStatus();
}

struct Loop {
  Loop(const ValidateOptions& opts, const Progress& p)
      : o(opts), progress(p), program(opts.program.empty() ? SelfExe() : opts.program) {}

  const ValidateOptions& o;
  const Progress& progress;
  std::string program;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::size_t total = 0;
  std::string load_start = LoadAverage();
  std::vector<Entry> entries;
  int failures = 0;

  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  void Say(std::size_t k, const std::string& label, const std::string& what) const {
    char head[64];
    std::snprintf(head, sizeof head, "[%zu/%zu %5.0f s] ", k + 1, total, Elapsed());
    if (progress) progress(head + label + ": " + what);
  }
  std::string Conditions() const {
    return "Machine: " + std::to_string(std::thread::hardware_concurrency()) +
           " cores; 1-minute load average " + load_start + " at the start, " + LoadAverage() +
           " at the end (work other than this loop slows the measured steps).";
  }
  Status WriteSummary() const {
    const double tol = o.tolerance;
    if (Status s = WriteFileAtomic(o.out + "/summary.csv", SummaryCsv(entries, tol)); !s) return s;
    return WriteFileAtomic(
        o.out + "/summary.md",
        SummaryMd(entries, tol, o.command, Conditions(), o.separate_calibration, o.backend,
                  static_cast<int>(std::thread::hardware_concurrency())));
  }
};

// Phase 2: the measurement under the launcher: `run --calibrate` (calibration steps between
// the measured ones), or `calibrate` then `run`. False where a process failed: the entry's
// note then says which and where its log is.
bool Measure(Loop& L, std::size_t k, Variant& v, const std::string& dir) {
  Entry& e = v.entry;
  for (const MeasureStep& step : MeasureSteps(L.o, v, dir, L.program)) {
    L.Say(k, e.label, step.what + " (" + L.o.launcher + " -np " + std::to_string(v.np) + ")");
    const std::string log = dir + "/" + step.log;
    if (const int rc = Spawn(step.argv, log); rc != 0) {
      e.note = step.what + " failed (exit " + std::to_string(rc) + "; see " + log + ")";
      L.Say(k, e.label, e.note);
      return false;
    }
  }
  return true;
}

// Phase 3: the prediction from the profile alone (the sleep backend: from the job's costs).
Expected<SimResult> Predict(const ResolvedJob& job, const std::string& dir, bool sleep) {
  auto sim = sleep ? Simulate(job) : SimulateWithProfile(job, dir + "/profile.yaml", {});
  if (!sim) return sim.error();
  if (Status s = WriteFileAtomic(dir + "/predicted.json", ReportToJson(sim->report)); !s) {
    return s.error();
  }
  if (Status s =
          WriteTraceFile(dir + "/predicted.trace.json", sim->timeline, job.path() + " (predicted)");
      !s) {
    return s.error();
  }
  return sim;
}

// Every measured step (an added key of run's report), for the spread.
void RecordSpread(Entry& e, const std::string& measured_json) {
  const auto j = nlohmann::json::parse(measured_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("measured_steps_ms") || !j["measured_steps_ms"].is_array()) {
    return;
  }
  const auto& st = j["measured_steps_ms"];
  e.steps = static_cast<int>(st.size());
  for (const auto& x : st) {
    e.min_ms = std::min(e.min_ms, x.get<double>());
    e.max_ms = std::max(e.max_ms, x.get<double>());
  }
}

// The same simulation with the run's own action medians (from its trace of the median step).
void RecordReplay(Entry& e, const std::string& trace_file, const std::string& profile,
                  const ResolvedJob& job) {
  const Schedule& schedule = job.schedule;
  std::map<std::pair<int, ActionKind>, std::map<std::int64_t, std::vector<double>>> durs;
  const auto trace =
      ReadTraceFile(trace_file, "the measured trace", kMaxTraceBytes, [&](const ComputeSlice& s) {
        durs[{s.action.stage, s.action.kind}][s.rank].push_back(s.dur_us * 1e-3);
      });
  if (!trace) return;  // no replay: the table says "–"
  ActionMedians medians;
  for (auto& [key, by_rank] : durs) {
    double worst = 0;  // the slowest replica, as calibrate keeps it
    for (auto& [rank, v] : by_rank) {
      worst = std::max(worst, Median(v));
    }
    medians[key] = worst;
  }
  if (auto t = LoadProfile(profile, schedule, &medians); t) {
    const bool sync = job.config.optimizer_sync;
    const SimStats st = RunEngine(schedule, t->table, {.optimizer_sync = sync}, nullptr);
    e.replay_ms = static_cast<double>(IterationNs(sync, StepRecordOf(st))) * 1e-6;
    e.replay_error = e.measured_ms > 0 ? (e.replay_ms - e.measured_ms) / e.measured_ms : 0;
  }
}

// Phase 4: predicted against measured (with the profile's "Where time goes"), the spread of
// the measured steps, the replay.
Status CompareVariant(Entry& e, const std::string& dir, double tol, const ResolvedJob& job) {
  const std::string profile = dir + "/profile.yaml";
  auto c = CompareFiles(dir + "/predicted.json", dir + "/measured.json", dir,
                        e.label + ": predicted against measured", tol,
                        std::filesystem::exists(profile) ? profile : "");
  if (!c) return c.error();
  RecordComparison(e, *c);
  if (auto mt = ReadText(dir + "/measured.json"); mt) RecordSpread(e, *mt);
  if (std::filesystem::exists(dir + "/measured.trace.json") &&
      std::filesystem::exists(dir + "/profile.yaml")) {
    RecordReplay(e, dir + "/measured.trace.json", dir + "/profile.yaml", job);
  }
  return OkStatus();
}

// Phases 2–4 for one variant; false where a process failed.
Expected<bool> ValidateVariant(Loop& L, std::size_t k, Variant& v) {
  Entry& e = v.entry;
  const std::string dir = L.o.out + "/" + e.label;
  if (Status s = MakeDir(dir); !s) return s.error();
  std::error_code ec;
  std::filesystem::remove(dir + "/calibrate.log", ec);
  std::filesystem::remove(dir + "/run.log", ec);
  if (Status s = WriteFileAtomic(dir + "/job.yaml", v.yaml); !s) return s.error();
  if (!Measure(L, k, v, dir)) return false;
  const bool sleep = L.o.backend == "sleep";
  L.Say(k, e.label, sleep ? "simulate (the job's costs)" : "simulate --profile");
  auto job = LoadJob(dir + "/job.yaml");
  if (!job) return job.error();
  auto sim = Predict(*job, dir, sleep);
  if (!sim) return sim.error();
  if (Status s = CompareVariant(e, dir, L.o.tolerance, *job); !s) return s.error();
  char line[256];
  char replay[64] = "";
  if (!sleep) std::snprintf(replay, sizeof replay, " (replay %+.2f%%)", 100.0 * e.replay_error);
  std::snprintf(line, sizeof line,
                "predicted %.2f ms, measured %.2f ms, error %+.2f%%%s; memory %s; bytes %s",
                e.predicted_ms, e.measured_ms, 100.0 * e.error, replay,
                e.memory_equal ? "equal" : "differs", e.bytes_equal ? "equal" : "differ");
  L.Say(k, e.label, line);
  return true;
}

}  // namespace

Expected<ValidateResult> Validate(const ValidateOptions& o, const Progress& progress) {
  if (Status s = CheckOptions(o); !s) return s.error();
  if (Status s = CheckOutputDir(o.out, "--out"); !s) return s.error();
  auto variants = PlanVariants(o);  // phase 1: everything checked before anything runs
  if (!variants) return variants.error();
  if (Status s = CheckOutputs(o, *variants); !s) return s.error();
  if (Status s = MakeDir(o.out); !s) return s.error();
  Loop L(o, progress);
  L.total = variants->size();
  for (std::size_t k = 0; k < variants->size(); ++k) {
    Variant& v = (*variants)[k];
    if (!v.entry.note.empty()) {
      L.Say(k, v.entry.label, v.entry.note);
    } else {
      auto ok = ValidateVariant(L, k, v);
      if (!ok) return ok.error();
      if (!*ok) ++L.failures;
    }
    L.entries.push_back(v.entry);
    if (Status s = L.WriteSummary(); !s) return s.error();
  }
  // Phase 5: the summary and the plots.
  if (Status s = L.WriteSummary(); !s) return s.error();
  ValidateResult r;
  r.summary_md =
      SummaryMd(L.entries, o.tolerance, o.command, L.Conditions(), o.separate_calibration,
                o.backend, static_cast<int>(std::thread::hardware_concurrency()));
  r.entries = std::move(L.entries);
  r.failures = L.failures;
  r.seconds = L.Elapsed();
  if (o.plots) {
    RunPlots(o.out,
             o.tutorial ? std::vector<std::string>{"--tutorial"} : std::vector<std::string>{});
  }
  return r;
}

}  // namespace pipetwin::workflow
