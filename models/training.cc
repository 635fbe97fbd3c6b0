#include "models/training.h"

#include "models/yaml_util.h"

#include <string>

namespace pipetwin::models {

std::string_view ToString(Precision v) {
  switch (v) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp32:
      return "fp32";
  }
  return "?";
}

std::string_view ToString(Optimizer v) {
  switch (v) {
    case Optimizer::kAdam:
      return "adam";
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kSgdMomentum:
      return "sgd-momentum";
  }
  return "?";
}

std::string_view ToString(Recompute v) {
  switch (v) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

Expected<TrainingConfig> ParseTrainingConfig(const YAML::Node& node, const YamlFields& f) {
  TrainingConfig t;
  if (!node || node.IsNull()) return t;
  if (Status s = f.CheckKeys(node, "training",
                             {"global_batch", "micro_batch", "precision", "optimizer", "recompute",
                              "flash_attention"});
      !s) {
    return s.error();
  }
  if (const YAML::Node v = node["global_batch"]) {
    Expected<long long> x = f.Int(v, "training.global_batch", 1, 1LL << 30);
    if (!x) return x.error();
    t.global_batch = static_cast<int>(*x);
  }
  if (const YAML::Node v = node["micro_batch"]) {
    Expected<long long> x = f.Int(v, "training.micro_batch", 1, 1LL << 20);
    if (!x) return x.error();
    t.micro_batch = static_cast<int>(*x);
  }
  if (const YAML::Node v = node["precision"]) {
    Expected<std::string> x = f.Choice(v, "training.precision", {"bf16", "fp16", "fp32"});
    if (!x) return x.error();
    t.precision = *x == "bf16"   ? Precision::kBf16
                  : *x == "fp16" ? Precision::kFp16
                                 : Precision::kFp32;
  }
  if (const YAML::Node v = node["optimizer"]) {
    Expected<std::string> x = f.Choice(v, "training.optimizer", {"adam", "sgd", "sgd-momentum"});
    if (!x) return x.error();
    t.optimizer = *x == "adam"  ? Optimizer::kAdam
                  : *x == "sgd" ? Optimizer::kSgd
                                : Optimizer::kSgdMomentum;
  }
  if (const YAML::Node v = node["recompute"]) {
    Expected<std::string> x = f.Choice(v, "training.recompute", {"none", "selective", "full"});
    if (!x) return x.error();
    t.recompute = *x == "none"        ? Recompute::kNone
                  : *x == "selective" ? Recompute::kSelective
                                      : Recompute::kFull;
  }
  if (const YAML::Node v = node["flash_attention"]) {
    Expected<bool> x = f.Bool(v, "training.flash_attention");
    if (!x) return x.error();
    t.flash_attention = *x;
  }
  return t;
}

}  // namespace pipetwin::models
