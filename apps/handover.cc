// handover.cc — `pipetwin run|calibrate --backend cuda` from the CPU-only `pipetwin`: the
// process becomes `pipetwin-cuda` (commands.h, HandOverBackend).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "apps/commands.h"
#include "exec/backend_registry.h"

namespace pipetwin {

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

}  // namespace pipetwin
