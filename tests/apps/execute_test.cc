// What a rank's exception becomes in `run` and `calibrate` (CatchOnRank, apps/execute.cc): the
// message said once for the whole world, and the exit status.
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "apps/commands.h"
#include "exec/mpi_util.h"
#include "schedule/report.h"

namespace pipetwin {
namespace {

JobToExecute WithPredictedPeak(int rank, std::int64_t peak_bytes) {
  JobToExecute j;
  Report predicted;
  for (int r = 0; r < 4; ++r) {
    RankReport row;
    row.rank = r;
    row.peak_memory_bytes = r == rank ? peak_bytes : 1;
    predicted.ranks.push_back(row);
  }
  j.predicted = predicted;
  return j;
}

TEST(CatchOnRank, NothingThrownIsOk) {
  int ran = 0;
  EXPECT_TRUE(CatchOnRank(JobToExecute{}, 0, [&] { ++ran; }));
  EXPECT_EQ(ran, 1);
}

TEST(CatchOnRank, ATimeoutReadsAsItIs) {
  // The waiting code names the rank itself: no second "rank N: " in front.
  const std::string what =
      "timed out: rank 1 (pipeline rank 1), action 1RECV_F0, peer pipeline rank 0";
  const Status s = CatchOnRank(JobToExecute{}, 1, [&] { throw exec::TimeoutError(what); });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, what);
  EXPECT_EQ(s.error().code, ErrorCode::kFailure);
}

TEST(CatchOnRank, AFailedMpiCallReadsAsItIs) {
  // PT_MPI_CHECK names the call, the place and the rank (exec/mpi_util.cc).
  const std::string what = "exec/host_comm.cc:40: rank 1: MPI_Iallreduce(...) failed: MPI_ERR_COMM";
  const Status s = CatchOnRank(JobToExecute{}, 1, [&] { throw exec::MpiError(what); });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, what);
  EXPECT_EQ(s.error().code, ErrorCode::kFailure);
}

TEST(CatchOnRank, AFailedAllocationSaysOutOfMemoryAndThePredictedPeak) {
  const Status s =
      CatchOnRank(WithPredictedPeak(2, std::int64_t{3} << 30), 2, [] { throw std::bad_alloc(); });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kFailure);
  const std::string want =
      "rank 2: out of memory (std::bad_alloc); simulate predicts a peak of 3.00 GiB for this rank";
  EXPECT_EQ(s.error().message.substr(0, want.size()), want) << s.error().message;
  EXPECT_NE(s.error().message.find("workspace inside an action"), std::string::npos);
  // Without a prediction (simulate failed on a job that gives its own timeout): no figure.
  const Status bare = CatchOnRank(JobToExecute{}, 2, [] { throw std::bad_alloc(); });
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error().message, "rank 2: out of memory (std::bad_alloc)");
}

TEST(CatchOnRank, AnyOtherExceptionNamesTheRank) {
  const Status s =
      CatchOnRank(JobToExecute{}, 3, [] { throw std::logic_error("buffer allocated twice"); });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "rank 3: buffer allocated twice");
  EXPECT_EQ(s.error().code, ErrorCode::kFailure);
}

}  // namespace
}  // namespace pipetwin
