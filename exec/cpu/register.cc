#include "exec/cpu/register.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "exec/backend_registry.h"
#include "exec/cpu/chunk.h"
#include "exec/cpu/cpu_backend.h"
#include "exec/cpu/model.h"
#include "exec/cpu/optimizer.h"
#include "exec/param_server.h"

namespace pipetwin::cpu {
namespace {

// Worst relative error (‖a − b‖ / ‖b‖ per tensor) of this rank's gradients against a
// single-process reference of the same model and data; also checks the step's mean loss.
// `perturb` scales this rank's gradients first (a test hook: 1.0001 must fail the check).
double ReferenceError(const exec::BackendConfig& cfg, const exec::Backend& backend,
                      const std::vector<int>& stages, double measured_loss, float perturb) {
  const ModelConfig& model = cfg.model;
  const int microbatches = cfg.microbatches;
  const int dp = cfg.dp;
  const TpConfig& tp = cfg.tp;
  const std::uint64_t seed = cfg.data_seed;
  Accountant acc;
  Chunk ref(model,
            ChunkSpec{.first_layer = 0, .num_layers = model.layers, .first = true, .last = true},
            TpConfig{}, acc);
  ref.set_loss_scale(1.0f / static_cast<float>(microbatches * dp));
  SyntheticData data({.vocab = model.vocab,
                      .seq_len = model.seq_len,
                      .micro_batch = model.micro_batch,
                      .seed = seed,
                      .noise = 0.0f});
  std::vector<std::int32_t> tokens(data.tokens_per_microbatch()), labels(tokens.size());
  double loss = 0;
  for (int mb = 0; mb < microbatches * dp; ++mb) {
    data.Fill(0, mb, tokens, labels);
    loss += static_cast<double>(ref.Forward(mb, {.tokens = tokens, .labels = labels}));
    ref.Backward(mb, {}, {});
  }
  loss /= microbatches * dp;
  double worst = std::abs(measured_loss - loss) / std::max(std::abs(loss), 1e-30);
  for (int s : stages) {
    const ParamLayout& layout = backend.StageLayout(s);
    std::vector<float> grads = backend.StageGrads(s);
    for (float& g : grads) g *= perturb;
    std::vector<float> shard;
    for (const ParamInfo& p : layout.params) {
      const ParamInfo& rp = ref.layout().Find(p.name);
      shard.assign(static_cast<std::size_t>(p.size()), 0.0f);
      ShardFromFull(p, tp, ref.grads().data() + rp.offset, shard.data());
      double diff = 0, norm = 0;
      for (std::size_t i = 0; i < shard.size(); ++i) {
        const double a = static_cast<double>(grads[p.offset + i]);
        const double b = static_cast<double>(shard[i]);
        diff += (a - b) * (a - b);
        norm += b * b;
      }
      worst = std::max(worst, std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30));
    }
  }
  return worst;
}

// A parameter server's optimizer (exec/param_server.h): the CPU backend's own Adam or SGD,
// with the same settings as a worker's, over the server's shard.
class ServerOptimizer final : public exec::ShardOptimizer {
 public:
  ServerOptimizer(std::size_t n, const exec::ShardOptimizerSpec& spec) {
    if (spec.adam) {
      opt_ = std::make_unique<Adam>(n, AdamConfig{.lr = spec.learning_rate}, acc_);
    } else {
      opt_ = std::make_unique<Sgd>(
          n, SgdConfig{.lr = spec.learning_rate, .momentum = spec.momentum}, acc_);
    }
  }
  void Step(std::span<float> params, std::span<const float> grads) override {
    opt_->Step(params, grads);
  }

 private:
  Accountant acc_;
  std::unique_ptr<Optimizer> opt_;
};

}  // namespace

void RegisterCpuBackend() {
  exec::RegisterShardOptimizer("cpu", [](std::size_t n, const exec::ShardOptimizerSpec& spec) {
    return std::unique_ptr<exec::ShardOptimizer>(std::make_unique<ServerOptimizer>(n, spec));
  });
  exec::RegisterBackend(
      "cpu", [](const exec::BackendConfig& cfg) -> Expected<std::unique_ptr<exec::Backend>> {
        return std::unique_ptr<exec::Backend>(std::make_unique<exec::CpuBackend>(cfg));
      });
  exec::RegisterReference(ReferenceError);
}

}  // namespace pipetwin::cpu
