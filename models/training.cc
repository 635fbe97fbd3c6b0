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
    case Precision::kFp8:
      return "fp8";
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

std::string_view ToString(GradReduceDtype v) {
  return v == GradReduceDtype::kFp32 ? "fp32" : "bf16";
}

std::string_view ToString(CrossEntropy v) {
  return v == CrossEntropy::kUnfused ? "unfused" : "fused";
}

std::string_view ToString(PipelineEngine v) {
  return v == PipelineEngine::kMegatron ? "megatron" : "deepspeed";
}

std::string_view ToString(MasterWeights v) {
  return v == MasterWeights::kFp32 ? "fp32" : "remainders";
}

std::string_view ToString(DpSync v) {
  return v == DpSync::kSync ? "sync" : v == DpSync::kAsync ? "async" : "stale";
}

Expected<Overlap> ParseOverlap(const YAML::Node& v, const YamlFields& f, const std::string& key) {
  if (!v.IsMap()) {
    return f.At(v, key,
                "must be a map {tp_comm: bool, grad_reduce: bool, param_gather: bool, "
                "tp_dgrad_reduce: bool}");
  }
  if (Status s = f.CheckKeys(v, key, {"tp_comm", "grad_reduce", "param_gather", "tp_dgrad_reduce"});
      !s) {
    return s.error();
  }
  Overlap o;
  const std::pair<const char*, bool*> flags[] = {
      {"tp_comm", &o.tp_comm}, {"grad_reduce", &o.grad_reduce}, {"param_gather", &o.param_gather}};
  for (const auto& [name, out] : flags) {
    if (const YAML::Node b = v[name]) {
      Expected<bool> x = f.Bool(b, key + "." + name);
      if (!x) return x.error();
      *out = *x;
    }
  }
  if (const YAML::Node b = v["tp_dgrad_reduce"]) {
    Expected<bool> x = f.Bool(b, key + ".tp_dgrad_reduce");
    if (!x) return x.error();
    o.tp_dgrad_reduce = *x;
  }
  return o;
}

