// collectives.h — the communication a tensor-parallel chunk needs, as an injected interface.
//
// The layers call these inside F and I (never inside W) on the ranks of one tensor-parallel
// group; every rank calls the same sequence with the same sizes. The engine implements the
// interface over MPI (or NCCL); ThreadGroup below implements it in one process, one thread per
// rank, for tests.
//
//   ThreadGroup group(2);
//   std::thread t0([&] { auto c = group.Rank(0); Run(c); });   // c: ThreadCollectives
//   std::thread t1([&] { auto c = group.Rank(1); Run(c); });
#pragma once

#include <barrier>
#include <cstddef>
#include <span>
#include <vector>

namespace pipetwin::cpu {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int size() const = 0;
  virtual int rank() const = 0;
  // data := sum over ranks of data (in place).
  virtual void AllReduceSum(std::span<float> data) = 0;
  // out (size() * in.size()) := concatenation of every rank's `in`, in rank order.
  virtual void AllGather(std::span<const float> in, std::span<float> out) = 0;
  // in holds size() equal pieces; out (in.size() / size()) := sum over ranks of their
  // piece number rank().
  virtual void ReduceScatterSum(std::span<const float> in, std::span<float> out) = 0;
};

// In-process group: one ThreadCollectives per rank, each used from its own thread. Sums are
// taken in rank order, so results are deterministic and identical on every rank.
class ThreadGroup;

class ThreadCollectives final : public Collectives {
 public:
  ThreadCollectives(ThreadGroup& group, int rank) : group_(&group), rank_(rank) {}
  int size() const override;
  int rank() const override { return rank_; }
  void AllReduceSum(std::span<float> data) override;
  void AllGather(std::span<const float> in, std::span<float> out) override;
  void ReduceScatterSum(std::span<const float> in, std::span<float> out) override;

 private:
  ThreadGroup* group_;
  int rank_;
};

class ThreadGroup {
 public:
  explicit ThreadGroup(int size);
  int size() const { return size_; }
  ThreadCollectives Rank(int rank) { return ThreadCollectives(*this, rank); }

 private:
  friend class ThreadCollectives;
  int size_;
  std::barrier<> barrier_;
  std::vector<const float*> inputs_;
};

}  // namespace pipetwin::cpu
