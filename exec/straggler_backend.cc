#include "exec/straggler_backend.h"

#include <chrono>
#include <thread>
#include <utility>

namespace pipetwin::exec {
namespace {

class StragglerBackend final : public Backend {
 public:
  StragglerBackend(std::unique_ptr<Backend> inner, const models::Stragglers& s, int rank)
      : inner_(std::move(inner)), stragglers_(s), rank_(rank) {}

  void BeginStep(std::int64_t step) override {
    factor_ = models::StragglerFactor(stragglers_, rank_, step);
    inner_->BeginStep(step);
  }
  void Compute(const Action& a) override {
    const auto start = std::chrono::steady_clock::now();
    inner_->Compute(a);
    if (factor_ > 1) {
      const auto took = std::chrono::steady_clock::now() - start;
      std::this_thread::sleep_until(
          start + took +
          std::chrono::duration_cast<std::chrono::nanoseconds>(took * (factor_ - 1)));
    }
  }
  void PostSend(const Action& send, int peer) override { inner_->PostSend(send, peer); }
  void PostRecv(const Action& recv, int peer) override { inner_->PostRecv(recv, peer); }
  bool TestRecv(const Action& recv) override { return inner_->TestRecv(recv); }
  bool TestSends() override { return inner_->TestSends(); }
  void StartReduceGrad(int stage) override { inner_->StartReduceGrad(stage); }
  bool TestReduceGrad(int stage) override { return inner_->TestReduceGrad(stage); }
  double StepLoss() const override { return inner_->StepLoss(); }
  MemoryBytes PeakMemory() const override { return inner_->PeakMemory(); }
  std::int64_t PeakMemoryTotal() const override { return inner_->PeakMemoryTotal(); }
  void ResetPeakMemory() override { inner_->ResetPeakMemory(); }
  std::int64_t BytesSent(CommGroup group) const override { return inner_->BytesSent(group); }
  std::optional<GradReduction> DescribeReduceGrad(int stage) const override {
    return inner_->DescribeReduceGrad(stage);
  }
  double GradNormSquared() const override { return inner_->GradNormSquared(); }
  const gpt::ParamLayout& StageLayout(int stage) const override {
    return inner_->StageLayout(stage);
  }
  std::vector<float> StageGrads(int stage) const override { return inner_->StageGrads(stage); }
  bool Computes() const override { return inner_->Computes(); }
  void FinishStep(std::vector<TimelineEvent>& events) override { inner_->FinishStep(events); }
  std::optional<Roofline> MeasureRoofline() override { return inner_->MeasureRoofline(); }

 private:
  std::unique_ptr<Backend> inner_;
  models::Stragglers stragglers_;
  int rank_;
  double factor_ = 1;
};

}  // namespace

std::unique_ptr<Backend> WrapStragglers(std::unique_ptr<Backend> inner,
                                        const models::Stragglers& stragglers, int world_rank) {
  return std::make_unique<StragglerBackend>(std::move(inner), stragglers, world_rank);
}

}  // namespace pipetwin::exec
