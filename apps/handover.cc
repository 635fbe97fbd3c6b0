// handover.cc — `pipetwin run|calibrate --backend cuda` from the CPU-only `pipetwin`: the
// process becomes `pipetwin-cuda` (commands.h, HandOverBackend).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "apps/commands.h"
#include "exec/backend_registry.h"

namespace pipetwin {
namespace {

// Before MPI starts, under mpirun every rank gets the same argv: the launcher's rank 0 (or a
// process started without mpirun) says `message` and exits with `status`, after a moment for
// mpirun to forward it; the others exit 0 (Open MPI ends the job at the first non-zero exit
// and can drop output it has not forwarded yet).
int SayOnceBeforeMpi(const std::string& message, int status) {
  const char* env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (env_rank == nullptr) env_rank = std::getenv("PMI_RANK");
  if (env_rank != nullptr && std::strcmp(env_rank, "0") != 0) return 0;
  std::fprintf(stderr, "pipetwin: %s\n", message.c_str());
  std::fflush(stderr);
  if (env_rank != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return status;
}

}  // namespace

int FailBeforeMpi(const Error& e) { return SayOnceBeforeMpi(e.message, e.exit_status()); }

std::optional<int> HandOverBackend(int argc, char** argv) {
  std::string backend;
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0) backend = argv[i + 1];
  }
  // Only --backend cuda hands over; any other unknown name is refused after MPI starts, where
  // the ranks agree on it and one says it (exec/run.cc, CheckRunnable).
  if (backend != "cuda" || exec::BackendRegistered(backend)) return std::nullopt;
  // Under mpirun every rank gets here, before MPI: rank 0 says it and exits 1, the others 0.
  const auto fail = [](const std::string& message) { return SayOnceBeforeMpi(message, 1); };
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path cuda = self.parent_path() / "pipetwin-cuda";
  if (ec || ::access(cuda.c_str(), X_OK) != 0) {
    return fail(std::string("built without CUDA: there is no ") +
                (ec ? "pipetwin-cuda next to this program" : cuda.string()) +
                " (configure with the CUDA toolkit and PIPETWIN_WITH_CUDA=ON to use --backend "
                "cuda)");
  }
  ::execv(cuda.c_str(), argv);
  return fail("cannot start " + cuda.string() + ": " + std::strerror(errno));
}

std::optional<int> EndBeforeMpi(const Status& parsed, bool help, int argc, char** argv) {
  if (parsed && help) return 0;
  // A bad command line is said before MPI starts (exit 2, whatever the backend).
  if (!parsed) return FailBeforeMpi(parsed.error());
  // This process may become pipetwin-cuda.
  return HandOverBackend(argc, argv);
}

}  // namespace pipetwin
