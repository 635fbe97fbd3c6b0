// `mpirun -np N pipetwin calibrate --backend cpu JOB.yaml --out PROFILE.yaml`
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "apps/commands.h"
#include "exec/calibrate.h"
#include "exec/mpi_util.h"
#include "job/job.h"
#include "schedule/csv.h"

namespace pipetwin {

bool CmdArgs::Has(const std::string& flag) const {
  for (const auto& f : flags) {
    if (f == flag) return true;
  }
  return false;
}

std::string CmdArgs::Get(const std::string& option, const std::string& fallback) const {
  auto it = options.find(option);
  return it == options.end() ? fallback : it->second;
}

Expected<CmdArgs> ParseCmdArgs(int argc, char** argv, int first,
                               const std::vector<std::string>& valued,
                               const std::vector<std::string>& flags) {
  CmdArgs a;
  for (int i = first; i < argc; ++i) {
    const std::string s = argv[i];
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    bool is_valued = false, is_flag = false;
    for (const auto& v : valued) is_valued = is_valued || v == s;
    for (const auto& f : flags) is_flag = is_flag || f == s;
    if (is_valued) {
      if (i + 1 >= argc) return Error::BadInput("option " + s + " needs a value");
      a.options[s] = argv[++i];
    } else if (is_flag) {
      a.flags.push_back(s);
    } else {
      return Error::BadInput("unknown option " + s + " (see pipetwin --help)");
    }
  }
  return a;
}

Expected<double> ToleranceArg(const CmdArgs& a, double fallback) {
  const std::string text = a.Get("--tolerance");
  if (text.empty()) return fallback;
  char* end = nullptr;
  const double tol = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !(tol >= 0 && tol <= 1)) {
    return Error::BadInput("--tolerance: must be a number in [0, 1] (0.05 is 5%), got '" + text +
                           "'");
  }
  return tol;
}

int CmdCalibrate(int argc, char** argv) {
  if (auto rc = HandOverBackend(argc, argv)) return *rc;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = exec::WorldRank();
  // A failure on any rank stops every rank (see `run`).
  auto abort_with = [&](const Error& e, bool print) -> int {
    if (print) {
      std::cerr << "pipetwin: " << (rank == 0 ? "" : "rank " + std::to_string(rank) + ": ")
                << e.message << "\n";
    }
    std::cerr.flush();
    MPI_Abort(MPI_COMM_WORLD, e.exit_status());
    return e.exit_status();
  };
  auto a = ParseCmdArgs(argc, argv, 2, {"--backend", "--out", "--steps", "--warmup"}, {});
  if (!a) return abort_with(a.error(), rank == 0);
  if (a->positional.size() != 1) {
    return abort_with(Error::BadInput("calibrate: expected exactly one job file"), rank == 0);
  }
  if (a->Get("--backend").empty()) {
    return abort_with(Error::BadInput("calibrate: --backend cpu|cuda is required"), rank == 0);
  }
  const std::string out = a->Get("--out");
  if (out.empty()) {
    return abort_with(Error::BadInput("calibrate: --out PROFILE.yaml is required"), rank == 0);
  }
  exec::CalibrateOptions opts;
  opts.backend = a->Get("--backend");
  auto count = [&](const char* opt, int& v) -> Status {
    if (a->Get(opt).empty()) return OkStatus();
    try {
      std::size_t used = 0;
      v = std::stoi(a->Get(opt), &used);
      if (used != a->Get(opt).size() || v < 1) throw std::invalid_argument("");
    } catch (const std::exception&) {
      return Error::BadInput(std::string(opt) + ": must be a positive integer, got '" +
                             a->Get(opt) + "'");
    }
    return OkStatus();
  };
  if (Status s = count("--steps", opts.min_steps); !s) return abort_with(s.error(), rank == 0);
  if (Status s = count("--warmup", opts.min_warmup); !s) return abort_with(s.error(), rank == 0);
  auto job = LoadJob(a->positional[0]);
  if (!job) return abort_with(job.error(), rank == 0);
  Expected<exec::CalibrateResult> res = Error::Failure("not run");
  try {
    res = exec::Calibrate(*job, opts);
  } catch (const std::exception& e) {
    return abort_with(Error::Failure("rank " + std::to_string(rank) + ": " + e.what()), true);
  }
  if (!res) {
    return abort_with(res.error(), rank == 0 || res.error().code != ErrorCode::kBadInput);
  }
  if (res->root) {
    if (Status s = WriteFileAtomic(out, res->profile_yaml); !s) return abort_with(s.error(), true);
    std::printf("%s: calibrated on %s, profile written to %s\n", job->path().c_str(),
                opts.backend.c_str(), out.c_str());
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}

}  // namespace pipetwin
