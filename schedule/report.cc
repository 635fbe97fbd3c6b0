#include "schedule/report.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace pipetwin {

using nlohmann::ordered_json;

nlohmann::ordered_json BreakdownJson(const Breakdown& b) {
  return {{"pipeline_rank", b.pipeline_rank},
          {"compute_ms", b.compute_ms},
          {"tp_cp_comm_exposed_ms", b.tp_cp_comm_exposed_ms},
          {"dp_comm_exposed_ms", b.dp_comm_exposed_ms},
          {"pp_comm_and_bubble_ms", b.pp_comm_and_bubble_ms},
          {"tp_cp_comm_overlapped_ms", b.tp_cp_comm_overlapped_ms},
          {"dp_comm_overlapped_ms", b.dp_comm_overlapped_ms},
          {"compute_slowed_by_comm_ms", b.compute_slowed_by_comm_ms}};
}

std::string ReportToJson(const Report& r) {
  ordered_json j;
  j["source"] = r.source;
  j["schedule"] = r.schedule;
  j["pp"] = r.pp;
  j["microbatches"] = r.microbatches;
  j["optimizer_sync"] = r.optimizer_sync;
  j["iteration_time_ms"] = r.iteration_time_ms;
  j["makespan_ms"] = r.makespan_ms;
  j["bubble_fraction"] = r.bubble_fraction;
  ordered_json ranks = ordered_json::array();
  for (const RankReport& k : r.ranks) {
    ordered_json e;
    e["rank"] = k.rank;
    if (k.pp_rank >= 0) {
      e["pp_rank"] = k.pp_rank;
      e["dp_rank"] = k.dp_rank;
      e["tp_rank"] = k.tp_rank;
      e["cp_rank"] = k.cp_rank;
    }
    e["compute_busy_ms"] = k.compute_busy_ms;
    e["bubble_fraction"] = k.bubble_fraction;
    e["span_ms"] = k.span_ms;
    e["peak_memory_bytes"] = k.peak_memory_bytes;
    e["memory_bytes"] = {{"params", k.memory.params},
                         {"grads", k.memory.grads},
                         {"optimizer", k.memory.optimizer},
                         {"activations", k.memory.activations},
                         {"comm_buffers", k.memory.comm_buffers}};
    e["comm_bytes_sent"] = k.comm_bytes_sent;
    e["peak_inflight_microbatches"] = k.peak_inflight_microbatches;
    e["peak_pending_weight_grads"] = k.peak_pending_weight_grads;
    ranks.push_back(std::move(e));
  }
  j["ranks"] = std::move(ranks);
  j["comm"] = {
      {"bytes_total", r.comm.total()},
      {"by_group", {{"pp", r.comm.pp}, {"dp", r.comm.dp}, {"tp", r.comm.tp}, {"cp", r.comm.cp}}}};
  j["throughput"] = {{"samples_per_s", r.throughput.samples_per_s},
                     {"tokens_per_s", r.throughput.tokens_per_s},
                     {"tflops_per_device", r.throughput.tflops_per_device},
                     {"mfu", r.throughput.mfu}};
  if (r.hardware_flops) {
    j["hardware_flops"] = {{"tflops_per_device", r.hardware_flops->tflops_per_device},
                           {"hfu", r.hardware_flops->hfu}};
  }
  if (r.breakdown) {
    const Breakdown& b = *r.breakdown;
    j["breakdown"] = BreakdownJson(b);
  }
  if (r.memory) {
    const MemorySummary& m = *r.memory;
    j["memory"] = {{"fits", m.fits},
                   {"device_memory_bytes", m.device_memory_bytes},
                   {"worst_rank", m.worst_rank},
                   {"worst_peak_bytes", m.worst_peak_bytes},
                   {"shortfall_bytes", m.shortfall_bytes}};
  }
  if (r.job) {
    const JobSummary& x = *r.job;
    j["job"] = {{"model", x.model},
                {"world_size", x.world_size},
                {"pipeline_replicas", x.pipeline_replicas},
                {"parameters", x.parameters},
                {"model_flops_per_iteration", x.model_flops_per_iteration},
                {"hardware_flops_per_iteration", x.hardware_flops_per_iteration},
                {"device", x.device}};
    if (!x.layers_per_stage.empty()) j["job"]["layers_per_stage"] = x.layers_per_stage;
  }
  if (r.profile) {
    j["profile"] = r.profile->path;
    if (r.profile->has_jitter) {
      j["jitter"] = {{"samples", r.profile->jitter_samples},
                     {"nominal_iteration_time_ms", r.profile->nominal_iteration_time_ms},
                     {"min_ms", r.profile->jitter_min_ms},
                     {"max_ms", r.profile->jitter_max_ms}};
    }
  }
  if (!r.parameter_servers.empty()) {
    ordered_json servers = ordered_json::array();
    for (const ParameterServerReport& p : r.parameter_servers) {
      servers.push_back({{"server", p.server},
                         {"rank", p.rank},
                         {"bytes_sent", p.bytes_sent},
                         {"bytes_received", p.bytes_received}});
    }
    j["parameter_servers"] = servers;
  }
  if (r.dp_sync) {
    const DpSyncReport& d = *r.dp_sync;
    j["dp_sync"] = {{"mode", d.mode},
                    {"staleness_bound", d.staleness_bound},
                    {"steps", d.steps},
                    {"worker_steps_per_s", d.worker_steps_per_s},
                    {"steps_per_s", d.steps_per_s},
                    {"samples_per_s", d.samples_per_s},
                    {"staleness_mean", d.staleness_mean},
                    {"staleness_max", d.staleness_max}};
  }
  if (r.measured) {
    j["measured_steps_ms"] = r.measured->steps_ms;
    j["losses"] = r.measured->losses;
    j["backend"] = r.measured->backend;
    if (r.measured->has_reference) {
      j["reference_max_relative_error"] = r.measured->reference_max_relative_error;
    }
  }
  // A path that is not UTF-8 (a profile named with byte 0xFF) is written with U+FFFD, not thrown.
  return j.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

namespace {

// A report field out of its range, missing or of the wrong type: caught in ReportFromJson,
// bad input naming the key (never the JSON library's message without one).
struct BadField {
  std::string message;
};

constexpr std::int64_t kMaxCount = std::int64_t{1} << 31;  // ranks, microbatches, samples
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 62;
constexpr double kMaxMs = 1e15;
constexpr double kHuge = 1e300;

// o[key], which must be there. `where` prefixes the key in messages ("rank 2: ", "memory.").
const ordered_json& Field(const ordered_json& o, const char* key, const std::string& where) {
  if (!o.is_object()) {
    throw BadField{where + key + ": expected inside a JSON object, found a " +
                   std::string(o.type_name())};
  }
  const auto it = o.find(key);
  if (it == o.end()) throw BadField{where + key + ": missing"};
  return *it;
}

bool Has(const ordered_json& o, const char* key) { return o.is_object() && o.contains(key); }

// An integer in [lo, hi]: JSON numbers beyond it (1e18 for a rank, 2^64 bytes) are refused
// before any conversion; so are fractions.
std::int64_t IntIn(const ordered_json& o, const char* key, const std::string& where,
                   std::int64_t lo, std::int64_t hi) {
  const ordered_json& v = Field(o, key, where);
  const std::string name = where + key;
  const std::string range = " in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  bool ok = false;
  std::int64_t x = 0;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    ok = u <= static_cast<std::uint64_t>(hi);
    x = ok ? static_cast<std::int64_t>(u) : 0;
  } else if (v.is_number_integer()) {
    x = v.get<std::int64_t>();
    ok = true;
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    ok = d == std::floor(d) && d >= static_cast<double>(lo) && d <= static_cast<double>(hi);
    x = ok ? static_cast<std::int64_t>(d) : 0;
  }
  if (!ok || x < lo || x > hi) throw BadField{name + ": must be an integer" + range};
  return x;
}

template <class T>
T IntOr(const ordered_json& o, const char* key, const std::string& where, T fallback,
        std::int64_t lo, std::int64_t hi) {
  return Has(o, key) ? static_cast<T>(IntIn(o, key, where, lo, hi)) : fallback;
}

int RankIn(const ordered_json& o, const char* key, const std::string& where) {
  return static_cast<int>(IntIn(o, key, where, 0, kMaxCount));
}

// A finite number in [lo, hi]; `positive`: above zero as well (a time that must have passed).
double NumIn(const ordered_json& o, const char* key, const std::string& where, double lo = -kHuge,
             double hi = kHuge, bool positive = false) {
  const ordered_json& v = Field(o, key, where);
  if (!v.is_number()) throw BadField{where + key + ": must be a number"};
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (positive && d <= 0)) {
    throw BadField{where + key + ": must be a number" + (positive ? " above 0" : "") + " in [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "]"};
  }
  return d;
}

