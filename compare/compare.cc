#include "compare/compare.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace pipetwin {
namespace {

std::string Fmt(double v, ErrorRow::Kind k) {
  char b[64];
  if (k == ErrorRow::Kind::kBytes) {
    std::snprintf(b, sizeof b, "%lld", static_cast<long long>(std::llround(v)));
  } else {
    std::snprintf(b, sizeof b, "%.6g", v);
  }
  return b;
}

const char* Unit(ErrorRow::Kind k) {
  switch (k) {
    case ErrorRow::Kind::kTime:
      return "ms";
    case ErrorRow::Kind::kBytes:
      return "bytes";
    case ErrorRow::Kind::kFraction:
      return "fraction";
  }
  return "";
}

std::string Pct(double rel) {
  if (std::isinf(rel)) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%+.2f%%", 100.0 * rel);
  return b;
}

}  // namespace

double ErrorRow::relative_error() const {
  if (measured == 0) return predicted == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return (predicted - measured) / measured;
}

bool ErrorRow::ok(double tolerance) const {
  switch (kind) {
    case Kind::kBytes:
      return std::llround(predicted) == std::llround(measured);
    case Kind::kFraction:
      return std::abs(predicted - measured) <= tolerance;
    case Kind::kTime:
      return std::abs(relative_error()) <= tolerance;
  }
  return false;
}

Expected<Comparison> CompareReports(const Report& p, const Report& m) {
  if (p.schedule != m.schedule || p.microbatches != m.microbatches || p.pp != m.pp) {
    return Error::BadInput("compare: the reports describe different jobs (predicted " + p.schedule +
                           ", pp " + std::to_string(p.pp) + ", " + std::to_string(p.microbatches) +
                           " microbatches; measured " + m.schedule + ", pp " +
                           std::to_string(m.pp) + ", " + std::to_string(m.microbatches) +
                           " microbatches)");
  }
  if (p.ranks.empty() || m.ranks.empty()) {
    return Error::BadInput("compare: a report has no ranks");
  }
  std::size_t per_pred = 1;  // measured rows per predicted row
  if (p.ranks.size() != m.ranks.size()) {
    if (m.ranks.size() % p.ranks.size() != 0 || static_cast<int>(p.ranks.size()) != p.pp) {
      return Error::BadInput("compare: the predicted report has " + std::to_string(p.ranks.size()) +
                             " ranks, the measured one " + std::to_string(m.ranks.size()) +
                             " (expected the same, or one predicted row per pipeline rank)");
    }
    per_pred = m.ranks.size() / p.ranks.size();
  }
  using K = ErrorRow::Kind;
  Comparison c;
  auto add = [&](std::string metric, int rank, double pv, double mv, K kind) {
    c.rows.push_back(ErrorRow{std::move(metric), rank, pv, mv, kind});
    return c.rows.back();
  };
  add("iteration_time_ms", -1, p.iteration_time_ms, m.iteration_time_ms, K::kTime);
  c.iteration_error = c.rows.back().relative_error();
  add("bubble_fraction", -1, p.bubble_fraction, m.bubble_fraction, K::kFraction);
  for (std::size_t w = 0; w < m.ranks.size(); ++w) {
    const RankReport& mr = m.ranks[w];
    const RankReport& pr = p.ranks[w / per_pred];
    const int r = mr.rank;
    add("compute_busy_ms", r, pr.compute_busy_ms, mr.compute_busy_ms, K::kTime);
    add("bubble_fraction", r, pr.bubble_fraction, mr.bubble_fraction, K::kFraction);
    const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> mem[] = {
        {"memory.params", {pr.memory.params, mr.memory.params}},
        {"memory.grads", {pr.memory.grads, mr.memory.grads}},
        {"memory.optimizer", {pr.memory.optimizer, mr.memory.optimizer}},
        {"memory.activations", {pr.memory.activations, mr.memory.activations}},
        {"memory.comm_buffers", {pr.memory.comm_buffers, mr.memory.comm_buffers}},
        {"peak_memory_bytes", {pr.peak_memory_bytes, mr.peak_memory_bytes}}};
    for (const auto& [name, v] : mem) {
      const ErrorRow& row =
          add(name, r, static_cast<double>(v.first), static_cast<double>(v.second), K::kBytes);
      ++c.memory_rows;
      c.memory_equal = c.memory_equal && row.ok(0);
    }
    const ErrorRow& row = add("comm_bytes_sent", r, static_cast<double>(pr.comm_bytes_sent),
                              static_cast<double>(mr.comm_bytes_sent), K::kBytes);
    ++c.bytes_rows;
    c.bytes_equal = c.bytes_equal && row.ok(0);
  }
  // Group totals: a per-pipeline-rank prediction counts each pipeline rank once.
  const double scale = static_cast<double>(per_pred);
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> groups[] = {
      {"comm.pp", {p.comm.pp, m.comm.pp}},
      {"comm.dp", {p.comm.dp, m.comm.dp}},
      {"comm.tp", {p.comm.tp, m.comm.tp}},
      {"comm.cp", {p.comm.cp, m.comm.cp}},
      {"comm.bytes_total", {p.comm.total(), m.comm.total()}}};
  for (const auto& [name, v] : groups) {
    const ErrorRow& row = add(name, -1, static_cast<double>(v.first) * scale,
                              static_cast<double>(v.second), K::kBytes);
    ++c.bytes_rows;
    c.bytes_equal = c.bytes_equal && row.ok(0);
  }
  return c;
}

