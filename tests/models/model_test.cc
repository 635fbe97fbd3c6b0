#include "models/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include <yaml-cpp/yaml.h>
#include "models/cpu_inventory.h"
#include "models/training.h"

namespace pipetwin::models {
namespace {

// Narayanan et al. 2021, Sec. 5.1: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)) for a GPT
// model with learned position embeddings, tied embeddings and biases. The closed form leaves
// out the final LayerNorm (2h parameters).
double NarayananParams(const ModelConfig& m) {
  const double l = m.layers, h = m.hidden, V = m.vocab, s = m.seq_len;
  return 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
}

TEST(ModelTest, Gpt3ParametersMatchNarayananClosedForm) {
  for (const char* name : {"gpt3-125m", "gpt3-350m", "gpt3-760m", "gpt3-1.3b", "gpt3-2.7b",
                           "gpt3-6.7b", "gpt3-13b", "gpt3-175b", "gpt3-5b", "gpt3-20b"}) {
    Expected<ModelConfig> m = FindPreset(name);
    ASSERT_TRUE(m) << name;
    const double expected = NarayananParams(*m) + 2.0 * m->hidden;
    EXPECT_NEAR(static_cast<double>(TotalParameters(*m)), expected, expected * 1e-13) << name;
  }
}

TEST(ModelTest, PublishedSizes) {
  // Brown et al. 2020 Table 2.1 rounds: 125M, 1.3B, 175B.
  EXPECT_NEAR(static_cast<double>(TotalParameters(*FindPreset("gpt3-125m"))), 125e6, 1e6);
  EXPECT_NEAR(static_cast<double>(TotalParameters(*FindPreset("gpt3-1.3b"))), 1.3e9, 0.05e9);
  EXPECT_NEAR(static_cast<double>(TotalParameters(*FindPreset("gpt3-175b"))), 175e9, 0.5e9);
  // Llama: 6,738,415,616 (Llama 2 7B), 8,030,261,248 (Llama 3 8B), 70.55e9, 405.9e9.
  EXPECT_EQ(TotalParameters(*FindPreset("llama2-7b")), 6738415616);
  EXPECT_EQ(TotalParameters(*FindPreset("llama3-8b")), 8030261248);
  EXPECT_NEAR(static_cast<double>(TotalParameters(*FindPreset("llama3-70b"))), 70.55e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(TotalParameters(*FindPreset("llama3-405b"))), 405.85e9, 0.1e9);
  // Llama 2 13B: 13,015,864,320 (its config.json's shapes, counted by Hugging Face).
  EXPECT_EQ(TotalParameters(*FindPreset("llama2-13b")), 13015864320);
}

// Nemotron-4's reports state embedding and non-embedding parameters apart, to 0.1B: 15B
// (Parmar et al. 2024, Table 1) 12.5B non-embedding; 340B (Nvidia 2024, Table 1) 9.4B
// embedding (input and output, untied) and 331.6B non-embedding.
TEST(ModelTest, NemotronPublishedSizes) {
  auto split = [](const char* name) {
    const ModelConfig m = *FindPreset(name);
    const double emb = static_cast<double>(EmbeddingParameters(m) + OutputParameters(m));
    return std::pair{emb, static_cast<double>(TotalParameters(m)) - emb};
  };
  const auto [emb340, rest340] = split("nemotron4-340b");
  EXPECT_NEAR(emb340, 9.4e9, 0.05e9);
  EXPECT_NEAR(rest340, 331.6e9, 0.05e9);
  EXPECT_NEAR(split("nemotron4-15b").second, 12.5e9, 0.05e9);
  const ModelConfig m = *FindPreset("nemotron4-15b");
  EXPECT_FALSE(m.bias);
  EXPECT_FALSE(m.dropout);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(m.position, Position::kRope);
  EXPECT_EQ(m.ffn_hidden, 4 * m.hidden);
}

// Llama 3.1 has Llama 3's shapes: only the name differs.
TEST(ModelTest, Llama31IsLlama3) {
  for (const char* size : {"8b", "70b", "405b"}) {
    const ModelConfig a = *FindPreset(std::string("llama3-") + size);
    const ModelConfig b = *FindPreset(std::string("llama3.1-") + size);
    EXPECT_EQ(TotalParameters(a), TotalParameters(b)) << size;
    EXPECT_EQ(a.layers, b.layers);
    EXPECT_EQ(a.ffn_hidden, b.ffn_hidden);
    EXPECT_EQ(a.kv_heads, b.kv_heads);
    EXPECT_EQ(a.seq_len, b.seq_len);
  }
}

TEST(ModelTest, Llama3_405bShape) {
  const ModelConfig m = *FindPreset("llama3-405b");
  EXPECT_EQ(m.layers, 126);
  EXPECT_EQ(m.hidden, 16384);
  EXPECT_EQ(m.ffn_hidden, 53248);
  EXPECT_EQ(m.heads, 128);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.vocab, 128256);
  EXPECT_EQ(m.seq_len, 8192);
  EXPECT_EQ(m.mlp, Mlp::kSwiglu);
  EXPECT_EQ(m.norm, Norm::kRmsNorm);
  EXPECT_FALSE(m.tied_embeddings);
}

TEST(ModelTest, PresetNamesAreAllFound) {
  EXPECT_EQ(PresetNames().size(), 24u);
  for (const auto& n : PresetNames()) EXPECT_TRUE(FindPreset(n)) << n;
}

// The section parsers on a job file's text (job/ calls them when it reads a job).
YAML::Node Job(const std::string& yaml) { return YAML::Load(yaml); }

Expected<ModelConfig> Model(const std::string& yaml) {
  return ParseModelConfig(Job(yaml)["model"], YamlFields{"job.yaml"});
}

const char* kHead = "schedule: 1f1b\nmicrobatches: 8\nparallel: {pp: 4}\n";

TEST(ModelTest, PresetWithOverride) {
  Expected<ModelConfig> m =
      Model(std::string(kHead) + "model: {preset: gpt3-175b, seq_len: 4096}\n");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->seq_len, 4096);
  EXPECT_EQ(m->hidden, 12288);
  EXPECT_EQ(m->layers, 96);
}

