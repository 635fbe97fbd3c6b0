// layout.h — the parameter layout of one model chunk, identical to cpu::Chunk's (names, order,
// sharding, offsets), so the CUDA backend's flat parameter and gradient buffers line up with
// the CPU reference element for element (plain C++; a CPU test checks the equality).
//
//   cpu::ParamLayout l = ChunkParamLayout(model, spec, tp);
//   const cpu::ParamInfo& w = l.Find("block0.qkv_w");   // offset into the flat buffers
#pragma once

#include <string>

#include "exec/cpu/config.h"
#include "exec/cpu/params.h"

namespace pipetwin::cuda {

cpu::ParamLayout ChunkParamLayout(const cpu::ModelConfig& model, const cpu::ChunkSpec& spec,
                                  const cpu::TpConfig& tp);
std::string BlockParamName(int layer, const char* what);

}  // namespace pipetwin::cuda
