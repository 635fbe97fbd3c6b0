#include "exec/cpu/chunk.h"

#include <stdexcept>
#include <string>

namespace pipetwin::cpu {

struct Chunk::State {
  enum class Phase { kForwardDone, kInputDone };
  Phase phase = Phase::kForwardDone;
  Embedding::Saved embed;
  std::vector<TransformerBlock::Saved> blocks;
  LayerNorm::Saved final_ln;
  Linear::Saved out;
  SoftmaxCrossEntropy::Saved loss;
};

namespace {

void CheckSize(std::size_t got, std::size_t want, const char* what) {
  if (got != want) {
    throw std::invalid_argument(std::string("chunk: ") + what + " has " + std::to_string(got) +
                                " elements, expected " + std::to_string(want));
  }
}

}  // namespace

Chunk::Chunk(const ModelConfig& model, const ChunkSpec& spec, const TpConfig& tp, Accountant& acc,
             Collectives* comm, const CpContext& cp)
    : model_(model), spec_(spec), tp_{tp, comm}, cp_(cp), acc_(&acc) {
  if (auto err = Validate(model, spec, tp, cp.cfg)) throw std::invalid_argument(*err);
  if (tp.size > 1 && (comm == nullptr || comm->size() != tp.size || comm->rank() != tp.rank)) {
    throw std::invalid_argument("chunk: tp > 1 needs a Collectives of the TP group");
  }
  if (cp.cfg.size > 1 &&
      (cp.comm == nullptr || cp.comm->size() != cp.cfg.size || cp.comm->rank() != cp.cfg.rank)) {
    throw std::invalid_argument("chunk: cp > 1 needs a RingComm of the CP group");
  }
  dims_ = MakeLocalDims(model, tp, cp.cfg);
  layout_ = ChunkParamLayout(model, spec, tp);

  const auto total = static_cast<Index>(layout_.total);
  params_ = Tensor(acc, MemCategory::kParams, 1, total);
  grads_ = Tensor(acc, MemCategory::kGrads, 1, total);
  for (const ParamInfo& p : layout_.params) InitParam(p, tp, model, params_.data() + p.offset);

  if (spec.first) {
    embed_ = Embedding(Ref("embed.tok"), RefIfAny("embed.pos"), dims_.batch, dims_.seq,
                       dims_.row_begin, dims_.rows, cp.cfg);
  }
  blocks_.reserve(static_cast<std::size_t>(spec.num_layers));
  for (int l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l) {
    BlockParams bp;
    bp.ln1_g = Ref(BlockParamName(l, "ln1_g"));
    bp.ln1_b = RefIfAny(BlockParamName(l, "ln1_b"));
    bp.qkv_w = Ref(BlockParamName(l, "qkv_w"));
    bp.qkv_b = RefIfAny(BlockParamName(l, "qkv_b"));
    bp.proj_w = Ref(BlockParamName(l, "proj_w"));
    bp.proj_b = RefIfAny(BlockParamName(l, "proj_b"));
    bp.ln2_g = Ref(BlockParamName(l, "ln2_g"));
    bp.ln2_b = RefIfAny(BlockParamName(l, "ln2_b"));
    bp.fc1_w = Ref(BlockParamName(l, "fc1_w"));
    bp.fc1_b = RefIfAny(BlockParamName(l, "fc1_b"));
    bp.fc2_w = Ref(BlockParamName(l, "fc2_w"));
    bp.fc2_b = RefIfAny(BlockParamName(l, "fc2_b"));
    blocks_.emplace_back(bp, model, tp_, l, spec.recompute, cp_);
  }
  if (spec.last) {
    final_ln_ =
        LayerNorm(Ref("head.ln_g"), RefIfAny("head.ln_b"), model.layernorm_eps, model.rms_norm);
    if (model.tied_embeddings) {
      out_ = Linear(Ref("embed.tok"), ParamRef{}, Linear::Options{.transposed_weight = true});
    } else {
      out_ = Linear(Ref("head.out_w"), ParamRef{});
    }
    loss_ = SoftmaxCrossEntropy(dims_.batch, dims_.seq, dims_.row_begin, dims_.rows, cp.cfg);
  }
}

Chunk::~Chunk() = default;

ParamRef Chunk::Ref(const std::string& name) {
  const ParamInfo& p = layout_.Find(name);
  return ParamRef{params_.data() + p.offset, grads_.data() + p.offset, p.rows, p.cols};
}

ParamRef Chunk::RefIfAny(const std::string& name) {
  return layout_.TryFind(name) != nullptr ? Ref(name) : ParamRef{};
}

Chunk::State& Chunk::Find(std::int64_t microbatch, const char* action) {
  auto it = states_.find(microbatch);
  if (it == states_.end()) {
    throw std::logic_error(std::string("chunk: ") + action + " of microbatch " +
                           std::to_string(microbatch) + " before its forward");
  }
  return *it->second;
}

float Chunk::Forward(std::int64_t microbatch, const ForwardArgs& args) {
  if (states_.count(microbatch) != 0) {
    throw std::logic_error("chunk: forward of microbatch " + std::to_string(microbatch) +
                           " while it is still in flight");
  }
  auto state = std::make_unique<State>();
  state->blocks.resize(blocks_.size());
  const Index h = dims_.hidden;

  Tensor x;
  if (spec_.first) {
    x = embed_.Forward(args.tokens, &state->embed, *acc_);
  } else {
    CheckSize(args.input.size(), activation_size(), "forward input");
    x = Tensor(*acc_, MemCategory::kWorkspace, dims_.rows, h);
    std::copy(args.input.begin(), args.input.end(), x.data());
  }
  const std::uint64_t dropout_key =
      Mix64(Mix64(model_.dropout_seed ^ static_cast<std::uint64_t>(args.step)) ^
            static_cast<std::uint64_t>(args.sample >= 0 ? args.sample : microbatch));
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    x = blocks_[i].Forward(std::move(x), &state->blocks[i], dropout_key);
  }

