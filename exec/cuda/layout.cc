#include "exec/cuda/layout.h"

namespace pipetwin::cuda {

using cpu::InitKind;
using cpu::ShardKind;

std::string BlockParamName(int layer, const char* what) {
  return "block" + std::to_string(layer) + "." + what;
}

cpu::ParamLayout ChunkParamLayout(const cpu::ModelConfig& model, const cpu::ChunkSpec& spec,
                                  const cpu::TpConfig& tp) {
  const cpu::LocalDims d = cpu::MakeLocalDims(model, tp);
  const cpu::Index h = d.hidden;
  const cpu::Index f = model.ffn_hidden;
  const cpu::Index v = d.vocab;
  cpu::ParamLayoutBuilder b(tp);
  if (spec.first) {
    b.Add("embed.tok", v, h, ShardKind::kReplicated, InitKind::kNormal);
    b.Add("embed.pos", d.seq, h, ShardKind::kReplicated, InitKind::kNormal);
  }
  for (int l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l) {
    b.Add(BlockParamName(l, "ln1_g"), 1, h, ShardKind::kReplicated, InitKind::kOnes);
    b.Add(BlockParamName(l, "ln1_b"), 1, h, ShardKind::kReplicated, InitKind::kZeros);
    b.Add(BlockParamName(l, "qkv_w"), h, 3 * h, ShardKind::kColumns, InitKind::kNormal, 3);
    b.Add(BlockParamName(l, "qkv_b"), 1, 3 * h, ShardKind::kColumns, InitKind::kZeros, 3);
    b.Add(BlockParamName(l, "proj_w"), h, h, ShardKind::kRows, InitKind::kNormal);
    b.Add(BlockParamName(l, "proj_b"), 1, h, ShardKind::kReplicated, InitKind::kZeros);
    b.Add(BlockParamName(l, "ln2_g"), 1, h, ShardKind::kReplicated, InitKind::kOnes);
    b.Add(BlockParamName(l, "ln2_b"), 1, h, ShardKind::kReplicated, InitKind::kZeros);
    b.Add(BlockParamName(l, "fc1_w"), h, f, ShardKind::kColumns, InitKind::kNormal);
    b.Add(BlockParamName(l, "fc1_b"), 1, f, ShardKind::kColumns, InitKind::kZeros);
    b.Add(BlockParamName(l, "fc2_w"), f, h, ShardKind::kRows, InitKind::kNormal);
    b.Add(BlockParamName(l, "fc2_b"), 1, h, ShardKind::kReplicated, InitKind::kZeros);
  }
  if (spec.last) {
    b.Add("head.ln_g", 1, h, ShardKind::kReplicated, InitKind::kOnes);
    b.Add("head.ln_b", 1, h, ShardKind::kReplicated, InitKind::kZeros);
    b.Add("head.out_w", h, v, ShardKind::kReplicated, InitKind::kNormal);
  }
  return std::move(b).Build();
}

}  // namespace pipetwin::cuda
