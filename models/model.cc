#include "models/model.h"

#include "models/yaml_util.h"
#include "schedule/quote.h"
#include "schedule/suggest.h"

#include <array>

namespace pipetwin::models {
namespace {

ModelConfig Gpt3(const char* name, int layers, int hidden, int heads) {
  // Brown et al. 2020, Table 2.1: ffn = 4h, vocabulary 50257 (GPT-2 BPE), context 2048.
  ModelConfig m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.ffn_hidden = 4 * hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.vocab = 50257;
  m.seq_len = 2048;
  return m;  // GPT defaults: GeLU, LayerNorm, learned positions, tied, biases, dropout
}

ModelConfig Llama(const char* name, int layers, int hidden, int ffn, int heads, int kv_heads,
                  int vocab, int seq_len) {
  ModelConfig m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.ffn_hidden = ffn;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.vocab = vocab;
  m.seq_len = seq_len;
  m.mlp = Mlp::kSwiglu;
  m.norm = Norm::kRmsNorm;
  m.position = Position::kRope;
  m.tied_embeddings = false;
  m.bias = false;
  m.dropout = false;
  return m;
}

// Nemotron (NVIDIA's NeMo configs; Parmar et al. 2024, Table 1; Nvidia 2024, the 340B report,
// Table 1): GPT's two-GEMM MLP of 4h with squared ReLU (priced as GeLU: the same GEMMs, and an
// activation that reads and writes the same bytes), LayerNorm, rotary positions, no biases, no
// dropout, untied embeddings, a 256,000-token vocabulary, sequence 4,096.
ModelConfig Nemotron(const char* name, int layers, int hidden, int heads, int kv_heads) {
  ModelConfig m = Gpt3(name, layers, hidden, heads);
  m.kv_heads = kv_heads;
  m.vocab = 256000;
  m.seq_len = 4096;
  m.position = Position::kRope;
  m.tied_embeddings = false;
  m.bias = false;
  m.dropout = false;
  return m;
}

ModelConfig Tiny() {
  ModelConfig m;
  m.name = "tiny";
  m.layers = 4;
  m.hidden = 64;
  m.ffn_hidden = 256;
  m.heads = 4;
  m.kv_heads = 4;
  m.vocab = 128;
  m.seq_len = 32;
  // The executor's decoder (ExecutorModelMismatch, models/cpu_inventory.h): GPT's, with the
  // output layer apart from the embedding and without dropout, which the CPU backend also runs
  // (tied_embeddings: true, dropout: true) and the CUDA backend does not.
  m.tied_embeddings = false;
  m.dropout = false;
  return m;
}

const std::vector<ModelConfig>& Presets() {
  static const std::vector<ModelConfig> presets = {
      Tiny(),
      // GPT-3 (Brown et al. 2020, Table 2.1). Two rows of the table do not add up:
      // 13B prints d_model = 5140 (40 heads x d_head 128 = 5120, which we use), and 1.3B
      // prints 24 heads of d_head 128 for d_model 2048 (we keep d_model and d_head: 16
      // heads). Head count changes no parameter or FLOP count (only the unfused-attention
      // activation term 5as/h).
      Gpt3("gpt3-125m", 12, 768, 12),
      Gpt3("gpt3-350m", 24, 1024, 16),
      Gpt3("gpt3-760m", 24, 1536, 16),
      Gpt3("gpt3-1.3b", 24, 2048, 16),
      Gpt3("gpt3-2.7b", 32, 2560, 32),
      Gpt3("gpt3-6.7b", 32, 4096, 32),
      Gpt3("gpt3-13b", 40, 5120, 40),
      Gpt3("gpt3-175b", 96, 12288, 96),
      // NeMo's GPT-3 5B and 20B (NeMo-Framework-Launcher, conf/training/gpt3/5b.yaml and
      // 20b.yaml): GPT-3's style at sizes Brown et al. do not have.
      Gpt3("gpt3-5b", 24, 4096, 32),
      Gpt3("gpt3-20b", 44, 6144, 48),
      // Llama 2 (Touvron et al. 2023) and Llama 3 (Llama Team 2024, Table 3), as published
      // in the models' config.json files.
      Llama("llama2-7b", 32, 4096, 11008, 32, 32, 32000, 4096),
      Llama("llama2-13b", 40, 5120, 13824, 40, 40, 32000, 4096),
      Llama("llama2-70b", 80, 8192, 28672, 64, 8, 32000, 4096),
      Llama("llama3-8b", 32, 4096, 14336, 32, 8, 128256, 8192),
      Llama("llama3-70b", 80, 8192, 28672, 64, 8, 128256, 8192),
      Llama("llama3-405b", 126, 16384, 53248, 128, 8, 128256, 8192),
      // Llama 3.1 has Llama 3's shapes (its longer context comes from RoPE scaling and a
      // final long-context phase; pre-training ran at 8,192 tokens, the sequence kept here).
      Llama("llama3.1-8b", 32, 4096, 14336, 32, 8, 128256, 8192),
      Llama("llama3.1-70b", 80, 8192, 28672, 64, 8, 128256, 8192),
      Llama("llama3.1-405b", 126, 16384, 53248, 128, 8, 128256, 8192),
      // Nemotron 8B and 22B (NeMo-Framework-Launcher, conf/training/nemotron/8b.yaml and
      // 22b.yaml), Nemotron-4 15B (Parmar et al. 2024) and 340B (Nvidia 2024).
      Nemotron("nemotron-8b", 32, 4096, 32, 32),
      Nemotron("nemotron-22b", 40, 6144, 48, 48),
      Nemotron("nemotron4-15b", 32, 6144, 48, 8),
      Nemotron("nemotron4-340b", 96, 18432, 96, 8),
  };
  return presets;
}

std::string JoinNames() {
  std::string s;
  for (const auto& n : PresetNames()) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

using I64 = std::int64_t;

I64 NormParams(const ModelConfig& m) {
  return m.norm == Norm::kLayerNorm ? 2 * I64{m.hidden} : I64{m.hidden};
}

}  // namespace

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& p : Presets()) v.push_back(p.name);
    return v;
  }();
  return names;
}

