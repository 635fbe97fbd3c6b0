// model.h — brings the executor's backend-neutral GPT model types (exec/model/: configuration,
// parameter layout, memory accounting, synthetic data) into the CPU backend's namespace, so
// the CPU layers and their tests name them as cpu::ModelConfig, cpu::ParamLayout, ...
#pragma once

#include "exec/model/config.h"
#include "exec/model/data.h"
#include "exec/model/memory.h"
#include "exec/model/params.h"

namespace pipetwin::cpu {

using gpt::Accountant;
using gpt::BlockParamName;
using gpt::ChunkParamLayout;
using gpt::ChunkSpec;
using gpt::CpConfig;
using gpt::CpExchange;
using gpt::CpGlobalPosition;
using gpt::HashString;
using gpt::Index;
using gpt::InitKind;
using gpt::InitParam;
using gpt::kNumMemCategories;
using gpt::LocalDims;
using gpt::MakeLocalDims;
using gpt::MemCategory;
using gpt::Mix64;
using gpt::ModelConfig;
using gpt::NormalFromKey;
using gpt::ParamInfo;
using gpt::ParamLayout;
using gpt::ParamLayoutBuilder;
using gpt::Recompute;
using gpt::ShardFromFull;
using gpt::ShardKind;
using gpt::SyntheticData;
using gpt::SyntheticDataConfig;
using gpt::TpConfig;
using gpt::UnshardIntoFull;
using gpt::Validate;

}  // namespace pipetwin::cpu
