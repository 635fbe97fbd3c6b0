// The validation loop's pieces that start no process: the variant list, the job variants,
// the launcher command, the summary tables, compare on files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "job/job.h"
#include "schedule/csv.h"
#include "schedule/generators.h"
#include "schedule/report.h"
#include "sim/simulate.h"
#include "workflow/compare_files.h"
#include "workflow/process.h"
#include "workflow/validate.h"

namespace pipetwin::workflow {
namespace {

const std::string kPp2 = PIPETWIN_SOURCE_DIR "/examples/validate/pp2.yaml";

std::string TempDir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("pipetwin_workflow_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(SchedulesFor, JobAllAndLists) {
  EXPECT_EQ(*SchedulesFor("job", "zb-h1"), std::vector<std::string>{"zb-h1"});
  auto all = SchedulesFor("all", "1f1b");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), AllGenerators().size());
  EXPECT_EQ(*SchedulesFor("1f1b,zb-h1", "gpipe"), (std::vector<std::string>{"1f1b", "zb-h1"}));
  EXPECT_EQ(*SchedulesFor("csv:a.csv", "gpipe"), std::vector<std::string>{"csv:a.csv"});
}

TEST(SchedulesFor, UnknownNameIsBadInputNamingTheOption) {
  auto s = SchedulesFor("1f1b,no-such", "1f1b");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kBadInput);
  EXPECT_NE(s.error().message.find("--schedules: unknown schedule 'no-such'"), std::string::npos);
  EXPECT_FALSE(SchedulesFor(",", "1f1b"));
}

TEST(VariantConfig, SetsTheScheduleAndTheChunksPerRank) {
  auto job = ReadJobConfig(kPp2);
  ASSERT_TRUE(job) << job.error().message;
  // Typed variants, written as files that read back to the same job.
  auto inter = ParseJob(WriteJobConfig(VariantConfig(*job, "interleaved-1f1b")), "variant.yaml");
  ASSERT_TRUE(inter) << inter.error().message;
  EXPECT_EQ(inter->config.schedule, "interleaved-1f1b");
  EXPECT_EQ(inter->parallel().vpp, 2);
  auto zbv = ParseJob(WriteJobConfig(VariantConfig(*job, "zbv")), "variant.yaml");
  ASSERT_TRUE(zbv) << zbv.error().message;
  EXPECT_EQ(zbv->config.schedule, "zbv");
  EXPECT_EQ(zbv->parallel().vpp, 2);
  // Back from an interleaved job to a one-chunk schedule.
  JobConfig i2 = VariantConfig(*job, "interleaved-1f1b");
  auto back = ResolveJob(VariantConfig(i2, "1f1b"));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->parallel().vpp, 1);
}

TEST(PlanVariants, OneVariantPerScheduleLabelledByJobAndSchedule) {
  ValidateOptions o;
  o.jobs = {kPp2};
  o.schedules = "all";
  auto v = PlanVariants(o);
  ASSERT_TRUE(v) << v.error().message;
  ASSERT_EQ(v->size(), AllGenerators().size());
  for (const Variant& x : *v) {
    EXPECT_EQ(x.entry.label, "pp2-" + x.entry.schedule);
    EXPECT_EQ(x.entry.job, kPp2);
    if (x.entry.note.empty()) {
      EXPECT_EQ(x.np, 2);
      EXPECT_EQ(x.entry.pp, 2);
      EXPECT_EQ(x.entry.microbatches, 8);
    }
    EXPECT_EQ(x.entry.note.find(','), std::string::npos);  // a CSV field
  }
  o.schedules = "job";
  v = PlanVariants(o);
  ASSERT_TRUE(v);
  ASSERT_EQ(v->size(), 1u);
  EXPECT_EQ((*v)[0].entry.label, "pp2");
  o.jobs = {"/no/such/job.yaml"};
  EXPECT_FALSE(PlanVariants(o));
}

