#include "exec/mpi_session.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <thread>

#include "exec/mpi_util.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace pipetwin::exec {
namespace {

// Open MPI keeps what MPI_Init allocates past MPI_Finalize (its components' tables, hwloc's
// topology): under LeakSanitizer a command that finalises (exit 0, or exit 2 for bad input
// agreed by every rank) would report them as leaks of pipetwin's. Allocations made inside
// MPI_Init and MPI_Finalize are not counted; pipetwin's own code stays checked.
struct MpiAllocationsNotLeaks {
#if defined(__SANITIZE_ADDRESS__)
  __lsan::ScopedDisabler off;
#endif
};

}  // namespace

MpiSession::MpiSession() : uncaught_(std::uncaught_exceptions()) {
  int provided = 0;
  {
    [[maybe_unused]] MpiAllocationsNotLeaks lsan;
    PT_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
  }
  PT_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  PT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
}

MpiSession::~MpiSession() {
  // Unwinding (an exception leaves the command): no MPI_Finalize, which would wait for the
  // other ranks; main() prints the error and exits 1, and mpirun stops the ranks left.
  if (aborted_ || std::uncaught_exceptions() > uncaught_) return;
  try {
    [[maybe_unused]] MpiAllocationsNotLeaks lsan;
    PT_MPI_CHECK(MPI_Finalize());
  } catch (const MpiError& e) {
    std::fprintf(stderr, "pipetwin: %s\n", e.what());
  }
}

int MpiSession::Abort(const Error& e, bool print) {
  if (print) {
    std::cerr << "pipetwin: " << (rank_ == 0 ? "" : "rank " + std::to_string(rank_) + ": ")
              << e.message << "\n";
  }
  std::cerr.flush();
  std::fflush(stdout);
  aborted_ = true;
  try {
    PT_MPI_CHECK(MPI_Abort(MPI_COMM_WORLD, e.exit_status()));
  } catch (const MpiError& err) {
    std::fprintf(stderr, "pipetwin: %s\n", err.what());
  }
  return e.exit_status();
}

int MpiSession::Fail(const Error& e, bool print) {
  if (!e.said) return Abort(e, print);
  if (e.said_by != rank_) return 0;
  int size = 1;
  PT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (size > 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return e.exit_status();
}

int MpiSession::BroadcastStatus(int status) {
  PT_MPI_CHECK(MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD));
  return status;
}

}  // namespace pipetwin::exec