Expected<ModelConfig> FindPreset(std::string_view name) {
  for (const auto& p : Presets()) {
    if (p.name == name) return p;
  }
  const std::string guess = DidYouMean(name, PresetNames());
  return Error::BadInput("unknown model preset " + Quoted(name) +
                         (guess.empty() ? "" : ", " + guess) + " (allowed: " + JoinNames() + ")");
}

std::string_view ToString(Mlp v) { return v == Mlp::kGelu ? "gelu" : "swiglu"; }
std::string_view ToString(Norm v) { return v == Norm::kLayerNorm ? "layernorm" : "rmsnorm"; }
std::string_view ToString(Position v) { return v == Position::kLearned ? "learned" : "rope"; }

Status CheckModel(const ModelConfig& m) {
  auto bad = [&](const std::string& what) {
    return Error::BadInput("model '" + m.name + "': " + what);
  };
  if (m.layers < 1 || m.hidden < 1 || m.ffn_hidden < 1 || m.heads < 1 || m.kv_heads < 1 ||
      m.vocab < 1 || m.seq_len < 1) {
    return bad("layers, hidden, ffn_hidden, heads, kv_heads, vocab and seq_len must be >= 1");
  }
  if (m.hidden % m.heads != 0) {
    return bad("heads (" + std::to_string(m.heads) + ") must divide hidden (" +
               std::to_string(m.hidden) + ")");
  }
  if (m.heads % m.kv_heads != 0) {
    return bad("kv_heads (" + std::to_string(m.kv_heads) + ") must divide heads (" +
               std::to_string(m.heads) + ")");
  }
  return OkStatus();
}