TEST(CheckOptions, CalibrateStepsNeedSeparateCalibration) {
  ValidateOptions o;
  EXPECT_FALSE(CheckOptions(o));  // no job
  o.jobs = {kPp2};
  EXPECT_TRUE(CheckOptions(o));
  o.calibrate_steps = "3";
  auto s = CheckOptions(o);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("--calibrate-steps"), std::string::npos);
  o.separate_calibration = true;
  EXPECT_TRUE(CheckOptions(o));
}

TEST(Launcher, OptionThenEnvironmentThenMpirun) {
  EXPECT_EQ(Launcher("srun --mpi=pmix", "mpirun --oversubscribe"), "srun --mpi=pmix");
  EXPECT_EQ(Launcher("", "mpirun --oversubscribe"), "mpirun --oversubscribe");
  EXPECT_EQ(Launcher("", ""), "mpirun");
  EXPECT_EQ(Launcher("", nullptr), "mpirun");
  EXPECT_EQ(MpirunCommand("mpirun  --oversubscribe ", 4, "/bin/pipetwin"),
            (std::vector<std::string>{"mpirun", "--oversubscribe", "-np", "4", "/bin/pipetwin"}));
}

TEST(MeasureSteps, RunCalibrateOrCalibrateThenRunUnderTheLauncher) {
  ValidateOptions o;
  o.launcher = Launcher("", "mpirun --oversubscribe");
  Variant v;
  v.np = 4;
  auto steps = MeasureSteps(o, v, "out/pp2", "/bin/pipetwin");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].log, "run.log");
  EXPECT_EQ(steps[0].argv,
            (std::vector<std::string>{
                "mpirun", "--oversubscribe", "-np", "4", "/bin/pipetwin", "run", "out/pp2/job.yaml",
                "--backend", "cpu", "--report", "out/pp2/measured.json", "--trace",
                "out/pp2/measured.trace.json", "--calibrate", "out/pp2/profile.yaml"}));
  o.separate_calibration = true;
  o.calibrate_steps = "3";
  steps = MeasureSteps(o, v, "out/pp2", "/bin/pipetwin");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].what, "calibrate");
  EXPECT_EQ(steps[0].argv,
            (std::vector<std::string>{"mpirun", "--oversubscribe", "-np", "4", "/bin/pipetwin",
                                      "calibrate", "--backend", "cpu", "out/pp2/job.yaml", "--out",
                                      "out/pp2/profile.yaml", "--steps", "3"}));
  EXPECT_EQ(steps[1].what, "run");
  EXPECT_EQ(steps[1].argv.back(), "out/pp2/measured.trace.json");
}

// --backend sleep: one `run --backend sleep` (no calibration); the job must have costs:.
TEST(MeasureSteps, SleepBackendRunsWithoutCalibration) {
  ValidateOptions o;
  o.jobs = {kPp2};
  o.backend = "sleep";
  EXPECT_TRUE(CheckOptions(o));
  Variant v;
  v.np = 8;
  auto steps = MeasureSteps(o, v, "out/s", "/bin/pipetwin");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].what, "run --backend sleep");
  EXPECT_EQ(steps[0].argv, (std::vector<std::string>{"mpirun", "-np", "8", "/bin/pipetwin", "run",
                                                     "out/s/job.yaml", "--backend", "sleep",
                                                     "--report", "out/s/measured.json", "--trace",
                                                     "out/s/measured.trace.json"}));
  o.separate_calibration = true;
  EXPECT_FALSE(CheckOptions(o));
  o.separate_calibration = false;
  o.backend = "gpu";
  auto bad = CheckOptions(o);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("--backend"), std::string::npos);
  // pp2.yaml has a model and no costs: the sleep backend would have nothing to sleep.
  o.backend = "sleep";
  auto plan = PlanVariants(o);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("costs"), std::string::npos);
}

TEST(Spawn, ExitStatusOfAMissingProgram) {
  EXPECT_EQ(Spawn({"/no/such/program"}, ""), 127);
  EXPECT_EQ(Spawn({}, ""), 127);
}

