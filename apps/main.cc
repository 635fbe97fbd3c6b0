// pipetwin — predict a distributed training step, then run it for real and compare.
// Subcommands only parse arguments and call the libraries (DESIGN.md). The programs' main()
// (entry_cpu.cc: `pipetwin`, entry_cuda.cc: `pipetwin-cuda`) register their backends and
// call RunMain.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

#include "apps/commands.h"
#include "exec/backend_registry.h"
#include "exec/calibrate.h"
#include "exec/mpi_util.h"
#include "exec/run.h"
#include "job/job.h"
#include "models/cluster.h"
#include "models/model.h"
#include "schedule/csv.h"
#include "schedule/generators.h"
#include "schedule/lower.h"
#include "schedule/report.h"
#include "schedule/trace.h"
#include "sim/ascii.h"
#include "sim/profile.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

constexpr const char* kUsage = R"(pipetwin — pipeline schedules: predict, run, compare

usage:
  pipetwin simulate JOB.yaml [--report R.json] [--trace T.json] [--ascii]
                    [--profile PROFILE.yaml] [--per-pipeline-rank]
      Predict one training step: iteration time, bubbles, in-flight microbatches, memory per
      rank, throughput and MFU. The report has a row per GPU (--per-pipeline-rank: one per
      pipeline rank, for very large jobs).
  pipetwin schedule JOB.yaml [--csv OUT.csv] [--format compute_only|compute_comms]
      Write the per-rank programs (PyTorch action syntax, one row per rank).
  mpirun -np N pipetwin run JOB.yaml --backend cpu|cuda [--report R.json] [--trace T.json]
                                 [--check-reference] [--calibrate PROFILE.yaml]
      Execute the same step for real, N = pp × dp × tp × cp ranks; --check-reference compares
      the loss and every gradient with a single-process run of the same model and data;
      --calibrate alternates each measured step with a calibration step and writes the
      profile (as calibrate does), so that profile and measurement see the same machine.
  mpirun -np N pipetwin calibrate --backend cpu JOB.yaml --out PROFILE.yaml
                                 [--steps S] [--warmup W]
      Measure F, I, W, B and the optimizer step per stage, the executor's per-action
      overhead, point-to-point latency and bandwidth, the DP all-reduce; for simulate --profile.
  pipetwin compare PREDICTED.json MEASURED.json --out DIR [--predicted-trace T.json]
                   [--measured-trace T.json] [--tolerance 0.05] [--title TEXT] [--no-plots]
      Error table (DIR/errors.md, DIR/errors.csv) and plots (scripts/plot.py, matplotlib).
  pipetwin validate JOB.yaml [JOB2.yaml ...] [--schedules job|all|NAME,NAME] [--out DIR]
                    [--mpirun "mpirun --oversubscribe"] [--tolerance 0.05] [--tutorial]
                    [--separate-calibration]
      For each job and schedule: run --calibrate (calibration and measured steps
      interleaved in one run; --separate-calibration: calibrate, then run), simulate
      --profile, compare. mpirun, or $PIPETWIN_MPIRUN, starts the ranks; DIR/summary.md and
      plots.
  pipetwin schedules
      List the schedule generators.
  pipetwin presets
      List the model presets (any field can be overridden in `model:`) and the devices.

Exit status: 0 success, 2 bad input (the message names the file and the field), 1 other failure.
)";

int Fail(const Error& e) {
  std::cerr << "pipetwin: " << e.message << "\n";
  return e.exit_status();
}

Expected<ResolvedJob> JobFromArgs(const CmdArgs& a, const char* cmd) {
  if (a.positional.size() != 1) {
    return Error::BadInput(std::string(cmd) +
                           ": expected exactly one job file (see pipetwin --help)");
  }
  return LoadJob(a.positional[0]);
}

