// validate.h — `pipetwin validate`: for each job and schedule, measure (run --calibrate under
// mpirun, or calibrate then run), predict (simulate --profile), compare; then one summary
// (DIR/summary.md, DIR/summary.csv) and one set of plots. With `--backend sleep` the
// measurement is `run --backend sleep` (each compute action sleeps the job's `costs:`,
// communication is real) and the prediction is `simulate` from the same costs: a check of the
// schedule, wait and communication model without kernels.
//
// `calibrate` and `run` need their ranks, so they are started as child processes of the
// `pipetwin` program through the launcher (workflow/process.h); their output goes to
// DIR/<entry>/calibrate.log and run.log. The phases are separate functions so that tests can
// call the ones that start no process (the variant list, the summary tables).
//
//   ValidateOptions o{.jobs = {"examples/validate/pp2.yaml"}, .schedules = "all"};
//   Expected<ValidateResult> r = Validate(o, [](const std::string& line) { ... });
//   if (r) std::fputs(r->summary_md.c_str(), stdout);
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "job/job.h"
#include "schedule/expected.h"

namespace pipetwin::workflow {

struct ValidateOptions {
  std::vector<std::string> jobs;  // job files
  std::string schedules = "job";  // job | all | NAME,NAME (csv:PATH allowed)
  std::string out = "validate-out";
  std::string launcher = "mpirun";  // workflow::Launcher(--mpirun, $PIPETWIN_MPIRUN)
  std::string program;              // the pipetwin to start under the launcher; empty: SelfExe()
  double tolerance = 0.05;
  bool separate_calibration = false;
  std::string calibrate_steps;  // passed to `calibrate --steps`; separate calibration only
  bool plots = true;
  bool tutorial = false;        // plot.py --tutorial
  std::string command;          // the command line, quoted in summary.md
  std::string backend = "cpu";  // cpu (calibrated) | sleep (the job's costs, no profile)
};

// One row of the summary: one job with one schedule.
struct Entry {
  std::string label;  // "<job stem>-<schedule>" ("<job stem>" with --schedules job)
  std::string job, schedule;
  int pp = 1, dp = 1, tp = 1, cp = 1, microbatches = 0;
  int ranks = 1;  // pp × dp × tp × cp: the processes of the measured run
  double predicted_ms = 0, measured_ms = 0, error = 0, min_ms = 0, max_ms = 0;
  double replay_ms = 0, replay_error = 0;  // with the run's own action medians
  int steps = 0;
  bool memory_equal = false, bytes_equal = false, done = false;
  std::string note;  // why it was skipped or failed (no commas: it is a CSV field)
};

// The job with one schedule, checked (resolved) before anything runs.
struct Variant {
  Entry entry;
  std::string yaml;  // the job file to write to DIR/<label>/job.yaml (WriteJobConfig)
  int np = 1;        // ranks
};

// Fails (bad input) where the options contradict each other.
Status CheckOptions(const ValidateOptions& o);

// The schedules that `which` names for a job whose own schedule is `job_schedule`:
// "job" → {job_schedule}; "all" → every generator; "a,b" → {a, b} (each a generator or csv:).
Expected<std::vector<std::string>> SchedulesFor(const std::string& which,
                                                const std::string& job_schedule);

// The typed job with schedule `schedule`: vpp at least 2 for interleaved-1f1b, 2 for the
// V-shaped schedules, 1 for the others (a CSV schedule keeps the job's).
JobConfig VariantConfig(const JobConfig& job, const std::string& schedule);

// Phase 1: every (job, schedule). A variant that does not build is kept with a note (or is
// an error with --schedules job).
Expected<std::vector<Variant>> PlanVariants(const ValidateOptions& o);

// Before anything runs: --out can be written or created, no two variants write the same
// folder DIR/<label> (two jobs with the same file name), and no input (a job file, a CSV
// schedule) lies in a folder that validate rewrites or is DIR/summary.*.
Status CheckOutputs(const ValidateOptions& o, const std::vector<Variant>& variants);

// One process that measures a variant: its command line and its log (DIR/<label>/LOG).
struct MeasureStep {
  std::string what;  // "run --calibrate", "calibrate", "run"
  std::string log;   // "run.log", "calibrate.log"
  std::vector<std::string> argv;
};

// Phase 2's processes, in order: `run --calibrate`, or `calibrate` then `run` with
// --separate-calibration, or `run --backend sleep` alone; each `LAUNCHER -np N PROGRAM ...`,
// writing into `dir`.
std::vector<MeasureStep> MeasureSteps(const ValidateOptions& o, const Variant& v,
                                      const std::string& dir, const std::string& program);

// An entry's results from the comparison of its predicted and measured reports.
void RecordComparison(Entry& e, const Comparison& c);

// The summary tables.
std::string SummaryCsv(const std::vector<Entry>& entries, double tolerance);
// cores > 0: rows with more ranks than cores (oversubscribed: the ranks time-share the cores)
// are marked as not a timing check, and their error is not held against the tolerance.
std::string SummaryMd(const std::vector<Entry>& entries, double tolerance,
                      const std::string& command, const std::string& conditions, bool separate,
                      const std::string& backend = "cpu", int cores = 0);

struct ValidateResult {
  std::vector<Entry> entries;
  int failures = 0;  // entries whose calibrate or run failed
  std::string summary_md;
  double seconds = 0;
};

using Progress = std::function<void(const std::string& line)>;

// The whole loop: plan, then for each variant measure, predict and compare, then summarise
// (and plot unless !o.plots). Progress lines go to `progress`.
Expected<ValidateResult> Validate(const ValidateOptions& o, const Progress& progress);

}  // namespace pipetwin::workflow