Comparison MakeComparison(double predicted, double measured) {
  Comparison c;
  ErrorRow row;
  row.metric = "iteration_time_ms";
  row.predicted = predicted;
  row.measured = measured;
  c.rows.push_back(row);
  c.iteration_error = (predicted - measured) / measured;
  c.memory_equal = true;
  c.bytes_equal = false;
  return c;
}

Entry MakeEntry(const std::string& label, const std::string& schedule, const std::string& note) {
  Entry e;
  e.label = label;
  e.job = "pp2.yaml";
  e.schedule = schedule;
  e.pp = 2;
  e.note = note;
  return e;
}

TEST(Summary, TablesFromGivenComparisons) {
  Entry a = MakeEntry("pp2-1f1b", "1f1b", "");
  a.microbatches = 8;
  RecordComparison(a, MakeComparison(10.2, 10.0));
  Entry b = MakeEntry("pp2-zb-h1", "zb-h1", "");
  RecordComparison(b, MakeComparison(12.0, 10.0));
  Entry c = MakeEntry("pp2-zbv", "zbv", "skipped: no");
  const std::vector<Entry> es = {a, b, c};

  const std::string csv = SummaryCsv(es, 0.05);
  EXPECT_EQ(csv.rfind("label,job,schedule,pp,dp,tp,microbatches,predicted_ms,", 0), 0u);
  EXPECT_NE(csv.find("pp2-1f1b,pp2.yaml,1f1b,2,1,1,8,10.2000,10.0000,2.000,"), std::string::npos);
  EXPECT_NE(csv.find(",1,0,1,"), std::string::npos);  // memory equal, bytes differ, within
  EXPECT_NE(csv.find("pp2-zbv,pp2.yaml,zbv,"), std::string::npos);
  EXPECT_NE(csv.find("skipped: no"), std::string::npos);

  const std::string md = SummaryMd(es, 0.05, "pipetwin validate pp2.yaml", "Machine: test", false);
  EXPECT_NE(md.find("Made by: `pipetwin validate pp2.yaml`"), std::string::npos);
  EXPECT_NE(md.find("| pp2-1f1b | 2 | 1 | 1 | 1 | 8 | 10.20 | 10.00 (10.00–10.00) | +2.00% |"),
            std::string::npos);
  EXPECT_NE(md.find("+20.00% **outside**"), std::string::npos);
  EXPECT_EQ(md.find("Oversubscribed"), std::string::npos);
  // More ranks than cores: the row is marked, its error not held against the tolerance.
  Entry d = b;
  d.label = "hybrid8-zb-h1";
  d.ranks = 8;
  d.cp = 2;
  const std::string md8 = SummaryMd({a, d}, 0.05, "x", "y", false, "cpu", 2);
  EXPECT_NE(md8.find("Oversubscribed rows"), std::string::npos);
  EXPECT_NE(md8.find("| hybrid8-zb-h1 | 2 | 1 | 1 | 2 | "), std::string::npos);
  EXPECT_NE(md8.find("+20.00% (8 ranks on 2 cores: timing not checked)"), std::string::npos);
  EXPECT_EQ(md8.find("**outside**"), std::string::npos);
  EXPECT_NE(SummaryCsv({d}, 0.05).find(",2,8,"), std::string::npos);  // cp, ranks
  EXPECT_NE(md.find("| pp2-zbv |"), std::string::npos);
  EXPECT_NE(md.find("Jitter:"), std::string::npos);
  EXPECT_EQ(SummaryMd(es, 0.05, "x", "y", true).find("Jitter:"), std::string::npos);
}

