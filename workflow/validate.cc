#include "workflow/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <utility>

#include "schedule/file_io.h"
#include "schedule/generators.h"
#include "schedule/quote.h"
#include "schedule/suggest.h"
#include "workflow/process.h"

namespace pipetwin::workflow {

Status CheckOptions(const ValidateOptions& o) {
  if (o.jobs.empty()) {
    return Error::BadInput("validate: expected one or more job files (see --help)");
  }
  if (o.backend != "cpu" && o.backend != "sleep") {
    return Error::BadInput("--backend: must be cpu or sleep, got '" + o.backend + "'");
  }
  if (o.backend == "sleep" && o.separate_calibration) {
    return Error::BadInput(
        "--separate-calibration: not with --backend sleep (it predicts from the job's costs:, "
        "nothing is calibrated)");
  }
  if (!o.separate_calibration && !o.calibrate_steps.empty()) {
    return Error::BadInput(
        "--calibrate-steps: only with --separate-calibration (interleaved, the run has as many "
        "calibration steps as measured steps: execution.steps in the job)");
  }
  return OkStatus();
}

Expected<std::vector<std::string>> SchedulesFor(const std::string& which,
                                                const std::string& job_schedule) {
  std::vector<std::string> schedules;
  if (which == "job") return std::vector<std::string>{job_schedule};
  if (which == "all") {
    for (const GeneratorInfo& g : AllGenerators()) schedules.emplace_back(g.name);
    return schedules;
  }
  std::string s = which;
  for (char& c : s) c = c == ',' ? ' ' : c;
  schedules = Words(s);
  // The generators' names, once: to recognise a name, to list them, and to suggest one.
  std::vector<std::string> generators;
  std::string names;
  for (const GeneratorInfo& g : AllGenerators()) {
    generators.emplace_back(g.name);
    names += (names.empty() ? "" : ", ") + generators.back();
  }
  for (const std::string& name : schedules) {
    if (name.rfind("csv:", 0) == 0 ||
        std::find(generators.begin(), generators.end(), name) != generators.end()) {
      continue;
    }
    std::vector<std::string> all = generators;
    all.insert(all.end(), {"job", "all"});
    const std::string guess = DidYouMean(name, all);
    return Error::BadInput("--schedules: unknown schedule " + Quoted(name) +
                           (guess.empty() ? "" : ", " + guess) + " (one of " + names +
                           ", csv:PATH; or job, all)");
  }
  if (schedules.empty()) {
    return Error::BadInput("--schedules: empty (job, all, or names: one of " + names + ")");
  }
  return schedules;
}

JobConfig VariantConfig(const JobConfig& job, const std::string& schedule) {
  JobConfig v = job;
  v.schedule = schedule;
  if (schedule == "interleaved-1f1b") {
    v.parallel.vpp = std::max(v.parallel.vpp, 2);
  } else if (schedule == "zbv" || schedule == "dualpipev") {
    v.parallel.vpp = 2;
  } else if (!v.IsCsvSchedule()) {
    v.parallel.vpp = 1;
  }
  return v;
}

Expected<std::vector<Variant>> PlanVariants(const ValidateOptions& o) {
  std::vector<Variant> variants;
  const bool strict = o.schedules == "job";
  for (const std::string& path : o.jobs) {
    auto job = LoadJob(path);
    if (!job) return job.error();
    auto schedules = SchedulesFor(o.schedules, job->config.schedule);
    if (!schedules) return schedules.error();
    const std::string stem = std::filesystem::path(path).stem().string();
    for (const std::string& sched : *schedules) {
      Variant p;
      p.entry.label = strict ? stem : stem + "-" + sched;
      p.entry.job = path;
      p.entry.schedule = sched;
      const JobConfig config = VariantConfig(job->config, sched);
      p.yaml = WriteJobConfig(config,
                              path + " with schedule " + sched + " (written by pipetwin validate)");
      auto vj = ResolveJob(config);
      if (!vj) {
        if (strict) return vj.error();
        const std::string& m = vj.error().message;
        p.entry.note = "skipped: " + m.substr(0, m.find('\n'));
      } else {
        p.entry.pp = vj->parallel().pp;
        p.entry.dp = vj->parallel().dp;
        p.entry.tp = vj->parallel().tp;
        p.entry.cp = vj->parallel().cp;
        p.np = vj->parallel().WorldSize();
        p.entry.ranks = p.np;
        p.entry.microbatches = vj->microbatches;
        if (o.backend == "sleep" && !vj->config.costs) {
          return vj->config.source.At(
              "costs", "validate --backend sleep predicts and sleeps the job's costs: (give them)");
        }
      }
      for (char& c : p.entry.note) c = c == ',' ? ';' : c;
      variants.push_back(std::move(p));
    }
  }
  return variants;
}

Status CheckOutputs(const ValidateOptions& o, const std::vector<Variant>& variants) {
  if (Status s = CheckOutputDir(o.out, "--out"); !s) return s;
  std::vector<std::string> inputs = o.jobs;
  std::map<std::string, const Variant*> by_label;
  for (const Variant& v : variants) {
    auto [it, fresh] = by_label.emplace(v.entry.label, &v);
    if (!fresh && it->second->entry.job != v.entry.job) {
      return Error::BadInput("--out: " + it->second->entry.job + " and " + v.entry.job +
                             " would both write " + o.out + "/" + v.entry.label +
                             "/ (the same file name); rename one of them");
    }
    if (v.entry.schedule.rfind("csv:", 0) == 0) {
      JobConfig c;
      c.schedule = v.entry.schedule;
      c.source = SourceMap(v.entry.job);
      inputs.push_back(c.CsvPath());
    }
  }
  for (const std::string& in : inputs) {
    for (const char* summary : {"/summary.md", "/summary.csv"}) {
      if (SamePath(in, o.out + summary)) {
        return Error::BadInput("--out: " + o.out + summary +
                               ", which validate writes, is its input " + in);
      }
    }
    const std::string folder = std::filesystem::path(in).parent_path().string();
    for (const auto& [label, v] : by_label) {
      if (SamePath(folder.empty() ? "." : folder, o.out + "/" + label)) {
        return Error::BadInput("--out: the input " + in + " is in " + o.out + "/" + label +
                               "/, which validate rewrites; choose another --out");
      }
    }
  }
  return OkStatus();
}

std::vector<MeasureStep> MeasureSteps(const ValidateOptions& o, const Variant& v,
                                      const std::string& dir, const std::string& program) {
  const std::string job_path = dir + "/job.yaml", profile = dir + "/profile.yaml";
  auto command = [&](std::vector<std::string> args) {
    std::vector<std::string> cmd = MpirunCommand(o.launcher, v.np, program);
    cmd.insert(cmd.end(), args.begin(), args.end());
    return cmd;
  };
  std::vector<std::string> run = {"run",       job_path,
                                  "--backend", o.backend,
                                  "--report",  dir + "/measured.json",
                                  "--trace",   dir + "/measured.trace.json"};
  if (o.backend == "sleep") return {{"run --backend sleep", "run.log", command(run)}};
  if (!o.separate_calibration) {
    run.insert(run.end(), {"--calibrate", profile});
    return {{"run --calibrate", "run.log", command(run)}};
  }
  std::vector<std::string> cal = {"calibrate", "--backend", "cpu", job_path, "--out", profile};
  if (!o.calibrate_steps.empty()) cal.insert(cal.end(), {"--steps", o.calibrate_steps});
  return {{"calibrate", "calibrate.log", command(cal)}, {"run", "run.log", command(run)}};
}

void RecordComparison(Entry& e, const Comparison& c) {
  e.done = true;
  e.predicted_ms = c.rows.empty() ? 0 : c.rows[0].predicted;
  e.measured_ms = c.rows.empty() ? 0 : c.rows[0].measured;
  e.error = c.iteration_error;
  e.memory_equal = c.memory_equal;
  e.bytes_equal = c.bytes_equal;
  e.min_ms = e.max_ms = e.measured_ms;
}

std::string SummaryCsv(const std::vector<Entry>& es, double tol) {
  std::ostringstream o;
  o << "label,job,schedule,pp,dp,tp,microbatches,predicted_ms,measured_ms,error_pct,"
       "measured_min_ms,measured_max_ms,measured_steps,memory_equal,bytes_equal,within_tolerance,"
       "replay_ms,replay_error_pct,cp,ranks,note\n";
  char b[512];
  for (const Entry& e : es) {
    std::snprintf(b, sizeof b,
                  "%s,%s,%s,%d,%d,%d,%d,%.4f,%.4f,%.3f,%.4f,%.4f,%d,%d,%d,%d,%.4f,%.3f,%d,%d,%s\n",
                  e.label.c_str(), e.job.c_str(), e.schedule.c_str(), e.pp, e.dp, e.tp,
                  e.microbatches, e.predicted_ms, e.measured_ms, 100.0 * e.error, e.min_ms,
                  e.max_ms, e.steps, e.memory_equal ? 1 : 0, e.bytes_equal ? 1 : 0,
                  e.done && std::abs(e.error) <= tol ? 1 : 0, e.replay_ms, 100.0 * e.replay_error,
                  e.cp, e.ranks, e.note.c_str());
    o << b;
  }
  return o.str();
}

std::string SummaryMd(const std::vector<Entry>& es, double tol, const std::string& command,
                      const std::string& conditions, bool separate, const std::string& backend,
                      int cores) {
  const bool sleep = backend == "sleep";
  const auto oversubscribed = [&](const Entry& e) { return cores > 0 && e.ranks > cores; };
  const bool any_oversubscribed = std::any_of(es.begin(), es.end(), oversubscribed);
  std::ostringstream o;
  o << "# Predicted against measured\n\n"
    << "Made by: `" << command << "`\n\n"
    << conditions << "\n\n"
    << (sleep ? "Each row: `pipetwin run --backend sleep` (every compute action sleeps its time "
                "from the job's `costs:`, holding no core; transfers and reductions are real MPI "
                "on real buffer sizes; the median of the measured steps after warm-up), `pipetwin "
                "simulate` (the prediction, from the same costs), `pipetwin compare`. Memory is "
                "not measured by the sleep backend (its report takes the model's)."
        : separate
            ? "Each row: `pipetwin calibrate` (a profile measured on the CPU backend), `pipetwin "
              "simulate --profile`, `pipetwin run` (median of the measured steps after warm-up), "
              "`pipetwin compare`."
            : "Each row: `pipetwin run --calibrate` (one run on the CPU backend whose steps after "
              "warm-up alternate: calibration steps, from which the profile's per-action times "
              "come, and measured steps, whose median is the measurement), `pipetwin simulate "
              "--profile` (the prediction: it reads only the profile), `pipetwin compare`.")
    << " Error = (predicted − measured) / measured; tolerance ±" << 100.0 * tol
    << "%. Per-entry tables: `<label>/errors.md`.\n\n"
    << (separate || sleep
            ? ""
            : "Jitter: this machine's cores change speed from one step to the next and a step "
              "waits for its slowest rank, so the prediction plays the step once per "
              "calibration step, each rank at the speed it had in that step, and reports "
              "the median, as the measurement does (sim/profile.h).\n\n")
    << (sleep ? ""
              : "Replay: the same simulation, without jitter, with each action's time taken from "
                "the measured run itself (its median step's median per stage and kind) instead "
                "of the calibration: a check of the schedule model alone.\n\n")
    << (any_oversubscribed
            ? "Oversubscribed rows (more ranks than the machine's " + std::to_string(cores) +
                  " cores, marked so): the ranks time-share the cores, so the measured step is "
                  "not the step the simulator plays (one rank per device); their predicted time "
                  "is the simulation's, stated and not validated, and the error is not held "
                  "against the tolerance. Memory and bytes are checked as on every row.\n\n"
            : "")
    << "| entry | pp | dp | tp | cp | m | predicted ms | measured ms (min–max) | error | replay "
       "error | memory | bytes |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|:-:|\n";
  char b[640];
  for (const Entry& e : es) {
    if (!e.done) {
      o << "| " << e.label << " | " << e.pp << " | " << e.dp << " | " << e.tp << " | " << e.cp
        << " | " << e.microbatches << " | – | – | – | – | – | – |  " << e.note << "\n";
      continue;
    }
    std::string verdict = std::abs(e.error) <= tol ? "" : " **outside**";
    if (oversubscribed(e)) {
      verdict = " (" + std::to_string(e.ranks) + " ranks on " + std::to_string(cores) +
                " cores: timing not checked)";
    }
    char replay[32] = "–";  // the sleep backend has no profile to replay
    if (!sleep) std::snprintf(replay, sizeof replay, "%+.2f%%", 100.0 * e.replay_error);
    std::snprintf(
        b, sizeof b,
        "| %s | %d | %d | %d | %d | %d | %.2f | %.2f (%.2f–%.2f) | %+.2f%%%s | %s | %s | %s |\n",
        e.label.c_str(), e.pp, e.dp, e.tp, e.cp, e.microbatches, e.predicted_ms, e.measured_ms,
        e.min_ms, e.max_ms, 100.0 * e.error, verdict.c_str(), replay,
        e.memory_equal ? "equal" : "**differs**", e.bytes_equal ? "equal" : "**differ**");
    o << b;
  }
  return o.str();
}

}  // namespace pipetwin::workflow
