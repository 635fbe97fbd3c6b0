// execute.cc — the start and the failure handling that `run` and `calibrate` share: the job
// loaded, simulated once and agreed on by every rank, the host-memory checks of the CPU backend,
// and what a rank's exception becomes (apps/commands.h).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include "apps/commands.h"
#include "exec/mpi_session.h"
#include "exec/mpi_util.h"
#include "job/job.h"
#include "models/costs.h"
#include "models/param_server.h"
#include "schedule/report.h"
#include "sim/simulate.h"

namespace pipetwin {
namespace {

// Bytes this machine can still give: MemAvailable (/proc/meminfo), less where a cgroup (v2)
// limits this process to less. Nothing where neither can be read.
std::optional<std::int64_t> AvailableHostBytes(std::string* source) {
  std::optional<std::int64_t> avail;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::int64_t kib = 0;
    if (key == "MemAvailable:" && meminfo >> kib) {
      avail = kib * 1024;
      *source = "MemAvailable in /proc/meminfo";
      break;
    }
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  std::ifstream max_file("/sys/fs/cgroup/memory.max"),
      current_file("/sys/fs/cgroup/memory.current");
  std::int64_t max = 0, current = 0;
  if (max_file >> max && current_file >> current && max > current &&
      (!avail || max - current < *avail)) {
    avail = max - current;
    *source = "the cgroup's memory.max less memory.current";
  }
  return avail;
}

// The address space this process may still map: its RLIMIT_AS (`ulimit -v`) less what it maps
// now (VmSize in /proc/self/status). Nothing where the limit is infinite or cannot be read.
std::optional<std::int64_t> AddressSpaceLeft(std::int64_t* limit) {
  rlimit rl{};
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return std::nullopt;
  std::ifstream status("/proc/self/status");
  for (std::string key; status >> key;) {
    std::int64_t kib = 0;
    if (key == "VmSize:" && status >> kib) {
      *limit = static_cast<std::int64_t>(std::min<rlim_t>(
          rl.rlim_cur, static_cast<rlim_t>(std::numeric_limits<std::int64_t>::max())));
      return std::max<std::int64_t>(0, *limit - kib * 1024);
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

std::string Gib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

// This rank's row in the prediction (per world rank), or nothing.
const RankReport* PredictedRow(const JobToExecute& j, int world_rank) {
  if (!j.predicted) return nullptr;
  for (const RankReport& r : j.predicted->ranks) {
    if (r.rank == world_rank) return &r;
  }
  return nullptr;
}

// What each parameter server of a CPU run holds at least (models/param_server.h), from the
// cost model's float32 stage sizes; nothing without servers.
std::vector<std::int64_t> ServerHostBytes(const ResolvedJob& job) {
  const JobConfig& c = job.config;
  const int servers = models::ParameterServerRanks(c.cluster, c.parallel);
  if (servers == 0 || !job.model_costs) return {};
  std::vector<std::int64_t> elements;
  for (const models::StageCost& sc : job.model_costs->stages) elements.push_back(sc.params);
  const models::Optimizer o = c.training.optimizer;
  const int state = o == models::Optimizer::kAdam          ? 2
                    : o == models::Optimizer::kSgdMomentum ? 1
                                                           : 0;
  return models::PredictServerHostBytes(
      elements, {.dp = c.parallel.dp, .tp = c.parallel.tp, .servers = servers}, state);
}

// The CPU backend allocates every rank's model, gradients, optimizer state and activations in
// this machine's memory, exactly as simulate predicts them on the cpu device (results/memory/).
// Ranks that need more than the machine has would end in std::bad_alloc or the kernel's OOM
// killer part way through: refused before anything is allocated, naming the figures. The
// predicted peak leaves out the workspace inside an action, so a job just under the line may
// still not fit. Parameter servers on this machine count with what they hold at least. Each rank
// also checks its own address-space limit (below). A collective over MPI_COMM_WORLD.
Status CheckHostMemory(const JobToExecute& j, const std::string& backend) {
  const ResolvedJob& job = j.job;
  if (backend != "cpu" || job.config.cluster.device.name != "cpu") return OkStatus();
  if (!j.predicted) return OkStatus();  // simulate's own errors are said where they matter
  const std::vector<int> here = exec::WorldRanksOnThisMachine();
  std::string source;
  if (const std::optional<std::int64_t> avail = AvailableHostBytes(&source)) {
    std::int64_t need = 0, most = 0;
    int fullest = -1;
    auto count = [&](int rank, std::int64_t bytes) {
      if (std::find(here.begin(), here.end(), rank) == here.end()) return;
      need += bytes;
      if (bytes > most) {
        most = bytes;
        fullest = rank;
      }
    };
    for (const RankReport& r : j.predicted->ranks) count(r.rank, r.peak_memory_bytes);
    const std::vector<std::int64_t> servers = ServerHostBytes(job);
    for (std::size_t i = 0; i < servers.size(); ++i) {
      count(job.config.parallel.WorldSize() + static_cast<int>(i), servers[i]);
    }
    if (need > *avail) {
      return Error::BadInput(
          job.path() + ": the " + std::to_string(here.size()) + " rank" +
          (here.size() == 1 ? " on this machine needs " : "s on this machine need ") + Gib(need) +
          " (simulate's predicted peaks on the cpu device, the CPU backend's own inventory, "
          "and what parameter servers hold at least; rank " +
          std::to_string(fullest) + " the most, " + Gib(most) + "), and it has " + Gib(*avail) +
          " available (" + source +
          "): make the model smaller (model.layers, hidden, seq_len, training.micro_batch) or "
          "spread the ranks over more machines");
    }
  }
  // Each rank is a process of its own: its address space may be limited too (ulimit -v). Beyond
  // the tensors, a rank maps a buffer for each thread that runs its GEMMs (OpenBLAS; the
  // library's other threads and everything else are mapped already, in VmSize) and malloc's
  // arenas. Measured on 2 cores (2026-11-29, GPT-3 1.3B's width on 2 ranks, 2.30 GiB predicted
  // a rank): the peak VmSize less the VmSize at this check exceeded the prediction by 0.14 GiB
  // with execution.threads 1 and 0.28 GiB with 2, and with 0.09 GiB to spare OpenBLAS spun
  // forever in a failing malloc. So the check keeps 128 MiB + 160 MiB per GEMM thread free
  // (execution.threads, at most the hardware threads: OpenBLAS runs no more), not per hardware
  // thread, which on a 64-core machine would have asked 8 GiB of every rank.
  constexpr std::int64_t kMiB = 1 << 20;
  const std::int64_t gemm_threads =
      std::clamp<std::int64_t>(job.config.execution.threads, 1,
                               std::max<std::int64_t>(1, std::thread::hardware_concurrency()));
  const std::int64_t headroom = 128 * kMiB + 160 * kMiB * gemm_threads;
  std::int64_t limit = 0;
  const RankReport* mine = PredictedRow(j, exec::WorldRank());
  const std::optional<std::int64_t> left = AddressSpaceLeft(&limit);
  if (!mine || !left || mine->peak_memory_bytes + headroom <= *left) return OkStatus();
  return Error::BadInput(
      job.path() + ": rank " + std::to_string(mine->rank) + " needs " +
      Gib(mine->peak_memory_bytes) + " (simulate's predicted peak on the cpu device) and " +
      Gib(headroom) + " more for the BLAS library's buffers (" + std::to_string(gemm_threads) +
      " GEMM thread" + (gemm_threads == 1 ? "" : "s") +
      ", execution.threads), and its address space is limited to " + Gib(limit) +
      " (RLIMIT_AS, ulimit -v), " + Gib(*left) +
      " of it left: raise the limit or make the model smaller (model.layers, hidden, seq_len, "
      "training.micro_batch)");
}

Error OutOfHostMemory(const JobToExecute& j, int world_rank) {
  std::string msg = "rank " + std::to_string(world_rank) + ": out of memory (std::bad_alloc)";
  if (const RankReport* mine = PredictedRow(j, world_rank)) {
    msg += "; simulate predicts a peak of " + Gib(mine->peak_memory_bytes) +
           " for this rank, which was checked against the memory available at the start, but "
           "not the workspace inside an action or what other processes took since";
  }
  return Error::Failure(msg);
}

Expected<JobToExecute> LoadJobToExecute(const std::string& path) {
  auto job = LoadJob(path);
  if (!job) return job.error();
  JobToExecute out{.job = std::move(*job), .predicted = std::nullopt};
  auto sim = Simulate(out.job, {.record_timeline = false, .per_world_rank = true});
  if (sim) out.predicted = std::move(sim->report);
  // No execution.timeout_s in the job: 10 × the predicted step + a margin.
  if (!sim && out.job.config.execution.timeout_s <= 0) return sim.error();
  std::optional<double> step_ms;
  if (out.predicted) step_ms = out.predicted->iteration_time_ms;
  if (auto t = SizeRunTimeout(out.job, step_ms); !t) return t.error();
  return out;
}

}  // namespace

std::optional<JobToExecute> StartExecution(exec::MpiSession& mpi, const std::string& path,
                                           const std::string& backend,
                                           const std::function<Status(const ResolvedJob&)>& also,
                                           int* exit_status) {
  std::optional<JobToExecute> loaded;
  const Status ready = [&]() -> Status {
    auto j = LoadJobToExecute(path);
    if (!j) return j.error();
    loaded.emplace(std::move(*j));
    return also ? also(loaded->job) : OkStatus();
  }();
  // Bad input is the same on every process: they agree on it first; one says it and exits 2,
  // every one leaves through MPI_Finalize (exec/mpi_util.h).
  if (Status s = exec::AgreeAcrossWorld(ready); !s) {
    *exit_status = mpi.Fail(s.error(), false);
    return std::nullopt;
  }
  if (Status s = exec::AgreeAcrossWorld(CheckHostMemory(*loaded, backend)); !s) {
    *exit_status = mpi.Fail(s.error(), false);
    return std::nullopt;
  }
  return loaded;
}

Status CatchOnRank(const JobToExecute& j, int world_rank, const std::function<void()>& body) {
  try {
    body();
  } catch (const exec::TimeoutError& e) {
    return Error::Failure(e.what());  // names the rank, the action and the peer already
  } catch (const exec::MpiError& e) {
    return Error::Failure(e.what());  // names the call, where it was made and the rank
  } catch (const std::bad_alloc&) {
    return OutOfHostMemory(j, world_rank);
  } catch (const std::exception& e) {
    return Error::Failure("rank " + std::to_string(world_rank) + ": " + e.what());
  }
  return OkStatus();
}

}  // namespace pipetwin