TEST(CompareInto, AReportAgainstItselfHasNoError) {
  auto job = LoadJob(kPp2);
  ASSERT_TRUE(job);
  auto sim = Simulate(*job, {});
  ASSERT_TRUE(sim) << sim.error().message;
  const std::string dir = TempDir("compare");
  const std::string report = dir + "/r.json";
  ASSERT_TRUE(WriteFileAtomic(report, ReportToJson(sim->report)));
  CompareRequest r;
  r.predicted = report;
  r.measured = report;
  r.dir = dir + "/out";
  auto c = CompareInto(r);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->iteration_error, 0.0);
  EXPECT_TRUE(c->memory_equal);
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/errors.md"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/measured.json"));
  r.measured = dir + "/missing.json";
  auto bad = CompareInto(r);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kBadInput);
  std::filesystem::remove_all(dir);
}

// compare --profile: errors.md ends with the profile's "Where time goes"; a bad profile is bad
// input naming the file, and errors.md is not written.
TEST(CompareInto, WithAProfileShowsWhereTimeGoes) {
  auto job = LoadJob(kPp2);
  ASSERT_TRUE(job);
  auto sim = Simulate(*job, {});
  ASSERT_TRUE(sim) << sim.error().message;
  const std::string dir = TempDir("compare_profile");
  const std::string report = dir + "/r.json", profile = dir + "/profile.yaml";
  ASSERT_TRUE(WriteFileAtomic(report, ReportToJson(sim->report)));
  ASSERT_TRUE(WriteFileAtomic(
      profile,
      "version: 1\nbackend: cpu\nparallel: {pp: 2}\nstages:\n"
      "  - {stage: 0, forward_ms: 4, backward_input_ms: 6, backward_weight_ms: 5, "
      "optimizer_ms: 1.5, forward_gflops: 20, backward_input_gflops: 25, "
      "backward_weight_gflops: 16}\n"
      "  - {stage: 1, forward_ms: 8, backward_ms: 16, forward_gflops: 30, backward_gflops: 32.5}\n"
      "p2p: {latency_ms: 0.01, bandwidth_bytes_per_ms: 1e6}\n"
      "roofline: {gemm_gflops: 100, memory_gb_s: 10}\n"));
  CompareRequest r;
  r.predicted = report;
  r.measured = report;
  r.dir = dir + "/out";
  r.profile = profile;
  auto c = CompareInto(r);
  ASSERT_TRUE(c) << c.error().message;
  auto md = ReadText(dir + "/out/errors.md");
  ASSERT_TRUE(md);
  EXPECT_LT(md->find("| iteration_time_ms |"), md->find("### Where time goes")) << *md;
  for (const char* row :
       {"| 0 | F | 4.000 | 0.08 | 20.00 | 20.0% |", "| 0 | I | 6.000 | 0.15 | 25.00 | 25.0% |",
        "| 0 | W | 5.000 | 0.08 | 16.00 | 16.0% |", "| 0 | OPT | 1.500 | – | – | – |",
        "| 1 | F | 8.000 | 0.24 | 30.00 | 30.0% |", "| 1 | B | 16.000 | 0.52 | 32.50 | 32.5% |"}) {
    EXPECT_NE(md->find(row), std::string::npos) << row << "\n" << *md;
  }
  // Bad input, naming the file and the key; nothing written.
  ASSERT_TRUE(WriteFileAtomic(profile,
                              "version: 1\nstages:\n  - {forward_ms: 1, "
                              "forward_gflops: -1}\n"));
  r.dir = dir + "/bad";
  auto bad = CompareInto(r);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kBadInput);
  EXPECT_NE(bad.error().message.find(profile), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("stages[0].forward_gflops"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad/errors.md"));
  r.profile = dir + "/missing.yaml";
  auto missing = CompareInto(r);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kBadInput);
  EXPECT_NE(missing.error().message.find("missing.yaml"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(ParseTolerance, AFractionInZeroOne) {
  EXPECT_EQ(*ParseTolerance("0.05"), 0.05);
  EXPECT_FALSE(ParseTolerance("5%"));
  EXPECT_FALSE(ParseTolerance("2"));
  EXPECT_FALSE(ParseTolerance(""));
}

}  // namespace
}  // namespace pipetwin::workflow