TEST(ModelTest, DerivedFieldsFollowOverrides) {
  // Narayanan et al. 2021's 1T configuration, from the GPT-3 preset.
  Expected<ModelConfig> t = Model(
      std::string(kHead) + "model: {preset: gpt3-175b, layers: 128, hidden: 25600, heads: 160}\n");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->ffn_hidden, 4 * 25600);
  EXPECT_EQ(t->kv_heads, 160);
  EXPECT_NEAR(static_cast<double>(TotalParameters(*t)), 1.008e12, 0.001e12);
  // Llama's ffn is not 4h and its kv_heads are grouped: they stay.
  Expected<ModelConfig> l =
      Model(std::string(kHead) + "model: {preset: llama3-8b, hidden: 8192, heads: 64}\n");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->ffn_hidden, 14336);
  EXPECT_EQ(l->kv_heads, 8);
}

TEST(ModelTest, ExplicitShape) {
  Expected<ModelConfig> m = Model(std::string(kHead) +
                                  "model: {layers: 8, hidden: 256, heads: 8, kv_heads: 2,\n"
                                  "        vocab: 1000, seq_len: 128, mlp: swiglu,\n"
                                  "        norm: rmsnorm, tied_embeddings: false,\n"
                                  "        layers_per_stage: [1, 3, 3, 1]}\n");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->ffn_hidden, 1024);  // default 4h
  EXPECT_EQ(m->kv_heads, 2);
  EXPECT_EQ(m->mlp, Mlp::kSwiglu);
  EXPECT_EQ(m->layers_per_stage, (std::vector<int>{1, 3, 3, 1}));
}

