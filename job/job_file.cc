// job_file.cc — step 1 of job.h: the YAML job file to a typed JobConfig.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

#include "job/job.h"
#include "job/plan_file.h"
#include "schedule/file_io.h"
#include "schedule/generators.h"
#include "schedule/yaml_fields.h"

namespace pipetwin {
namespace {

std::vector<std::string> CpCommNames() { return {kCpCommNames.begin(), kCpCommNames.end()}; }

std::vector<std::string> ScheduleNames() {
  std::vector<std::string> names;
  for (const auto& g : AllGenerators()) names.emplace_back(g.name);
  names.emplace_back("csv:PATH");
  return names;
}

Status ParseParallel(const YamlFields& f, const YAML::Node& n, ParallelConfig* p) {
  if (auto s = f.CheckKeys(n, "parallel",
                           {"pp", "vpp", "dp", "tp", "sp", "cp", "cp_comm", "cp_a2a", "zero"});
      !s) {
    return s;
  }
  if (!n.IsDefined() || n.IsNull()) return OkStatus();
  struct IntField {
    const char* key;
    int* out;
    long long min, max;
  };
  const IntField ints[] = {{"pp", &p->pp, 1, 4096},  {"vpp", &p->vpp, 1, 64},
                           {"dp", &p->dp, 1, 65536}, {"tp", &p->tp, 1, 1024},
                           {"cp", &p->cp, 1, 1024},  {"zero", &p->zero, 0, 3}};
  for (const IntField& i : ints) {
    if (!n[i.key]) continue;
    auto v = f.Int(n[i.key], std::string("parallel.") + i.key, i.min, i.max);
    if (!v) return v.error();
    *i.out = static_cast<int>(*v);
  }
  if (n["sp"]) {
    auto v = f.Bool(n["sp"], "parallel.sp");
    if (!v) return v.error();
    p->sp = *v;
    if (p->sp && p->tp < 2) {
      return f.At(n["sp"], "parallel.sp",
                  "sequence parallelism splits the tensor-parallel region, so it needs tp ≥ 2 "
                  "(got tp " +
                      std::to_string(p->tp) + ")");
    }
  }
  if (n["cp_comm"]) {
    auto v = f.Choice(n["cp_comm"], "parallel.cp_comm", CpCommNames());
    if (!v) return v.error();
    p->cp_comm = *ParseCpComm(*v);
  }
  const bool hierarchical = p->cp_comm == ParallelConfig::CpComm::kAllToAllP2P;
  if (n["cp_a2a"]) {
    if (!hierarchical) {
      return f.At(n["cp_a2a"], "parallel.cp_a2a",
                  "only with cp_comm: a2a+p2p (the size of its all-to-all level)");
    }
    auto v = f.Int(n["cp_a2a"], "parallel.cp_a2a", 2, 1024);
    if (!v) return v.error();
    p->cp_a2a = static_cast<int>(*v);
  } else if (hierarchical) {
    return f.At(n["cp_comm"], "parallel.cp_a2a",
                "required with cp_comm: a2a+p2p: the size of the all-to-all level (Megatron-Core's "
                "first --hierarchical-context-parallel-sizes), 2 <= cp_a2a < cp, dividing cp");
  }
  return OkStatus();
}

Status ParseCosts(const YamlFields& f, const YAML::Node& n, AbstractCosts* c) {
  if (auto s = f.CheckKeys(n, "costs",
                           {"forward_ms", "backward_input_ms", "backward_weight_ms", "p2p_ms",
                            "optimizer_ms", "dp_reduce_ms", "sync_ms"});
      !s) {
    return s;
  }
  struct NumField {
    const char* key;
    double* out;
    double min;
  };
  // Forward and input-gradient costs must be positive (at least one nanosecond): a step
  // that takes no time has no bubble to measure. The others may be zero.
  const NumField nums[] = {{"forward_ms", &c->forward_ms, 1e-6},
                           {"backward_input_ms", &c->backward_input_ms, 1e-6},
                           {"backward_weight_ms", &c->backward_weight_ms, 0},
                           {"p2p_ms", &c->p2p_ms, 0},
                           {"optimizer_ms", &c->optimizer_ms, 0},
                           {"dp_reduce_ms", &c->dp_reduce_ms, 0},
                           {"sync_ms", &c->sync_ms, 0}};
  for (const NumField& x : nums) {
    if (!n[x.key]) continue;
    auto v = f.Number(n[x.key], std::string("costs.") + x.key, x.min, 1e9);
    if (!v) return v.error();
    *x.out = *v;
  }
  return OkStatus();
}

Status ParseExecution(const YamlFields& f, const YAML::Node& n, ExecutionConfig* c) {
  if (Status s = f.CheckKeys(n, "execution",
                             {"steps", "warmup", "timeout_s", "seed", "learning_rate",
                              "recv_window", "stragglers", "threads"});
      !s) {
    return s;
  }
  if (!n.IsDefined() || n.IsNull()) return OkStatus();
  struct IntField {
    const char* key;
    long long min, max;
    int* out;
  };
  const IntField ints[] = {{"steps", 1, 100000, &c->steps},
                           {"warmup", 0, 100000, &c->warmup},
                           {"recv_window", 1, 1 << 20, &c->recv_window},
                           {"threads", 1, 1024, &c->threads}};
  for (const IntField& i : ints) {
    if (!n[i.key]) continue;
    auto v = f.Int(n[i.key], std::string("execution.") + i.key, i.min, i.max);
    if (!v) return v.error();
    *i.out = static_cast<int>(*v);
  }
  if (n["seed"]) {
    auto v = f.Int(n["seed"], "execution.seed", 0, 1LL << 62);
    if (!v) return v.error();
    c->seed = static_cast<std::uint64_t>(*v);
  }
  if (n["timeout_s"]) {
    auto v = f.Number(n["timeout_s"], "execution.timeout_s", 0.001, 86400);
    if (!v) return v.error();
    c->timeout_s = *v;
  }
  if (n["learning_rate"]) {
    auto v = f.Number(n["learning_rate"], "execution.learning_rate", 0, 10);
    if (!v) return v.error();
    c->learning_rate = *v;
  }
  return OkStatus();
}

// Ignores the parser's events: CountDocuments only needs document boundaries.
struct IgnoreEvents final : YAML::EventHandler {
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// The number of YAML documents in `text`, counting at most `cap`.
int CountDocuments(const std::string& text, int cap) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  IgnoreEvents ignore;
  int docs = 0;
  while (docs < cap && parser.HandleNextDocument(ignore)) ++docs;
  return docs;
}

// Every key's position, by its dotted path ("parallel.pp"), for messages at resolve time.
// A key given twice in one mapping is an error (YAML parsers keep one of the two silently).
Status RecordMarks(const YamlFields& f, const YAML::Node& n, const std::string& prefix,
                   SourceMap* map) {
  if (!n.IsMap()) return OkStatus();
  std::set<std::string> seen;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) continue;
    const std::string key = prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar();
    if (!seen.insert(kv.first.Scalar()).second) {
      return f.At(kv.first, key, "given twice (each key may appear once)");
    }
    const YAML::Mark m = kv.second.Mark();
    if (m.line >= 0) map->Set(key, m.line + 1, m.column + 1);
    if (Status s = RecordMarks(f, kv.second, key, map); !s) return s;
  }
  return OkStatus();
}

}  // namespace

