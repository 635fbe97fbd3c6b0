// training.h — the job file's `training:` section and the microbatch count it implies.
//
//   training: {global_batch: 1536, micro_batch: 1, precision: bf16, optimizer: adam,
//              recompute: selective, flash_attention: false}
//
//   Expected<TrainingConfig> t = ParseTrainingConfig(job.training, YamlFields{job.path});
#pragma once

#include <yaml-cpp/yaml.h>

#include <string_view>

#include "schedule/expected.h"
#include "schedule/yaml_fields.h"

namespace pipetwin::models {

enum class Precision { kBf16, kFp16, kFp32 };  // bf16/fp16: mixed precision with fp32 master
enum class Optimizer { kAdam, kSgd, kSgdMomentum };
enum class Recompute { kNone, kSelective, kFull };  // Korthikanti et al. 2022

struct TrainingConfig {
  int global_batch = 0;  // sequences per iteration; 0 = derived from `microbatches`
  int micro_batch = 1;   // sequences per microbatch (b)
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdam;
  Recompute recompute = Recompute::kNone;
  // Fused (FlashAttention) attention: the s x s score matrices are never stored and the
  // softmax is not a separate memory-bound pass. false: the unfused attention of
  // Korthikanti et al. 2022 Table 2 (its 5as/h term).
  bool flash_attention = false;

  // Bytes of one activation / parameter / gradient element in the compute precision.
  int element_bytes() const { return precision == Precision::kFp32 ? 4 : 2; }
  bool mixed_precision() const { return precision != Precision::kFp32; }
};

// Absent node: all defaults. Unknown keys and bad enum values are errors naming the file,
// the key and what is allowed.
Expected<TrainingConfig> ParseTrainingConfig(const YAML::Node& node, const YamlFields& fields);

std::string_view ToString(Precision v);
std::string_view ToString(Optimizer v);
std::string_view ToString(Recompute v);

}  // namespace pipetwin::models
