#include "sim/ascii.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace pipetwin {

std::string AsciiTimeline(const Timeline& t, int stages_per_rank, int max_columns) {
  std::int64_t quantum = 0;
  std::int64_t end = 0;
  std::size_t width = 2;
  auto label_of = [&](const Action& a) {
    std::string l = std::string(KindName(a.kind));
    if (a.microbatch >= 0) l += std::to_string(a.microbatch);
    if (stages_per_rank > 1 || a.kind == ActionKind::kOptimizer) l = std::to_string(a.stage) + l;
    return l;
  };
  for (const auto& rank : t.events) {
    for (const TimelineEvent& e : rank) {
      if (e.stream != Stream::kCompute) continue;
      const std::int64_t d = e.end_ns - e.start_ns;
      if (d > 0) quantum = std::gcd(quantum, d);
      end = std::max(end, e.end_ns);
      width = std::max(width, label_of(e.action).size());
    }
  }
  if (quantum <= 0 || end <= 0) return "(no compute)\n";
  const auto cols_for = [&](std::int64_t q) { return (end + q - 1) / q; };
  if (cols_for(quantum) > max_columns) quantum = (end + max_columns - 1) / max_columns;
  const std::int64_t cols = cols_for(quantum);
  std::string out;
  for (std::size_t r = 0; r < t.events.size(); ++r) {
    std::vector<std::string> cells(static_cast<std::size_t>(cols), ".");
    for (const TimelineEvent& e : t.events[r]) {
      if (e.stream != Stream::kCompute || e.end_ns == e.start_ns) continue;
      const std::int64_t c0 = e.start_ns / quantum;
      const std::int64_t c1 = std::max(c0 + 1, (e.end_ns + quantum - 1) / quantum);
      for (std::int64_t c = c0; c < c1 && c < cols; ++c) {
        cells[static_cast<std::size_t>(c)] = c == c0 ? label_of(e.action) : "~";
      }
    }
    std::string row = "rank " + std::to_string(r);
    row.resize(8, ' ');
    out += row + "|";
    for (const std::string& c : cells) {
      out += c;
      out += std::string(width - std::min(width, c.size()) + 1, ' ');
    }
    out += "\n";
  }
  char legend[96];
  std::snprintf(legend, sizeof legend,
                "(one column = %.6g ms; ~ continues the action to its left)\n",
                static_cast<double>(quantum) * 1e-6);
  out += legend;
  return out;
}

}  // namespace pipetwin