void SourceMap::Set(const std::string& key, int line, int column) { marks_[key] = {line, column}; }

std::string SourceMap::Where(std::string_view key) const {
  std::string k(key);
  while (true) {
    if (auto it = marks_.find(k); it != marks_.end()) {
      return path_ + ":" + std::to_string(it->second.first) + ":" +
             std::to_string(it->second.second) + ": " + std::string(key);
    }
    const auto dot = k.rfind('.');
    if (dot == std::string::npos) break;
    k.resize(dot);
  }
  return path_ + ": " + std::string(key);
}

Error SourceMap::At(std::string_view key, std::string_view what) const {
  return Error::BadInput(Where(key) + ": " + std::string(what));
}

std::string JobConfig::CsvPath() const {
  std::filesystem::path p = schedule.substr(4);
  if (p.is_relative()) p = std::filesystem::path(path()).parent_path() / p;
  return p.string();
}

namespace {

// The one YAML document of a job (or plan) file.
Expected<YAML::Node> LoadRoot(const YamlFields& f, const std::string& yaml_text,
                              const std::string& path) {
  YAML::Node root;
  try {
    // The first document, then whether a second one follows. Not YAML::LoadAll: on some
    // malformed inputs yaml-cpp's parser reports a new document forever and LoadAll never
    // returns (fuzz/repro/yaml-loadall-hang.yaml); counting at most two documents is bounded.
    root = YAML::Load(yaml_text);
    if (CountDocuments(yaml_text, 2) > 1) {
      return Error::BadInput(path +
                             ": (top level): a job file holds one YAML document; this one has "
                             "more (remove the `---` separators)");
    }
  } catch (const YAML::Exception& e) {
    return Error::BadInput(path + ":" + std::to_string(e.mark.line + 1) + ":" +
                           std::to_string(e.mark.column + 1) + ": not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) return f.At(root, "(top level)", "a job file is a mapping of keys to values");
  return root;
}

// The job's keys of `root`; a plan file also has `search:` (read by ParsePlanFile).
Expected<JobConfig> ParseJobRoot(const YamlFields& f, const YAML::Node& root,
                                 const std::string& path, bool plan) {
  JobConfig job;
  job.source = SourceMap(path);
  if (Status s = RecordMarks(f, root, "", &job.source); !s) return s.error();
  std::vector<std::string> keys = {"schedule", "microbatches", "optimizer_sync",
                                   "parallel", "costs",        "model",
                                   "training", "cluster",      "execution"};
  if (plan) keys.emplace_back("search");
  if (auto s = f.CheckKeys(root, "(top level)", keys); !s) return s.error();
  if (!root["schedule"]) {
    return f.At(root, "schedule",
                "missing (one of gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, "
                "zbv, dualpipev, csv:PATH)");
  }
  auto sched = f.String(root["schedule"], "schedule");
  if (!sched) return sched.error();
  job.schedule = *sched;
  if (!job.IsCsvSchedule() && FindGenerator(job.schedule) == nullptr) {
    auto c = f.Choice(root["schedule"], "schedule", ScheduleNames());
    return c.error();
  }
  if (job.IsCsvSchedule() && job.schedule.size() == 4) {
    return f.At(root["schedule"], "schedule", "csv: must be followed by a file path");
  }
  if (root["microbatches"]) {
    auto m = f.Int(root["microbatches"], "microbatches", 1, 1000000);
    if (!m) return m.error();
    job.microbatches = static_cast<int>(*m);
  }
  if (root["optimizer_sync"]) {
    auto b = f.Bool(root["optimizer_sync"], "optimizer_sync");
    if (!b) return b.error();
    job.optimizer_sync = *b;
  }
  if (auto s = ParseParallel(f, root["parallel"], &job.parallel); !s) return s.error();
  if (Status s = CheckWorldSize(job); !s) return s.error();
  if (root["costs"]) {
    AbstractCosts c;
    if (auto s = ParseCosts(f, root["costs"], &c); !s) return s.error();
    job.costs = c;
  }
  if (root["execution"]) {
    if (auto s = ParseExecution(f, root["execution"], &job.execution); !s) return s.error();
    if (Status s = models::ParseStragglers(root["execution"]["stragglers"], f,
                                           job.parallel.WorldSize(), &job.stragglers);
        !s) {
      return s.error();
    }
  }
  if (!job.costs && !root["model"]) {
    return f.At(root, "costs",
                "give either costs: (abstract per-action costs) or model: with training: and "
                "cluster:");
  }
  if (!job.microbatches && !root["training"]) {
    return f.At(root, "microbatches",
                "missing (give microbatches:, or training: with global_batch and micro_batch)");
  }
  // model:, training:, cluster: are read by models/ with the same rules. A job with only
  // abstract costs executes the tiny preset under `run`.
  job.has_model = static_cast<bool>(root["model"]);
  YAML::Node none;
  auto model =
      models::ParseModelConfig(job.has_model ? root["model"] : YAML::Load("{preset: tiny}"), f);
  if (!model) return model.error();
  job.model = std::move(*model);
  auto training = models::ParseTrainingConfig(root["training"] ? root["training"] : none, f);
  if (!training) return training.error();
  job.training = *training;
  // Whether the file gives `section.key` (the defaults and implications below apply only to
  // keys left out).
  const auto given = [&root](const char* section, const char* key) {
    return root[section] && root[section][key];
  };
  // Megatron-Core runs TP communication overlap only with sequence parallelism (its
  // arguments refuse --tp-comm-overlap without --sequence-parallel): a job that turns the
  // overlap on at tp > 1 and leaves parallel.sp out had it.
  if (job.training.overlap.tp_comm && job.parallel.tp > 1 && !given("parallel", "sp")) {
    job.parallel.sp = true;
  }
  auto cluster = models::ParseClusterConfig(root["cluster"] ? root["cluster"] : none, f,
                                            job.parallel.WorldSize());
  if (!cluster) return cluster.error();
  job.cluster = std::move(*cluster);
  // parallel.dp left out where cluster.nodes is given and pp × tp × cp would leave whole
  // nodes idle: the data parallelism that fills the cluster (as plan's `dp: auto`), or an
  // error where pp × tp × cp does not divide it, rather than a job on a fraction of the nodes
  // it names. A job within fewer GPUs than one node keeps dp 1 (`nodes: 1` for 4 of 8 GPUs).
  if (!plan && !given("parallel", "dp") && job.cluster.nodes_given) {
    const long long gpus = static_cast<long long>(job.cluster.nodes) * job.cluster.gpus_per_node;
    const long long model_parallel =
        static_cast<long long>(job.parallel.pp) * job.parallel.tp * job.parallel.cp;
    const long long nodes_used =
        (model_parallel + job.cluster.gpus_per_node - 1) / job.cluster.gpus_per_node;
    if (nodes_used < job.cluster.nodes) {
      if (gpus % model_parallel != 0) {
        return f.At(root["parallel"] ? root["parallel"] : root, "parallel.dp",
                    "left out, and the cluster's " + std::to_string(gpus) +
                        " GPUs are not a multiple of pp × tp × cp = " +
                        std::to_string(model_parallel) + ": give parallel.dp");
      }
      if (gpus / model_parallel > 65536) {
        return f.At(root["parallel"] ? root["parallel"] : root, "parallel.dp",
                    "left out, and filling the cluster's " + std::to_string(gpus) +
                        " GPUs would take dp " + std::to_string(gpus / model_parallel) +
                        " (at most 65536)");
      }
      job.parallel.dp = static_cast<int>(gpus / model_parallel);
    }
  }
  // Megatron-Core's --overlap-param-gather needs its distributed optimizer (ZeRO-1): a job
  // that turns overlap.param_gather on and leaves parallel.zero out had it.
  if (job.training.overlap.param_gather && !given("parallel", "zero")) {
    job.parallel.zero = 1;
  }
  // training.flash_attention left out: the device's default (on for H100/H200, off for A100
  // and the cpu executor; models/cluster.h, DeviceSpec::fused_attention_by_default).
  if (!given("training", "flash_attention")) {
    job.training.flash_attention = job.cluster.device.fused_attention_by_default;
  }
  // training.precision left out: bf16 on the GPUs, fp32 on the cpu device (the CPU executor
  // computes in float32, and its inventory counts float32).
  if (!given("training", "precision") && job.cluster.device.name == "cpu") {
    job.training.precision = models::Precision::kFp32;
  }

  // Chunks per rank follow from the schedule.
  const bool has_vpp = given("parallel", "vpp");
  YAML::Node vpp_node;
  if (has_vpp) vpp_node = root["parallel"]["vpp"];
  if (job.schedule == "zbv" || job.schedule == "dualpipev") {
    if (has_vpp && job.parallel.vpp != 2) {
      return f.At(vpp_node, "parallel.vpp",
                  job.schedule + " always places two chunks per rank: vpp must be 2 or left out");
    }
    job.parallel.vpp = 2;
  } else if (job.schedule != "interleaved-1f1b" && !job.IsCsvSchedule() && job.parallel.vpp != 1) {
    return f.At(vpp_node, "parallel.vpp",
                "must be 1 for " + job.schedule +
                    " (several chunks per rank: interleaved-1f1b, zbv, dualpipev)");
  }
  return job;
}

}  // namespace

Expected<JobConfig> ParseJobConfig(const std::string& yaml_text, const std::string& path) {
  YamlFields f{path};
  auto root = LoadRoot(f, yaml_text, path);
  if (!root) return root.error();
  return ParseJobRoot(f, *root, path, /*plan=*/false);
}

Expected<JobConfig> ReadJobConfig(const std::string& path) {
  auto text = ReadInputFile(path, "the job file");
  if (!text) return text.error();
  return ParseJobConfig(*text, path);
}

namespace {

// The values of `search.<key>`: a non-empty list (or one scalar), each read by `read`;
// repeated values are kept once.
template <typename T, typename Read>
Status SearchList(const YamlFields& f, const YAML::Node& search, const char* key, Read read,
                  std::vector<T>* out) {
  const YAML::Node n = search[key];
  if (!n) return OkStatus();
  const std::string name = std::string("search.") + key;
  if (n.IsMap() || n.IsNull() || (n.IsSequence() && n.size() == 0)) {
    return f.At(n, name, "must be a non-empty list of candidate values");
  }
  if (n.IsSequence() && n.size() > kMaxSearchValues) {
    return f.At(n, name,
                "lists " + std::to_string(n.size()) + " values; at most " +
                    std::to_string(kMaxSearchValues) + " are allowed");
  }
  std::vector<T> values;
  auto add = [&](const YAML::Node& v) -> Status {
    Expected<T> x = read(v, name);
    if (!x) return x.error();
    if (std::find(values.begin(), values.end(), *x) == values.end()) values.push_back(*x);
    return OkStatus();
  };
  if (n.IsSequence()) {
    for (const YAML::Node& v : n) {
      if (Status s = add(v); !s) return s;
    }
  } else if (Status s = add(n); !s) {
    return s;
  }
  *out = std::move(values);
  return OkStatus();
}

Status ParseSearch(const YamlFields& f, const YAML::Node& n, const JobConfig& job,
                   SearchSpace* sp) {
  if (Status s = f.CheckKeys(n, "search",
                             {"schedule", "tp", "pp", "dp", "cp", "cp_comm", "vpp", "sp",
                              "micro_batch", "recompute", "zero", "overlap", "rank_order"});
      !s) {
    return s;
  }
  // Defaults: the job's own values.
  const ParallelConfig& p = job.parallel;
  sp->schedule = {job.schedule};
  sp->tp = {p.tp};
  sp->pp = {p.pp};
  sp->cp = {p.cp};
  sp->vpp = {p.vpp};
  sp->zero = {p.zero};
  sp->sp = {p.sp};
  sp->micro_batch = {job.training.micro_batch};
  sp->recompute = {job.training.recompute};
  sp->overlap = {job.training.overlap};
  sp->rank_order = {job.cluster.rank_order};
  sp->cp_comm = {p.cp_comm};
  auto read_cp_comm = [&](const YAML::Node& v,
                          const std::string& key) -> Expected<ParallelConfig::CpComm> {
    auto x = f.Choice(v, key, CpCommNames());
    if (!x) return x.error();
    if (*x == "a2a+p2p" && p.cp_a2a == 0) {
      return f.At(v, key,
                  "a2a+p2p needs parallel.cp_a2a in the job (the size of its all-to-all level, "
                  "with cp_comm: a2a+p2p there)");
    }
    return *ParseCpComm(*x);
  };
  if (Status s = SearchList<ParallelConfig::CpComm>(f, n, "cp_comm", read_cp_comm, &sp->cp_comm);
      !s) {
    return s;
  }
  auto read_order = [&](const YAML::Node& v, const std::string& key) -> Expected<models::DimOrder> {
    Expected<std::string> x = f.String(v, key);
    if (!x) return x.error();
    Expected<models::DimOrder> order = models::ParseDimOrder(*x);
    if (!order) return f.At(v, key, order.error().message);
    return *order;
  };
  if (Status s = SearchList<models::DimOrder>(f, n, "rank_order", read_order, &sp->rank_order);
      !s) {
    return s;
  }
  std::vector<std::string> names;
  for (const auto& g : AllGenerators()) names.emplace_back(g.name);
  auto read_schedule = [&](const YAML::Node& v, const std::string& key) {
    return f.Choice(v, key, names);
  };
  if (Status s = SearchList<std::string>(f, n, "schedule", read_schedule, &sp->schedule); !s) {
    return s;
  }
  struct IntKey {
    const char* key;
    long long min, max;
    std::vector<int>* out;
  };
  const IntKey ints[] = {{"tp", 1, 1024, &sp->tp},  {"pp", 1, 4096, &sp->pp},
                         {"cp", 1, 1024, &sp->cp},  {"vpp", 1, 64, &sp->vpp},
                         {"zero", 0, 3, &sp->zero}, {"micro_batch", 1, 65536, &sp->micro_batch}};
  for (const IntKey& k : ints) {
    auto read = [&](const YAML::Node& v, const std::string& key) -> Expected<int> {
      auto x = f.Int(v, key, k.min, k.max);
      if (!x) return x.error();
      return static_cast<int>(*x);
    };
    if (Status s = SearchList<int>(f, n, k.key, read, k.out); !s) return s;
  }
  if (n["dp"] && !(n["dp"].IsScalar() && n["dp"].Scalar() == "auto")) {
    std::vector<int> dp;
    auto read = [&](const YAML::Node& v, const std::string& key) -> Expected<int> {
      auto x = f.Int(v, key, 1, 65536);
      if (!x) {
        return f.At(v, key, "must be `auto` or a list of integers in [1, 65536]");
      }
      return static_cast<int>(*x);
    };
    if (Status s = SearchList<int>(f, n, "dp", read, &dp); !s) return s;
    sp->dp = std::move(dp);
  }
  auto read_bool = [&](const YAML::Node& v, const std::string& key) { return f.Bool(v, key); };
  if (Status s = SearchList<bool>(f, n, "sp", read_bool, &sp->sp); !s) return s;
  auto read_recompute = [&](const YAML::Node& v,
                            const std::string& key) -> Expected<models::Recompute> {
    auto x = f.Choice(v, key, {"none", "selective", "full"});
    if (!x) return x.error();
    return *x == "none"        ? models::Recompute::kNone
           : *x == "selective" ? models::Recompute::kSelective
                               : models::Recompute::kFull;
  };
  if (Status s = SearchList<models::Recompute>(f, n, "recompute", read_recompute, &sp->recompute);
      !s) {
    return s;
  }
  // A bool turns all three flags on or off; a map is training.overlap's.
  auto read_overlap = [&](const YAML::Node& v,
                          const std::string& key) -> Expected<models::Overlap> {
    if (v.IsScalar()) {
      auto b = f.Bool(v, key);
      if (!b)
        return f.At(
            v, key,
            "each candidate must be true, false or a map {tp_comm, grad_reduce, param_gather, "
            "tp_dgrad_reduce}");
      return models::Overlap{*b, *b, *b, *b};
    }
    return models::ParseOverlap(v, f, key);
  };
  if (Status s = SearchList<models::Overlap>(f, n, "overlap", read_overlap, &sp->overlap); !s) {
    return s;
  }
  if (const double layouts = sp->Layouts(); layouts > kMaxPlanLayouts) {
    std::ostringstream msg;
    msg << "the lists make ";
    if (layouts < 1e15) {
      msg << static_cast<long long>(layouts);
    } else {
      msg << std::setprecision(3) << layouts;
    }
    msg << " layouts; plan evaluates at most " << static_cast<long long>(kMaxPlanLayouts)
        << ": shorten the longest (lengths:";
    const std::pair<const char*, std::size_t> lengths[] = {{"schedule", sp->schedule.size()},
                                                           {"tp", sp->tp.size()},
                                                           {"pp", sp->pp.size()},
                                                           {"cp", sp->cp.size()},
                                                           {"vpp", sp->vpp.size()},
                                                           {"dp", sp->dp ? sp->dp->size() : 1},
                                                           {"sp", sp->sp.size()},
                                                           {"zero", sp->zero.size()},
                                                           {"micro_batch", sp->micro_batch.size()},
                                                           {"recompute", sp->recompute.size()},
                                                           {"overlap", sp->overlap.size()},
                                                           {"rank_order", sp->rank_order.size()},
                                                           {"cp_comm", sp->cp_comm.size()}};
    const bool interleaved = std::find(sp->schedule.begin(), sp->schedule.end(),
                                       "interleaved-1f1b") != sp->schedule.end();
    const bool cp_over_1 = std::any_of(sp->cp.begin(), sp->cp.end(), [](int c) { return c > 1; });
    for (const auto& [key, size] : lengths) {
      const std::string_view k = key;
      if ((k == "vpp" && !interleaved) || (k == "cp_comm" && !cp_over_1)) continue;
      if (size > 1) msg << " " << key << " " << size;
    }
    msg << ")";
    return f.At(n, "search", msg.str());
  }
  return OkStatus();
}

}  // namespace

double SearchSpace::Layouts() const {
  double per_schedule = 0;  // vpp's candidates count for the interleaved schedule only
  for (const std::string& s : schedule) {
    per_schedule += s == "interleaved-1f1b" ? static_cast<double>(vpp.size()) : 1.0;
  }
  double per_cp = 0;  // cp_comm's candidates count where cp > 1
  for (int c : cp) per_cp += c == 1 ? 1.0 : static_cast<double>(cp_comm.size());
  return per_schedule * per_cp * static_cast<double>(tp.size()) * static_cast<double>(pp.size()) *
         static_cast<double>(dp ? dp->size() : 1) * static_cast<double>(this->sp.size()) *
         static_cast<double>(zero.size()) * static_cast<double>(micro_batch.size()) *
         static_cast<double>(recompute.size()) * static_cast<double>(overlap.size()) *
         static_cast<double>(rank_order.size());
}

Expected<PlanFile> ParsePlanFile(const std::string& yaml_text, const std::string& path) {
  YamlFields f{path};
  auto root = LoadRoot(f, yaml_text, path);
  if (!root) return root.error();
  PlanFile plan;
  auto job = ParseJobRoot(f, *root, path, /*plan=*/true);
  if (!job) return job.error();
  plan.job = std::move(*job);
  if (!plan.job.has_model || plan.job.costs) {
    return f.At(*root, "model",
                "a plan file needs model:, training: (with global_batch) and cluster:, and no "
                "costs:");
  }
  if (plan.job.IsCsvSchedule()) {
    return f.At((*root)["schedule"], "schedule",
                "a plan searches the built-in generators, not csv:");
  }
  if (plan.job.training.global_batch == 0) {
    return f.At(*root, "training.global_batch", "required in a plan file (the batch is fixed)");
  }
  const YAML::Node search = (*root)["search"];
  if (!search || search.IsNull()) {
    return f.At(*root, "search", "missing: a plan file lists its candidate values in search:");
  }
  if (Status s = ParseSearch(f, search, plan.job, &plan.search); !s) return s.error();
  return plan;
}

Expected<PlanFile> ReadPlanFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error::BadInput(path + ": cannot open the plan file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParsePlanFile(ss.str(), path);
}

}  // namespace pipetwin