TEST(ModelTest, ErrorsNameFileKeyAndAllowedValues) {
  Expected<ModelConfig> unknown = Model(std::string(kHead) + "model: {preset: tiny, layerz: 3}\n");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("job.yaml:"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("layerz"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("seq_len"), std::string::npos);  // allowed list
  EXPECT_EQ(unknown.error().exit_status(), 2);

  Expected<ModelConfig> preset = Model(std::string(kHead) + "model: {preset: gpt5}\n");
  ASSERT_FALSE(preset);
  EXPECT_NE(preset.error().message.find("job.yaml:"), std::string::npos);
  EXPECT_NE(preset.error().message.find("model.preset"), std::string::npos);
  EXPECT_NE(preset.error().message.find("gpt3-175b"), std::string::npos);
  EXPECT_NE(preset.error().message.find("llama3-405b"), std::string::npos);

  Expected<ModelConfig> mlp = Model(std::string(kHead) + "model: {preset: tiny, mlp: relu}\n");
  ASSERT_FALSE(mlp);
  EXPECT_NE(mlp.error().message.find("model.mlp"), std::string::npos);
  EXPECT_NE(mlp.error().message.find("swiglu"), std::string::npos);

  Expected<ModelConfig> missing = Model(std::string(kHead) + "model: {hidden: 64}\n");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("model.layers"), std::string::npos);

  Expected<ModelConfig> heads = Model(std::string(kHead) + "model: {preset: tiny, heads: 3}\n");
  ASSERT_FALSE(heads);
  EXPECT_NE(heads.error().message.find("heads"), std::string::npos);
}

TEST(TrainingTest, ParsesAndRejects) {
  const YAML::Node job =
      Job(std::string(kHead) +
          "model: {preset: tiny}\n"
          "training: {global_batch: 64, micro_batch: 2, precision: fp16, optimizer: "
          "sgd-momentum, recompute: full}\n");
  Expected<TrainingConfig> t = ParseTrainingConfig(job["training"], YamlFields{"job.yaml"});
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->global_batch, 64);
  EXPECT_EQ(t->micro_batch, 2);
  EXPECT_EQ(t->precision, Precision::kFp16);
  EXPECT_EQ(t->optimizer, Optimizer::kSgdMomentum);
  EXPECT_EQ(t->recompute, Recompute::kFull);

  for (const char* bad : {"training: {precision: fp4}\n", "training: {optimizer: lamb}\n",
                          "training: {recompute: some}\n", "training: {batch: 3}\n"}) {
    const YAML::Node j = Job(std::string(kHead) + "model: {preset: tiny}\n" + bad);
    Expected<TrainingConfig> x = ParseTrainingConfig(j["training"], YamlFields{"job.yaml"});
    ASSERT_FALSE(x) << bad;
    EXPECT_NE(x.error().message.find("job.yaml:"), std::string::npos) << x.error().message;
    EXPECT_NE(x.error().message.find("training"), std::string::npos) << x.error().message;
  }
  const YAML::Node j =
      Job(std::string(kHead) + "model: {preset: tiny}\ntraining: {optimizer: lamb}\n");
  EXPECT_NE(ParseTrainingConfig(j["training"], YamlFields{"job.yaml"})
                .error()
                .message.find("adam, sgd, sgd-momentum"),
            std::string::npos);
}

// The executor's decoder: the tiny preset is it, with or without dropout and tied embeddings
// (the CPU backend runs both); each architecture key changed alone is named, with what to
// write (rotary positions need an even head dimension), and every preset is the decoder.
TEST(ModelTest, ExecutorModelMismatchNamesTheFirstKeyThatDiffers) {
  const ModelConfig tiny = *FindPreset("tiny");
  EXPECT_FALSE(ExecutorModelMismatch(tiny).has_value());
  ModelConfig with_dropout = tiny;
  with_dropout.dropout = true;
  with_dropout.tied_embeddings = true;
  EXPECT_FALSE(ExecutorModelMismatch(with_dropout).has_value());
  ModelConfig llama_norms = tiny;  // RMSNorm, no biases, rotary: the executor runs them too
  llama_norms.norm = Norm::kRmsNorm;
  llama_norms.bias = false;
  llama_norms.position = Position::kRope;
  llama_norms.mlp = Mlp::kSwiglu;  // and SwiGLU, and grouped-query attention
  llama_norms.kv_heads = 2;
  EXPECT_FALSE(ExecutorModelMismatch(llama_norms).has_value());
  struct Case {
    void (*change)(ModelConfig&);
    const char* key;
    const char* says;
  };
  const Case cases[] = {
      {[](ModelConfig& m) {
         m.position = Position::kRope;  // tiny's heads are 16 wide; 65 / 5 = 13 is odd
         m.hidden = 65;
         m.heads = 5;
         m.kv_heads = 5;
       },
       "model.position", "the head dimension (hidden / heads = 13) must be even"},
  };
  for (const Case& c : cases) {
    ModelConfig m = tiny;
    c.change(m);
    const auto bad = ExecutorModelMismatch(m);
    ASSERT_TRUE(bad.has_value()) << c.key;
    EXPECT_EQ(bad->key, c.key);
    EXPECT_NE(bad->message.find(c.says), std::string::npos) << bad->message;
  }
  EXPECT_FALSE(ExecutorModelMismatch(*FindPreset("gpt3-1.3b")).has_value());
  // Every preset is the executor's decoder as it is (Llama's and Nemotron's grouped-query
  // attention, SwiGLU, RMSNorm, rotary positions and bias-free layers included; their head
  // dimensions are even).
  for (const std::string& name : PresetNames()) {
    EXPECT_FALSE(ExecutorModelMismatch(*FindPreset(name)).has_value()) << name;
  }
}

