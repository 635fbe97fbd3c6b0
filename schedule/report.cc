#include "schedule/report.h"

#include <nlohmann/json.hpp>

namespace pipetwin {

using nlohmann::ordered_json;

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
    j["breakdown"] = {{"pipeline_rank", b.pipeline_rank},
                      {"compute_ms", b.compute_ms},
                      {"tp_cp_comm_exposed_ms", b.tp_cp_comm_exposed_ms},
                      {"dp_comm_exposed_ms", b.dp_comm_exposed_ms},
                      {"pp_comm_and_bubble_ms", b.pp_comm_and_bubble_ms},
                      {"tp_cp_comm_overlapped_ms", b.tp_cp_comm_overlapped_ms},
                      {"dp_comm_overlapped_ms", b.dp_comm_overlapped_ms}};
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
  if (r.measured) {
    j["measured_steps_ms"] = r.measured->steps_ms;
    j["losses"] = r.measured->losses;
    j["backend"] = r.measured->backend;
    if (r.measured->has_reference) {
      j["reference_max_relative_error"] = r.measured->reference_max_relative_error;
    }
  }
  return j.dump(2) + "\n";
}

Expected<Report> ReportFromJson(const std::string& text, const std::string& path) {
  try {
    const ordered_json j = ordered_json::parse(text);
    Report r;
    r.source = j.value("source", "");
    r.schedule = j.value("schedule", "");
    r.pp = j.value("pp", 0);
    r.microbatches = j.value("microbatches", 0);
    r.optimizer_sync = j.value("optimizer_sync", true);
    r.iteration_time_ms = j.at("iteration_time_ms").get<double>();
    r.makespan_ms = j.value("makespan_ms", r.iteration_time_ms);
    r.bubble_fraction = j.at("bubble_fraction").get<double>();
    for (const auto& e : j.at("ranks")) {
      RankReport k;
      k.rank = e.at("rank").get<int>();
      k.compute_busy_ms = e.at("compute_busy_ms").get<double>();
      k.bubble_fraction = e.at("bubble_fraction").get<double>();
      k.span_ms = e.value("span_ms", 0.0);
      k.peak_memory_bytes = e.at("peak_memory_bytes").get<std::int64_t>();
      const auto& m = e.at("memory_bytes");
      k.memory.params = m.at("params").get<std::int64_t>();
      k.memory.grads = m.at("grads").get<std::int64_t>();
      k.memory.optimizer = m.at("optimizer").get<std::int64_t>();
      k.memory.activations = m.at("activations").get<std::int64_t>();
      k.memory.comm_buffers = m.value("comm_buffers", std::int64_t{0});
      k.comm_bytes_sent = e.at("comm_bytes_sent").get<std::int64_t>();
      k.peak_inflight_microbatches = e.value("peak_inflight_microbatches", 0);
      k.peak_pending_weight_grads = e.value("peak_pending_weight_grads", 0);
      k.pp_rank = e.value("pp_rank", -1);
      k.dp_rank = e.value("dp_rank", 0);
      k.tp_rank = e.value("tp_rank", 0);
      k.cp_rank = e.value("cp_rank", 0);
      r.ranks.push_back(k);
    }
    const auto& g = j.at("comm").at("by_group");
    r.comm.pp = g.value("pp", std::int64_t{0});
    r.comm.dp = g.value("dp", std::int64_t{0});
    r.comm.tp = g.value("tp", std::int64_t{0});
    r.comm.cp = g.value("cp", std::int64_t{0});
    const auto& t = j.at("throughput");
    r.throughput.samples_per_s = t.value("samples_per_s", 0.0);
    r.throughput.tokens_per_s = t.value("tokens_per_s", 0.0);
    r.throughput.tflops_per_device = t.value("tflops_per_device", 0.0);
    r.throughput.mfu = t.value("mfu", 0.0);
    if (j.contains("hardware_flops")) {
      const auto& h = j.at("hardware_flops");
      r.hardware_flops =
          HardwareFlops{h.at("tflops_per_device").get<double>(), h.at("hfu").get<double>()};
    }
    if (j.contains("breakdown")) {
      const auto& b = j.at("breakdown");
      r.breakdown = Breakdown{
          b.at("pipeline_rank").get<int>(), b.at("compute_ms").get<double>(),
          b.at("tp_cp_comm_exposed_ms").get<double>(), b.at("dp_comm_exposed_ms").get<double>(),
          b.at("pp_comm_and_bubble_ms").get<double>(),
          // Added later: reports written before them read as 0.
          b.value("tp_cp_comm_overlapped_ms", 0.0), b.value("dp_comm_overlapped_ms", 0.0)};
    }
    if (j.contains("memory")) {
      const auto& m = j.at("memory");
      r.memory =
          MemorySummary{m.at("fits").get<bool>(), m.at("device_memory_bytes").get<std::int64_t>(),
                        m.at("worst_rank").get<int>(), m.at("worst_peak_bytes").get<std::int64_t>(),
                        m.at("shortfall_bytes").get<std::int64_t>()};
    }
    if (j.contains("job")) {
      const auto& x = j.at("job");
      r.job = JobSummary{x.at("model").get<std::string>(),
                         x.at("world_size").get<int>(),
                         x.at("pipeline_replicas").get<int>(),
                         x.at("parameters").get<std::int64_t>(),
                         x.at("model_flops_per_iteration").get<double>(),
                         x.at("hardware_flops_per_iteration").get<double>(),
                         x.at("device").get<std::string>()};
    }
    if (j.contains("profile")) {
      ProfileUse p;
      p.path = j.at("profile").get<std::string>();
      if (j.contains("jitter")) {
        const auto& x = j.at("jitter");
        p.has_jitter = true;
        p.jitter_samples = x.at("samples").get<int>();
        p.nominal_iteration_time_ms = x.at("nominal_iteration_time_ms").get<double>();
        p.jitter_min_ms = x.at("min_ms").get<double>();
        p.jitter_max_ms = x.at("max_ms").get<double>();
      }
      r.profile = p;
    }
    if (j.contains("measured_steps_ms")) {
      Measured m;
      m.steps_ms = j.at("measured_steps_ms").get<std::vector<double>>();
      m.losses = j.value("losses", std::vector<double>{});
      m.backend = j.value("backend", "");
      if (j.contains("reference_max_relative_error")) {
        m.has_reference = true;
        m.reference_max_relative_error = j.at("reference_max_relative_error").get<double>();
      }
      r.measured = m;
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Error::BadInput(path + ": not a pipetwin report: " + e.what());
  }
}

}  // namespace pipetwin