double NumOr(const ordered_json& o, const char* key, const std::string& where, double fallback,
             double lo = -kHuge, double hi = kHuge) {
  return Has(o, key) ? NumIn(o, key, where, lo, hi) : fallback;
}

std::string Str(const ordered_json& o, const char* key, const std::string& where) {
  const ordered_json& v = Field(o, key, where);
  if (!v.is_string()) throw BadField{where + key + ": must be a string"};
  return v.get<std::string>();
}

std::string StrOr(const ordered_json& o, const char* key, const std::string& where) {
  return Has(o, key) ? Str(o, key, where) : std::string();
}

bool Bool(const ordered_json& o, const char* key, const std::string& where) {
  const ordered_json& v = Field(o, key, where);
  if (!v.is_boolean()) throw BadField{where + key + ": must be true or false"};
  return v.get<bool>();
}

const ordered_json& Object(const ordered_json& o, const char* key, const std::string& where) {
  const ordered_json& v = Field(o, key, where);
  if (!v.is_object()) throw BadField{where + key + ": must be a JSON object"};
  return v;
}

std::vector<double> Numbers(const ordered_json& o, const char* key, const std::string& where) {
  const ordered_json& v = Field(o, key, where);
  if (!v.is_array()) throw BadField{where + key + ": must be a list of numbers"};
  std::vector<double> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const ordered_json& x = v[i];
    if (!x.is_number() || !std::isfinite(x.get<double>())) {
      throw BadField{where + key + "[" + std::to_string(i) + "]: must be a number"};
    }
    out.push_back(x.get<double>());
  }
  return out;
}

}  // namespace

