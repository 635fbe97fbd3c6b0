#include "schedule/csv.h"

#include "schedule/file_io.h"
#include "schedule/limits.h"

#include <algorithm>
#include <sstream>

namespace pipetwin {

bool KeptIn(CsvFormat format, const Action& a) {
  return format == CsvFormat::kComputeComms ||
         (IsCompute(a.kind) && a.kind != ActionKind::kOptimizer);
}

std::string WriteScheduleCsv(const Schedule& s, CsvFormat format) {
  std::string out;
  for (const auto& prog : s.programs) {
    bool first = true;
    for (const Action& a : prog) {
      if (!KeptIn(format, a)) continue;
      if (!first) out += ',';
      out += a.ToString();
      first = false;
    }
    out += '\n';
  }
  return out;
}

Expected<Schedule> ParseScheduleCsv(const std::string& text, const std::string& path) {
  Schedule s;
  std::istringstream in(text);
  std::string line;
  int row = 0;
  int max_stage = -1;
  int max_mb = -1;
  std::vector<int> owner;  // stage -> rank, -1 unknown
  while (std::getline(in, line)) {
    ++row;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (row > kMaxCsvRanks && line.find_first_not_of(", \t") != std::string::npos) {
      return Error::BadInput(path + ": row " + std::to_string(row) + ": more than " +
                             std::to_string(kMaxCsvRanks) + " ranks (rows) are not supported");
    }
    std::vector<Action> prog;
    std::size_t col = 0;
    std::size_t start = 0;
    while (start <= line.size()) {
      std::size_t end = line.find(',', start);
      if (end == std::string::npos) end = line.size();
      ++col;
      std::string cell = line.substr(start, end - start);
      cell.erase(0, cell.find_first_not_of(" \t"));
      cell.erase(cell.find_last_not_of(" \t") + 1);
      if (!cell.empty()) {
        auto a = Action::Parse(cell);
        if (!a) {
          return Error::BadInput(path + ": row " + std::to_string(row) + " (rank " +
                                 std::to_string(row - 1) + "), column " + std::to_string(col) +
                                 ": " + a.error().message);
        }
        const int rank = row - 1;
        const std::string where =
            path + ": row " + std::to_string(row) + ", column " + std::to_string(col) + ": ";
        if (a->stage > kMaxCsvStage) {
          return Error::BadInput(where + "stage " + std::to_string(a->stage) +
                                 " is out of range (at most " + std::to_string(kMaxCsvStage) + ")");
        }
        if (a->microbatch > kMaxCsvMicrobatch) {
          return Error::BadInput(where + "microbatch " + std::to_string(a->microbatch) +
                                 " is out of range (at most " + std::to_string(kMaxCsvMicrobatch) +
                                 ")");
        }
        const std::int64_t stages = std::max(max_stage, a->stage) + 1;
        const std::int64_t mbs = std::max(max_mb, a->microbatch) + 1;
        if (stages * mbs * 4 > kMaxScheduleActions) {
          return Error::BadInput(where + std::to_string(stages) + " stages x " +
                                 std::to_string(mbs) + " microbatches x 4 exceeds the limit of " +
                                 std::to_string(kMaxScheduleActions) + " schedule actions");
        }
        if (static_cast<std::size_t>(a->stage) >= owner.size()) {
          owner.resize(static_cast<std::size_t>(a->stage) + 1, -1);
        }
        int& o = owner[static_cast<std::size_t>(a->stage)];
        if (o != -1 && o != rank) {
          return Error::BadInput(path + ": row " + std::to_string(row) + ", column " +
                                 std::to_string(col) + ": stage " + std::to_string(a->stage) +
                                 " appears on rank " + std::to_string(o) + " and on rank " +
                                 std::to_string(rank) + " (a stage lives on exactly one rank)");
        }
        o = rank;
        max_stage = std::max(max_stage, a->stage);
        max_mb = std::max(max_mb, a->microbatch);
        prog.push_back(*a);
      }
      start = end + 1;
    }
    s.programs.push_back(std::move(prog));
  }
  // Trailing empty rows are not ranks.
  while (!s.programs.empty() && s.programs.back().empty()) s.programs.pop_back();
  if (s.programs.empty()) return Error::BadInput(path + ": no actions (one row per rank expected)");
  s.num_ranks = static_cast<int>(s.programs.size());
  s.num_stages = max_stage + 1;
  s.num_microbatches = max_mb + 1;
  for (int st = 0; st < s.num_stages; ++st) {
    if (owner[static_cast<std::size_t>(st)] < 0) {
      return Error::BadInput(path + ": stage " + std::to_string(st) + " never appears, but stage " +
                             std::to_string(max_stage) +
                             " does (stages are numbered from 0 without gaps)");
    }
  }
  for (int r = 0; r < s.num_ranks; ++r) {
    if (s.programs[static_cast<std::size_t>(r)].empty()) {
      return Error::BadInput(path + ": row " + std::to_string(r + 1) + " (rank " +
                             std::to_string(r) + ") holds no action");
    }
  }
  if (s.num_microbatches < 1) return Error::BadInput(path + ": no action names a microbatch");
  if (s.num_stages % s.num_ranks != 0) {
    return Error::BadInput(path + ": " + std::to_string(s.num_stages) + " stages over " +
                           std::to_string(s.num_ranks) +
                           " ranks: every rank must hold the same number of stages");
  }
  s.stage_to_rank = std::move(owner);
  return s;
}

Expected<Schedule> LoadScheduleCsv(const std::string& path) {
  auto text = ReadInputFile(path, "the schedule CSV");
  if (!text) return text.error();
  return ParseScheduleCsv(*text, path);
}

}  // namespace pipetwin