int CmdSimulate(int argc, char** argv) {
  auto a = ParseCmdArgs(argc, argv, 2, {"--report", "--trace", "--profile"},
                        {"--ascii", "--per-pipeline-rank"});
  if (!a) return Fail(a.error());
  auto job = JobFromArgs(*a, "simulate");
  if (!job) return Fail(job.error());
  const bool want_timeline = a->options.count("--trace") > 0 || a->Has("--ascii");
  const SimulateOptions so{.record_timeline = want_timeline,
                           .per_world_rank = !a->Has("--per-pipeline-rank")};
  // --profile: measured costs (pipetwin calibrate) in place of the cost model's times.
  auto res = a->options.count("--profile") > 0
                 ? SimulateWithProfile(*job, a->options.at("--profile"), so)
                 : Simulate(*job, so);
  if (!res) return Fail(res.error());
  const Report& r = res->report;
  if (auto it = a->options.find("--report"); it != a->options.end()) {
    if (Status s = WriteFileAtomic(it->second, ReportToJson(r)); !s) return Fail(s.error());
  }
  if (auto it = a->options.find("--trace"); it != a->options.end()) {
    if (Status s = WriteFileAtomic(it->second, TraceJson(res->timeline, job->path())); !s) {
      return Fail(s.error());
    }
  }
  std::printf("%s: %s, pp %d, %d microbatches, %zu actions\n", job->path().c_str(),
              r.schedule.c_str(), r.pp, r.microbatches, job->schedule.NumActions());
  std::printf("iteration time %.3f ms (%s), makespan %.3f ms, bubble %.2f%%\n", r.iteration_time_ms,
              r.optimizer_sync ? "optimizer_sync" : "no optimizer sync", r.makespan_ms,
              100.0 * r.bubble_fraction);
  if (r.job && r.memory) {
    const JobSummary& j = *r.job;
    const MemorySummary& m = *r.memory;
    std::printf("%s on %d × %s: %.1f TFLOP/s per device, MFU %.1f%%, %.0f tokens/s\n",
                j.model.c_str(), j.world_size, j.device.c_str(), r.throughput.tflops_per_device,
                100.0 * r.throughput.mfu, r.throughput.tokens_per_s);
    if (r.hardware_flops && j.hardware_flops_per_iteration > j.model_flops_per_iteration) {
      std::printf("with the recomputed forward: %.1f TFLOP/s per device (HFU %.1f%%)\n",
                  r.hardware_flops->tflops_per_device, 100.0 * r.hardware_flops->hfu);
    }
    const double gib = 1024.0 * 1024 * 1024;
    if (m.fits) {
      std::printf("memory: fits; the fullest rank (%d) peaks at %.1f GiB of %.1f GiB\n",
                  m.worst_rank, static_cast<double>(m.worst_peak_bytes) / gib,
                  static_cast<double>(m.device_memory_bytes) / gib);
    } else {
      std::printf("memory: DOES NOT FIT; rank %d needs %.1f GiB of %.1f GiB (%.1f GiB short)\n",
                  m.worst_rank, static_cast<double>(m.worst_peak_bytes) / gib,
                  static_cast<double>(m.device_memory_bytes) / gib,
                  static_cast<double>(m.shortfall_bytes) / gib);
    }
  }
  // One line per pipeline rank: data-, tensor- and context-parallel replicas are identical.
  std::printf("%6s %12s %8s %10s %10s %12s\n", "pp", "busy ms", "bubble", "in-flight", "pending W",
              "peak GiB");
  for (const RankReport& k : r.ranks) {
    if (k.dp_rank != 0 || k.tp_rank != 0 || k.cp_rank != 0) continue;
    std::printf("%6d %12.3f %7.2f%% %10d %10d %12.2f\n", k.pp_rank >= 0 ? k.pp_rank : k.rank,
                k.compute_busy_ms, 100.0 * k.bubble_fraction, k.peak_inflight_microbatches,
                k.peak_pending_weight_grads,
                static_cast<double>(k.peak_memory_bytes) / (1024.0 * 1024 * 1024));
  }
  if (a->Has("--ascii")) {
    std::printf("\n%s", AsciiTimeline(res->timeline, job->schedule.StagesPerRank()).c_str());
  }
  return 0;
}

