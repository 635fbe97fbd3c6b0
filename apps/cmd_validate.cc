// `pipetwin validate JOB.yaml [JOB2.yaml ...] --schedules job|all|LIST --out DIR`
//
// For each job and schedule: calibrate, simulate with the profile, run, compare; then one
// summary (DIR/summary.md, DIR/summary.csv) and one set of plots. `calibrate` and `run`
// need their ranks, so they are started as child processes through mpirun (posix_spawnp,
// no shell: arguments are passed as they are): `--mpirun "mpirun --oversubscribe"` or the
// environment variable PIPETWIN_MPIRUN names the launcher (default: mpirun). Their output
// goes to DIR/<entry>/calibrate.log and run.log; a progress line on stderr says where the
// loop is.
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "apps/commands.h"
#include "job/job.h"
#include "schedule/build.h"
#include "schedule/csv.h"
#include "schedule/generators.h"
#include "schedule/report.h"
#include "schedule/stats.h"
#include "schedule/trace.h"
#include "sim/engine.h"
#include "sim/profile.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

std::string SelfExe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("pipetwin") : p.string();
}

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

struct Entry {
  std::string label;  // "<job stem>-<schedule>"
  std::string job, schedule;
  int pp = 1, dp = 1, tp = 1, microbatches = 0;
  double predicted_ms = 0, measured_ms = 0, error = 0, min_ms = 0, max_ms = 0;
  double replay_ms = 0, replay_error = 0;  // with the run's own action medians
  int steps = 0;
  bool memory_equal = false, bytes_equal = false, done = false;
  std::string note;
};

std::string SummaryCsv(const std::vector<Entry>& es, double tol) {
  std::ostringstream o;
  o << "label,job,schedule,pp,dp,tp,microbatches,predicted_ms,measured_ms,error_pct,"
       "measured_min_ms,measured_max_ms,measured_steps,memory_equal,bytes_equal,within_tolerance,"
       "replay_ms,replay_error_pct,note\n";
  char b[512];
  for (const Entry& e : es) {
    std::snprintf(
        b, sizeof b, "%s,%s,%s,%d,%d,%d,%d,%.4f,%.4f,%.3f,%.4f,%.4f,%d,%d,%d,%d,%.4f,%.3f,%s\n",
        e.label.c_str(), e.job.c_str(), e.schedule.c_str(), e.pp, e.dp, e.tp, e.microbatches,
        e.predicted_ms, e.measured_ms, 100.0 * e.error, e.min_ms, e.max_ms, e.steps,
        e.memory_equal ? 1 : 0, e.bytes_equal ? 1 : 0, e.done && std::abs(e.error) <= tol ? 1 : 0,
        e.replay_ms, 100.0 * e.replay_error, e.note.c_str());
    o << b;
  }
  return o.str();
}

// The 1-minute load average (other work on the machine disturbs the timings).
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  return in >> one ? one : std::string("?");
}

std::string SummaryMd(const std::vector<Entry>& es, double tol, const std::string& command,
                      const std::string& conditions, bool separate) {
  std::ostringstream o;
  o << "# Predicted against measured\n\n"
    << "Made by: `" << command << "`\n\n"
    << conditions << "\n\n"
    << (separate
            ? "Each row: `pipetwin calibrate` (a profile measured on the CPU backend), `pipetwin "
              "simulate --profile`, `pipetwin run` (median of the measured steps after warm-up), "
              "`pipetwin compare`."
            : "Each row: `pipetwin run --calibrate` (one run on the CPU backend whose steps after "
              "warm-up alternate: calibration steps, from which the profile's per-action times "
              "come, and measured steps, whose median is the measurement), `pipetwin simulate "
              "--profile` (the prediction: it reads only the profile), `pipetwin compare`.")
    << " Error = (predicted − measured) / measured; tolerance ±" << 100.0 * tol
    << "%. Per-entry tables: `<label>/errors.md`.\n\n"
    << (separate ? ""
                 : "Jitter: this machine's cores change speed from one step to the next and a step "
                   "waits for its slowest rank, so the prediction plays the step once per "
                   "calibration step, each rank at the speed it had in that step, and reports "
                   "the median, as the measurement does (sim/profile.h).\n\n")
    << "Replay: the same simulation, without jitter, with each action's time taken from the "
       "measured run itself (its median step's median per stage and kind) instead of the "
       "calibration: a check of the schedule model alone.\n\n"
    << "| entry | pp | dp | tp | m | predicted ms | measured ms (min–max) | error | replay "
       "error | memory | bytes |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|:-:|:-:|\n";
  char b[512];
  for (const Entry& e : es) {
    if (!e.done) {
      o << "| " << e.label << " | " << e.pp << " | " << e.dp << " | " << e.tp << " | "
        << e.microbatches << " | – | – | – | – | – | – |  " << e.note << "\n";
      continue;
    }
    std::snprintf(
        b, sizeof b,
        "| %s | %d | %d | %d | %d | %.2f | %.2f (%.2f–%.2f) | %+.2f%%%s | %+.2f%% | %s | %s |\n",
        e.label.c_str(), e.pp, e.dp, e.tp, e.microbatches, e.predicted_ms, e.measured_ms, e.min_ms,
        e.max_ms, 100.0 * e.error, std::abs(e.error) <= tol ? "" : " **outside**",
        100.0 * e.replay_error, e.memory_equal ? "equal" : "**differs**",
        e.bytes_equal ? "equal" : "**differ**");
    o << b;
  }
  return o.str();
}

}  // namespace

