// job_writer.cc — a typed JobConfig back to a job file that reads back to the same config
// (job.h, WriteJobConfig). Defaults are left out; numbers are written to round-trip exactly.
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>

#include "job/job.h"
#include "models/placement.h"

namespace pipetwin {
namespace {

// Shortest decimal text that reads back to the same double.
std::string Num(double v) {
  char buf[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

template <typename T>
void Key(YAML::Emitter& e, const char* key, const T& value) {
  e << YAML::Key << key << YAML::Value << value;
}
void KeyNum(YAML::Emitter& e, const char* key, double value) {
  e << YAML::Key << key << YAML::Value << Num(value);
}

// The keys of a variability map (cluster.variability, execution.stragglers.variability).
void WriteVariability(YAML::Emitter& e, const models::Variability& v) {
  Key(e, "distribution", std::string(models::ToString(v.distribution)));
  KeyNum(e, "cv", v.cv);
  if (v.distribution == models::Variability::Distribution::kSlowFraction) {
    KeyNum(e, "fraction", v.fraction);
    KeyNum(e, "slowdown", v.slowdown);
  }
}

void WriteModel(YAML::Emitter& e, const models::ModelConfig& m) {
  // The preset the model came from, and the fields where it differs from it.
  std::string preset = m.name;
  const std::string kModified = " (modified)";
  if (preset.size() > kModified.size() &&
      preset.compare(preset.size() - kModified.size(), kModified.size(), kModified) == 0) {
    preset.resize(preset.size() - kModified.size());
  }
  auto found = models::FindPreset(preset);
  const models::ModelConfig base = found ? *found : models::ModelConfig{};
  e << YAML::Key << "model" << YAML::Value << YAML::Flow << YAML::BeginMap;
  if (found) Key(e, "preset", preset);
  const std::pair<const char*, std::pair<int, int>> ints[] = {
      {"layers", {m.layers, base.layers}},
      {"hidden", {m.hidden, base.hidden}},
      {"ffn_hidden", {m.ffn_hidden, base.ffn_hidden}},
      {"heads", {m.heads, base.heads}},
      {"kv_heads", {m.kv_heads, base.kv_heads}},
      {"vocab", {m.vocab, base.vocab}},
      {"seq_len", {m.seq_len, base.seq_len}}};
  // Without a preset every shape field is written; ffn_hidden and kv_heads always, since
  // their defaults follow hidden and heads.
  // A modified preset writes seq_len too, so that it reads back as modified.
  const bool modified = found && m.name != base.name;
  for (const auto& [key, v] : ints) {
    const std::string k = key;
    const bool always = modified && (k == "ffn_hidden" || k == "kv_heads" || k == "seq_len");
    if (!found || v.first != v.second || always) Key(e, key, v.first);
  }
  if (!found || m.mlp != base.mlp) Key(e, "mlp", std::string(models::ToString(m.mlp)));
  if (!found || m.norm != base.norm) Key(e, "norm", std::string(models::ToString(m.norm)));
  if (!found || m.position != base.position) {
    Key(e, "position", std::string(models::ToString(m.position)));
  }
  if (!found || m.tied_embeddings != base.tied_embeddings) {
    Key(e, "tied_embeddings", m.tied_embeddings);
  }
  if (!found || m.bias != base.bias) Key(e, "bias", m.bias);
  if (!found || m.dropout != base.dropout) Key(e, "dropout", m.dropout);
  if (!m.layers_per_stage.empty()) {
    e << YAML::Key << "layers_per_stage" << YAML::Value << YAML::Flow << m.layers_per_stage;
  }
  e << YAML::EndMap;
}

void WriteTraining(YAML::Emitter& e, const models::TrainingConfig& t) {
  e << YAML::Key << "training" << YAML::Value << YAML::Flow << YAML::BeginMap;
  if (t.global_batch != 0) Key(e, "global_batch", t.global_batch);
  Key(e, "micro_batch", t.micro_batch);
  Key(e, "precision", std::string(models::ToString(t.precision)));
  Key(e, "optimizer", std::string(models::ToString(t.optimizer)));
  Key(e, "recompute", std::string(models::ToString(t.recompute)));
  Key(e, "flash_attention", t.flash_attention);
  if (t.overlap != models::Overlap{}) {
    e << YAML::Key << "overlap" << YAML::Value << YAML::Flow << YAML::BeginMap;
    Key(e, "tp_comm", t.overlap.tp_comm);
    Key(e, "grad_reduce", t.overlap.grad_reduce);
    Key(e, "param_gather", t.overlap.param_gather);
    if (t.overlap.tp_dgrad_reduce) Key(e, "tp_dgrad_reduce", *t.overlap.tp_dgrad_reduce);
    e << YAML::EndMap;
  }
  {  // always: its default depends on the precision
    Key(e, "grad_reduce_dtype", std::string(t.grad_reduce_name()));
  }
  if (t.grad_bucket_mb != 0) KeyNum(e, "grad_bucket_mb", t.grad_bucket_mb);
  if (t.zero3_prefetch != 1) Key(e, "zero3_prefetch", t.zero3_prefetch);
  if (t.zero3_unit == models::Zero3Unit::kLayer || t.zero3_unit_stated) {
    Key(e, "zero3_unit",
        std::string(t.zero3_unit == models::Zero3Unit::kLayer ? "layer" : "module"));
  }
  if (t.zero3_nics != models::Zero3Nics::kAuto) {
    Key(e, "zero3_nics", std::string(t.zero3_nics == models::Zero3Nics::kRank ? "rank" : "node"));
  }
  if (t.pipeline_engine == models::PipelineEngine::kDeepSpeed)
    Key(e, "pipeline_engine", std::string(models::ToString(t.pipeline_engine)));
  if (t.cross_entropy == models::CrossEntropy::kFused)
    Key(e, "cross_entropy", std::string("fused"));
  if (t.master_weights != models::MasterWeights::kFp32)
    Key(e, "master_weights", std::string(models::ToString(t.master_weights)));
  if (t.fp8_params) Key(e, "fp8_params", true);
  if (t.pp_scatter_gather) Key(e, "pp_scatter_gather", *t.pp_scatter_gather);
  if (t.dp_sync != models::DpSync::kSync)
    Key(e, "dp_sync", std::string(models::ToString(t.dp_sync)));
  if (t.dp_sync == models::DpSync::kStale) Key(e, "staleness", t.staleness);
  e << YAML::EndMap;
}

void WriteCluster(YAML::Emitter& e, const models::ClusterConfig& c) {
  const models::DeviceSpec base = *models::FindDevice(c.device.name);
  const models::DeviceSpec& d = c.device;
  e << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
  Key(e, "device", d.name);
  Key(e, "gpus_per_node", c.gpus_per_node);
  if (c.nodes_given) Key(e, "nodes", c.nodes);
  Key(e, "rank_order", models::ToString(c.rank_order));
  using R = models::ClusterConfig::DpReduction;
  Key(e, "dp_reduction",
      std::string(c.dp_reduction == R::kRing   ? "ring"
                  : c.dp_reduction == R::kTree ? "tree"
                  : c.dp_reduction == R::kAuto ? "auto"
                                               : "parameter-server"));
  if (c.nics_per_node > 0) Key(e, "nics_per_node", c.nics_per_node);
  Key(e, "parameter_servers", c.parameter_servers);
  auto link = [&](const char* key, double bw, double lat, double eff, double bw0, double lat0,
                  double eff0) {
    if (bw == bw0 && lat == lat0 && eff == eff0) return;
    e << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
    KeyNum(e, "bandwidth_gb_s", bw / 1e9);
    KeyNum(e, "latency_us", lat / 1e-6);
    KeyNum(e, "efficiency", eff);
    e << YAML::EndMap;
  };
  link("intra_node", d.nvlink_bytes_per_s, d.nvlink_latency_s, d.nvlink_efficiency,
       base.nvlink_bytes_per_s, base.nvlink_latency_s, base.nvlink_efficiency);
  link("inter_node", d.ib_bytes_per_s, d.ib_latency_s, d.ib_efficiency, base.ib_bytes_per_s,
       base.ib_latency_s, base.ib_efficiency);
  // The device's own default is left out (a job file that did not state it reads the same);
  // anything else is written, `{distribution: none}` included.
  if (!(c.variability == base.variability)) {
    e << YAML::Key << "variability" << YAML::Value << YAML::Flow << YAML::BeginMap;
    WriteVariability(e, c.variability);
    e << YAML::EndMap;
  }
  if (c.fabric.block_nodes > 0 || c.fabric.oversubscription != 1) {
    e << YAML::Key << "fabric" << YAML::Value << YAML::Flow << YAML::BeginMap;
    if (c.fabric.block_nodes > 0) Key(e, "block_nodes", c.fabric.block_nodes);
    KeyNum(e, "oversubscription", c.fabric.oversubscription);
    e << YAML::EndMap;
  }
  if (d.gemm_efficiency != base.gemm_efficiency || d.fp8_gemm_factor != base.fp8_gemm_factor ||
      d.attn_fwd_efficiency != base.attn_fwd_efficiency ||
      d.attn_bwd_efficiency != base.attn_bwd_efficiency ||
      d.hbm_efficiency != base.hbm_efficiency) {
    e << YAML::Key << "compute" << YAML::Value << YAML::Flow << YAML::BeginMap;
    KeyNum(e, "gemm_efficiency", d.gemm_efficiency);
    KeyNum(e, "fp8_gemm_factor", d.fp8_gemm_factor);
    KeyNum(e, "attention_forward_efficiency", d.attn_fwd_efficiency);
    KeyNum(e, "attention_backward_efficiency", d.attn_bwd_efficiency);
    KeyNum(e, "hbm_efficiency", d.hbm_efficiency);
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
}

}  // namespace

std::string WriteJobConfig(const JobConfig& c, const std::string& comment) {
  YAML::Emitter e;
  if (!comment.empty()) e << YAML::Comment(comment);
  e << YAML::BeginMap;
  // A CSV path is written as the reader will resolve it (the new file may sit elsewhere).
  Key(e, "schedule", c.IsCsvSchedule() ? "csv:" + c.CsvPath() : c.schedule);
  if (c.microbatches) Key(e, "microbatches", *c.microbatches);
  Key(e, "optimizer_sync", c.optimizer_sync);
  const ParallelConfig& p = c.parallel;
  e << YAML::Key << "parallel" << YAML::Value << YAML::Flow << YAML::BeginMap;
  Key(e, "pp", p.pp);
  Key(e, "vpp", p.vpp);
  Key(e, "dp", p.dp);
  Key(e, "tp", p.tp);
  Key(e, "sp", p.sp);
  Key(e, "cp", p.cp);
  if (p.cp_comm != ParallelConfig::CpComm::kP2P)
    Key(e, "cp_comm", std::string(ToString(p.cp_comm)));
  if (p.cp_comm == ParallelConfig::CpComm::kAllToAllP2P) Key(e, "cp_a2a", p.cp_a2a);
  Key(e, "zero", p.zero);
  e << YAML::EndMap;
  if (c.costs) {
    const AbstractCosts& k = *c.costs;
    e << YAML::Key << "costs" << YAML::Value << YAML::Flow << YAML::BeginMap;
    KeyNum(e, "forward_ms", k.forward_ms);
    KeyNum(e, "backward_input_ms", k.backward_input_ms);
    KeyNum(e, "backward_weight_ms", k.backward_weight_ms);
    KeyNum(e, "p2p_ms", k.p2p_ms);
    KeyNum(e, "optimizer_ms", k.optimizer_ms);
    KeyNum(e, "dp_reduce_ms", k.dp_reduce_ms);
    KeyNum(e, "sync_ms", k.sync_ms);
    e << YAML::EndMap;
  }
  if (c.has_model) WriteModel(e, c.model);
  WriteTraining(e, c.training);
  WriteCluster(e, c.cluster);
  const ExecutionConfig& x = c.execution;
  e << YAML::Key << "execution" << YAML::Value << YAML::Flow << YAML::BeginMap;
  Key(e, "steps", x.steps);
  Key(e, "warmup", x.warmup);
  if (x.timeout_s > 0) KeyNum(e, "timeout_s", x.timeout_s);  // 0: sized by `run`
  Key(e, "seed", static_cast<long long>(x.seed));
  KeyNum(e, "learning_rate", x.learning_rate);
  Key(e, "recv_window", x.recv_window);
  if (x.threads != 1) Key(e, "threads", x.threads);  // default 1: files written before stay equal
  const models::Stragglers& st = c.stragglers;
  if (st.any()) {
    e << YAML::Key << "stragglers" << YAML::Value << YAML::BeginMap;
    if (!st.fixed.empty()) {
      e << YAML::Key << "fixed" << YAML::Value << YAML::BeginSeq;
      for (const models::Stragglers::Fixed& fx : st.fixed) {
        e << YAML::Flow << YAML::BeginMap;
        Key(e, "rank", fx.rank);
        KeyNum(e, "slowdown", fx.slowdown);
        e << YAML::EndMap;
      }
      e << YAML::EndSeq;
    }
    if (st.random()) {
      e << YAML::Key << "variability" << YAML::Value << YAML::Flow << YAML::BeginMap;
      WriteVariability(e, st.variability);
      e << YAML::EndMap;
    }
    Key(e, "seed", static_cast<long long>(st.seed));
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace pipetwin