int CmdSchedule(int argc, char** argv) {
  auto a = ParseCmdArgs(argc, argv, 2, {"--csv", "--format"}, {});
  if (!a) return Fail(a.error());
  auto job = JobFromArgs(*a, "schedule");
  if (!job) return Fail(job.error());
  CsvFormat format = CsvFormat::kComputeOnly;
  if (auto it = a->options.find("--format"); it != a->options.end()) {
    if (it->second == "compute_comms") {
      format = CsvFormat::kComputeComms;
    } else if (it->second != "compute_only") {
      return Fail(Error::BadInput("--format: must be compute_only or compute_comms, got '" +
                                  it->second + "'"));
    }
  }
  const std::string text = WriteScheduleCsv(job->schedule, format);
  if (auto it = a->options.find("--csv"); it != a->options.end()) {
    if (Status st = WriteFileAtomic(it->second, text); !st) return Fail(st.error());
  } else {
    std::fputs(text.c_str(), stdout);
  }
  return 0;
}

int CmdRun(int argc, char** argv) {
  if (auto rc = HandOverBackend(argc, argv)) return *rc;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = exec::WorldRank();
  // Any failure on any rank stops every rank: a rank that exits alone would leave the
  // others waiting for it.
  auto abort_with = [&](const Error& e, bool print) -> int {
    if (print)
      std::cerr << "pipetwin: " << (rank == 0 ? "" : "rank " + std::to_string(rank) + ": ")
                << e.message << "\n";
    std::cerr.flush();
    MPI_Abort(MPI_COMM_WORLD, e.exit_status());
    return e.exit_status();
  };
  auto a = ParseCmdArgs(argc, argv, 2, {"--report", "--trace", "--backend", "--calibrate"},
                        {"--check-reference"});
  if (!a) return abort_with(a.error(), rank == 0);
  auto job = JobFromArgs(*a, "run");
  if (!job) return abort_with(job.error(), rank == 0);
  exec::RunOptions opts;
  if (auto it = a->options.find("--backend"); it != a->options.end()) {
    opts.backend = it->second;
  } else {
    return abort_with(Error::BadInput("run: --backend cpu|cuda is required"), rank == 0);
  }
  opts.check_reference = a->Has("--check-reference");
  std::string profile_out, profile_yaml;
  if (auto it = a->options.find("--calibrate"); it != a->options.end()) {
    profile_out = it->second;
    if (opts.check_reference) {
      return abort_with(
          Error::BadInput("run: --calibrate and --check-reference cannot be combined"), rank == 0);
    }
  }
  Expected<exec::RunResult> res = Error::Failure("not run");
  try {
    if (profile_out.empty()) {
      res = exec::RunJob(*job, opts);
    } else {
      // Calibration steps alternate with the measured ones (exec/calibrate.h).
      auto cal = exec::Calibrate(*job, {.backend = opts.backend, .interleaved = true});
      if (cal) {
        profile_yaml = std::move(cal->profile_yaml);
        res = std::move(*cal->run);
      } else {
        res = cal.error();
      }
    }
  } catch (const exec::TimeoutError& e) {
    return abort_with(Error::Failure(e.what()), true);
  } catch (const std::exception& e) {
    return abort_with(Error::Failure(std::string("rank ") + std::to_string(rank) + ": " + e.what()),
                      true);
  }
  // Bad input is the same on every rank: rank 0 says it once.
  if (!res) return abort_with(res.error(), rank == 0 || res.error().code != ErrorCode::kBadInput);
  int status = 0;
  if (res->root) {
    const Report& r = res->report;
    if (!profile_out.empty()) {
      if (Status s = WriteFileAtomic(profile_out, profile_yaml); !s) {
        return abort_with(s.error(), true);
      }
    }
    if (auto it = a->options.find("--report"); it != a->options.end()) {
      if (Status s = WriteFileAtomic(it->second, ReportToJson(r)); !s)
        return abort_with(s.error(), true);
    }
    if (auto it = a->options.find("--trace"); it != a->options.end()) {
      if (Status s =
              WriteFileAtomic(it->second, TraceJson(res->timeline, job->path() + " (measured)"));
          !s) {
        return abort_with(s.error(), true);
      }
    }
    std::printf("%s: %s, pp %d, %d microbatches, %zu ranks, backend %s\n", job->path().c_str(),
                r.schedule.c_str(), r.pp, r.microbatches, r.ranks.size(), opts.backend.c_str());
    std::printf("measured iteration time %.3f ms (median of %zu steps), bubble %.2f%%\n",
                r.iteration_time_ms, res->step_ms.size(), 100.0 * r.bubble_fraction);
    std::printf("loss: first step %.6f, last step %.6f\n", res->losses.front(), res->losses.back());
    if (!profile_out.empty()) {
      std::printf(
          "calibration: %zu steps interleaved with the measured ones, profile written to %s\n",
          res->step_ms.size(), profile_out.c_str());
    }
    if (opts.check_reference) {
      std::printf("reference check: worst relative error %.3g (tolerance %.0e) %s\n",
                  res->max_relative_error, opts.tolerance,
                  res->max_relative_error <= opts.tolerance ? "ok" : "FAILED");
      if (!(res->max_relative_error <= opts.tolerance)) status = 1;
    }
    std::fflush(stdout);
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}

int CmdPresets() {
  std::printf("%-14s %7s %7s %7s %6s %6s %7s %6s  %s\n", "model", "layers", "hidden", "ffn",
              "heads", "kv", "vocab", "seq", "parameters");
  for (const std::string& name : models::PresetNames()) {
    const models::ModelConfig m = *models::FindPreset(name);
    std::printf("%-14s %7d %7d %7d %6d %6d %7d %6d  %.3g\n", name.c_str(), m.layers, m.hidden,
                m.ffn_hidden, m.heads, m.kv_heads, m.vocab, m.seq_len,
                static_cast<double>(models::TotalParameters(m)));
  }
  std::printf("\n%-16s %12s %12s %10s\n", "device", "bf16 TFLOP/s", "fp32 TFLOP/s", "memory GiB");
  for (const std::string& name : models::DeviceNames()) {
    const models::DeviceSpec d = *models::FindDevice(name);
    std::printf("%-16s %12.4g %12.4g %10.1f\n", name.c_str(), d.peak_bf16_flops * 1e-12,
                d.peak_fp32_flops * 1e-12,
                static_cast<double>(d.hbm_bytes) / (1024.0 * 1024 * 1024));
  }
  return 0;
}

int CmdSchedules() {
  for (const GeneratorInfo& g : AllGenerators()) {
    std::printf("%-18s %s\n", std::string(g.name).c_str(), std::string(g.description).c_str());
  }
  return 0;
}

}  // namespace

