// layout.h — the parameter layout of one model chunk: the CPU chunk's own (exec/model/params.h),
// so the CUDA backend's flat parameter and gradient buffers line up with the CPU reference
// element for element.
//
//   gpt::ParamLayout l = ChunkParamLayout(model, spec, tp);
//   const gpt::ParamInfo& w = l.Find("block0.qkv_w");   // offset into the flat buffers
#pragma once

#include "exec/model/params.h"

namespace pipetwin::cuda {

using gpt::BlockParamName;
using gpt::ChunkParamLayout;

}  // namespace pipetwin::cuda