// Tied embeddings over a pipeline: the executor sums the copies after the ring all-reduce, so
// pp > 1 with ZeRO-1 or parameter servers is refused, naming the key and the reason; pp 1,
// untied, or the ring without ZeRO pass.
TEST(ModelTest, ExecutorTiedMismatchNamesParameterServers) {
  ModelConfig m = *FindPreset("tiny");
  m.tied_embeddings = true;
  ClusterConfig ring;
  ring.dp_reduction = ClusterConfig::DpReduction::kRing;
  ClusterConfig ps = ring;
  ps.dp_reduction = ClusterConfig::DpReduction::kParameterServer;
  ps.parameter_servers = 1;
  const ParallelConfig pp2{.pp = 2, .dp = 2};
  ParallelConfig pp2_zero1 = pp2;
  pp2_zero1.zero = 1;
  const ParallelConfig pp1_zero1{.pp = 1, .dp = 2, .zero = 1};
  EXPECT_FALSE(ExecutorTiedMismatch(m, pp2, ring).has_value());
  EXPECT_FALSE(ExecutorTiedMismatch(m, pp1_zero1, ring).has_value());
  EXPECT_FALSE(ExecutorTiedMismatch(m, pp2_zero1, ring).has_value());  // Zero1Layout
  const auto servers = ExecutorTiedMismatch(m, pp2, ps);
  ASSERT_TRUE(servers.has_value());
  EXPECT_EQ(servers->key, "model.tied_embeddings");
  EXPECT_NE(servers->message.find("parameter-server"), std::string::npos) << servers->message;
  m.tied_embeddings = false;
  EXPECT_FALSE(ExecutorTiedMismatch(m, pp2, ps).has_value());
}

// ZeRO-1's blocks, by hand: 10 elements over 3 ranks, the embedding at 6, 7, 8.
TEST(ModelTest, Zero1LayoutShardsTheTiedEmbeddingApart) {
  const Zero1Layout z = MakeZero1Layout(10, 3, 6, 3);
  EXPECT_EQ(z.tied_shard, 1);
  EXPECT_EQ(z.rest_shard, 3);
  EXPECT_EQ(z.padded(), 12);
  std::vector<std::int64_t> at(12, -1);  // flat index at each position of the padded buffer
  for (const Zero1Layout::Run& r : z.Runs()) {
    for (std::int64_t i = 0; i < r.length; ++i)
      at[static_cast<std::size_t>(r.pos + i)] = r.flat + i;
  }
  EXPECT_EQ(at, (std::vector<std::int64_t>{6, 0, 1, 2, 7, 3, 4, 5, 8, 9, -1, -1}));
  // Without a tied copy: block r is [r·shard, (r+1)·shard), as a plain reduce-scatter has it.
  const Zero1Layout plain = MakeZero1Layout(10, 3);
  EXPECT_EQ(plain.shard(), 4);
  ASSERT_EQ(plain.Runs().size(), 3u);
  EXPECT_EQ(plain.Runs()[2].pos, 8);
  EXPECT_EQ(plain.Runs()[2].flat, 8);
  EXPECT_EQ(plain.Runs()[2].length, 2);
}