std::string ComparisonMarkdown(const Comparison& c, const std::string& title, double tolerance) {
  std::ostringstream o;
  char head[256];
  std::snprintf(head, sizeof head,
                "iteration time error %s (tolerance ±%.0f%%) %s; memory %s; communication "
                "bytes %s.",
                Pct(c.iteration_error).c_str(), 100.0 * tolerance,
                c.iteration_error_abs() <= tolerance ? "ok" : "OUTSIDE",
                c.memory_equal ? "equal byte for byte" : "DIFFERS",
                c.bytes_equal ? "equal" : "DIFFER");
  o << "## " << title << "\n\n" << head << "\n\n";
  o << "| metric | rank | unit | predicted | measured | error | ok |\n";
  o << "|---|---:|---|---:|---:|---:|:-:|\n";
  for (const ErrorRow& r : c.rows) {
    const std::string err =
        r.kind == ErrorRow::Kind::kFraction ? Fmt(r.predicted - r.measured, r.kind)
        : r.kind == ErrorRow::Kind::kBytes  ? Fmt(r.predicted - r.measured, r.kind)
                                            : Pct(r.relative_error());
    o << "| " << r.metric << " | " << (r.rank < 0 ? std::string("all") : std::to_string(r.rank))
      << " | " << Unit(r.kind) << " | " << Fmt(r.predicted, r.kind) << " | "
      << Fmt(r.measured, r.kind) << " | " << err << " | " << (r.ok(tolerance) ? "yes" : "**no**")
      << " |\n";
  }
  return o.str();
}

std::string ComparisonCsv(const Comparison& c, double tolerance) {
  std::ostringstream o;
  o << "metric,rank,unit,predicted,measured,difference,relative_error,ok\n";
  for (const ErrorRow& r : c.rows) {
    const double rel = r.relative_error();
    o << r.metric << "," << r.rank << "," << Unit(r.kind) << "," << Fmt(r.predicted, r.kind) << ","
      << Fmt(r.measured, r.kind) << "," << Fmt(r.predicted - r.measured, r.kind) << ","
      << (std::isinf(rel) ? std::string("inf") : Fmt(rel, ErrorRow::Kind::kTime)) << ","
      << (r.ok(tolerance) ? 1 : 0) << "\n";
  }
  return o.str();
}

std::string WhereTimeGoesMarkdown(const WhereTimeGoes& w) {
  std::ostringstream o;
  char b[256];
  o << "### Where time goes\n\n"
    << "From the calibration profile `" << w.profile << "`"
    << (w.backend.empty() ? std::string() : " (backend " + w.backend + ")")
    << ": per stage and compute action, the median time, the cost model's FLOPs of one rank "
       "(its TP x CP group) in one microbatch's action, the rate achieved";
  if (w.roofline_gflops > 0) {
    std::snprintf(b, sizeof b,
                  ", and that rate as a share of the profile's roofline (one core's fp32 GEMM: "
                  "%.1f GFLOP/s",
                  w.roofline_gflops);
    o << b;
    if (w.roofline_gb_s > 0) {
      std::snprintf(b, sizeof b, "; memory %.1f GB/s", w.roofline_gb_s);
      o << b;
    }
    o << ")";
  }
  o << ". FLOPs follow the cost model's convention (every GEMM and the non-causal attention "
       "core; I and B include a forward recomputed under training.recompute); the rates are "
       "over the actions' wall-clock medians.\n\n";
  o << "| stage | action | median ms | GFLOP / microbatch | GFLOP/s | % of roofline |\n";
  o << "|---:|:-:|---:|---:|---:|---:|\n";
  for (const ActionRate& r : w.rows) {
    std::string gflop = "–", rate = "–", share = "–";
    if (r.gflops > 0) {
      std::snprintf(b, sizeof b, "%.4g", r.gflops * r.ms * 1e-3);
      gflop = b;
      std::snprintf(b, sizeof b, "%.2f", r.gflops);
      rate = b;
      if (w.roofline_gflops > 0) {
        std::snprintf(b, sizeof b, "%.1f%%", 100.0 * r.gflops / w.roofline_gflops);
        share = b;
      }
    }
    std::snprintf(b, sizeof b, "%.3f", r.ms);
    o << "| " << r.stage << " | " << KindName(r.kind) << " | " << b << " | " << gflop << " | "
      << rate << " | " << share << " |\n";
  }
  return o.str();
}

}  // namespace pipetwin
