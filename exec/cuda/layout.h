// layout.h — the parameter layout of one model chunk: the CPU chunk's own (exec/cpu/params.h),
// so the CUDA backend's flat parameter and gradient buffers line up with the CPU reference
// element for element.
//
//   cpu::ParamLayout l = ChunkParamLayout(model, spec, tp);
//   const cpu::ParamInfo& w = l.Find("block0.qkv_w");   // offset into the flat buffers
#pragma once

#include "exec/cpu/params.h"

namespace pipetwin::cuda {

using cpu::BlockParamName;
using cpu::ChunkParamLayout;

}  // namespace pipetwin::cuda
