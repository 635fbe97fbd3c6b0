// mpi_util.h — checked MPI calls, waits with a deadline, and the parallel groups of a job.
//
//   PT_MPI_CHECK(MPI_Isend(...));     // throws MpiError with file:line, rank and MPI's message
//   WaitFor(deadline, [&] { return Test(req); }, [&] { return "rank 1: 2RECV_F0 from rank 0"; });
#pragma once

#include <mpi.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/placement.h"
#include "schedule/expected.h"

namespace pipetwin::exec {

class MpiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A receive, send or collective that did not complete before the deadline.
class TimeoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void CheckMpi(int rc, const char* call, const char* file, int line);
#define PT_MPI_CHECK(call) ::pipetwin::exec::CheckMpi((call), #call, __FILE__, __LINE__)

int WorldRank();

// A collective over `comm`, for checks that every process of it makes alike before any other
// communication (a job, its flags, the world mpirun started, the backend it configures): if any
// process's `local` failed, the lowest failing rank prints "pipetwin: [rank R: ]MESSAGE" (R its
// world rank) and every process returns an error with the worst exit status, `said` set and
// `said_by` that rank, so that all of them leave MPI cleanly (MPI_Finalize; MpiSession::Fail:
// the printing rank exits 2 for bad input, the others 0). Aborting instead would race: a rank
// that aborts first kills rank 0 before it prints.
Status AgreeAcross(MPI_Comm comm, const Status& local);
inline Status AgreeAcrossWorld(const Status& local) { return AgreeAcross(MPI_COMM_WORLD, local); }

// The world ranks that share this process's machine (MPI_COMM_TYPE_SHARED), in order; a
// collective over MPI_COMM_WORLD.
std::vector<int> WorldRanksOnThisMachine();

// The communicator of the job's own ranks: MPI_COMM_WORLD, or with parameter servers the
// workers alone (exec/param_server.h's PsWorld sets it; world ranks and its ranks agree, the
// servers come last). RunJob's world-wide collectives and Groups::Split use it.
MPI_Comm JobComm();
void SetJobComm(MPI_Comm comm);

using Clock = std::chrono::steady_clock;

// Polls `done` until it returns true; past `deadline` throws TimeoutError with what().
// Spins (yielding) for the SetWaitSpin budget, at least 64 polls, then backs off to short
// sleeps so that oversubscribed ranks leave the cores to the ranks that compute. A sleep
// delays the wake-up by tens of microseconds, and a nonblocking collective progresses only
// when tested, so ranks that have a core each spin longer (RunJob sets 2 ms).
void SetWaitSpin(std::chrono::nanoseconds spin);
void WaitFor(Clock::time_point deadline, const std::function<bool()>& done,
             const std::function<std::string()>& what);

// Waits for a non-blocking MPI request until `deadline` (or for `timeout_s` from now); past it,
// TimeoutError with "rank R: " + what().
void WaitRequest(MPI_Request* req, Clock::time_point deadline,
                 const std::function<std::string()>& what);
void WaitRequest(MPI_Request* req, double timeout_s, const std::function<std::string()>& what);

// One MPI communicator per parallel group of this rank, split from MPI_COMM_WORLD by the
// same rank placement the simulator uses.
struct Groups {
  models::RankCoord coord;
  MPI_Comm pp = MPI_COMM_NULL;  // ranks of this pipeline (same dp, tp, cp), ordered by pp rank
  MPI_Comm dp = MPI_COMM_NULL;
  MPI_Comm tp = MPI_COMM_NULL;
  MPI_Comm cp = MPI_COMM_NULL;  // ring attention: ordered by cp rank
  // The gradient reduction: the dp × cp ranks of the same (pp, tp), ordered by dp then cp
  // (Megatron reduces over DP and CP together); the DP group when cp is 1.
  MPI_Comm grad = MPI_COMM_NULL;
  Groups() = default;
  Groups(const Groups&) = delete;
  Groups& operator=(const Groups&) = delete;
  ~Groups();
  static std::unique_ptr<Groups> Split(const models::RankLayout& layout);
};

}  // namespace pipetwin::exec