Expected<Report> ReportFromJson(const std::string& text, const std::string& path) {
  try {
    const ordered_json j = ordered_json::parse(text);
    if (!j.is_object()) throw BadField{"must be a JSON object (a pipetwin report)"};
    Report r;
    r.source = StrOr(j, "source", "");
    r.schedule = StrOr(j, "schedule", "");
    r.pp = IntOr(j, "pp", "", 0, 0, kMaxCount);
    r.microbatches = IntOr(j, "microbatches", "", 0, 0, kMaxCount);
    r.optimizer_sync = Has(j, "optimizer_sync") ? Bool(j, "optimizer_sync", "") : true;
    r.iteration_time_ms = NumIn(j, "iteration_time_ms", "", 0, kMaxMs, true);
    r.makespan_ms =
        Has(j, "makespan_ms") ? NumIn(j, "makespan_ms", "", 0, kMaxMs, true) : r.iteration_time_ms;
    r.bubble_fraction = NumIn(j, "bubble_fraction", "", -1, 1);
    const ordered_json& ranks = Field(j, "ranks", "");
    if (!ranks.is_array()) throw BadField{"ranks: must be a list"};
    for (std::size_t index = 0; index < ranks.size(); ++index) {
      const ordered_json& e = ranks[index];
      RankReport k;
      const std::string at = "ranks[" + std::to_string(index) + "].";
      k.rank = RankIn(e, "rank", at);
      const std::string w = "rank " + std::to_string(k.rank) + ": ";
      k.compute_busy_ms = NumIn(e, "compute_busy_ms", w, 0, kMaxMs);
      k.bubble_fraction = NumIn(e, "bubble_fraction", w, -1, 1);
      k.span_ms = NumOr(e, "span_ms", w, 0.0, 0, kMaxMs);
      k.peak_memory_bytes = IntIn(e, "peak_memory_bytes", w, 0, kMaxBytes);
      const auto& m = Object(e, "memory_bytes", w);
      const std::string wm = w + "memory_bytes.";
      k.memory.params = IntIn(m, "params", wm, 0, kMaxBytes);
      k.memory.grads = IntIn(m, "grads", wm, 0, kMaxBytes);
      k.memory.optimizer = IntIn(m, "optimizer", wm, 0, kMaxBytes);
      k.memory.activations = IntIn(m, "activations", wm, 0, kMaxBytes);
      k.memory.comm_buffers = IntOr(m, "comm_buffers", wm, std::int64_t{0}, 0, kMaxBytes);
      k.comm_bytes_sent = IntIn(e, "comm_bytes_sent", w, 0, kMaxBytes);
      k.peak_inflight_microbatches = IntOr(e, "peak_inflight_microbatches", w, 0, 0, kMaxCount);
      k.peak_pending_weight_grads = IntOr(e, "peak_pending_weight_grads", w, 0, 0, kMaxCount);
      k.pp_rank = IntOr(e, "pp_rank", w, -1, -1, kMaxCount);
      k.dp_rank = IntOr(e, "dp_rank", w, 0, 0, kMaxCount);
      k.tp_rank = IntOr(e, "tp_rank", w, 0, 0, kMaxCount);
      k.cp_rank = IntOr(e, "cp_rank", w, 0, 0, kMaxCount);
      r.ranks.push_back(k);
    }
    const auto& g = Object(Object(j, "comm", ""), "by_group", "comm.");
    r.comm.pp = IntOr(g, "pp", "comm.by_group.", std::int64_t{0}, 0, kMaxBytes);
    r.comm.dp = IntOr(g, "dp", "comm.by_group.", std::int64_t{0}, 0, kMaxBytes);
    r.comm.tp = IntOr(g, "tp", "comm.by_group.", std::int64_t{0}, 0, kMaxBytes);
    r.comm.cp = IntOr(g, "cp", "comm.by_group.", std::int64_t{0}, 0, kMaxBytes);
    const auto& t = Object(j, "throughput", "");
    r.throughput.samples_per_s = NumOr(t, "samples_per_s", "throughput.", 0.0, 0, kHuge);
    r.throughput.tokens_per_s = NumOr(t, "tokens_per_s", "throughput.", 0.0, 0, kHuge);
    r.throughput.tflops_per_device = NumOr(t, "tflops_per_device", "throughput.", 0.0, 0, kHuge);
    r.throughput.mfu = NumOr(t, "mfu", "throughput.", 0.0, 0, kHuge);
    if (Has(j, "hardware_flops")) {
      const auto& h = Object(j, "hardware_flops", "");
      r.hardware_flops = HardwareFlops{NumIn(h, "tflops_per_device", "hardware_flops."),
                                       NumIn(h, "hfu", "hardware_flops.")};
    }
    if (Has(j, "breakdown")) {
      const auto& b = Object(j, "breakdown", "");
      const std::string w = "breakdown.";
      r.breakdown = Breakdown{
          RankIn(b, "pipeline_rank", w), NumIn(b, "compute_ms", w),
          NumIn(b, "tp_cp_comm_exposed_ms", w), NumIn(b, "dp_comm_exposed_ms", w),
          NumIn(b, "pp_comm_and_bubble_ms", w),
          // Added later: reports written before them read as 0.
          NumOr(b, "tp_cp_comm_overlapped_ms", w, 0.0), NumOr(b, "dp_comm_overlapped_ms", w, 0.0),
          NumOr(b, "compute_slowed_by_comm_ms", w, 0.0)};
    }
    if (Has(j, "memory")) {
      const auto& m = Object(j, "memory", "");
      r.memory = MemorySummary{
          Bool(m, "fits", "memory."), IntIn(m, "device_memory_bytes", "memory.", 0, kMaxBytes),
          RankIn(m, "worst_rank", "memory."), IntIn(m, "worst_peak_bytes", "memory.", 0, kMaxBytes),
          IntIn(m, "shortfall_bytes", "memory.", 0, kMaxBytes)};
    }
    if (Has(j, "job")) {
      const auto& x = Object(j, "job", "");
      r.job = JobSummary{Str(x, "model", "job."),
                         static_cast<int>(IntIn(x, "world_size", "job.", 1, kMaxCount)),
                         static_cast<int>(IntIn(x, "pipeline_replicas", "job.", 1, kMaxCount)),
                         IntIn(x, "parameters", "job.", 0, kMaxBytes),
                         NumIn(x, "model_flops_per_iteration", "job."),
                         NumIn(x, "hardware_flops_per_iteration", "job."),
                         Str(x, "device", "job."),
                         {}};
      if (Has(x, "layers_per_stage")) {
        const std::vector<double> v = Numbers(x, "layers_per_stage", "job.");
        if (v.size() > static_cast<std::size_t>(kMaxCount)) {
          throw BadField{"job.layers_per_stage: too many entries"};
        }
        for (std::size_t i = 0; i < v.size(); ++i) {
          if (!(v[i] >= 0 && v[i] <= 1 << 20) || v[i] != std::floor(v[i])) {
            throw BadField{"job.layers_per_stage[" + std::to_string(i) +
                           "]: must be an integer in [0, 1048576]"};
          }
          r.job->layers_per_stage.push_back(static_cast<int>(v[i]));
        }
      }
    }
    if (Has(j, "profile")) {
      ProfileUse p;
      p.path = Str(j, "profile", "");
      if (Has(j, "jitter")) {
        const auto& x = Object(j, "jitter", "");
        p.has_jitter = true;
        p.jitter_samples = static_cast<int>(IntIn(x, "samples", "jitter.", 0, kMaxCount));
        p.nominal_iteration_time_ms = NumIn(x, "nominal_iteration_time_ms", "jitter.");
        p.jitter_min_ms = NumIn(x, "min_ms", "jitter.");
        p.jitter_max_ms = NumIn(x, "max_ms", "jitter.");
      }
      r.profile = p;
    }
    if (Has(j, "parameter_servers")) {
      const auto& a = Field(j, "parameter_servers", "");
      if (!a.is_array()) throw BadField{"parameter_servers: must be an array"};
      for (const auto& x : a) {
        r.parameter_servers.push_back(
            {static_cast<int>(IntIn(x, "server", "parameter_servers[].", 0, kMaxCount)),
             RankIn(x, "rank", "parameter_servers[]."),
             IntIn(x, "bytes_sent", "parameter_servers[].", 0, kMaxBytes),
             IntIn(x, "bytes_received", "parameter_servers[].", 0, kMaxBytes)});
      }
    }
    if (Has(j, "dp_sync")) {
      const auto& x = Object(j, "dp_sync", "");
      DpSyncReport d;
      d.mode = Str(x, "mode", "dp_sync.");
      d.staleness_bound = static_cast<int>(IntIn(x, "staleness_bound", "dp_sync.", -1, kMaxCount));
      d.steps = static_cast<int>(IntIn(x, "steps", "dp_sync.", 0, kMaxCount));
      d.worker_steps_per_s = Numbers(x, "worker_steps_per_s", "dp_sync.");
      d.steps_per_s = NumIn(x, "steps_per_s", "dp_sync.");
      d.samples_per_s = NumIn(x, "samples_per_s", "dp_sync.");
      d.staleness_mean = NumIn(x, "staleness_mean", "dp_sync.");
      d.staleness_max = static_cast<int>(IntIn(x, "staleness_max", "dp_sync.", 0, kMaxCount));
      r.dp_sync = d;
    }
    if (Has(j, "measured_steps_ms")) {
      Measured m;
      m.steps_ms = Numbers(j, "measured_steps_ms", "");
      if (Has(j, "losses")) m.losses = Numbers(j, "losses", "");
      m.backend = StrOr(j, "backend", "");
      if (Has(j, "reference_max_relative_error")) {
        m.has_reference = true;
        m.reference_max_relative_error = NumIn(j, "reference_max_relative_error", "");
      }
      r.measured = m;
    }
    return r;
  } catch (const BadField& e) {
    return Error::BadInput(path + ": " + e.message);
  } catch (const nlohmann::json::parse_error& e) {
    // The library's position in the text ("at line 3, column 7"): the rest names no key.
    return Error::BadInput(path + ": not valid JSON: " + e.what());
  } catch (const nlohmann::json::exception& e) {
    return Error::BadInput(path + ": not a pipetwin report: " + e.what());
  }
}

}  // namespace pipetwin