int CmdValidate(int argc, char** argv) {
  auto fail = [](const Error& e) {
    std::cerr << "pipetwin: " << e.message << "\n";
    return e.exit_status();
  };
  auto a = ParseCmdArgs(argc, argv, 2,
                        {"--schedules", "--out", "--mpirun", "--tolerance", "--calibrate-steps"},
                        {"--no-plots", "--tutorial", "--separate-calibration"});
  if (!a) return fail(a.error());
  if (a->positional.empty()) {
    return fail(Error::BadInput("validate: expected one or more job files (see --help)"));
  }
  const std::string out = a->Get("--out", "validate-out");
  const std::string which = a->Get("--schedules", "job");
  std::string launcher = a->Get("--mpirun");
  if (launcher.empty()) {
    const char* e = std::getenv("PIPETWIN_MPIRUN");
    launcher = e != nullptr && *e != '\0' ? e : "mpirun";
  }
  auto tolerance = ToleranceArg(*a, 0.05);
  if (!tolerance) return fail(tolerance.error());
  const double tol = *tolerance;
  const bool separate = a->Has("--separate-calibration");
  if (!separate && !a->Get("--calibrate-steps").empty()) {
    return fail(Error::BadInput(
        "--calibrate-steps: only with --separate-calibration (interleaved, the run has as many "
        "calibration steps as measured steps: execution.steps in the job)"));
  }
  std::string command = "pipetwin validate";
  for (int i = 2; i < argc; ++i) command += std::string(" ") + argv[i];

  // Every (job, schedule), checked before anything runs.
  struct Plan {
    Entry e;
    std::string variant_yaml;
    int np = 1;
  };
  std::vector<Plan> plans;
  for (const std::string& path : a->positional) {
    auto job = LoadJob(path);
    if (!job) return fail(job.error());
    std::vector<std::string> schedules;
    if (which == "job") {
      schedules = {job->config.schedule};
    } else if (which == "all") {
      for (const GeneratorInfo& g : AllGenerators()) schedules.emplace_back(g.name);
    } else {
      std::string s = which;
      for (char& c : s) c = c == ',' ? ' ' : c;
      schedules = Words(s);
      for (const std::string& name : schedules) {
        bool known = name.rfind("csv:", 0) == 0;
        std::string names;
        for (const GeneratorInfo& g : AllGenerators()) {
          known = known || name == g.name;
          names += std::string(names.empty() ? "" : ", ") + std::string(g.name);
        }
        if (!known) {
          return fail(Error::BadInput("--schedules: unknown schedule '" + name + "' (one of " +
                                      names + ", csv:PATH; or job, all)"));
        }
      }
    }
    YAML::Node root = YAML::LoadFile(path);
    const std::string stem = std::filesystem::path(path).stem().string();
    for (const std::string& sched : schedules) {
      YAML::Node v = YAML::Clone(root);
      v["schedule"] = sched;
      if (sched == "interleaved-1f1b") {
        if (job->parallel().vpp < 2) v["parallel"]["vpp"] = 2;
      } else if (v["parallel"] && v["parallel"]["vpp"]) {
        // V-shaped schedules place two chunks per rank themselves; the others one.
        if (sched == "zbv" || sched == "dualpipev") {
          v["parallel"].remove("vpp");
        } else {
          v["parallel"]["vpp"] = 1;
        }
      }
      YAML::Emitter em;
      em << v;
      Plan p;
      p.e.label = which == "job" ? stem : stem + "-" + sched;
      p.e.job = path;
      p.e.schedule = sched;
      p.variant_yaml = std::string("# ") + path + " with schedule " + sched +
                       " (written by pipetwin validate)\n" + em.c_str() + "\n";
      auto vj = ParseJob(p.variant_yaml, out + "/" + p.e.label + "/job.yaml");
      if (!vj) {
        if (which == "job") return fail(vj.error());
        p.e.note = "skipped: " + vj.error().message.substr(0, vj.error().message.find('\n'));
      } else {
        p.e.pp = vj->parallel().pp;
        p.e.dp = vj->parallel().dp;
        p.e.tp = vj->parallel().tp;
        p.np = vj->parallel().WorldSize();
        p.e.microbatches = vj->microbatches;
      }
      for (char& c : p.e.note) c = c == ',' ? ';' : c;
      plans.push_back(std::move(p));
    }
  }

  {
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec) return fail(Error::Failure(out + ": cannot create the folder: " + ec.message()));
  }
  const std::string self = SelfExe();
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<Entry> entries;
  const std::size_t total = plans.size();
  auto progress = [&](std::size_t k, const std::string& label, const std::string& what) {
    std::fprintf(stderr, "[%zu/%zu %5.0f s] %s: %s\n", k + 1, total, elapsed(), label.c_str(),
                 what.c_str());
  };
  const std::string load_start = LoadAverage();
  auto conditions = [&] {
    return "Machine: " + std::to_string(std::thread::hardware_concurrency()) +
           " cores; 1-minute load average " + load_start + " at the start, " + LoadAverage() +
           " at the end (work other than this loop slows the measured steps).";
  };
  auto write_summary = [&]() -> Status {
    if (Status s = WriteFileAtomic(out + "/summary.csv", SummaryCsv(entries, tol)); !s) return s;
    return WriteFileAtomic(out + "/summary.md",
                           SummaryMd(entries, tol, command, conditions(), separate));
  };
  int failures = 0;
  for (std::size_t k = 0; k < plans.size(); ++k) {
    Plan& p = plans[k];
    Entry& e = p.e;
    if (!e.note.empty()) {
      progress(k, e.label, e.note);
      entries.push_back(e);
      continue;
    }
    const std::string dir = out + "/" + e.label;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(Error::Failure(dir + ": cannot create the folder: " + ec.message()));
    std::filesystem::remove(dir + "/calibrate.log", ec);
    std::filesystem::remove(dir + "/run.log", ec);
    const std::string job_path = dir + "/job.yaml";
    if (Status s = WriteFileAtomic(job_path, p.variant_yaml); !s) return fail(s.error());
    std::vector<std::string> mpi = Words(launcher);
    mpi.insert(mpi.end(), {"-np", std::to_string(p.np), self});

    const std::string np = std::to_string(p.np);
    auto failed = [&](const std::string& what, int rc, const std::string& log) {
      e.note = what + " failed (exit " + std::to_string(rc) + "; see " + log + ")";
      progress(k, e.label, e.note);
      entries.push_back(e);
      ++failures;
    };
    std::vector<std::string> run = mpi;
    run.insert(run.end(), {"run", job_path, "--backend", "cpu", "--report", dir + "/measured.json",
                           "--trace", dir + "/measured.trace.json"});
    if (separate) {
      progress(k, e.label, "calibrate (" + launcher + " -np " + np + ")");
      std::vector<std::string> cal = mpi;
      cal.insert(cal.end(),
                 {"calibrate", "--backend", "cpu", job_path, "--out", dir + "/profile.yaml"});
      if (!a->Get("--calibrate-steps").empty()) {
        cal.insert(cal.end(), {"--steps", a->Get("--calibrate-steps")});
      }
      if (int rc = Spawn(cal, dir + "/calibrate.log"); rc != 0) {
        failed("calibrate", rc, dir + "/calibrate.log");
        continue;
      }
    } else {
      // One run: calibration steps alternate with the measured steps (run --calibrate); the
      // prediction below reads only the profile.
      progress(k, e.label, "run --calibrate (" + launcher + " -np " + np + ")");
      run.insert(run.end(), {"--calibrate", dir + "/profile.yaml"});
      if (int rc = Spawn(run, dir + "/run.log"); rc != 0) {
        failed("run --calibrate", rc, dir + "/run.log");
        continue;
      }
    }

    progress(k, e.label, "simulate --profile");
    auto job = LoadJob(job_path);
    if (!job) return fail(job.error());
    auto sim = SimulateWithProfile(*job, dir + "/profile.yaml", {});
    if (!sim) return fail(sim.error());
    if (Status s = WriteFileAtomic(dir + "/predicted.json", ReportToJson(sim->report)); !s) {
      return fail(s.error());
    }
    if (Status s = WriteFileAtomic(dir + "/predicted.trace.json",
                                   TraceJson(sim->timeline, job_path + " (predicted)"));
        !s) {
      return fail(s.error());
    }

    if (separate) {
      progress(k, e.label, "run (" + launcher + " -np " + np + ")");
      if (int rc = Spawn(run, dir + "/run.log"); rc != 0) {
        failed("run", rc, dir + "/run.log");
        continue;
      }
    }

    auto c = CompareFiles(dir + "/predicted.json", dir + "/measured.json", dir,
                          e.label + ": predicted against measured", tol);
    if (!c) return fail(c.error());
    e.done = true;
    e.predicted_ms = c->rows[0].predicted;
    e.measured_ms = c->rows[0].measured;
    e.error = c->iteration_error;
    e.memory_equal = c->memory_equal;
    e.bytes_equal = c->bytes_equal;
    // Every measured step (an added key of run's report), for the spread.
    e.min_ms = e.max_ms = e.measured_ms;
    if (auto mt = ReadText(dir + "/measured.json"); mt) {
      const auto j = nlohmann::json::parse(*mt, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("measured_steps_ms") && j["measured_steps_ms"].is_array()) {
        const auto& st = j["measured_steps_ms"];
        e.steps = static_cast<int>(st.size());
        for (const auto& x : st) {
          e.min_ms = std::min(e.min_ms, x.get<double>());
          e.max_ms = std::max(e.max_ms, x.get<double>());
        }
      }
    }
    // Replay with the run's own action medians (from its trace of the median step).
    if (auto tt = ReadText(dir + "/measured.trace.json"); tt) {
      const auto j = nlohmann::json::parse(*tt, nullptr, /*allow_exceptions=*/false);
      std::map<std::pair<int, ActionKind>, std::map<int, std::vector<double>>> durs;
      if (j.is_object() && j.contains("traceEvents")) {
        for (const auto& ev : j["traceEvents"]) {
          if (ev.value("ph", "") != "X" || ev.value("tid", -1) != 0) continue;
          auto act = Action::Parse(ev.value("name", ""));
          if (!act || !IsCompute(act->kind)) continue;
          durs[{act->stage, act->kind}][ev.value("pid", 0)].push_back(ev.value("dur", 0.0) * 1e-3);
        }
      }
      ActionMedians medians;
      for (auto& [key, by_rank] : durs) {
        double worst = 0;  // the slowest replica, as calibrate keeps it
        for (auto& [rank, v] : by_rank) {
          worst = std::max(worst, Median(v));
        }
        medians[key] = worst;
      }
      if (auto t = LoadProfile(dir + "/profile.yaml", job->schedule, &medians); t) {
        const SimStats st = RunEngine(job->schedule, t->table,
                                      {.optimizer_sync = job->config.optimizer_sync}, nullptr);
        e.replay_ms =
            static_cast<double>(IterationNs(job->config.optimizer_sync, StepRecordOf(st))) * 1e-6;
        e.replay_error = e.measured_ms > 0 ? (e.replay_ms - e.measured_ms) / e.measured_ms : 0;
      }
    }
    char line[256];
    std::snprintf(line, sizeof line,
                  "predicted %.2f ms, measured %.2f ms, error %+.2f%% (replay %+.2f%%); memory "
                  "%s; bytes %s",
                  e.predicted_ms, e.measured_ms, 100.0 * e.error, 100.0 * e.replay_error,
                  e.memory_equal ? "equal" : "differs", e.bytes_equal ? "equal" : "differ");
    progress(k, e.label, line);
    entries.push_back(e);
    if (Status s = write_summary(); !s) return fail(s.error());
  }
  if (Status s = write_summary(); !s) return fail(s.error());
  std::printf("%s", SummaryMd(entries, tol, command, conditions(), separate).c_str());
  std::printf("\nsummary: %s/summary.md, %s/summary.csv (%.0f s)\n", out.c_str(), out.c_str(),
              elapsed());
  if (!a->Has("--no-plots")) {
    RunPlots(out, a->Has("--tutorial") ? std::vector<std::string>{"--tutorial"}
                                       : std::vector<std::string>{});
  }
  return failures > 0 ? 1 : 0;
}

}  // namespace pipetwin
