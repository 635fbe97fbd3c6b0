// mpi_session.h — the MPI lifecycle of one command as one object: MPI is initialised in the
// constructor (MPI_THREAD_FUNNELED, errors returned to the caller, checked by PT_MPI_CHECK)
// and finalised in the destructor (not where an exception is leaving the command: main()
// prints it and exits 1, and mpirun stops the other ranks). A failure on any rank stops every rank:
// Abort prints the error once and aborts the world, since a rank that exits alone would leave the
// others waiting for it.
//
//   exec::MpiSession mpi;
//   Expected<RunResult> r = RunJob(job, opts);
//   if (!r) return mpi.Fail(r.error(), mpi.rank() == 0);
//   return mpi.BroadcastStatus(status);   // rank 0's status on every rank
#pragma once

#include "schedule/expected.h"

namespace pipetwin::exec {

class MpiSession {
 public:
  MpiSession();  // throws MpiError where MPI cannot start
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }

  // Prints "pipetwin: [rank R: ]MESSAGE" on stderr when `print`, then aborts every rank with
  // the error's exit status (which it returns, should MPI_Abort return).
  int Abort(const Error& e, bool print);

  // How a command leaves on an error. One that every process agreed on (Error::said, from
  // AgreeAcrossWorld in exec/mpi_util.h) was printed already: the destructor finalises MPI on
  // every process, and only the rank that printed it exits with its status (mpirun's status);
  // the others exit 0, and the printing rank waits 200 ms before it exits: Open MPI ends the
  // job at the first non-zero exit and can drop output it has not forwarded yet (seen once in
  // ~40 runs under load). Any other error aborts the world (Abort).
  int Fail(const Error& e, bool print);

  // Rank 0's `status`, on every rank.
  int BroadcastStatus(int status);

 private:
  int rank_ = 0;
  bool aborted_ = false;
  int uncaught_ = 0;  // std::uncaught_exceptions() at construction
};

}  // namespace pipetwin::exec
