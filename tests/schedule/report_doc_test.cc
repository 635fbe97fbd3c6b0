// docs/report.md lists exactly the keys the report writer can emit: a report with every
// optional section present is written, its key paths collected (arrays as `[]`), and compared
// both ways with the paths the doc's tables name in their first column.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "schedule/report.h"

namespace pipetwin {
namespace {

// Every optional part filled, every list non-empty.
Report FullReport() {
  Report r;
  r.source = "run";
  r.schedule = "1f1b";
  r.pp = 2;
  r.microbatches = 4;
  r.iteration_time_ms = 10;
  r.makespan_ms = 10;
  RankReport k;
  k.pp_rank = 0;
  r.ranks.push_back(k);
  r.hardware_flops = HardwareFlops{1, 0.5};
  r.breakdown = Breakdown{};
  r.memory = MemorySummary{};
  r.job = JobSummary{"gpt3-125m", 2, 1, 1000, 1e12, 1.2e12, "cpu", {6, 6}};
  r.profile = ProfileUse{"p.yaml", true, 3, 10, 9, 11};
  r.measured = Measured{{10, 11}, {2.5, 2.4}, "cpu", true, 1e-9};
  r.parameter_servers.push_back({0, 2, 100, 100});
  r.dp_sync = DpSyncReport{"stale", 2, 3, {1.0, 1.1}, 1.05, 8.4, 0.5, 1};
  return r;
}

void Walk(const nlohmann::json& j, const std::string& path, std::set<std::string>* out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      Walk(value, path.empty() ? key : path + "." + key, out);
    }
  } else if (j.is_array()) {
    ASSERT_FALSE(j.empty()) << path << ": fill it in FullReport()";
    if (j.front().is_structured()) {
      Walk(j.front(), path + "[]", out);
    } else {
      out->insert(path + "[]");
    }
  } else {
    out->insert(path);
  }
}

// The key paths named in the first column of the doc's table rows: `a.b.c`, and the shorthand
// `.d` for a sibling of the path before it in the same cell (a.b.d).
std::set<std::string> DocumentedPaths(const std::string& doc) {
  std::set<std::string> out;
  std::istringstream lines(doc);
  const std::regex tick("`([^`]*)`");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::string cell = line.substr(1, line.find('|', 1) - 1);
    std::string previous;
    for (std::sregex_iterator it(cell.begin(), cell.end(), tick), end; it != end; ++it) {
      std::string p = (*it)[1].str();
      if (!p.empty() && p[0] == '.') {
        const std::size_t dot = previous.rfind('.');
        EXPECT_NE(dot, std::string::npos) << "shorthand " << p << " with nothing before it";
        p = previous.substr(0, dot) + p;
      }
      out.insert(p);
      previous = p;
    }
  }
  return out;
}

TEST(ReportDoc, ListsExactlyTheKeysTheWriterEmits) {
  std::ifstream f(std::string(PIPETWIN_SOURCE_DIR) + "/docs/report.md");
  ASSERT_TRUE(f) << "docs/report.md";
  std::stringstream doc;
  doc << f.rdbuf();
  const std::set<std::string> documented = DocumentedPaths(doc.str());

  std::set<std::string> written;
  Walk(nlohmann::json::parse(ReportToJson(FullReport())), "", &written);
  ASSERT_GT(written.size(), 60u);
  for (const std::string& p : written) {
    EXPECT_TRUE(documented.count(p)) << p << " is written but not in docs/report.md";
  }
  for (const std::string& p : documented) {
    EXPECT_TRUE(written.count(p)) << p << " is in docs/report.md but never written";
  }
}

}  // namespace
}  // namespace pipetwin
