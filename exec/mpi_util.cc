#include "exec/mpi_util.h"

#include <atomic>
#include <cstdio>
#include <limits>
#include <memory>
#include <thread>

namespace pipetwin::exec {

int WorldRank() {
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::vector<int> WorldRanksOnThisMachine() {
  MPI_Comm node = MPI_COMM_NULL;
  PT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int n = 0;
  PT_MPI_CHECK(MPI_Comm_size(node, &n));
  const int me = WorldRank();
  std::vector<int> ranks(static_cast<std::size_t>(n));
  PT_MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, ranks.data(), 1, MPI_INT, node));
  PT_MPI_CHECK(MPI_Comm_free(&node));
  return ranks;
}

Status AgreeAcross(MPI_Comm comm, const Status& local) {
  const int mine = local ? 0 : local.error().exit_status();
  int worst = 0;
  PT_MPI_CHECK(MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, comm));
  if (worst == 0) return OkStatus();
  const int rank = WorldRank();
  const int me = local ? std::numeric_limits<int>::max() : rank;
  int first = 0;
  PT_MPI_CHECK(MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, comm));
  Error e =
      local ? Error::Failure("world rank " + std::to_string(first) + " failed") : local.error();
  if (rank == first) {
    std::fprintf(stderr, "pipetwin: %s%s\n",
                 rank == 0 ? "" : ("rank " + std::to_string(rank) + ": ").c_str(),
                 e.message.c_str());
    std::fflush(stderr);
  }
  e.code = static_cast<ErrorCode>(worst);
  e.said = true;
  e.said_by = first;
  return e;
}

namespace {
MPI_Comm g_job_comm = MPI_COMM_WORLD;
}  // namespace

MPI_Comm JobComm() { return g_job_comm; }
void SetJobComm(MPI_Comm comm) { g_job_comm = comm; }

void CheckMpi(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw MpiError(std::string(file) + ":" + std::to_string(line) + ": rank " +
                 std::to_string(WorldRank()) + ": " + call + " failed: " + msg);
}

namespace {
std::atomic<std::int64_t> g_spin_ns{0};
}  // namespace

void SetWaitSpin(std::chrono::nanoseconds spin) { g_spin_ns.store(spin.count()); }

void WaitFor(Clock::time_point deadline, const std::function<bool()>& done,
             const std::function<std::string()>& what) {
  const auto spin_until = Clock::now() + std::chrono::nanoseconds(g_spin_ns.load());
  int polls = 0;
  while (!done()) {
    const auto now = Clock::now();
    if (now > deadline) throw TimeoutError("timed out: " + what());
    if (++polls < 64 || now < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 1024 ? 20 : 200));
    }
  }
}

void WaitRequest(MPI_Request* req, Clock::time_point deadline,
                 const std::function<std::string()>& what) {
  WaitFor(
      deadline,
      [&] {
        int done = 0;
        PT_MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        return done != 0;
      },
      [&] { return "rank " + std::to_string(WorldRank()) + ": " + what(); });
}

void WaitRequest(MPI_Request* req, double timeout_s, const std::function<std::string()>& what) {
  WaitRequest(req,
              Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(timeout_s)),
              what);
}

Groups::~Groups() {
  for (MPI_Comm* c : {&pp, &dp, &tp, &cp, &grad}) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

std::unique_ptr<Groups> Groups::Split(const models::RankLayout& layout) {
  auto g = std::make_unique<Groups>();
  const int rank = WorldRank();
  g->coord = layout.Coord(rank);
  const models::RankCoord c = g->coord;
  // The colour is the rank of the group's first member; the key orders by the group's dim.
  auto split = [&](models::Dim d, MPI_Comm* out) {
    models::RankCoord first = c;
    first.Set(d, 0);
    PT_MPI_CHECK(MPI_Comm_split(JobComm(), layout.GlobalRank(first), c.Get(d), out));
  };
  split(models::Dim::kPp, &g->pp);
  split(models::Dim::kDp, &g->dp);
  split(models::Dim::kTp, &g->tp);
  split(models::Dim::kCp, &g->cp);
  models::RankCoord first = c;
  first.Set(models::Dim::kDp, 0);
  first.Set(models::Dim::kCp, 0);
  PT_MPI_CHECK(MPI_Comm_split(
      JobComm(), layout.GlobalRank(first),
      c.Get(models::Dim::kDp) * layout.Size(models::Dim::kCp) + c.Get(models::Dim::kCp), &g->grad));
  return g;
}

}  // namespace pipetwin::exec