  float loss = 0.0f;
  if (spec_.last) {
    Tensor y = final_ln_.Forward(x, &state->final_ln);
    y = out_.Forward(std::move(y), &state->out);
    const double inv_tokens = 1.0 / static_cast<double>(dims_.tokens);
    const auto grad_scale = static_cast<float>(static_cast<double>(loss_scale_) * inv_tokens);
    double sum = loss_.Forward(std::move(y), args.labels, grad_scale, &state->loss);
    if (tp_.cfg.size > 1 && tp_.cfg.sequence_parallel) {
      float part = static_cast<float>(sum);
      tp_.comm->AllReduceSum({&part, 1});
      sum = static_cast<double>(part);
    }
    loss = static_cast<float>(sum * inv_tokens);
  } else {
    CheckSize(args.output.size(), activation_size(), "forward output");
    std::copy(x.data(), x.data() + x.size(), args.output.begin());
  }
  states_.emplace(microbatch, std::move(state));
  return loss;
}

void Chunk::BackwardInput(std::int64_t microbatch, std::span<const float> grad_output,
                          std::span<float> grad_input) {
  State& s = Find(microbatch, "backward-input");
  if (s.phase != State::Phase::kForwardDone) {
    throw std::logic_error("chunk: second backward-input of microbatch " +
                           std::to_string(microbatch));
  }
  Tensor g;
  if (spec_.last) {
    g = out_.BackwardInput(loss_.BackwardInput(&s.loss), &s.out);
    g = final_ln_.BackwardInput(g, &s.final_ln);
  } else {
    CheckSize(grad_output.size(), activation_size(), "gradient of the output");
    g = Tensor(*acc_, MemCategory::kWorkspace, dims_.rows, dims_.hidden);
    std::copy(grad_output.begin(), grad_output.end(), g.data());
  }
  for (std::size_t i = blocks_.size(); i-- > 0;) g = blocks_[i].BackwardInput(g, &s.blocks[i]);
  if (spec_.first) {
    embed_.BackwardInput(std::move(g), &s.embed);
  } else {
    CheckSize(grad_input.size(), activation_size(), "gradient of the input");
    std::copy(g.data(), g.data() + g.size(), grad_input.begin());
  }
  s.phase = State::Phase::kInputDone;
}

void Chunk::BackwardWeight(std::int64_t microbatch) {
  State& s = Find(microbatch, "backward-weight");
  if (s.phase != State::Phase::kInputDone) {
    throw std::logic_error("chunk: backward-weight of microbatch " + std::to_string(microbatch) +
                           " before its backward-input");
  }
  if (spec_.last) out_.BackwardWeight(&s.out);
  for (std::size_t i = blocks_.size(); i-- > 0;) blocks_[i].BackwardWeight(&s.blocks[i]);
  if (spec_.first) embed_.BackwardWeight(&s.embed);
  states_.erase(microbatch);
}

void Chunk::Backward(std::int64_t microbatch, std::span<const float> grad_output,
                     std::span<float> grad_input) {
  BackwardInput(microbatch, grad_output, grad_input);
  BackwardWeight(microbatch);
}

void Chunk::ZeroGrads() { grads_.mat().setZero(); }

void Chunk::SyncSequenceParallelGrads() {
  if (tp_.cfg.size == 1 || !tp_.cfg.sequence_parallel) return;
  tp_.comm->AllReduceSum(replicated_grads());
}

void Chunk::LoadFullParams(std::span<const float> full) {
  CheckSize(full.size(), layout_.full_total, "full parameter buffer");
  for (const ParamInfo& p : layout_.params) {
    ShardFromFull(p, tp_.cfg, full.data() + p.full_offset, params_.data() + p.offset);
  }
}

void Chunk::ExportFullParams(std::span<float> full) const {
  CheckSize(full.size(), layout_.full_total, "full parameter buffer");
  for (const ParamInfo& p : layout_.params) {
    UnshardIntoFull(p, tp_.cfg, params_.data() + p.offset, full.data() + p.full_offset);
  }
}

void Chunk::ExportFullGrads(std::span<float> full) const {
  CheckSize(full.size(), layout_.full_total, "full gradient buffer");
  for (const ParamInfo& p : layout_.params) {
    UnshardIntoFull(p, tp_.cfg, grads_.data() + p.offset, full.data() + p.full_offset);
  }
}

int Chunk::inflight() const {
  int n = 0;
  for (const auto& [mb, s] : states_) n += s->phase == State::Phase::kForwardDone ? 1 : 0;
  return n;
}

int Chunk::pending_weight() const { return static_cast<int>(states_.size()) - inflight(); }

}  // namespace pipetwin::cpu
