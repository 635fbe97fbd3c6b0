#include "schedule/report.h"

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
  for (const auto& [k, v] : r.extra.items()) j[k] = v;
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
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Error::BadInput(path + ": not a pipetwin report: " + e.what());
  }
}

}  // namespace pipetwin