Expected<TrainingConfig> ParseTrainingConfig(const YAML::Node& node, const YamlFields& f) {
  TrainingConfig t;
  if (!node || node.IsNull()) return t;
  if (Status s = f.CheckKeys(
          node, "training",
          {"global_batch", "micro_batch", "precision", "optimizer", "recompute", "flash_attention",
           "overlap", "grad_reduce_dtype", "grad_bucket_mb", "zero3_prefetch", "zero3_unit",
           "zero3_nics", "pipeline_engine", "cross_entropy", "dp_sync", "staleness",
           "master_weights", "fp8_params", "pp_scatter_gather"});
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
    Expected<std::string> x = f.Choice(v, "training.precision", {"bf16", "fp16", "fp32", "fp8"});
    if (!x) return x.error();
    t.precision = *x == "bf16"   ? Precision::kBf16
                  : *x == "fp16" ? Precision::kFp16
                  : *x == "fp8"  ? Precision::kFp8
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
  if (const YAML::Node v = node["overlap"]) {
    Expected<Overlap> x = ParseOverlap(v, f, "training.overlap");
    if (!x) return x.error();
    t.overlap = *x;
  }
  if (const YAML::Node v = node["grad_reduce_dtype"]) {
    Expected<std::string> x = f.Choice(v, "training.grad_reduce_dtype", {"fp32", "bf16", "fp16"});
    if (!x) return x.error();
    // fp16 and bf16 both name the 16-bit compute type (2 bytes): what the job trains in.
    t.grad_reduce_dtype = *x == "fp32" ? GradReduceDtype::kFp32 : GradReduceDtype::kBf16;
  } else if (t.precision == Precision::kFp16) {
    // Megatron-LM's defaults: fp16 runs reduce gradients in fp16 (16-bit), bf16 runs in fp32
    // (arguments.py sets accumulate_allreduce_grads_in_fp32 with --bf16).
    t.grad_reduce_dtype = GradReduceDtype::kBf16;
  }
  if (const YAML::Node v = node["grad_bucket_mb"]) {
    // 0 keeps Megatron-Core's default; up to 1 TB.
    Expected<double> x = f.Number(v, "training.grad_bucket_mb", 0, 1e6);
    if (!x) return x.error();
    t.grad_bucket_mb = *x;
  }
  if (const YAML::Node v = node["zero3_prefetch"]) {
    Expected<long long> x = f.Int(v, "training.zero3_prefetch", 0, 64);
    if (!x) return x.error();
    t.zero3_prefetch = static_cast<int>(*x);
  }
  if (const YAML::Node v = node["zero3_unit"]) {
    Expected<std::string> x = f.Choice(v, "training.zero3_unit", {"layer", "module"});
    if (!x) return x.error();
    t.zero3_unit = *x == "layer" ? Zero3Unit::kLayer : Zero3Unit::kModule;
    t.zero3_unit_stated = true;
  }
  if (const YAML::Node v = node["zero3_nics"]) {
    Expected<std::string> x = f.Choice(v, "training.zero3_nics", {"auto", "rank", "node"});
    if (!x) return x.error();
    t.zero3_nics = *x == "auto"   ? Zero3Nics::kAuto
                   : *x == "rank" ? Zero3Nics::kRank
                                  : Zero3Nics::kNode;
  }
  if (const YAML::Node v = node["pipeline_engine"]) {
    Expected<std::string> x = f.Choice(v, "training.pipeline_engine", {"megatron", "deepspeed"});
    if (!x) return x.error();
    t.pipeline_engine = *x == "megatron" ? PipelineEngine::kMegatron : PipelineEngine::kDeepSpeed;
  }
  if (const YAML::Node v = node["cross_entropy"]) {
    Expected<std::string> x = f.Choice(v, "training.cross_entropy", {"unfused", "fused"});
    if (!x) return x.error();
    t.cross_entropy = *x == "unfused" ? CrossEntropy::kUnfused : CrossEntropy::kFused;
  }
  if (const YAML::Node v = node["dp_sync"]) {
    Expected<std::string> x = f.Choice(v, "training.dp_sync", {"sync", "async", "stale"});
    if (!x) return x.error();
    t.dp_sync = *x == "sync" ? DpSync::kSync : *x == "async" ? DpSync::kAsync : DpSync::kStale;
  }
  if (const YAML::Node v = node["staleness"]) {
    if (t.dp_sync != DpSync::kStale) {
      return f.At(v, "training.staleness",
                  "only with dp_sync: stale (the steps a worker may run ahead of the slowest)");
    }
    Expected<long long> x = f.Int(v, "training.staleness", 0, 1 << 20);
    if (!x) return x.error();
    t.staleness = static_cast<int>(*x);
  } else if (t.dp_sync == DpSync::kStale) {
    return f.At(node, "training.staleness",
                "required with dp_sync: stale: the steps a worker may run ahead of the slowest "
                "(0 = sync)");
  }
  if (const YAML::Node v = node["master_weights"]) {
    Expected<std::string> x = f.Choice(v, "training.master_weights", {"fp32", "remainders"});
    if (!x) return x.error();
    t.master_weights = *x == "fp32" ? MasterWeights::kFp32 : MasterWeights::kRemainders;
    if (t.master_weights == MasterWeights::kRemainders &&
        ((t.precision != Precision::kBf16 && t.precision != Precision::kFp8) ||
         t.optimizer != Optimizer::kAdam)) {
      return f.At(v, "training.master_weights",
                  "remainders (the 16 low bits of fp32 beside a bf16 weight, Apex's "
                  "store_param_remainders) needs precision: bf16 or fp8 and optimizer: adam, got "
                  "precision: " +
                      std::string(ToString(t.precision)) +
                      ", optimizer: " + std::string(ToString(t.optimizer)));
    }
  }
  if (const YAML::Node v = node["fp8_params"]) {
    Expected<bool> x = f.Bool(v, "training.fp8_params");
    if (!x) return x.error();
    t.fp8_params = *x;
    if (t.fp8_params && t.precision != Precision::kFp8) {
      return f.At(v, "training.fp8_params",
                  "true (GEMM weights held in FP8) needs precision: fp8, got precision: " +
                      std::string(ToString(t.precision)));
    }
    if (t.fp8_params && t.master_weights == MasterWeights::kRemainders) {
      return f.At(v, "training.fp8_params",
                  "true keeps no bf16 weight for master_weights: remainders to complete (NeMo "
                  "stores full fp32 master weights with fp8_params): use master_weights: fp32");
    }
  }
  if (const YAML::Node v = node["pp_scatter_gather"]) {
    Expected<bool> x = f.Bool(v, "training.pp_scatter_gather");
    if (!x) return x.error();
    t.pp_scatter_gather = *x;
    if (*x && t.pipeline_engine == PipelineEngine::kDeepSpeed) {
      return f.At(v, "training.pp_scatter_gather",
                  "true is Megatron-LM's pipeline transfer; DeepSpeed's PipelineEngine "
                  "(pipeline_engine: deepspeed) sends whole tensors: use false, or leave it out");
    }
  }
  return t;
}

}  // namespace pipetwin::models
