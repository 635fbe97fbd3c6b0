// model.h — the transformer being trained: its shape, named presets, and the job file's
// `model:` section.
//
// A model is a stack of identical decoder layers between an input embedding and an output
// (logit) layer. GPT-3 style: learned position embeddings, GeLU MLP, LayerNorm, biases, tied
// input/output embeddings, dropout. Llama style: rotary positions, SwiGLU MLP, RMSNorm, no
// biases, untied embeddings, grouped-query attention (kv_heads < heads), no dropout.
//
//   Expected<ModelConfig> m = FindPreset("gpt3-175b");        // 96 layers, hidden 12288, ...
//   YamlFields f{"job.yaml"};
//   Expected<ModelConfig> m2 = ParseModelConfig(job.model, f);  // {preset: gpt3-175b, seq_len:
//   4096} std::int64_t n = TotalParameters(*m);                       // 174.6e9
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/expected.h"
#include "schedule/yaml_fields.h"

namespace pipetwin::models {

enum class Mlp { kGelu, kSwiglu };         // GeLU: fc1 h->f, fc2 f->h. SwiGLU: gate+up h->2f.
enum class Norm { kLayerNorm, kRmsNorm };  // LayerNorm has weight and bias; RMSNorm weight only
enum class Position { kLearned, kRope };   // learned: an s x h table; rotary: no parameters

struct ModelConfig {
  std::string name = "custom";  // the preset it came from, or "custom"
  int layers = 0;
  int hidden = 0;      // h
  int ffn_hidden = 0;  // f
  int heads = 0;       // a
  int kv_heads = 0;    // grouped-query attention; == heads for multi-head attention
  int vocab = 0;       // V
  int seq_len = 0;     // s
  Mlp mlp = Mlp::kGelu;
  Norm norm = Norm::kLayerNorm;
  Position position = Position::kLearned;
  bool tied_embeddings = true;
  bool bias = true;     // biases in the linear layers
  bool dropout = true;  // hidden and attention dropout (their masks are saved activations)
  // Optional uneven split of `layers` over the pipeline stages (model chunks, in model
  // order). Empty: even split. Checked against the stage count by BuildJobCosts.
  std::vector<int> layers_per_stage;

  int head_dim() const { return hidden / heads; }
  int kv_dim() const { return kv_heads * head_dim(); }  // width of K (and of V)
};

// Preset names in the order `pipetwin presets` lists them.
const std::vector<std::string>& PresetNames();
// A preset by name; the error lists the names.
Expected<ModelConfig> FindPreset(std::string_view name);

// `model:` — `preset:` plus overrides, or every shape field given explicitly. Left out,
// ffn_hidden is 4 x hidden and kv_heads is heads, also on a preset that had that relation
// (so `{preset: gpt3-175b, hidden: 25600, heads: 160}` gets ffn 102400 and 160 kv heads). Unknown
// keys, unknown presets and bad enum values are errors naming the file, key and allowed values.
Expected<ModelConfig> ParseModelConfig(const YAML::Node& node, const YamlFields& fields);

// Shape checks shared by presets and parsed configs (heads divide hidden, kv_heads divide
// heads, ...).
Status CheckModel(const ModelConfig& m);

// Parameter counts of the whole model (no parallelism). The embedding is counted once even
// when the output layer shares it.
std::int64_t LayerParameters(const ModelConfig& m);      // one decoder layer
std::int64_t EmbeddingParameters(const ModelConfig& m);  // word (+ learned position) embedding
std::int64_t FinalNormParameters(const ModelConfig& m);
std::int64_t OutputParameters(const ModelConfig& m);  // 0 when tied
std::int64_t TotalParameters(const ModelConfig& m);

std::string_view ToString(Mlp v);
std::string_view ToString(Norm v);
std::string_view ToString(Position v);

}  // namespace pipetwin::models