// Every element lands exactly once, and the first and last stage's rank r hold the same slice
// of the embedding (first stage: embedding in front; last: at the end), whatever the sizes.
TEST(ModelTest, Zero1LayoutAlignsTheEmbeddingSlices) {
  for (std::int64_t ranks : {1, 2, 3, 5, 8}) {
    for (std::int64_t tied : {1, 7, 64}) {
      for (std::int64_t rest : {0, 1, 9, 100}) {
        const Zero1Layout first = MakeZero1Layout(tied + rest, ranks, 0, tied);
        const Zero1Layout last = MakeZero1Layout(rest + 3 + tied, ranks, rest + 3, tied);
        for (const Zero1Layout& z : {first, last}) {
          std::vector<int> seen(static_cast<std::size_t>(z.elements), 0);
          std::vector<std::int64_t> slice(static_cast<std::size_t>(ranks * z.tied_shard), -1);
          for (const Zero1Layout::Run& r : z.Runs()) {
            ASSERT_LE(r.pos + r.length, z.padded());
            for (std::int64_t i = 0; i < r.length; ++i) {
              ++seen[static_cast<std::size_t>(r.flat + i)];
              const std::int64_t block = (r.pos + i) / z.shard(), in = (r.pos + i) % z.shard();
              const std::int64_t e = r.flat + i - z.tied_offset;
              if (in < z.tied_shard) {
                ASSERT_TRUE(e >= 0 && e < tied);
                slice[static_cast<std::size_t>(block * z.tied_shard + in)] = e;
              }
            }
          }
          EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), z.elements);
          for (std::size_t k = 0; k < slice.size(); ++k) {
            EXPECT_EQ(slice[k],
                      static_cast<std::int64_t>(k) < tied ? static_cast<std::int64_t>(k) : -1);
          }
        }
      }
    }
  }
}

// What the CPU executor runs of training: fp32 throughout, reduced in fp32, no TP or ZeRO-1
// gather overlap; each key changed alone is named, with what to write.
TEST(ModelTest, CpuExecutorTrainingMismatchNamesTheKey) {
  TrainingConfig fp32;
  fp32.precision = Precision::kFp32;
  EXPECT_FALSE(CpuExecutorTrainingMismatch(fp32).has_value());
  struct Case {
    void (*change)(TrainingConfig&);
    const char* key;
    const char* says;
  };
  const Case cases[] = {
      {[](TrainingConfig& t) { t.precision = Precision::kBf16; }, "training.precision",
       "write precision: fp32 (the cpu device's default; bf16 runs on --backend cuda); got bf16"},
      {[](TrainingConfig& t) { t.master_weights = MasterWeights::kRemainders; },
       "training.master_weights", "write fp32"},
      {[](TrainingConfig& t) { t.grad_reduce_dtype = GradReduceDtype::kBf16; },
       "training.grad_reduce_dtype", "write grad_reduce_dtype: fp32"},
      {[](TrainingConfig& t) { t.overlap.tp_comm = true; }, "training.overlap.tp_comm",
       "write tp_comm: false"},
      {[](TrainingConfig& t) { t.overlap.param_gather = true; }, "training.overlap.param_gather",
       "write param_gather: false"},
      {[](TrainingConfig& t) { t.overlap.tp_dgrad_reduce = true; },
       "training.overlap.tp_dgrad_reduce", "write tp_dgrad_reduce: false, or leave it out"},
  };
  for (const Case& c : cases) {
    TrainingConfig t = fp32;
    c.change(t);
    const auto bad = CpuExecutorTrainingMismatch(t);
    ASSERT_TRUE(bad.has_value()) << c.key;
    EXPECT_EQ(bad->key, c.key);
    EXPECT_NE(bad->message.find(c.says), std::string::npos) << bad->message;
  }
  // Left out (it follows parallel.sp elsewhere) or false: what the executor runs.
  TrainingConfig dgrad_off = fp32;
  dgrad_off.overlap.tp_dgrad_reduce = false;
  EXPECT_FALSE(CpuExecutorTrainingMismatch(dgrad_off).has_value());
  // The GPUs' default, bf16, is the first thing the CPU executor does not run.
  EXPECT_EQ(CpuExecutorTrainingMismatch(TrainingConfig{})->key, "training.precision");
}

}  // namespace
}  // namespace pipetwin::models