Expected<ModelConfig> ParseModelConfig(const YAML::Node& node, const YamlFields& f) {
  if (!node || node.IsNull()) {
    return internal::AtOrFile(f, node, "model",
                              "required when `costs:` is absent (a preset or the shape)");
  }
  if (node.IsScalar()) {  // `model: gpt3-175b` is short for `model: {preset: gpt3-175b}`
    Expected<std::string> name = f.String(node, "model");
    if (!name) return name.error();
    Expected<ModelConfig> p = FindPreset(*name);
    if (!p) return f.At(node, "model", p.error().message);
    return p;
  }
  static const std::vector<std::string> kKeys = {
      "preset",   "layers",          "hidden",  "ffn_hidden", "heads",
      "kv_heads", "vocab",           "seq_len", "mlp",        "norm",
      "position", "tied_embeddings", "bias",    "dropout",    "layers_per_stage"};
  if (Status s = f.CheckKeys(node, "model", kKeys); !s) return s.error();

  ModelConfig m;
  const bool has_preset = static_cast<bool>(node["preset"]);
  if (has_preset) {
    Expected<std::string> name = f.Choice(node["preset"], "model.preset", PresetNames());
    if (!name) return name.error();
    m = *FindPreset(*name);
  }
  bool customised = false;

  struct IntKey {
    const char* key;
    int* out;
    bool required;
    long long max;  // every product of sizes the cost model forms stays inside int64
  };
  const std::array<IntKey, 7> ints = {{{"layers", &m.layers, true, 1LL << 14},
                                       {"hidden", &m.hidden, true, 1LL << 18},
                                       {"ffn_hidden", &m.ffn_hidden, false, 1LL << 20},
                                       {"heads", &m.heads, true, 1LL << 14},
                                       {"kv_heads", &m.kv_heads, false, 1LL << 14},
                                       {"vocab", &m.vocab, true, 1LL << 24},
                                       {"seq_len", &m.seq_len, true, 1LL << 21}}};
  for (const IntKey& k : ints) {
    const std::string key = std::string("model.") + k.key;
    const YAML::Node v = node[k.key];
    if (!v) {
      if (k.required && !has_preset) {
        return f.At(node, key,
                    "required when model.preset is absent (presets: " + JoinNames() + ")");
      }
      continue;
    }
    Expected<long long> x = f.Int(v, key, 1, k.max);
    if (!x) return x.error();
    *k.out = static_cast<int>(*x);
    customised = true;
  }
  // Derived fields follow their base unless given: without a preset ffn_hidden = 4 hidden
  // and kv_heads = heads; on a preset they follow the override where the preset had that
  // relation (GPT-3's ffn = 4h, multi-head attention's kv_heads = heads).
  const ModelConfig base = has_preset ? *FindPreset(m.name) : ModelConfig{};
  if (!node["ffn_hidden"] && (!has_preset || base.ffn_hidden == 4 * base.hidden)) {
    m.ffn_hidden = 4 * m.hidden;
  }
  if (!node["kv_heads"] && (!has_preset || base.kv_heads == base.heads)) m.kv_heads = m.heads;
  if (const YAML::Node v = node["mlp"]) {
    Expected<std::string> x = f.Choice(v, "model.mlp", {"gelu", "swiglu"});
    if (!x) return x.error();
    m.mlp = *x == "gelu" ? Mlp::kGelu : Mlp::kSwiglu;
    customised = true;
  }
  if (const YAML::Node v = node["norm"]) {
    Expected<std::string> x = f.Choice(v, "model.norm", {"layernorm", "rmsnorm"});
    if (!x) return x.error();
    m.norm = *x == "layernorm" ? Norm::kLayerNorm : Norm::kRmsNorm;
    customised = true;
  }
  if (const YAML::Node v = node["position"]) {
    Expected<std::string> x = f.Choice(v, "model.position", {"learned", "rope"});
    if (!x) return x.error();
    m.position = *x == "learned" ? Position::kLearned : Position::kRope;
    customised = true;
  }
  struct BoolKey {
    const char* key;
    bool* out;
  };
  const std::array<BoolKey, 3> bools = {
      {{"tied_embeddings", &m.tied_embeddings}, {"bias", &m.bias}, {"dropout", &m.dropout}}};
  for (const BoolKey& k : bools) {
    if (const YAML::Node v = node[k.key]) {
      Expected<bool> x = f.Bool(v, std::string("model.") + k.key);
      if (!x) return x.error();
      *k.out = *x;
      customised = true;
    }
  }
  if (const YAML::Node v = node["layers_per_stage"]) {
    if (!v.IsSequence() || v.size() == 0) {
      return f.At(v, "model.layers_per_stage",
                  "must be a non-empty list of layer counts, one per pipeline stage");
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      Expected<long long> x =
          f.Int(v[i], "model.layers_per_stage[" + std::to_string(i) + "]", 0, 1 << 20);
      if (!x) return x.error();
      m.layers_per_stage.push_back(static_cast<int>(*x));
    }
  }
  if (customised) m.name = has_preset ? m.name + " (modified)" : "custom";
  if (Status s = CheckModel(m); !s) return f.At(node, "model", s.error().message);
  return m;
}

std::int64_t LayerParameters(const ModelConfig& m) {
  const I64 h = m.hidden, f = m.ffn_hidden, kv = m.kv_dim();
  const I64 qkv_out = h + 2 * kv;
  I64 p = h * qkv_out + h * h;  // QKV and the attention output projection
  p += m.mlp == Mlp::kGelu ? 2 * h * f : 3 * h * f;
  if (m.bias) {
    p += qkv_out + h;                            // QKV bias, projection bias
    p += (m.mlp == Mlp::kGelu ? f : 2 * f) + h;  // fc1 (gate+up) bias, fc2 bias
  }
  return p + 2 * NormParams(m);
}

std::int64_t EmbeddingParameters(const ModelConfig& m) {
  const I64 h = m.hidden;
  return I64{m.vocab} * h + (m.position == Position::kLearned ? I64{m.seq_len} * h : 0);
}

std::int64_t FinalNormParameters(const ModelConfig& m) { return NormParams(m); }

std::int64_t OutputParameters(const ModelConfig& m) {
  return m.tied_embeddings ? 0 : I64{m.vocab} * m.hidden;
}

std::int64_t TotalParameters(const ModelConfig& m) {
  return I64{m.layers} * LayerParameters(m) + EmbeddingParameters(m) + FinalNormParameters(m) +
         OutputParameters(m);
}

}  // namespace pipetwin::models