std::optional<int> HandOverBackend(int argc, char** argv) {
  std::string backend;
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0) backend = argv[i + 1];
  }
  if (backend.empty() || exec::BackendRegistered(backend)) return std::nullopt;
  // Under mpirun every rank gets here: one message is enough.
  const char* env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (env_rank == nullptr) env_rank = std::getenv("PMI_RANK");
  const bool print = env_rank == nullptr || std::strcmp(env_rank, "0") == 0;
  if (backend != "cuda") {
    std::string known;
    for (const std::string& n : exec::RegisteredBackends()) known += n + " or ";
    if (print) {
      std::fprintf(stderr, "pipetwin: --backend: must be %scuda, got '%s'\n", known.c_str(),
                   backend.c_str());
    }
    return 2;
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path cuda = self.parent_path() / "pipetwin-cuda";
  if (ec || ::access(cuda.c_str(), X_OK) != 0) {
    if (print) {
      std::fprintf(stderr,
                   "pipetwin: built without CUDA: there is no %s (configure with the CUDA "
                   "toolkit and PIPETWIN_WITH_CUDA=ON to use --backend cuda)\n",
                   ec ? "pipetwin-cuda next to this program" : cuda.c_str());
    }
    return 1;
  }
  ::execv(cuda.c_str(), argv);
  const int err = errno;
  if (print)
    std::fprintf(stderr, "pipetwin: cannot start %s: %s\n", cuda.c_str(), std::strerror(err));
  return 1;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "simulate") return CmdSimulate(argc, argv);
  if (cmd == "schedule") return CmdSchedule(argc, argv);
  if (cmd == "schedules") return CmdSchedules();
  if (cmd == "presets") return CmdPresets();
  if (cmd == "run") return CmdRun(argc, argv);
  if (cmd == "calibrate") return CmdCalibrate(argc, argv);
  if (cmd == "compare") return CmdCompare(argc, argv);
  if (cmd == "validate") return CmdValidate(argc, argv);
  std::fprintf(stderr, "pipetwin: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}

int RunMain(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipetwin: internal error: %s\n", e.what());
    return 1;
  }
}

}  // namespace pipetwin
